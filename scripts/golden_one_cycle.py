#!/opt/peers/bin/python
"""Golden learning rates of torch.optim.lr_scheduler.OneCycleLR (defaults: cos annealing,
div_factor 25, final_div_factor 1e4, two phases, no momentum cycling) for tandem's one-cycle
schedule. Writes tests/golden/one_cycle.txt: a header line "max_lr total_steps pct_start", then
the learning rate of every update step 0 .. total_steps - 1, one per line.
Run: /opt/peers/bin/python scripts/golden_one_cycle.py [output path]
"""
import os
import sys

import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "golden",
                                                          "one_cycle.txt")
lines = []
for max_lr, total, pct in [(0.4, 50, 0.3), (0.1, 7, 0.25)]:
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=max_lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=total, pct_start=pct,
                                                cycle_momentum=False)
    lines.append(f"{max_lr} {total} {pct}")
    for _ in range(total):
        lines.append(repr(opt.param_groups[0]["lr"]))
        opt.step()
        if len(lines) and _ < total - 1:
            sched.step()
with open(OUT, "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"wrote {OUT}")
