#!/usr/bin/env python3
"""The textbook PyTorch training loop, fed by torch's DataLoader and then by tandem's.

  python examples/pytorch_loop.py DIR [--num-workers 2] [--batch-size 64] [--steps 30]

--loader-only drops the training step (the loaders alone). DIR is an image folder (DIR/train/<class>/*.jpg, e.g. scripts/make-photo-folder.sh DIR).
--model cnn (default: three conv blocks) or linear (one layer on the pixels: a step that costs
next to nothing, as on a GPU, so the loader sets the rate; on a CPU-only machine the cnn's
step runs on the same cores as the loader's workers and sets the rate of both loops).
--prefetch (with a GPU): the tandem loop takes its batches through tandem.data.CudaPrefetcher
(copies on a side stream, depth 2) instead of calling .to() itself.
Both loaders apply the same augmentation (RandomResizedCrop to --image-size, horizontal flip,
ImageNet Normalize) with the same num_workers and pin_memory; the model, AdamW and
cross-entropy are the same. Prints images/s of each over --steps steps after --warmup
steps, and their ratio. Needs torch and torchvision, and the tandem module (pip install .).
"""

import argparse
import os
import time

import torch
import torch.nn as nn

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def make_model(kind, classes, image_size):
    if kind == "linear":
        return nn.Sequential(nn.Flatten(), nn.Linear(3 * image_size * image_size, classes))
    return small_cnn(classes)


def small_cnn(classes):
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                             nn.MaxPool2d(2))

    return nn.Sequential(block(3, 32), block(32, 64), block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(128, classes))


def torch_loader(args):
    import torchvision
    from torchvision import transforms as T

    tf = T.Compose([T.RandomResizedCrop(args.image_size), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    ds = torchvision.datasets.ImageFolder(f"{args.dir}/train", transform=tf)
    return torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.num_workers,
                                       pin_memory=args.pin_memory, drop_last=True, persistent_workers=True), len(ds.classes)


def tandem_loader(args):
    import tandem

    loader = tandem.data.Loader(args.dir, batch_size=args.batch_size, num_workers=args.num_workers, shuffle=True,
                                seed=0, image_size=args.image_size, augment=True, mean=MEAN, std=STD,
                                pin_memory=args.pin_memory, drop_last=True)
    return loader, len(os.listdir(f"{args.dir}/train"))


def epochs(loader):
    while True:
        yield from loader


def run(name, loader, classes, args, device):
    torch.manual_seed(0)
    model = make_model(args.model, classes, args.image_size).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    seen, start, in_flight = 0, None, []
    for step, (images, labels) in enumerate(epochs(loader)):
        if step == args.warmup:
            start, seen = time.perf_counter(), 0
        if step == args.warmup + args.steps:
            break
        host = (images, labels)
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        if device.type == "cuda":
            # A pinned batch goes back to its loader's pool when dropped: keep it until its
            # asynchronous copy is done (torch's own pinned memory does this internally).
            copied = torch.cuda.Event()
            copied.record()
            in_flight.append((host, copied))
            if len(in_flight) > 2:
                in_flight.pop(0)[1].synchronize()
        seen += images.shape[0]
        if args.loader_only:
            continue
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    rate = seen / (time.perf_counter() - start)
    last = "" if args.loader_only else f" (last loss {loss.item():.3f})"
    print(f"{name:>24}: {rate:8.1f} images/s{last}")
    return rate


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--image-size", type=int, default=96)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--loader-only", action="store_true", help="batches to the device, no training step")
    p.add_argument("--only", choices=["torch", "tandem"], default=None)
    p.add_argument("--model", choices=["cnn", "linear"], default="cnn")
    p.add_argument("--prefetch", action="store_true", help="tandem loop: tandem.data.CudaPrefetcher (needs a GPU)")
    args = p.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    args.pin_memory = device.type == "cuda"
    rates = {}
    if args.only in (None, "torch"):
        loader, classes = torch_loader(args)
        rates["torch"] = run("torch DataLoader", loader, classes, args, device)
    if args.only in (None, "tandem"):
        loader, classes = tandem_loader(args)
        name = "tandem.data.Loader"
        if args.prefetch:
            import tandem

            loader, name = tandem.data.CudaPrefetcher(loader, device), "tandem + CudaPrefetcher"
        rates["tandem"] = run(name, loader, classes, args, device)
    if len(rates) == 2:
        print(f"tandem / torch: {rates['tandem'] / rates['torch']:.2f}x")


if __name__ == "__main__":
    main()
