#!/usr/bin/env python3
"""Writes Fashion-MNIST in CIFAR-10's binary format, for tests and training checks of the CIFAR
reader with real labels.

Each 28x28 grayscale image is padded with 2 black (0) pixels on every side to 32x32 and the
plane replicated to 3 channels (R = G = B), giving CIFAR-10 records of 1 label byte + 3072
pixel bytes ([3, 32, 32], row-major). The 60000 training images go, in order, to
data_batch_1.bin .. data_batch_5.bin (12000 each), the 10000 test images to test_batch.bin;
batches.meta.txt lists the Fashion-MNIST class names. Python's standard library only.

usage: fmnist-to-cifar.py [--src /usr/share/datasets/fashion-mnist] [--limit N] OUT
  --limit N  keeps the first N images of each split (split over the 5 batches as evenly as
             possible; every batch file gets at least one record, so N >= 5)
"""
import argparse
import gzip
import os
import struct
import sys

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        sys.exit(f"{path}: expected an IDX u8 file (magic 0x000008RR)")
    rank = data[3]
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    payload = data[4 + 4 * rank:]
    n = 1
    for d in dims:
        n *= d
    if len(payload) != n:
        sys.exit(f"{path}: expected {n} payload bytes for dims {dims}, found {len(payload)}")
    return dims, payload


def find(src, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(src, name)):
            return os.path.join(src, name)
    sys.exit(f"{src}: missing {stem}[.gz]")


def records(src, split, limit):
    (n, h, w), images = read_idx(find(src, f"{split}-images-idx3-ubyte"))
    (nl,), labels = read_idx(find(src, f"{split}-labels-idx1-ubyte"))
    if (h, w) != (28, 28) or nl != n:
        sys.exit(f"{src}: expected {split} images [N, 28, 28] with N labels, found [{n}, {h}, {w}] and {nl}")
    if limit:
        n = min(n, limit)
    row_pad = bytes(2)
    blank = bytes(32 * 2)
    out = []
    for i in range(n):
        img = images[i * 784:(i + 1) * 784]
        plane = blank + b"".join(row_pad + img[r * 28:(r + 1) * 28] + row_pad for r in range(28)) + blank
        out.append(bytes([labels[i]]) + plane * 3)
    return out


def write(path, recs):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for r in recs:
            f.write(r)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("out")
    a = ap.parse_args()
    if a.limit and a.limit < 5:
        sys.exit("--limit: expected at least 5 (one record per training batch file)")
    os.makedirs(a.out, exist_ok=True)
    train = records(a.src, "train", a.limit)
    for b in range(5):
        write(os.path.join(a.out, f"data_batch_{b + 1}.bin"), train[b * len(train) // 5:(b + 1) * len(train) // 5])
    test = records(a.src, "t10k", a.limit)
    write(os.path.join(a.out, "test_batch.bin"), test)
    with open(os.path.join(a.out, "batches.meta.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")
    print(f"wrote {len(train)} training and {len(test)} test records to {a.out}")


if __name__ == "__main__":
    main()
