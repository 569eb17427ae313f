#!/usr/bin/env python3
"""Overlap of copies and compute in a tandem --trace file (Chrome-trace JSON).

For each device stream whose track name contains COPY_LABEL (default "place boundary copies"),
prints its busy time, and how much of it ran while each device's compute stream was busy (the
other device's: the copies that ran while it computed; its own device's too, for comparison).
Busy time is the union of the track's spans ("ph": "X"), in ms.

usage: scripts/trace-overlap.py TRACE.json [COPY_LABEL]
"""
import json
import sys


def union(spans):
    out = []
    for b, e in sorted(spans):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def total(spans):
    return sum(e - b for b, e in spans)


def intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append([lo, hi])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    label = sys.argv[2] if len(sys.argv) > 2 else "place boundary copies"
    with open(sys.argv[1]) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names, spans = {}, {}
    for ev in events:
        key = (ev.get("pid"), ev.get("tid"))
        if ev.get("ph") == "M" and ev.get("name") == "thread_name":
            names[key] = ev["args"]["name"]
        elif ev.get("ph") == "X":
            spans.setdefault(key, []).append((float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0))))
    tracks = {names.get(k, str(k)): union(v) for k, v in spans.items()}
    copies = [n for n in tracks if label in n]
    # A device stream that carries no copies computes (the run's device labels its stream
    # "(compute)"; another device's stream may be unlabelled: "virt:0 stream 0").
    computes = [n for n in tracks if " stream " in n and not any(w in n for w in ("copies", "d2h", "h2d"))]
    if not copies:
        sys.exit(f"{sys.argv[1]}: no track named '*{label}*'; tracks: {', '.join(sorted(tracks))}")
    for c in copies:
        busy = total(tracks[c])
        print(f"{c}: {len(tracks[c])} busy spans, {busy / 1e3:.1f} ms")
        for k in computes:
            both = total(intersect(tracks[c], tracks[k]))
            share = both / busy if busy else 0.0
            print(f"  while {k} computed: {both / 1e3:.1f} ms ({100 * share:.0f}% of the copies)")


if __name__ == "__main__":
    main()
