#!/usr/bin/env python3
"""Walks every suggestion of tandem train's refusals: advice must lead to a run that starts.

Usage: scripts/check-advice.py TANDEM OUTDIR

Two kinds of refusal are walked on a tiny GPT (2 blocks of width 32, windows of 32 tokens, on a
virt device; the token shards of scripts/compose-matrix.sh):
  - the memory plan's ("needs X of device memory ...; try A or B or C"): each seed is planned
    without a budget, then with a budget of 90% of its device total, and every knob the refusal
    names is applied in turn: the run must then plan within that budget, or be refused again
    with a smaller device total (the knob helped, and the refusal advises on), or name an
    inherent limit ("no flag makes this run smaller"). A knob the run refuses, or one that does
    not shrink the total, leads nowhere and fails the test;
  - the flag checks' ("expected --X", "use --X", "drop --X"): each case below names a refused
    command, the advice its refusal must give, and that advice applied; the applied command
    must train one step (--max-steps 1).
Exit status 0 when every suggestion leads somewhere, 1 otherwise (each dead end printed).
"""
import os
import re
import subprocess
import sys
import zlib

TANDEM, OUT = sys.argv[1], sys.argv[2]
DATA = os.path.join(OUT, "data")
OFFLOAD = os.path.join(OUT, "offload")  # --offload-dir of the disk tier's case
BASE = ["train", "--model", "gpt2", "--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--block-size", "32",
        "--data", DATA, "--batch-size", "8", "--eval-batch-size", "8", "--lr", "1e-3", "--seed", "1",
        "--device", "virt:0", "--threads", "1", "--num-workers", "0", "--progress", "0"]
INHERENT = ("no flag makes this run smaller",)
failures = []


