"""The validation loss of a GPT saved by tandem (--save), measured the way
../shared/peers/torch_gpt.py measures its own, on the very same windows.

torch_gpt.py draws every window from one numpy Generator (default_rng(seed)): first `steps`
training batches of `batch` starts in [0, len(train) - block - 1), then `eval_batches`
validation batches in [0, len(val) - block - 1). This script replays the training draws
(it needs only the training file's length) and evaluates the saved model, loaded into
transformers' GPT2LMHeadModel with load_state_dict(strict=True), on the validation windows
that follow, so that the two models' losses differ by the models alone.

Usage: gpt_val_loss.py WEIGHTS.safetensors TRAIN.bin VAL.bin --steps N [--warmup 0]
       [--batch 8] [--block 256] [--eval-batches 200] [--seed 0] [--dtype uint16] [--threads 2]
Prints "tandem val_loss X (N windows)".
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel


def load(path):
    with safe_open(path, "pt") as f:
        meta = f.metadata() or {}
    sizes = {k: int(meta[k]) for k in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")}
    eps = float(meta.get("layer_norm_epsilon", 1e-5))
    cfg = GPT2Config(**sizes, activation_function="gelu_new",
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     layer_norm_epsilon=eps, tie_word_embeddings=True,
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).float().eval()
    model.load_state_dict(load_file(path), strict=True)
    return model


def main():
    a = argparse.ArgumentParser()
    a.add_argument("weights")
    a.add_argument("train")
    a.add_argument("val")
    defaults = dict(steps=0, warmup=0, batch=8, block=256,
                    eval_batches=200, seed=0, threads=2)
    for k, v in defaults.items():
        a.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    a.add_argument("--dtype", default="uint16")
    o = a.parse_args()
    torch.set_num_threads(o.threads)
    train = np.memmap(o.train, dtype=o.dtype, mode="r")
    val = np.memmap(o.val, dtype=o.dtype, mode="r")
    g = np.random.default_rng(o.seed)
    for _ in range(o.warmup + o.steps):  # the peer's training windows, not used here
        g.integers(0, len(train) - o.block - 1, o.batch)
    model = load(o.weights)
    total = 0.0
    with torch.no_grad():
        for _ in range(o.eval_batches):
            ix = g.integers(0, len(val) - o.block - 1, o.batch)
            w = torch.from_numpy(np.stack([val[i:i + o.block + 1].astype(np.int64) for i in ix]))
            logits = model(input_ids=w[:, :-1]).logits
            flat = logits.reshape(-1, logits.shape[-1]).float()
            total += F.cross_entropy(flat, w[:, 1:].reshape(-1)).item()
    print(f"tandem val_loss {total / o.eval_batches:.4f} ({o.eval_batches * o.batch} windows)")


if __name__ == "__main__":
    main()
