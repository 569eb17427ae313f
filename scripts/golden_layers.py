#!/usr/bin/python3
"""Golden values for tandem's nn layers, computed with PyTorch (Debian's torch 1.13).

Writes tests/golden/layers.safetensors: for each case, the fixed inputs, weights and upstream
gradients, and torch's forward outputs and backward gradients. The metadata entry
"fmnist_cnn_state" lists the reference CNN's state_dict as "name:d0xd1x...;" entries.
Run: /usr/bin/python3 scripts/golden_layers.py [output path]
"""
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, "/work/shared/peers")

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "golden",
                                                          "layers.safetensors")
torch.manual_seed(1234)
T = {}


def put(name, t):
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    T[name] = np.array(a, order="C", copy=True)  # keeps 0-d shapes (ascontiguousarray makes them 1-d)


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def run_module(prefix, m, x, params):
    """Forward with x, backward with a random upstream gradient; stores inputs and grads."""
    x = x.clone().requires_grad_(True)
    y = m(x)
    dy = rand(*y.shape)
    y.backward(dy)
    put(prefix + ".x", x)
    put(prefix + ".y", y)
    put(prefix + ".dy", dy)
    put(prefix + ".dx", x.grad)
    for pname in params:
        p = getattr(m, pname)
        put(prefix + "." + pname, p)
        put(prefix + ".d" + pname, p.grad)


# Linear
lin = nn.Linear(5, 4)
run_module("linear", lin, rand(3, 5), ["weight", "bias"])

# Conv2d: padding 1 stride 1, and stride 2 without padding on an odd-sized input
conv = nn.Conv2d(3, 4, 3, padding=1)
run_module("conv_p1", conv, rand(2, 3, 6, 5), ["weight", "bias"])
conv = nn.Conv2d(2, 3, 3, stride=2)
run_module("conv_s2", conv, rand(2, 2, 7, 8), ["weight", "bias"])

# BatchNorm2d training (random affine), then running stats after 3 steps and eval output
bn = nn.BatchNorm2d(3)
with torch.no_grad():
    bn.weight.copy_(torch.rand(3) + 0.5)
    bn.bias.copy_(rand(3))
run_module("bn", bn, rand(4, 3, 5, 5) * 2 + 1, ["weight", "bias"])
bn2 = nn.BatchNorm2d(3, momentum=0.2)
xs = [rand(4, 3, 3, 3) * (i + 1) + i for i in range(3)]
for i, x in enumerate(xs):
    put(f"bn_steps.x{i}", x)
    bn2(x)
put("bn_steps.running_mean", bn2.running_mean)
put("bn_steps.running_var", bn2.running_var)
put("bn_steps.num_batches_tracked", bn2.num_batches_tracked)
bn2.eval()
put("bn_steps.eval_y", bn2(xs[0]))

# BatchNorm2d followed by ReLU (fused in tandem's Sequential)
bnr = nn.Sequential(nn.BatchNorm2d(3), nn.ReLU())
x = rand(2, 3, 4, 4)
x = x.clone().requires_grad_(True)
y = bnr(x)
dy = rand(*y.shape)
y.backward(dy)
for k, v in [("x", x), ("y", y), ("dy", dy), ("dx", x.grad), ("dweight", bnr[0].weight.grad),
             ("dbias", bnr[0].bias.grad)]:
    put("bn_relu." + k, v)

# ReLU
run_module("relu", nn.ReLU(), rand(3, 7), [])

# MaxPool2d: 2x2 stride 2, and 3x3 stride 2 padding 1
run_module("pool2", nn.MaxPool2d(2), rand(2, 3, 6, 6), [])
run_module("pool3", nn.MaxPool2d(3, stride=2, padding=1), rand(2, 2, 7, 7), [])

# Cross-entropy, with and without label smoothing
for name, eps in [("ce", 0.0), ("ce_ls", 0.1)]:
    logits = (rand(6, 5) * 3).requires_grad_(True)
    labels = torch.tensor([0, 4, 2, 2, 1, 3], dtype=torch.int64)
    loss = nn.CrossEntropyLoss(label_smoothing=eps)(logits, labels)
    loss.backward()
    put(name + ".logits", logits)
    put(name + ".labels", labels)
    put(name + ".loss", loss)
    put(name + ".dlogits", logits.grad)

from torch_fmnist import net  # noqa: E402
from safetensors_writer import write_safetensors  # noqa: E402
state = ";".join(f"{k}:{'x'.join(str(d) for d in v.shape)}" for k, v in net().state_dict().items())

write_safetensors(OUT, T, {"fmnist_cnn_state": state, "torch": torch.__version__})
print(f"wrote {len(T)} tensors to {OUT}")
