#!/usr/bin/env python3
"""Samples/s of a Python data set through tandem.data.Loader (and torch's DataLoader when torch
imports), for the textbook case: __getitem__ takes 0.1 ms.

  PYTHONPATH=build/python python3 bench/python_dataset.py [--samples 4096] [--batch-size 32]

Two data sets, each sample a float32 [3, 32, 32] array and a label:
  sleep  - __getitem__ sleeps 0.1 ms (time.sleep releases the GIL, as file reads do);
  python - __getitem__ runs Python code for 0.1 ms (holds the GIL all along).
tandem's workers are threads that take the GIL for each __getitem__; torch's are processes.
Each figure is the best of --repeats epochs (after one warm-up epoch) with its median.
"""

import argparse
import statistics
import time

import numpy as np

WORK_S = 1e-4


class Sleep:
    def __init__(self, n):
        self.n, self.x = n, np.zeros((3, 32, 32), np.float32)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(WORK_S)
        return self.x, i % 10


class Python(Sleep):
    def __getitem__(self, i):
        end = time.perf_counter() + WORK_S
        while time.perf_counter() < end:
            pass
        return self.x, i % 10


def rate(make_loader, samples, repeats):
    loader = make_loader()
    for _ in loader:  # warm-up: threads or processes started, pools allocated
        pass
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in loader:
            pass
        rates.append(samples / (time.perf_counter() - t))
    return max(rates), statistics.median(rates)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    args = p.parse_args()
    import tandem
    try:
        import torch
        import torch.utils.data
    except ImportError:
        torch = None
        print("torch not found: tandem only")
    t = time.perf_counter()
    for _ in range(1000):
        time.sleep(WORK_S)
    took = (time.perf_counter() - t) / 1000
    print(f"time.sleep({WORK_S}) takes {1e3 * took:.3f} ms here: at most {1 / took:.0f} samples/s on one thread")
    for cls in (Sleep, Python):
        ds = cls(args.samples)
        for w in args.workers:
            best, med = rate(lambda: tandem.data.Loader(ds, batch_size=args.batch_size, num_workers=w, output="numpy"),
                             args.samples, args.repeats)
            print(f"{cls.__name__.lower():>6} tandem  num_workers={w}: {best:8.0f} samples/s (median {med:.0f})")
            if torch is not None:
                best, med = rate(lambda: torch.utils.data.DataLoader(ds, batch_size=args.batch_size, num_workers=w,
                                                                     persistent_workers=w > 0),
                                 args.samples, args.repeats)
                print(f"{cls.__name__.lower():>6} torch   num_workers={w}: {best:8.0f} samples/s (median {med:.0f})")


if __name__ == "__main__":
    main()
