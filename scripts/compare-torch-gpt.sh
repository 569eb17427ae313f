#!/usr/bin/env bash
# The small GPT in tandem and in PyTorch (../shared/peers/torch_gpt.py, the peers venv) on the
# same token shards, config and AdamW settings, for the same number of steps; prints both
# validation losses and their difference in nats.
#   config: gpt-mini (6 layers, 6 heads, 384 wide, block 256), the shards' vocabulary (4,096
#   for make train-lm's fortunes), batch 8, fp32, 2 threads;
#   AdamW lr 1e-3 constant, betas (0.9, 0.95), weight_decay 0.1, no warmup, no clipping.
# tandem runs make train-lm's command (scripts/train-lm.sh, the same flags) for STEPS optimizer
# steps (default 1,000; about 2.9 epochs of fortunes' 2,740 training windows); the PyTorch peer
# then runs exactly as many steps as tandem's metrics file reports. Both validation losses are
# then the mean over the same EVAL_BATCHES batches of 8 windows of val.tok (200 by default:
# 1,600 windows, about 5 times as many as val.tok holds end to end): the peer draws them from
# its numpy generator after its training draws, and scripts/gpt_val_loss.py replays those
# draws and evaluates tandem's saved weights (BUILD/gpt-mini.safetensors, loaded into
# transformers' GPT2LMHeadModel with strict=True) on the same windows, so that the difference
# is the models' alone. tandem's own validation loss (every window of val.tok once, from its
# metrics file) is printed beside them.
# Usage: scripts/compare-torch-gpt.sh BUILD [STEPS] [EVAL_BATCHES]
# Env: TANDEM_PEERS_PYTHON (default /opt/peers/bin/python), TANDEM_PEERS_DIR (default
#   ../shared/peers beside the repo, else /work/shared/peers).
set -euo pipefail
build=${1:?usage: compare-torch-gpt.sh BUILD [STEPS] [EVAL_BATCHES]}
steps=${2:-1000}
eval_batches=${3:-200}
here=$(cd "$(dirname "$0")/.." && pwd)
python=${TANDEM_PEERS_PYTHON:-/opt/peers/bin/python}
peers=${TANDEM_PEERS_DIR:-$here/../shared/peers}
[ -f "$peers/torch_gpt.py" ] || peers=/work/shared/peers
data=$build/data/fortunes-tok
for f in "$peers/torch_gpt.py" "$python"; do
  [ -e "$f" ] || { echo "compare-torch-gpt: $f not found" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

lscpu | sed -n 's/^Model name: *//p' | head -1 | sed 's/^/cpu: /'
start=$(date +%s)
TANDEM_LM_STEPS=$steps "$here/scripts/train-lm.sh" "$build" --threads 2 --metrics-file "$work/m.jsonl" \
  > "$work/tandem.log" 2>&1 ||
  { tail -5 "$work/tandem.log" >&2; echo "compare-torch-gpt: tandem train failed" >&2; exit 1; }
tandem_s=$(( $(date +%s) - start ))
grep -E '^(epoch|step) ' "$work/tandem.log"
read -r steps tandem_val < <("$python" -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
e = [x for x in r if x.get('type') == 'eval']
print(max(x.get('global_step', 0) for x in r), f\"{e[-1]['val_loss']:.4f}\")" "$work/m.jsonl")

# The shards' payload as flat arrays for the peer: after the 64-byte header, u16 ids
# (token bytes at offset 20 of the header; vocabularies up to 65,536).
tb=$(od -An -tu4 -j20 -N4 "$data/train.tok" | tr -d ' ')
[ "$tb" = 2 ] || { echo "compare-torch-gpt: $data/train.tok holds u32 ids; the script reads u16" >&2; exit 1; }
vocab=$(od -An -tu4 -j16 -N4 "$data/train.tok" | tr -d ' ')
tail -c +65 "$data/train.tok" > "$work/train.bin"
tail -c +65 "$data/val.tok" > "$work/val.bin"

start=$(date +%s)
"$python" "$peers/torch_gpt.py" --layers 6 --heads 6 --embd 384 --block 256 --vocab "$vocab" --batch 8 \
  --steps "$steps" --warmup 0 --threads 2 --lr 1e-3 --data "$work/train.bin" --val "$work/val.bin" \
  --dtype uint16 --eval-batches "$eval_batches" > "$work/torch.log" 2>&1 ||
  { tail -5 "$work/torch.log" >&2; echo "compare-torch-gpt: torch_gpt.py failed" >&2; exit 1; }
torch_s=$(( $(date +%s) - start ))
cat "$work/torch.log"
torch_val=$(sed -n 's/^torch_gpt val_loss //p' "$work/torch.log")
"$python" "$here/scripts/gpt_val_loss.py" "$build/gpt-mini.safetensors" "$work/train.bin" "$work/val.bin" \
  --steps "$steps" --eval-batches "$eval_batches" > "$work/tval.log"
cat "$work/tval.log"
same_val=$(sed -n 's/^tandem val_loss \([0-9.]*\).*/\1/p' "$work/tval.log")
echo "steps $steps (batch 8, block 256, vocab $vocab): on the same $((eval_batches * 8)) windows tandem" \
     "val_loss $same_val (${tandem_s} s), torch_gpt val_loss $torch_val (${torch_s} s), difference" \
     "$("$python" -c "print(f'{abs($same_val - $torch_val):.4f}')") nats (tandem's own estimate $tandem_val)"
