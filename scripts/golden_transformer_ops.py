#!/opt/peers/bin/python
"""Golden values for tandem's transformer ops, computed with PyTorch (2.15 in /opt/peers).

Writes tests/golden/transformer_ops.safetensors. For each dtype (f32, bf16) and op: the inputs
(bf16 cases hold bf16-representable values), the upstream gradient, and torch's outputs and
gradients, all stored as F32 (bf16 results converted exactly). Data outputs of the bf16 cases
come from torch's bf16 ops; the gradients tandem keeps in f32 (dwte, dwpe, dgamma, dbeta, dw)
come from f32 parameters used in bf16 (as mixed precision with f32 master weights does).
Ops: token + position embedding, layer norm (eps 1e-5), GELU (tanh), causal self-attention
(F.scaled_dot_product_attention, is_causal=True, on qkv split as GPT-2's c_attn) and the
classifier + cross-entropy (logits = h @ w.T, ignore_index -1, mean over counted rows).
Run: /opt/peers/bin/python scripts/golden_transformer_ops.py [output path]
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_writer import write_safetensors  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "golden",
                                                          "transformer_ops.safetensors")
B, T, C, H, V, P = 2, 11, 16, 2, 37, 12
torch.manual_seed(2026)
out = {}


def put(name, t):
    out[name] = np.array(t.detach().float().numpy() if t.is_floating_point() else t.detach().numpy(), order="C")


def rand(dtype, *shape, scale=1.0):
    return (torch.randn(*shape) * scale).to(dtype)


for tag, dt in (("f32", torch.float32), ("bf16", torch.bfloat16)):
    p = tag + "."
    # token + position embedding
    tok = torch.randint(0, V, (B, T))
    wte, wpe = rand(dt, V, C).float().requires_grad_(), rand(dt, P, C).float().requires_grad_()
    y = wte.to(dt)[tok] + wpe.to(dt)[:T]
    dy = rand(dt, B, T, C)
    y.backward(dy)
    for k, v in (("tokens", tok), ("wte", wte), ("wpe", wpe), ("y", y), ("dy", dy), ("dwte", wte.grad),
                 ("dwpe", wpe.grad)):
        put(p + "emb." + k, v)
    # layer norm; x has mean 2 so the centring matters
    x = (rand(dt, B * T, C) + 2).to(dt).requires_grad_()
    g, b = (torch.rand(C) + 0.5).requires_grad_(), torch.randn(C).requires_grad_()
    y = F.layer_norm(x, (C,), g, b, eps=1e-5)
    dy = rand(dt, B * T, C)
    y.backward(dy)
    for k, v in (("x", x), ("gamma", g), ("beta", b), ("y", y), ("dy", dy), ("dx", x.grad), ("dgamma", g.grad),
                 ("dbeta", b.grad)):
        put(p + "ln." + k, v)
    # GELU, tanh form
    x = rand(dt, 257, scale=3.0).requires_grad_()
    y = F.gelu(x, approximate="tanh")
    dy = rand(dt, 257)
    y.backward(dy)
    for k, v in (("x", x), ("y", y), ("dy", dy), ("dx", x.grad)):
        put(p + "gelu." + k, v)
    # causal self-attention on qkv [B, T, 3C]
    qkv = rand(dt, B, T, 3 * C).requires_grad_()
    q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=2))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
    dy = rand(dt, B, T, C)
    y.backward(dy)
    for k_, v_ in (("qkv", qkv), ("y", y), ("dy", dy), ("dqkv", qkv.grad)):
        put(p + "attn." + k_, v_)
    # classifier + cross-entropy over V with two ignored rows
    h = rand(dt, B * T, C).requires_grad_()
    w = rand(dt, V, C).float().requires_grad_()
    tgt = torch.randint(0, V, (B * T,))
    tgt[[2, 7]] = -1
    logits = h @ w.to(dt).t()
    loss = F.cross_entropy(logits.float(), tgt, ignore_index=-1)
    loss.backward()
    for k_, v_ in (("h", h), ("w", w), ("targets", tgt), ("loss", loss.reshape(1)), ("dh", h.grad), ("dw", w.grad)):
        put(p + "cls." + k_, v_)

write_safetensors(OUT, out, {"generator": "scripts/golden_transformer_ops.py", "torch": torch.__version__})
print(f"wrote {OUT}: {len(out)} tensors")
