#!/usr/bin/env python3
"""Golden values for the data tests: the reference Fashion-MNIST pixel pipeline of
/work/shared/peers/torch_fmnist.py applied to every u8 value and to a padded (zero) pixel.
Writes tests/golden/fmnist_normalize.txt: one line per u8 value v (0..255) with the f32 bit
pattern of (v.astype(float32) / 255.0 - 0.2860) / 0.3530 as computed by numpy + torch, then a
line 'pad <bits>' for a pixel added by nn.functional.pad. Run with /usr/bin/python3 (torch 1.13)."""
import struct, sys, numpy as np, torch, torch.nn as nn
x = np.arange(256, dtype=np.uint8).reshape(1, 16, 16)
img = torch.from_numpy(x.astype(np.float32) / 255.0)
img = nn.functional.pad(img, (2, 2, 2, 2))
out = ((img - 0.2860) / 0.3530).numpy()
bits = lambda f: struct.unpack("<I", struct.pack("<f", float(f)))[0]
path = sys.argv[1] if len(sys.argv) > 1 else "tests/golden/fmnist_normalize.txt"
with open(path, "w") as f:
    f.write(f"# {torch.__version__} (v / 255 - 0.2860) / 0.3530 in f32, v = 0..255, then a padded pixel\n")
    inner = out[0, 2:18, 2:18].reshape(-1)
    for v in range(256): f.write(f"{v} {bits(inner[v]):08x}\n")
    f.write(f"pad {bits(out[0, 0, 0]):08x}\n")
