"""Small data sets for the Python module's tests, written byte by byte."""

import json
import os
import random
import struct
import tempfile
import zlib


def write_cifar10(folder, per_file=8, test_records=8, seed=1):
    """CIFAR-10 binary layout: data_batch_1..5.bin and test_batch.bin, records of a label byte
    and 3072 pixel bytes [3, 32, 32]. Returns the number of training records."""
    rng = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    for name, n in [(f"data_batch_{i}.bin", per_file) for i in range(1, 6)] + [("test_batch.bin", test_records)]:
        with open(os.path.join(folder, name), "wb") as f:
            for _ in range(n):
                f.write(bytes([rng.randrange(10)]) + rng.randbytes(3072))
    return 5 * per_file


class CifarDirMixin:
    """For a unittest.TestCase: cls.dir, a CIFAR-10 folder of write_cifar10's, made once per class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "cifar")
        write_cifar10(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()


def read_cifar10(folder):
    """The training records of a CIFAR-10 folder: [(label, 3072 pixel bytes)] in file order."""
    out = []
    for i in range(1, 6):
        with open(os.path.join(folder, f"data_batch_{i}.bin"), "rb") as f:
            raw = f.read()
        out += [(raw[o], raw[o + 1:o + 3073]) for o in range(0, len(raw), 3073)]
    return out


def write_token_shard(path, ids, vocab_size):
    """A token shard (include/tandem/data/token_shard.h, version 1): 64-byte header, u16 ids."""
    payload = struct.pack(f"<{len(ids)}H", *ids)
    head = b"TNDMTOKS" + struct.pack("<IIIIQI", 1, 64, vocab_size, 2, len(ids), zlib.crc32(payload)) + bytes(24)
    with open(path, "wb") as f:
        f.write(head + struct.pack("<I", zlib.crc32(head)) + payload)


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


def read_png_rgb(path):
    """An 8-bit RGB, non-interlaced PNG (as tandem's encoder writes) as rows of bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(raw):
        n, kind = struct.unpack(">I4s", raw[pos:pos + 8])
        body = raw[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert (depth, colour, interlace) == (8, 2, 0), (depth, colour, interlace)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    data, stride, bpp = zlib.decompress(idat), width * 3, 3
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = data[y * (stride + 1)], bytearray(data[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows
