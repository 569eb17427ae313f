#!/opt/peers/bin/python
"""Golden values for tandem's GPT-2 model, computed with Hugging Face transformers'
GPT2LMHeadModel (5.24 with PyTorch 2.15 in /opt/peers).

Writes tests/golden/gpt2_tiny.safetensors: a 2-layer GPT-2 (vocabulary 37, 16 positions, 16
wide, 2 heads, GELU tanh, no dropout) with weights drawn N(0, 0.3^2) (initializer_range 0.3 so
that the attention is far from uniform; LayerNorm weights 1 + N(0, 0.1^2), biases N(0, 0.1^2)),
every parameter under "model.<name>" as GPT2LMHeadModel.state_dict() names it (lm_head.weight,
tied to transformer.wte.weight, is left out), token ids "tokens" [2, 11] and next-token targets
"targets" [2, 11] (i64; two set to -100, ignored), the logits [2, 11, 37], the mean
cross-entropy "loss" [1] over the counted positions, and "grad.<name>" for every parameter (f32;
the tied embedding's gradient holds both uses).
Run: /opt/peers/bin/python scripts/golden_gpt2.py [output path]
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_writer import write_safetensors  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "golden",
                                                          "gpt2_tiny.safetensors")
torch.manual_seed(26)
cfg = GPT2Config(vocab_size=37, n_positions=16, n_embd=16, n_layer=2, n_head=2, activation_function="gelu_new",
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5, initializer_range=0.3,
                 bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(cfg).float()
model.train()  # no dropout (p = 0), gradients on
with torch.no_grad():
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            p.copy_(torch.randn_like(p) * 0.1)
        elif ".ln_" in name:
            p.copy_(1 + torch.randn_like(p) * 0.1)
tokens = torch.randint(0, cfg.vocab_size, (2, 11))
targets = torch.randint(0, cfg.vocab_size, (2, 11))
targets[0, 3] = -100
targets[1, 10] = -100
logits = model(input_ids=tokens).logits
loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), targets.reshape(-1), ignore_index=-100)
loss.backward()

out = {}


def put(name, t):
    out[name] = np.array(t.detach().float().numpy() if t.is_floating_point() else t.detach().numpy(), order="C")


state = model.state_dict()
for name, t in state.items():
    if name == "lm_head.weight":
        assert t.data_ptr() == state["transformer.wte.weight"].data_ptr()
        continue
    put("model." + name, t)
put("tokens", tokens)
put("targets", targets)
put("logits", logits)
put("loss", loss.reshape(1))
for name, p in model.named_parameters():
    put("grad." + name, p.grad)
write_safetensors(OUT, out, {"generator": "scripts/golden_gpt2.py", "transformers": __import__("transformers").__version__,
                             "torch": torch.__version__})
print(f"wrote {OUT}: {len(out)} tensors, state: {[n for n in state if n != 'lm_head.weight'][:6]} ...")
