"""tandem.train: a run of ``tandem train`` from a dict, returning its metrics records."""

import json
import math
import os
import shutil
import subprocess
import tempfile

from . import _tandem


def executable():
    """The ``tandem`` program tandem.train runs: $TANDEM_EXECUTABLE, else the one installed
    inside the package (pip install .), else the one of the build tree the module was built in,
    else ``tandem`` on PATH. Raises tandem.Error when there is none."""
    candidates = [os.environ.get("TANDEM_EXECUTABLE", ""),
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "tandem")]
    try:
        from . import _build_tree
        candidates.append(_build_tree.executable)
    except ImportError:
        pass
    candidates.append(shutil.which("tandem") or "")
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise _tandem.Error("[train] no tandem program found: set TANDEM_EXECUTABLE, build the `tandem` target, "
                        "or install the package with pip install .")


def _toml_value(key, v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (str, os.PathLike)):
        return json.dumps(os.fspath(v))  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(key, x) for x in v) + "]"
    raise TypeError(f"tandem.train: config[{key!r}]: expected a bool, int, float, str or a list of them, "
                    f"got {type(v).__name__}")


def run_file(config):
    """The run file (TOML, docs/run-files.md) of ``config``: one ``key = value`` line per item."""
    lines = []
    for key, v in config.items():
        if not isinstance(key, str) or not key.replace("_", "").isalnum():
            raise TypeError(f"tandem.train: config key {key!r}: expected a flag name such as 'batch_size'")
        lines.append(f"{key} = {_toml_value(key, v)}")
    return "\n".join(lines) + "\n"


def train(config, verbose=False):
    """Trains as ``tandem train --config run.toml`` does, with ``config`` as the run file.

    config: a dict whose keys are the flags of ``tandem train`` with ``_`` for ``-`` (the keys
    of a run file, e.g. {"data": "/usr/share/datasets/fashion-mnist", "model": "mlp",
    "epochs": 1, "batch_size": 64, "lr": 1e-3}) and whose values are bools, ints, floats,
    strings or lists of them. Returns the metrics records (what --metrics-file writes, one dict
    per line: "run", then "window", "eval", "epoch" records, then "summary"; the schema table of
    docs/metrics.md); a "metrics_file" key also keeps them in that file. verbose: print the
    program's output as it runs (otherwise it is returned only through errors).

    The run is a child process (the program of ``executable()``): its threads, signals and
    memory stay out of the Python process; Ctrl-C stops it with a checkpoint when
    checkpoint_dir is set. Raises tandem.Error (a ValueError) with the program's one-line
    message for a bad key or value, a missing data set, and the other errors it exits with 2
    for; RuntimeError for other failures (exit status 1 or a signal), with its last line.
    """
    if not isinstance(config, dict):
        raise TypeError(f"tandem.train: config: expected a dict, got {type(config).__name__}")
    cfg = dict(config)
    for key in ("config", "print_config"):
        if key in cfg:
            raise ValueError(f"tandem.train: config[{key!r}]: the config dict is the run file; "
                             f"expected no {key!r} key")
    with tempfile.TemporaryDirectory(prefix="tandem-train-") as tmp:
        metrics = os.fspath(cfg.get("metrics_file") or os.path.join(tmp, "metrics.jsonl"))
        cfg["metrics_file"] = metrics
        cfg.setdefault("progress", 0)
        path = os.path.join(tmp, "config.toml")
        with open(path, "w") as f:
            f.write(run_file(cfg))
        tail = []
        with subprocess.Popen([executable(), "train", "--config", path], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
            for line in proc.stdout:
                if verbose:
                    print(line, end="", flush=True)
                tail = (tail + [line.rstrip("\n")])[-20:]
            code = proc.wait()
        if code != 0:
            errors = [l for l in tail if l.startswith("tandem: error: ")]
            message = (errors[-1][len("tandem: error: "):] if errors else (tail[-1] if tail else ""))
            message = message.replace(path, "config")
            if code == 2:
                raise _tandem.Error(message)
            raise RuntimeError(f"tandem train exited with status {code}: {message}")
        with open(metrics) as f:
            return [json.loads(line) for line in f if line.strip()]
