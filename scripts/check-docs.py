#!/usr/bin/env python3
"""The docs test (ctest -L docs): README.md and docs/*.md checked against the code.

1. docs/reference.md equals what scripts/gen-reference.sh makes from the built tandem's --help
   texts (on a difference: the diff and the command that rewrites it).
2. Every --flag in a code span or code block of README.md and docs/*.md is a flag of some tandem
   command, or another program's flag in ALLOWED_FLAGS below (with the reason).
3. Every repository path named (src/..., include/..., scripts/..., tests/..., docs/...,
   examples/..., python/..., tools/..., bench/..., fuzz/..., cmake/...) exists, every relative
   link's target exists, and a link's #anchor names a heading of the page it points to.
4. The README's "Where things are" table names exactly the folders under src/.
5. README.md has at most README_MAX_LINES lines.
6. Every `build/tandem train ...` command in the README's shell blocks parses and passes the
   run's checks: it is run with --print-config added, which makes the run's checks and exits
   without training (a --data folder an earlier step of the recipe makes may be missing: then
   the refusal must be that one). The README's other commands are not run (they need data,
   a build of the benchmarks, mpirun or Python); their flags are checked by 2.

Usage: scripts/check-docs.py TANDEM_BINARY [SOURCE_DIR]    (exit 0: all hold; 1: problems, listed)
"""
import difflib
import glob
import os
import re
import shlex
import subprocess
import sys

README_MAX_LINES = 200

# Flags in the docs that belong to other programs, each with the reason it is there.
ALLOWED_FLAGS = {
    "--allow-run-as-root": "mpirun's: run ranks as root",
    "--oversubscribe": "mpirun's: more ranks than cores",
    "--bind-to": "mpirun's: where ranks are bound (none: anywhere)",
    "--update": "compose-matrix.sh's: rewrite the committed table",
    "--hostfile": "mpirun's: the machines of a multi-host run",
    "--mca": "mpirun's: Open MPI component parameters",
    "--build": "cmake's: cmake --build",
    "--no-index": "pip's: install without a package index",
    "--index-url": "pip's: the package index (PyTorch's CPU wheels)",
    "--force-reinstall": "pip's: install the package again",
    "--install": "cmake's: cmake --install",
    "--prefix": "cmake --install's destination",
    "--target": "cmake --build's target",
    "--timeout": "ctest's time limit",
    "--gtest_filter": "GoogleTest's: which tests a test binary runs",
    "--logdir": "TensorBoard's: tensorboard --logdir DIR",
    "--layers": "bench_step's: per-layer times (docs/resnet.md)",
    "--data-binary": "curl's: the request body from a file",
    "--loader-only": "examples/pytorch_loop.py's: time the loaders without a training step",
    "--samples": "examples/cpp's stripes_train: samples in its data set",
    "--prepare": "scripts/gpu-check.sh's first step",
    "--profile": "docs/offload-bounds.md says that tandem has no such flag",
    "--signal": "sbatch's: the signal sent before the time limit",
    "--requeue": "sbatch's: the job may be requeued",
    "--mpi": "srun's: the PMI plugin of the step",
    "--cpu-bind": "srun's: the CPUs of each task",
}

# Paths named in the docs that are not this repository's, each with the reason.
ALLOWED_PATHS = {
    "tests/test-backend-ops.cpp": "ggml's op test, named in docs/design.md as the model of tandem's",
}

PATH_ROOTS = "src|include|scripts|tests|docs|examples|python|tools|bench|fuzz|cmake"
PATH_RE = re.compile(r"(?<![\w./$~-])((?:%s)/[\w./*{},<>-]*)" % PATH_ROOTS)
FLAG_RE = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*)")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")


def line_of(text, needle):
    """1-based line of needle's first occurrence in text (0 when absent)."""
    i = text.find(needle)
    return text.count("\n", 0, i) + 1 if i >= 0 else 0


def code_texts(text):
    """The code in a markdown text: each fenced block, and each inline code span (which may
    run over lines within a paragraph)."""
    out, para, fence = [], [], None
    for line in text.split("\n") + [""]:
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            else:
                out.append(line)
            continue
        m = re.match(r"(```+|~~~+)", stripped)
        if m:
            fence = m.group(1)
            continue
        if stripped == "":
            out += [s for _, s in re.findall(r"(`+)(.+?)\1", "\n".join(para), re.S)]
            para = []
        else:
            para.append(line)
    return out


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    """The anchors of a markdown file's headings (outside code blocks), repeats numbered."""
    seen, out, fence = {}, set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith(("```", "~~~")):
                fence = not fence
                continue
            m = None if fence else re.match(r"#{1,6}\s+(.*)", line)
            if m:
                a = slug(m.group(1))
                n = seen.get(a, 0)
                seen[a] = n + 1
                out.add(a if n == 0 else "%s-%d" % (a, n))
    return out


def help_flags(reference):
    """The flags the --help texts define: the option lines ('  -o,--out TEXT ...')."""
    flags = set()
    for line in reference.split("\n"):
        m = re.match(r"  (-[\w,-]+)", line)
        if m:
            flags.update(f for f in m.group(1).split(",") if f.startswith("--"))
    return flags


