"""Small data files for the module's tests, written byte by byte (no numpy needed)."""

import json
import os
import random
import struct


def write_cifar10(folder, per_file=40, seed=1):
    """CIFAR-10 binary layout: data_batch_1..5.bin, records of label byte + 3072 pixel bytes."""
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    for i in range(1, 6):
        with open(os.path.join(folder, f"data_batch_{i}.bin"), "wb") as f:
            for _ in range(per_file):
                f.write(bytes([rng.randrange(10)]) + bytes(rng.randrange(256) for _ in range(3072)))
    with open(os.path.join(folder, "test_batch.bin"), "wb") as f:
        for _ in range(per_file):
            f.write(bytes([rng.randrange(10)]) + bytes(rng.randrange(256) for _ in range(3072)))
    return 5 * per_file


def write_safetensors(path, tensors):
    """tensors: {name: (dtype "F32" | "I64", shape, values)}; the safetensors layout."""
    header, data = {}, b""
    for name, (dtype, shape, values) in tensors.items():
        fmt = {"F32": "f", "I64": "q"}[dtype]
        raw = struct.pack(f"<{len(values)}{fmt}", *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
