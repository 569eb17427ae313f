"""PyTorch's CPU transformer ops at the shapes of bench_transformer_ops (the small GPT: batch 16,
block 256, 384 wide, 6 heads, vocabulary 8000), timed per call the same way: median of
`repeats` calls after one warm-up. The attention is F.scaled_dot_product_attention (causal) on
views of qkv as nanoGPT splits it; backward passes use autograd.grad on a kept graph; the
classifier is h @ w.T and F.cross_entropy, forward and backward together (what tandem's fused
op does in one call).
Usage: /opt/peers/bin/python scripts/peers/torch_transformer_ops.py [repeats=10] [threads=2]
Prints "lm <op> <dtype> <shape> torch ms <median> min_ms <minimum>".
"""
import sys
import time

import torch
import torch.nn.functional as F

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 10
torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
B, T, C, H, V = 16, 256, 384, 6, 8000
N = B * T


def times_ms(f):
    f()
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        t.append((time.perf_counter() - t0) * 1e3)
    t.sort()
    return t[len(t) // 2], t[0]


def report(op, dt, shape, f):
    med, low = times_ms(f)
    print(f"lm {op} {dt} {shape} torch ms {med:.3f} min_ms {low:.3f}", flush=True)


for name, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
    g = torch.Generator().manual_seed(0)
    tok = torch.randint(0, V, (B, T), generator=g)
    wte = torch.randn(V, C, generator=g).to(dt).requires_grad_()
    wpe = torch.randn(T, C, generator=g).to(dt).requires_grad_()
    dy = torch.randn(B, T, C, generator=g).to(dt)
    with torch.no_grad():
        report("embedding_fwd", name, "[16, 256, 384]", lambda: wte[tok] + wpe)
    emb = wte[tok] + wpe
    report("embedding_bwd", name, "[16, 256, 384]", lambda: torch.autograd.grad(emb, [wte, wpe], dy, retain_graph=True))
    x = torch.randn(N, C, generator=g).to(dt).requires_grad_()
    w, b = torch.randn(C, generator=g).requires_grad_(), torch.randn(C, generator=g).requires_grad_()
    with torch.no_grad():
        report("layer_norm_fwd", name, "[4096, 384]", lambda: F.layer_norm(x, (C,), w, b))
    ln = F.layer_norm(x, (C,), w, b)
    report("layer_norm_bwd", name, "[4096, 384]",
           lambda: torch.autograd.grad(ln, [x, w, b], dy.view(N, C), retain_graph=True))
    h4 = (torch.randn(N, 4 * C, generator=g) * 3).to(dt).requires_grad_()
    dh4 = torch.randn(N, 4 * C, generator=g).to(dt)
    with torch.no_grad():
        report("gelu_fwd", name, "[4096, 1536]", lambda: F.gelu(h4, approximate="tanh"))
    ge = F.gelu(h4, approximate="tanh")
    report("gelu_bwd", name, "[4096, 1536]", lambda: torch.autograd.grad(ge, [h4], dh4, retain_graph=True))
    qkv = (torch.randn(B, T, 3 * C, generator=g) * 2).to(dt).requires_grad_()

    def attention():
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=2))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)

    with torch.no_grad():
        report("attention_fwd", name, "[16, 256, 1152]", attention)
    att = attention()
    report("attention_bwd", name, "[16, 256, 1152]", lambda: torch.autograd.grad(att, [qkv], dy, retain_graph=True))
    # logits of a few units, as after the final layer norm and GPT-2's initialisation (large
    # logits would make most probabilities subnormal, which slows every product down)
    hc = (torch.rand(N, C, generator=g) * 2 - 1).to(dt).requires_grad_()
    wc = ((torch.rand(V, C, generator=g) * 2 - 1) * 0.1).to(dt).requires_grad_()
    targets = torch.randint(0, V, (N,), generator=g)

    def classifier():
        loss = F.cross_entropy((hc @ wc.t()).float(), targets)
        return torch.autograd.grad(loss, [hc, wc])

    report("classifier_fwd_bwd", name, "[4096, 384] x [8000, 384]", classifier)