def path_exists(root, p):
    if "..." in p or p in ALLOWED_PATHS:
        return True
    p = re.sub(r"<[^>]*>", "*", p)
    variants = [p]
    m = re.search(r"\{([^}]*)\}", p)
    if m:
        variants = [p[: m.start()] + alt + p[m.end():] for alt in m.group(1).split(",")]
    for v in variants:
        full = os.path.join(root, v)
        if not (glob.glob(full) or glob.glob(full + ".*")):  # a binary's name: its source
            return False
    return True


def readme_train_commands(readme):
    """The argument lists of the `build/tandem train` commands in the README's sh blocks
    (continuation lines joined, comments dropped, an mpirun prefix skipped)."""
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", readme, re.S | re.M):
        for line in block.replace("\\\n", " ").split("\n"):
            words = shlex.split(line, comments=True)
            for i in range(len(words) - 1):
                if words[i] == "build/tandem" and words[i + 1] == "train":
                    commands.append(words[i + 2:])
    return commands


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().split("\n")[-1], file=sys.stderr)
        return 2
    tandem = sys.argv[1]
    root = os.path.abspath(sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(__file__), ".."))
    problems = []

    # 1. The reference, regenerated.
    gen = os.path.join(root, "scripts", "gen-reference.sh")
    fresh = subprocess.run([gen, tandem], capture_output=True, text=True)
    if fresh.returncode != 0:
        print(fresh.stderr, file=sys.stderr)
        problems.append("scripts/gen-reference.sh %s failed (exit %d)" % (tandem, fresh.returncode))
    ref_path = os.path.join(root, "docs", "reference.md")
    committed = open(ref_path, encoding="utf-8").read() if os.path.exists(ref_path) else ""
    if fresh.returncode == 0 and fresh.stdout != committed:
        diff = difflib.unified_diff(committed.splitlines(True), fresh.stdout.splitlines(True),
                                    "docs/reference.md (committed)", "docs/reference.md (from --help)")
        sys.stdout.writelines(diff)
        problems.append("docs/reference.md differs from the --help texts: regenerate it with\n"
                        "    scripts/gen-reference.sh %s > docs/reference.md" % tandem)
    known = help_flags(fresh.stdout)

    docs = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    for doc in docs:
        text = open(os.path.join(root, doc), encoding="utf-8").read()
        # 2. Flags (the generated reference holds only --help's own).
        if doc != "docs/reference.md" and known:
            named = {flag for code in code_texts(text) for flag in FLAG_RE.findall(code)}
            for flag in sorted(named - known - set(ALLOWED_FLAGS)):
                problems.append("%s:%d: %s is no flag of any tandem command (tandem <command> --help),"
                                " nor in ALLOWED_FLAGS" % (doc, line_of(text, flag), flag))
        # 3. Paths and links.
        for p in sorted(set(PATH_RE.findall(text))):
            p = p.rstrip(".,;:")
            if not path_exists(root, p):
                problems.append("%s:%d: %s does not exist" % (doc, line_of(text, p), p))
        for target in sorted(set(LINK_RE.findall(text))):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(root, os.path.dirname(doc), file_part)) if file_part \
                else os.path.join(root, doc)
            if not os.path.exists(dest):
                problems.append("%s:%d: link (%s): no such file" % (doc, line_of(text, target), target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append("%s:%d: link (%s): no heading with that anchor" % (doc, line_of(text, target), target))

    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    # 4. "Where things are": exactly the folders of src/.
    m = re.search(r"^## Where things are\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    if not m:
        problems.append("README.md: no '## Where things are' section")
    else:
        listed = set()
        for row in m.group(1).split("\n"):
            if row.startswith("|"):
                listed.update(re.findall(r"src/([\w-]+)/?", row.split("|")[1]))
        present = {d for d in os.listdir(os.path.join(root, "src")) if os.path.isdir(os.path.join(root, "src", d))}
        for d in sorted(present - listed):
            problems.append("README.md: 'Where things are' does not list src/%s/" % d)
        for d in sorted(listed - present):
            problems.append("README.md: 'Where things are' lists src/%s/, which does not exist" % d)
    # 5. The front door stays short.
    n = readme.count("\n")
    if n > README_MAX_LINES:
        problems.append("README.md: %d lines, more than %d: move detail into docs/" % (n, README_MAX_LINES))

    # 6. The README's training commands pass the run's own checks.
    env = dict(os.environ, GOMP_SPINCOUNT="10000")
    commands = readme_train_commands(readme)
    for args in commands:
        run = subprocess.run([tandem, "train"] + args + ["--print-config"], capture_output=True, text=True,
                             env=env, timeout=60)
        # A recipe's data is made by its earlier steps: a --data folder that is not there yet
        # may stop the dry run when it opens the data (after every flag was checked).
        data = args[args.index("--data") + 1] if "--data" in args else None
        missing = data is not None and not os.path.exists(data)
        if run.returncode == 2 and missing and "%s: cannot open data directory" % data in run.stderr:
            continue
        if run.returncode != 0:
            problems.append("README.md: `build/tandem train %s` fails its checks (exit %d): %s"
                            % (" ".join(args), run.returncode, run.stderr.strip()))

    for p in problems:
        print("check-docs: " + p)
    if problems:
        print("check-docs: %d problem(s)" % len(problems))
        return 1
    print("check-docs: reference, flags, paths, links, the src/ table, the README's length and its %d train"
          " commands agree (%d files, %d flags known)" % (len(commands), len(docs), len(known)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
