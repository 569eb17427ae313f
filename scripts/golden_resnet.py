#!/opt/peers/bin/python
"""Golden values for tandem's residual blocks, computed with torchvision's own BasicBlock and
Bottleneck (torch 2.15, torchvision 0.29 in the peers venv).

Writes tests/golden/resnet_blocks.safetensors with, per case ("basic": BasicBlock(4, 4),
identity shortcut; "bottleneck": Bottleneck(8, 4, stride 2) with a projection shortcut):
the block's state_dict before the step ("<case>.state.<name>"), the input x, the upstream
gradient dy, the training-mode output y, dx, every parameter gradient
("<case>.grad.<name>") and the running statistics after the forward
("<case>.after.<name>"). Small on purpose (a few KiB).
Also writes tests/golden/resnet_state_dicts.txt: for torchvision's resnet18, resnet34 and
resnet50 (num_classes 1000, 3 input channels) and resnet18-cifar (3x3 stride-1 conv1, no
max-pool, 1 input channel, 10 classes), one line per state_dict entry in order:
"<model> <name> <d0>x<d1>..." ("-" for a 0-d tensor).
Run: /opt/peers/bin/python scripts/golden_resnet.py [output path]
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
from torchvision.models.resnet import BasicBlock, Bottleneck, conv1x1

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_writer import write_safetensors  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "golden",
                                                          "resnet_blocks.safetensors")
torch.manual_seed(2026)
T = {}


def put(name, t):
    T[name] = np.array(t.detach().cpu().numpy(), order="C", copy=True)


def randomise(block):
    """Non-trivial weights and BatchNorm affine values, so every gradient path is exercised."""
    with torch.no_grad():
        for name, p in block.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.3 * torch.randn_like(p) if name.endswith("weight") else 0.2 * torch.randn_like(p))


def case(prefix, block, x_shape):
    randomise(block)
    block.train()
    for name, t in block.state_dict().items():
        put(f"{prefix}.state.{name}", t)
    x = torch.randn(*x_shape).requires_grad_(True)
    y = block(x)
    dy = torch.randn(*y.shape)
    y.backward(dy)
    put(prefix + ".x", x)
    put(prefix + ".dy", dy)
    put(prefix + ".y", y)
    put(prefix + ".dx", x.grad)
    for name, p in block.named_parameters():
        put(f"{prefix}.grad.{name}", p.grad)
    for name, t in block.state_dict().items():
        if "running" in name or "num_batches" in name:
            put(f"{prefix}.after.{name}", t)


case("basic", BasicBlock(4, 4), (2, 4, 6, 5))
case("bottleneck", Bottleneck(8, 4, stride=2, downsample=nn.Sequential(conv1x1(8, 16, 2), nn.BatchNorm2d(16))),
     (2, 8, 7, 6))
write_safetensors(OUT, T, {"torch": torch.__version__})
print(f"wrote {len(T)} tensors to {OUT}")

import torchvision  # noqa: E402

lines = []
for name in ["resnet18", "resnet34", "resnet50", "resnet18-cifar"]:
    if name == "resnet18-cifar":
        m = torchvision.models.resnet18(num_classes=10)
        m.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
        m.maxpool = nn.Identity()
    else:
        m = getattr(torchvision.models, name)()
    for k, v in m.state_dict().items():
        lines.append(f"{name} {k} {'x'.join(map(str, v.shape)) or '-'}")
names_out = os.path.join(os.path.dirname(OUT), "resnet_state_dicts.txt")
with open(names_out, "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"wrote {len(lines)} names to {names_out}")
