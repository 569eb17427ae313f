#!/usr/bin/env python3
"""The one-step delayed parameter update (ZeRO-Offload's DPU) emulated in PyTorch, to compare its
cost with tandem's --offload-delay 1: the reference CNN on Fashion-MNIST, AdamW lr 2e-3, weight
decay 0.05, 94-step linear warm-up then constant lr, batch 128. With delay 1 every gradient is
computed at the parameters one update old (the master copy is updated, the model keeps the
previous values). Prints train loss and test accuracy per epoch.
Usage: torch_delayed_update.py DELAY(0|1) [epochs=1]   (needs the peers folder: TANDEM_PEERS)"""
import os, sys
import torch, torch.nn as nn
from torch.utils.data import DataLoader

sys.path.insert(0, os.environ.get("TANDEM_PEERS", os.path.join(os.path.dirname(__file__), "../../shared/peers")))
from torch_fmnist import FM, net  # noqa: E402  (dataset and model of the peer baseline)

delay = int(sys.argv[1])
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
torch.set_num_threads(2)
torch.manual_seed(0)
model, loss_fn = net(), nn.CrossEntropyLoss()
master = [nn.Parameter(p.detach().clone()) for p in model.parameters()]
opt = torch.optim.AdamW(master, 2e-3, weight_decay=0.05)
train = DataLoader(FM("train", True), batch_size=128, shuffle=True, num_workers=1, drop_last=True)
test = DataLoader(FM("t10k", False), batch_size=512, num_workers=1)
for epoch in range(epochs):
    model.train()
    total, seen = 0.0, 0
    for i, (x, y) in enumerate(train):
        step = epoch * len(train) + i
        for g in opt.param_groups:
            g["lr"] = 2e-3 * min(1.0, (step + 1) / 94)
        model.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        total, seen = total + loss.item() * len(y), seen + len(y)
        previous = [p.detach().clone() for p in master]
        for p, q in zip(master, model.parameters()):
            p.grad = q.grad.detach().clone()
        opt.step()
        with torch.no_grad():  # the parameters the next step computes its gradient at
            for q, src in zip(model.parameters(), master if delay == 0 else previous):
                q.copy_(src)
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in test:
            correct += (model(x).argmax(1) == y).sum().item()
    print(f"delay {delay} epoch {epoch + 1} train_loss {total / seen:.4f} test_acc {correct / 10000:.4f}", flush=True)
