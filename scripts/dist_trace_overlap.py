#!/usr/bin/env python3
"""The hidden share of the gradient all-reduces, read from a `tandem train --trace` file of a
distributed run on virt (one file per rank: t.json, t.rank1.json, ...).

Per step: backward is the compute stream's "backward" span; each bucket is an "all-reduce
bucket" span on the "<device> all-reduce" track with a nested "wait for the other ranks" span
(the barrier: skew). Communication = bucket minus wait; hidden = the part of it before backward
ended. Prints, per file, ms per step of backward, communication and skew, and the hidden share.
Usage: dist_trace_overlap.py TRACE.json [TRACE.rank1.json ...]
"""
import json
import sys


def spans(path):
    with open(path) as f:
        t = json.load(f)
    events = t["traceEvents"] if isinstance(t, dict) else t
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return [(e["ts"], e["ts"] + e.get("dur", 0), names.get((e["pid"], e["tid"]), ""), e["name"])
            for e in events if e.get("ph") == "X"]


def before(b, e, t):
    return max(0.0, min(e, t) - b)


def overlap(path):
    xs = spans(path)
    backward = sorted((b, e) for b, e, track, name in xs if name == "backward" and track.endswith("(compute)"))
    buckets = sorted((b, e) for b, e, track, name in xs if name == "all-reduce bucket")
    waits = sorted((b, e) for b, e, track, name in xs if name == "wait for the other ranks")
    comm = hidden = skew = 0.0
    for i, (bb, be) in enumerate(backward):
        nxt = backward[i + 1][0] if i + 1 < len(backward) else float("inf")
        for b, e in buckets:
            if not bb <= b < nxt:
                continue
            w = [(wb, we) for wb, we in waits if b <= wb and we <= e]
            wait = sum(we - wb for wb, we in w)
            comm += (e - b) - wait
            hidden += before(b, e, be) - sum(before(wb, we, be) for wb, we in w)
            skew += wait
    steps = len(backward)
    bwd = sum(e - b for b, e in backward)
    return steps, bwd / steps / 1e3, comm / steps / 1e3, skew / steps / 1e3, hidden / comm if comm else float("nan")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        steps, bwd, comm, skew, share = overlap(path)
        print(f"{path}: {steps} steps; backward {bwd:.1f} ms/step, all-reduce {comm:.1f} ms/step, "
              f"{share:.2f} of it hidden behind backward; waiting for the other ranks {skew:.1f} ms/step")


if __name__ == "__main__":
    main()
