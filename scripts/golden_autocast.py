#!/opt/peers/bin/python
"""Golden values for tandem's bf16 mixed precision against PyTorch CPU autocast (torch 2.15).

The reference CNN (fmnist-cnn built for 1x16x16 inputs, 10 classes) with weights from a fixed
formula both sides can compute (no stored weights): parameter j of the state_dict's parameters,
element i, is b * sin(1.7 i + 0.3 j), b = 1/sqrt(fan_in) of its layer; batch-norm weights 1
and biases 0. The batch: x[i] = 1.5 sin(0.05 i) over [16, 1, 16, 16], label n = 3n mod 10.
Three plain SGD steps (lr 0.005), each loss recorded, once under torch.autocast("cpu", bf16) and
once in fp32. Writes tests/golden/autocast_fmnist_cnn.txt: "bf16 <loss1> <loss2> <loss3>" and
"fp32 <loss1> <loss2> <loss3>".
Run: /opt/peers/bin/python scripts/golden_autocast.py [output path]
"""
import math
import os
import sys

import torch
import torch.nn as nn

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "golden",
                                                          "autocast_fmnist_cnn.txt")
N, S, STEPS, LR = 16, 16, 3, 0.005


def net():
    flat = 64 * (S // 4) * (S // 4)
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(flat, 128), nn.ReLU(), nn.Linear(128, 10))


def init(m):
    with torch.no_grad():
        bound = None
        for j, (name, p) in enumerate(m.named_parameters()):
            if name.endswith("weight") and p.dim() > 1:
                bound = 1.0 / math.sqrt(p.numel() / p.shape[0])
            elif name.endswith("weight") or bound is None:  # batch norm: keep 1 and 0
                bound = None
                continue
            i = torch.arange(p.numel(), dtype=torch.float64)
            p.copy_((bound * torch.sin(1.7 * i + 0.3 * j)).float().reshape(p.shape))
            if name.endswith("bias"):
                bound = None


def run(autocast):
    torch.manual_seed(0)
    m = net()
    init(m)
    x = (1.5 * torch.sin(0.05 * torch.arange(N * S * S, dtype=torch.float64))).float().reshape(N, 1, S, S)
    if autocast:
        x = x.bfloat16().float()  # tandem's batches are bf16: the same rounded input
    y = torch.tensor([(3 * n) % 10 for n in range(N)])
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


with open(OUT, "w") as f:
    f.write(f"# scripts/golden_autocast.py, torch {torch.__version__}\n")
    f.write("bf16 " + " ".join(f"{v:.7g}" for v in run(True)) + "\n")
    f.write("fp32 " + " ".join(f"{v:.7g}" for v in run(False)) + "\n")
print(open(OUT).read())
