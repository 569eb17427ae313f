"""PyTorch's CPU batch norm on channels_last tensors, timed per call as bench_batch_norm times
tandem's: training forward followed by ReLU, and the backward (native_batch_norm_backward
after the ReLU mask), median of `repeats` calls after one warm-up.
Usage: /opt/peers/bin/python scripts/peers/torch_batch_norm.py [repeats=20] [threads=2]
Prints "bn <shape> <dtype> fwd|bwd torch ms <median> min_ms <minimum>".
"""
import sys
import time

import torch

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 20
torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)


def times_ms(f):
    """Median and minimum of `repeats` calls after one warm-up, in ms."""
    f()
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        t.append((time.perf_counter() - t0) * 1e3)
    t.sort()
    return t[len(t) // 2], t[0]


for shape in ([128, 32, 28, 28], [128, 64, 14, 14]):
    for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(shape, generator=g).to(dt).contiguous(memory_format=torch.channels_last)
        dy = torch.randn(shape, generator=g).to(dt).contiguous(memory_format=torch.channels_last)
        c = shape[1]
        w, b = torch.randn(c, generator=g), torch.randn(c, generator=g)
        rm, rv = torch.zeros(c), torch.ones(c)
        with torch.no_grad():
            def fwd():
                return torch.relu_(torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)[0])

            y, sm, sinv = torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
            y = torch.relu(y)

            def bwd():
                g_masked = dy.masked_fill(y <= 0, 0)
                return torch.ops.aten.native_batch_norm_backward(g_masked, x, w, rm, rv, sm, sinv, True, 1e-5,
                                                                 [True, True, True])

            s = "[" + ", ".join(map(str, shape)) + "]"
            for op, f in (("fwd", fwd), ("bwd", bwd)):
                med, low = times_ms(f)
                print(f"bn {s} {name} {op} torch ms {med:.3f} min_ms {low:.3f}")
