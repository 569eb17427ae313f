#!/opt/peers/bin/python
"""GPT-2 weights across tandem and Hugging Face transformers' GPT2LMHeadModel.

make (default): writes tests/golden/gpt2_hf_init.safetensors, the model.safetensors that
  GPT2LMHeadModel.save_pretrained(..., safe_serialization=True) writes for a random GPT-2
  (vocabulary 64, 32 positions, 32 wide, 2 layers, 2 heads, seed 26, initializer_range 0.2
  so that the loss is far from ln 64), and tests/golden/gpt2_hf_init.txt with the mean
  cross-entropy of that model on the validation window the C++ test writes: the 33 tokens
  ids[5000:5033] of ids[i] = (7 i + i // 13) % 64 (a shard of block_size + 1 tokens holds one
  window), inputs the first 32, targets the last 32.
check W.safetensors LOSS: loads a tandem --save of that size into GPT2LMHeadModel with
  load_state_dict(strict=True) (lm_head.weight included), and through from_pretrained with
  the file's recorded config, checks that both give the same logits on 4 sequences (1e-4 of
  the largest) and that the loss on the window above (with the file's vocabulary and
  positions: (7 i + i // 13) % vocab_size, n_positions + 1 tokens) equals LOSS (tandem's
  figure) within 1e-4. Any size: scripts/check-gpt2-124m.sh runs it on a gpt2 (124M) save.
  Exits 0 on success, 1 with the difference otherwise.
Run: /opt/peers/bin/python scripts/golden_gpt2_hf.py [make | check W.safetensors LOSS]
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "golden")
V, P, C, L, H = 64, 32, 32, 2, 2


def config(**kw):
    base = dict(vocab_size=V, n_positions=P, n_embd=C, n_layer=L, n_head=H, activation_function="gelu_new",
                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5, initializer_range=0.2,
                bos_token_id=0, eos_token_id=0, tie_word_embeddings=True)
    base.update(kw)
    return GPT2Config(**base)


def window_ids(vocab=V, positions=P):
    """The validation window: ids[5000 : 5001 + positions] of (7 i + i // 13) % vocab."""
    return [(7 * i + i // 13) % vocab for i in range(5000, 5000 + positions + 1)]


def window(vocab=V, positions=P):
    t = torch.tensor(window_ids(vocab, positions), dtype=torch.long)
    return t[:-1].unsqueeze(0), t[1:].unsqueeze(0)


def loss_of(model, vocab=V, positions=P):
    x, y = window(vocab, positions)
    with torch.no_grad():
        logits = model(input_ids=x).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), y.reshape(-1)).item()


def make():
    torch.manual_seed(26)
    model = GPT2LMHeadModel(config()).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.1)
    tmp = tempfile.mkdtemp()
    model.save_pretrained(tmp, safe_serialization=True)
    out = os.path.join(GOLDEN, "gpt2_hf_init.safetensors")
    shutil.copyfile(os.path.join(tmp, "model.safetensors"), out)
    shutil.rmtree(tmp)
    loss = loss_of(model)
    with open(os.path.join(GOLDEN, "gpt2_hf_init.txt"), "w") as f:
        f.write("# scripts/golden_gpt2_hf.py: GPT2LMHeadModel (V 64, P 32, C 32, L 2, H 2) saved by save_pretrained;\n")
        f.write("# the mean cross-entropy on ids[5000:5033] of (7 i + i // 13) % 64, the first 32 -> the last 32\n")
        f.write(f"val_loss {loss:.9f}\n")
    names = list(load_file(out).keys())
    print(f"wrote {out} ({len(names)} tensors, lm_head.weight {'in' if 'lm_head.weight' in names else 'not in'} "
          f"the file) and val_loss {loss:.9f}")


def check(path, want):
    state = load_file(path)
    with safe_open(path, "pt") as f:
        meta = f.metadata() or {}
    sizes = {k: int(meta[k]) for k in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")}
    cfg = config(**sizes)
    strict = GPT2LMHeadModel(cfg).float().eval()
    strict.load_state_dict(state, strict=True)  # raises on a missing or unexpected name
    assert strict.lm_head.weight.data_ptr() == strict.transformer.wte.weight.data_ptr(), "lm_head is not tied"
    tmp = tempfile.mkdtemp()
    shutil.copyfile(path, os.path.join(tmp, "model.safetensors"))
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(cfg.to_dict(), f)
    loaded = GPT2LMHeadModel.from_pretrained(tmp).float().eval()
    shutil.rmtree(tmp)
    torch.manual_seed(4)
    seqs = torch.randint(0, sizes["vocab_size"], (4, min(16, sizes["n_positions"])))
    with torch.no_grad():
        a, b = strict(input_ids=seqs).logits, loaded(input_ids=seqs).logits
    top = a.abs().max().item()
    diff = (a - b).abs().max().item()
    got = loss_of(strict, sizes["vocab_size"], sizes["n_positions"])
    ok = diff <= 1e-4 * top and abs(got - want) <= 1e-4
    print(f"{'ok' if ok else 'FAIL'}: strict=True load of {len(state)} tensors; logits of 4 sequences differ by "
          f"{diff:.3g} (largest {top:.3g}); loss {got:.6f}, tandem {want:.6f}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] == "make":
        make()
    elif sys.argv[1] == "check" and len(sys.argv) == 4:
        sys.exit(check(sys.argv[2], float(sys.argv[3])))
    else:
        sys.exit(__doc__)
