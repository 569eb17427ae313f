#!/opt/peers/bin/python
"""Weights between tandem and torchvision (torch 2.15, torchvision 0.29 in the peers venv), for
tests/models/torchvision_test.cpp.

  torchvision_resnet.py check MODEL WEIGHTS INPUT OUT
      Loads WEIGHTS (a `tandem train --save` file) into torchvision's MODEL with
      load_state_dict(strict=True), runs it in eval mode on INPUT's tensor "x" [N, C, H, W] and
      writes the logits to OUT as "logits".
  torchvision_resnet.py make MODEL SEED CLASSES N SIZE WEIGHTS OUT
      Builds torchvision's MODEL (CLASSES classes) from SEED with random BatchNorm statistics and
      affine values, writes its state_dict to WEIGHTS (safetensors), and N random images
      [N, 3, SIZE, SIZE] ("x") and the eval-mode logits ("logits") to OUT.
MODEL: resnet18 | resnet34 | resnet50 | resnet18-cifar (3x3 stride-1 conv1, no max-pool).
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.dirname(__file__))
from check_weights_torch import read_safetensors  # noqa: E402
from safetensors_writer import write_safetensors  # noqa: E402


def build(name, classes, channels=3):
    if name == "resnet18-cifar":
        m = torchvision.models.resnet18(num_classes=classes)
        m.conv1 = nn.Conv2d(channels, 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
        return m
    m = getattr(torchvision.models, name)(num_classes=classes)
    if channels != 3:
        m.conv1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
    return m


def logits_of(m, x):
    m.eval()
    with torch.no_grad():
        return m(x).numpy()


def main(a):
    torch.set_num_threads(int(os.environ.get("TANDEM_TEST_THREADS", "2")))
    if a[0] == "check":
        _, name, weights, inp, out = a
        state = read_safetensors(weights)
        x = read_safetensors(inp)["x"]
        classes = state["fc.weight"].shape[0]
        m = build(name, classes, state["conv1.weight"].shape[1])
        m.load_state_dict(state, strict=True)
        write_safetensors(out, {"logits": logits_of(m, x)})
    elif a[0] == "make":
        _, name, seed, classes, n, size, weights, out = a
        torch.manual_seed(int(seed))
        m = build(name, int(classes))
        with torch.no_grad():
            for mod in m.modules():
                if isinstance(mod, nn.BatchNorm2d):
                    mod.running_mean.normal_(0, 0.2)
                    mod.running_var.uniform_(0.5, 2.0)
                    mod.weight.uniform_(0.5, 1.5)
                    mod.bias.normal_(0, 0.2)
                    mod.num_batches_tracked.fill_(7)
        x = torch.randn(int(n), 3, int(size), int(size))
        write_safetensors(weights, {k: v.numpy() for k, v in m.state_dict().items()}, {"format": "pt"})
        write_safetensors(out, {"x": x.numpy(), "logits": logits_of(m, x)})
    else:
        sys.exit(f"unknown mode {a[0]} (expected check or make)")


if __name__ == "__main__":
    main(sys.argv[1:])
