#!/opt/peers/bin/python
"""Greedy generation golden values from Hugging Face transformers' GPT2LMHeadModel.

Loads tests/golden/gpt2_hf_init.safetensors (the random GPT-2 of scripts/golden_gpt2_hf.py:
vocabulary 64, 32 positions, 32 wide, 2 layers, 2 heads) into GPT2LMHeadModel with
strict=True and, for the prompt below, makes N = 20 greedy tokens twice: by a full forward of
the whole sequence per token (argmax of the last position's logits), and by
model.generate(do_sample=False, use_cache=True) (transformers' own key/value cache), which
must agree. Writes tests/golden/gpt2_hf_generate.safetensors:
  prompt  i64 [7]       the prompt's token ids
  tokens  i64 [20]      the greedy continuation
  logits  f32 [20, 64]  row i: the last position's logits when token i was chosen
  gap     f32 [20]      row i: the largest logit minus the second largest (how far argmax is
                        from a tie: the test's tolerance must stay well below it)
Run: /opt/peers/bin/python scripts/golden_gpt2_generate.py
"""
import os
import sys

import torch
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from golden_gpt2_hf import GOLDEN, config  # noqa: E402
from transformers import GPT2LMHeadModel  # noqa: E402

PROMPT = [5, 17, 42, 8, 63, 0, 29]
N = 20


def main():
    model = GPT2LMHeadModel(config()).float().eval()
    state = load_file(os.path.join(GOLDEN, "gpt2_hf_init.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    model.tie_weights()
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    seq = torch.tensor([PROMPT], dtype=torch.long)
    logits, gaps = [], []
    with torch.no_grad():
        for _ in range(N):
            last = model(input_ids=seq).logits[0, -1]
            top2 = torch.topk(last, 2).values
            logits.append(last.clone())
            gaps.append((top2[0] - top2[1]).item())
            seq = torch.cat([seq, last.argmax().view(1, 1)], dim=1)
        cached = model.generate(torch.tensor([PROMPT]), attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long),
                                max_new_tokens=N, do_sample=False, use_cache=True,
                                eos_token_id=None, pad_token_id=0, min_new_tokens=N)
    tokens = seq[0, len(PROMPT):]
    assert torch.equal(cached[0, len(PROMPT):], tokens), (cached, tokens)
    out = os.path.join(GOLDEN, "gpt2_hf_generate.safetensors")
    save_file({"prompt": torch.tensor(PROMPT, dtype=torch.long), "tokens": tokens.contiguous(),
               "logits": torch.stack(logits).contiguous(), "gap": torch.tensor(gaps, dtype=torch.float32)}, out,
              metadata={"source": "scripts/golden_gpt2_generate.py"})
    print(f"wrote {out}: tokens {tokens.tolist()}, smallest top-2 gap {min(gaps):.4g}, "
          f"largest |logit| {torch.stack(logits).abs().max().item():.4g}")


if __name__ == "__main__":
    main()
