#!/opt/peers/bin/python
"""Golden values for tandem's ImageNet-style resampling, computed with torchvision.

For three small u8 RGB images made by a formula (the same one is in
tests/data/image_resample_golden_test.cpp, so no image is stored), writes
tests/golden/image_transforms.safetensors with, per case, torchvision's output as u8 (the
uint8 path, which rounds) and as f32 (the same resampling of the image as float32):
  crop cases: torchvision.transforms.v2.functional.resized_crop(img, top, left, h, w,
              [out_h, out_w], antialias=True)
  eval cases: resize(img, [resize_size], antialias=True) then center_crop(img, [size])
Run: /opt/peers/bin/python scripts/golden_image_transforms.py [output path]
"""
import os
import sys

import numpy as np
import torch
import torchvision
from torchvision.transforms.v2 import functional as F

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_writer import write_safetensors  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "golden",
                                                          "image_transforms.safetensors")

# (width, height) of each image; pixel (y, x, c) of image k is formula(k, y, x, c).
IMAGES = [(40, 30), (23, 37), (64, 48)]


def formula(k, y, x, c):
    return (x * 17 + y * 29 + c * 83 + ((x * y + k * 5) % 23) * 11 + k * 40) % 256


def image(k):
    w, h = IMAGES[k]
    y, x, c = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing="ij")
    hwc = formula(k, y, x, c).astype(np.uint8)
    return torch.from_numpy(np.ascontiguousarray(hwc.transpose(2, 0, 1)))  # [3, H, W]


# name, image, (top, left, height, width), (out_h, out_w)
CROPS = [
    ("crop_down", 0, (2, 3, 24, 30), (16, 16)),
    ("crop_up", 0, (5, 10, 6, 8), (16, 16)),
    ("crop_whole", 0, (0, 0, 30, 40), (13, 13)),
    ("crop_wide", 0, (1, 2, 27, 33), (9, 20)),
    ("crop_strong", 1, (4, 1, 30, 21), (7, 7)),
]
# name, image, resize_size, size
EVALS = [
    ("eval_tall", 1, 20, 16),
    ("eval_wide", 2, 32, 24),
    ("eval_half", 2, 20, 15),  # offsets round((26 - 15) / 2) = 6 (half to even), round(2.5) = 2
]

T = {}
for name, k, (top, left, h, w), size in CROPS:
    img = image(k)
    T[name + ".u8"] = F.resized_crop(img, top, left, h, w, list(size), antialias=True).numpy()
    T[name + ".f32"] = F.resized_crop(img.float(), top, left, h, w, list(size), antialias=True).numpy()
for name, k, resize_size, size in EVALS:
    img = image(k)
    for suffix, x in ((".u8", img), (".f32", img.float())):
        r = F.resize(x, [resize_size], antialias=True)
        T[name + suffix] = F.center_crop(r, [size]).numpy()

write_safetensors(OUT, T, {"torch": torch.__version__, "torchvision": torchvision.__version__})
print("wrote", OUT, len(T), "tensors")
