#!/usr/bin/python3
"""Loads a safetensors file written by `tandem train --save` into the equivalent PyTorch
model (strict load_state_dict) and prints its test accuracy on Fashion-MNIST, to compare with
`tandem eval --weights FILE`. Needs torch and numpy (Debian: python3-torch), not the
safetensors package.

Usage: check_weights_torch.py FILE [--model fmnist-cnn|mlp] [--data DIR]
Prints: torch_eval test_acc <fraction> correct <n> samples <n> torch <version>
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "U8": np.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        arr = np.frombuffer(raw[base + b:base + end], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def read_idx(path):
    if not os.path.exists(path) and path.endswith(".gz"):
        path = path[:-3]  # the raw file
    with open(path, "rb") as f:
        b = f.read()
    if b[:2] == b"\x1f\x8b":
        b = gzip.decompress(b)
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("weights")
    ap.add_argument("--model", default="fmnist-cnn")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    m = model(a.model)
    m.load_state_dict(read_safetensors(a.weights), strict=True)
    m.eval()
    x = read_idx(f"{a.data}/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = torch.from_numpy(read_idx(f"{a.data}/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    x = (torch.from_numpy(x)[:, None] - 0.2860) / 0.3530
    with torch.no_grad():
        correct = sum(int((m(x[i:i + 500]).argmax(1) == y[i:i + 500]).sum()) for i in range(0, len(y), 500))
    print(f"torch_eval test_acc {correct / len(y):.4f} correct {correct} samples {len(y)} torch {torch.__version__}")


if __name__ == "__main__":
    sys.exit(main())
