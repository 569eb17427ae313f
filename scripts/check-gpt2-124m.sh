#!/usr/bin/env bash
# The 124M check of transformers interchange: trains `--model gpt2` (124M: 12 layers, 12
# heads, 768 wide, 1,024 positions, vocabulary 50,257) for one optimizer step on token
# shards made here, saves it, and runs scripts/golden_gpt2_hf.py check on the file. That
# loads it into transformers' GPT2LMHeadModel with load_state_dict(strict=True) (lm_head
# tied) and through from_pretrained, compares their logits on 4 sequences (1e-4 of the
# largest) and tandem's validation loss after the step with transformers' on the same window
# (1e-4). One window of 1,025 tokens is the validation shard: ids[5000:6025] of
# (7 i + i // 13) % 50257; the training shard is 4 windows of the same formula from 0.
# Usage: scripts/check-gpt2-124m.sh [BUILD]     (default build; needs /opt/peers with torch,
# transformers and safetensors; about 2.5 GB of memory; a minute or two on 2 cores)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
py=${PEERS_PYTHON:-/opt/peers/bin/python}
work=$(mktemp -d /tmp/tandem-gpt2-124m.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$py" - "$work" "$here" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(sys.argv[2], "python", "tests"))
sys.path.insert(0, os.path.join(sys.argv[2], "scripts"))
from data_files import write_token_shard
from golden_gpt2_hf import window_ids
V, P = 50257, 1024
write_token_shard(os.path.join(sys.argv[1], "train.tok"), [(7 * i + i // 13) % V for i in range(4 * (P + 1))], V)
write_token_shard(os.path.join(sys.argv[1], "val.tok"), window_ids(V, P), V)
PY
start=$(date +%s)
"$build/tandem" train --model gpt2 --data "$work" --max-steps 1 --eval-interval 1 --batch-size 1 \
  --eval-batch-size 1 --schedule constant --progress 0 --save "$work/gpt2.safetensors" \
  --metrics-file "$work/m.jsonl" | grep -E '^(model|params|done)' || true
loss=$("$py" -c "import json, sys
e = [r for r in map(json.loads, open(sys.argv[1])) if r.get('type') == 'eval']
print(f\"{e[-1]['val_loss']:.9f}\")" "$work/m.jsonl")
echo "tandem: gpt2 trained 1 step and saved in $(( $(date +%s) - start )) s; val_loss $loss"
"$py" "$here/scripts/golden_gpt2_hf.py" check "$work/gpt2.safetensors" "$loss"
