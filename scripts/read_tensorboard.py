#!/usr/bin/env python3
"""Reads the scalars of a TensorBoard log folder with TensorBoard's own EventAccumulator and
prints them as JSON: {"tag": [[step, value], ...], ...}. Used by tests/metrics to check that
the event files `tandem train --tensorboard DIR` writes load in TensorBoard.

Usage: read_tensorboard.py DIR
Exit status: 0 on success, 3 when the tensorboard package is not installed (the test then
skips), 1 when the folder holds no scalars.
"""
import json
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:  # the peers venv may lack it
    print(f"tensorboard not importable: {e}", file=sys.stderr)
    sys.exit(3)


def main() -> int:
    acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})  # 0: keep every event
    acc.Reload()
    tags = acc.Tags().get("scalars", [])
    if not tags:
        print(f"no scalars in {sys.argv[1]}", file=sys.stderr)
        return 1
    out = {t: [[e.step, e.value] for e in acc.Scalars(t)] for t in tags}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
