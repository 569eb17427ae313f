#!/usr/bin/env python3
"""Golden values for tests/optim: three steps of torch.optim SGD (momentum, Nesterov, weight
decay), Adam and AdamW on small fixed tensors, and learning-rate schedules.

Run with Debian's PyTorch: /usr/bin/python3 scripts/golden_optim.py
Writes tests/golden/optim.safetensors (float32 tensors; schedule values as exact decimal
strings in the header's __metadata__). Tensor names:
  init.w [3, 5], init.b [4]                initial parameters
  grad.<k>.w, grad.<k>.b                   gradient given at step k = 1..3
  <cfg>.<k>.w, <cfg>.<k>.b                 parameters after step k
  <cfg>.<k>.<w|b>.<state>                  optimizer state after step k (exp_avg, exp_avg_sq,
                                           momentum_buffer)
Parameter w is decayed (weight_decay), b is not (its own group with weight_decay 0).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_writer import write_safetensors  # noqa: E402

CONFIGS = {
    "sgd": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "sgd_plain": (torch.optim.SGD, dict(lr=0.1, weight_decay=0.01)),
    "adam": (torch.optim.Adam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
    "adamw": (torch.optim.AdamW, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
}
STEPS = 3


def main():
    gen = torch.Generator().manual_seed(1234)
    init = {"w": torch.randn(3, 5, generator=gen), "b": torch.randn(4, generator=gen)}
    grads = [{k: torch.randn(v.shape, generator=gen) for k, v in init.items()} for _ in range(STEPS)]
    out = {f"init.{k}": v.numpy() for k, v in init.items()}  # all float32
    for s, g in enumerate(grads, 1):
        out.update({f"grad.{s}.{k}": v.numpy() for k, v in g.items()})

    for cfg, (cls, kw) in CONFIGS.items():
        params = {k: torch.nn.Parameter(v.clone()) for k, v in init.items()}
        opt = cls([{"params": [params["w"]]}, {"params": [params["b"]], "weight_decay": 0.0}], **kw)
        for s in range(1, STEPS + 1):
            for k, p in params.items():
                p.grad = grads[s - 1][k].clone()
            opt.step()
            for k, p in params.items():
                out[f"{cfg}.{s}.{k}"] = p.detach().numpy().copy()
                for key, val in opt.state[p].items():
                    if torch.is_tensor(val) and val.shape == p.shape:
                        out[f"{cfg}.{s}.{k}.{key}"] = val.numpy().copy()

    def lrs(make, n):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=0.1)
        sched = make(opt)
        values = []
        for _ in range(n):
            values.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        return ",".join(repr(v) for v in values)

    S = torch.optim.lr_scheduler
    metadata = {
        "format": "tandem optim golden v1",
        "torch": torch.__version__,
        # base lr 0.1 in every schedule; value i is the lr used by step i (0-based)
        "sched.step": lrs(lambda o: S.StepLR(o, step_size=3, gamma=0.5), 10),
        "sched.cosine": lrs(lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001), 11),
        # warmup 4 steps (LinearLR from 1/4 to 1 over 3 steps), then cosine to step 14
        "sched.cosine_warmup": lrs(lambda o: S.SequentialLR(o, [
            S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=3),
            S.CosineAnnealingLR(o, T_max=10, eta_min=0.001)], milestones=[4]), 15),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden",
                        "optim.safetensors")
    write_safetensors(path, out, metadata)
    print(f"wrote {os.path.normpath(path)}: {len(out)} tensors")
    for k in ("sched.step", "sched.cosine", "sched.cosine_warmup"):
        print(k, metadata[k])


if __name__ == "__main__":
    main()
