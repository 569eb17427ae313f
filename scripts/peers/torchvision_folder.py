#!/usr/bin/env python3
"""torchvision ImageFolder + DataLoader with the ImageNet training transforms, the peer of
tandem's image pipeline: RandomResizedCrop(size), RandomHorizontalFlip, ToTensor-equivalent,
Normalize (ImageNet mean/std), batches of `batch` collated by the DataLoader.

usage: torchvision_folder.py FOLDER [num_workers] [size] [batch] [batches] [pil|tvio]
  FOLDER   an ImageFolder root (class subfolders), e.g. photos/train
  pil      the default ImageFolder loader (PIL decode) and transforms.v2 on PIL images
  tvio     torchvision.io.decode_jpeg on the file bytes and transforms.v2 on uint8 tensors
Prints: torchvision_folder mode M workers W size S img_per_s X (after one warm-up batch per worker).
"""
import sys
import time

import torch
import torchvision
from torchvision import datasets
from torchvision.transforms import v2


def main():
    folder = sys.argv[1]
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 224
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    batches = int(sys.argv[5]) if len(sys.argv) > 5 else 40
    mode = sys.argv[6] if len(sys.argv) > 6 else "pil"
    torch.set_num_threads(1)
    norm = v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    if mode == "pil":
        tf = v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(),
                         v2.PILToTensor(), v2.ToDtype(torch.float32, scale=True), norm])
        ds = datasets.ImageFolder(folder, transform=tf)
    elif mode == "tvio":
        def load(path):
            return torchvision.io.decode_image(torchvision.io.read_file(path), mode=torchvision.io.ImageReadMode.RGB)
        tf = v2.Compose([v2.RandomResizedCrop(size, antialias=True), v2.RandomHorizontalFlip(),
                         v2.ToDtype(torch.float32, scale=True), norm])
        ds = datasets.ImageFolder(folder, transform=tf, loader=load)
    else:
        raise SystemExit(f"mode: expected pil or tvio, got {mode}")
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                     persistent_workers=workers > 0, drop_last=True)
    it = iter(dl)
    for _ in range(max(1, workers)):  # warm-up: workers started, first batches made
        next(it)
    n = 0
    t0 = time.perf_counter()
    for _ in range(batches):
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(dl)
            x, y = next(it)
        n += x.shape[0]
    dt = time.perf_counter() - t0
    print(f"torchvision_folder mode {mode} workers {workers} size {size} img_per_s {n / dt:.1f} "
          f"(torch {torch.__version__}, torchvision {torchvision.__version__})")


if __name__ == "__main__":
    main()
