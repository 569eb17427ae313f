#!/usr/bin/env bash
# make train-lm: the small GPT (gpt-mini: 6 layers, 6 heads, 384 wide, block 256, 4,096 tokens:
# 12.3M parameters) on the default Debian corpus, Debian's `fortunes` (/usr/share/games/fortunes,
# 2.58 MB of English text), tokenized once into BUILD/data/fortunes-tok (scripts/lm-data.sh).
# Then TANDEM_LM_STEPS optimizer steps (default 300, a little less than one epoch of the 2,740
# training windows at batch 8) of AdamW, printing the training loss every 20 steps and the
# validation loss (val.tok) every 100 and at the end, and saving the weights to
# BUILD/gpt-mini.safetensors for `tandem generate` and `tandem serve`.
# Usage: scripts/train-lm.sh BUILD [more tandem train flags, e.g. --metrics-file run.jsonl]
# Env: TANDEM_LM_STEPS (default 300), TANDEM_LM_CORPUS_DIR (default /usr/share/games/fortunes).
set -euo pipefail
build=${1:?usage: train-lm.sh BUILD [tandem train flags]}
shift
here=$(cd "$(dirname "$0")" && pwd)
data=$("$here/lm-data.sh" "$build")
exec "$build/tandem" train --model gpt-mini --data "$data" --max-steps "${TANDEM_LM_STEPS:-300}" --batch-size 8 \
  --eval-batch-size 16 --eval-interval 100 --optimizer adamw --lr 1e-3 --weight-decay 0.1 --beta2 0.95 \
  --schedule constant --log-interval 20 --save "$build/gpt-mini.safetensors" "$@"