def write_shard(path, first, count):
    """A token shard of ids (7 i + i / 13) mod 64 (scripts/compose-matrix.sh's write_shard)."""
    payload = b"".join(((7 * i + i // 13) % 64).to_bytes(2, "little") for i in range(first, first + count))
    le = lambda v: v.to_bytes(4, "little")
    head = b"TNDMTOKS" + le(1) + le(64) + le(64) + le(2) + le(count) + le(0) + le(zlib.crc32(payload)) + bytes(24)
    with open(path, "wb") as f:
        f.write(head + le(zlib.crc32(head)) + payload)


def run(args):
    p = subprocess.run([TANDEM] + args, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def error_line(out):
    lines = [l for l in out.splitlines() if l.startswith("tandem: error:")]
    return lines[-1] if lines else ""


def command(*parts):
    """BASE with each part's flags set: a part is a list of flags and values, a flag followed by
    its value unless the next item is a flag too (a bare flag)."""
    args = list(BASE)
    for part in parts:
        i = 0
        while i < len(part):
            if i + 1 < len(part) and not part[i + 1].startswith("--"):
                args = with_flag(args, part[i], part[i + 1])
                i += 2
            else:
                args = with_flag(args, part[i])
                i += 1
    return args


def with_flag(args, flag, value=None):
    """args with FLAG set to VALUE (replaced where given, appended otherwise; None: a bare flag)."""
    args = list(args)
    if flag in args:
        i = args.index(flag)
        if value is None:
            return args
        args[i + 1] = value
        return args
    return args + ([flag] if value is None else [flag, value])


def without(args, flag, takes_value=True):
    args = list(args)
    if flag in args:
        i = args.index(flag)
        del args[i:i + (2 if takes_value else 1)]
    return args


def value_of(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


def device_total(out):
    """The device column of the plan's total row, in bytes."""
    m = re.search(r"^  total\s+([\d.]+) (GiB|MiB)", out, re.M)
    if not m:
        return None
    return float(m.group(1)) * (1 << (30 if m.group(2) == "GiB" else 20))


# A knob of the plan's advice as a change of the command line.
def apply_knob(args, knob):
    if knob.startswith("a smaller --batch-size"):
        return with_flag(args, "--batch-size", str(max(1, int(value_of(args, "--batch-size")) // 2)))
    if knob.startswith("a smaller --eval-batch-size"):
        return with_flag(args, "--eval-batch-size", str(max(1, int(value_of(args, "--eval-batch-size")) // 2)))
    m = re.match(r"(--[a-z-]+) ([a-z0-9.]+)( in place of (--[a-z-]+))?", knob)
    if not m:
        return None
    return with_flag(without(args, m.group(4)) if m.group(4) else args, m.group(1), m.group(2))


def walk_plan(name, args, budget):
    """The seed under `budget`: refused with advice; each knob applied must then fit, or be
    refused again with a smaller device total (the knob helped; the advice goes on), or name an
    inherent limit. A knob the run refuses for another reason, or one that does not shrink the
    total, leads nowhere."""
    code, out = run(args + ["--device-memory-budget", str(int(budget)), "--plan-only"])
    line = error_line(out)
    m = re.search(r"; try (.*)$", line)
    total = device_total(out)
    if code == 0 or not m or total is None:
        failures.append(f"{name}: expected a refusal with advice under {budget:.0f} B, got exit {code}: {line}")
        return
    for knob in m.group(1).split(" or "):
        applied = apply_knob(args, knob)
        if applied is None or applied == args:
            failures.append(f"{name}: knob '{knob}' names no flag to apply: {line}")
            continue
        code2, out2 = run(applied + ["--device-memory-budget", str(int(budget)), "--plan-only"])
        line2 = error_line(out2)
        if code2 == 0 or any(s in line2 for s in INHERENT):
            continue
        now = device_total(out2)
        if "needs " not in line2 or now is None:
            failures.append(f"{name}: knob '{knob}' is refused: {' '.join(applied)}: {line2}")
        elif now >= total:
            failures.append(f"{name}: knob '{knob}' does not shrink the device total ({total:.0f} B): {line2}")


# Seeds of the plan's refusals: runs whose device total a 90% budget then refuses, on a GPT large
# enough (4 blocks of width 256, windows of 64) that the pool's 2 MiB segments do not hide a
# knob's saving.
PLAN_MODEL = ["--n-layer", "4", "--n-head", "4", "--n-embd", "256", "--block-size", "64"]
PLAN_SEEDS = {
    "resident": [],
    "recompute": ["--recompute", "blocks"],
    "offloaded optimizer": ["--optimizer-device", "cpu"],
    "streamed": ["--param-device", "cpu"],
    "streamed, split update": ["--param-device", "cpu", "--optimizer-split", "0.5"],
    "evaluation batch above the training batch": ["--eval-batch-size", "64"],
}

# The flag checks' advice: (refused flags, advice the refusal gives, the flags with it applied;
# both set over BASE's).
FLAG_CASES = [
    (["--activations-device", "cpu"], "expected --recompute blocks too",
     ["--activations-device", "cpu", "--recompute", "blocks"]),
    (["--activations-device", "cpu", "--recompute", "blocks", "--device", "cpu"], "expected an accelerator --device",
     ["--activations-device", "cpu", "--recompute", "blocks", "--device", "virt:0"]),
    (["--optimizer-split", "0.5"], "expected --param-device cpu", ["--optimizer-split", "0.5", "--param-device", "cpu"]),
    (["--offload-delay", "1"], "expected --optimizer-device cpu or --param-device cpu",
     ["--offload-delay", "1", "--optimizer-device", "cpu"]),
    (["--offload-delay", "1"], "expected --optimizer-device cpu or --param-device cpu",
     ["--offload-delay", "1", "--param-device", "cpu"]),
    (["--optimizer-moments", "bf16", "--optimizer", "sgd"], "expected --optimizer adam or adamw",
     ["--optimizer-moments", "bf16", "--optimizer", "adamw"]),
    (["--no-decay-bn-bias", "--optimizer-device", "cpu"], "expected --optimizer-device device",
     ["--no-decay-bn-bias", "--optimizer-device", "device"]),
    (["--warmup-epochs", "1", "--epochs", "1", "--max-steps", "4"], "set --warmup-steps",
     ["--warmup-steps", "1", "--epochs", "1", "--max-steps", "4"]),
    (["--param-prefetch", "2"], "expected --param-device cpu", ["--param-prefetch", "2", "--param-device", "cpu"]),
    # fp16 (dynamic loss scaling) with streaming trains; what it is refused with names ways that do.
    (["--precision", "fp16", "--param-device", "cpu", "--optimizer-state-device", "disk", "--offload-dir", OFFLOAD],
     "expected --optimizer-state-device host", ["--precision", "fp16", "--param-device", "cpu"]),
    (["--precision", "fp16", "--optimizer-device", "cpu", "--zero", "1"], "expected --zero 0, --optimizer-device "
     "device, or --precision fp32 without --loss-scale dynamic", ["--precision", "fp16", "--optimizer-device", "cpu"]),
    (["--precision", "fp16", "--optimizer-device", "cpu", "--zero", "1"], "expected --zero 0, --optimizer-device "
     "device, or --precision fp32", ["--precision", "fp16", "--zero", "1"]),
    (["--precision", "fp16", "--optimizer-device", "cpu", "--zero", "1"], "expected --zero 0, --optimizer-device "
     "device, or --precision fp32", ["--precision", "fp32", "--optimizer-device", "cpu", "--zero", "1"]),
]


def main():
    os.makedirs(DATA, exist_ok=True)
    write_shard(os.path.join(DATA, "train.tok"), 0, 2500)
    write_shard(os.path.join(DATA, "val.tok"), 2500, 300)
    for name, extra in PLAN_SEEDS.items():
        args = command(PLAN_MODEL, extra)
        code, out = run(args + ["--plan-only"])
        total = device_total(out)
        if code != 0 or total is None:
            failures.append(f"plan seed {name}: {' '.join(args)} --plan-only: exit {code}: {error_line(out)}")
            continue
        walk_plan(f"plan seed {name}", args, 0.9 * total)
    for refused, advice, applied in FLAG_CASES:
        code, out = run(command(["--max-steps", "1"], refused))
        line = error_line(out)
        if code == 0 or advice not in line:
            failures.append(f"{' '.join(refused)}: expected a refusal saying '{advice}', got exit {code}: {line}")
            continue
        code, out = run(command(["--max-steps", "1"], applied))
        if code != 0:
            failures.append(f"{' '.join(refused)}: the advice '{advice}' ({' '.join(applied)}) leads to: "
                            f"{error_line(out) or out[-300:]}")
    for f in failures:
        print("check-advice: " + f)
    walked = len(PLAN_SEEDS) + len(FLAG_CASES)
    print(f"check-advice: {walked} refusals walked, {len(failures)} dead ends")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
