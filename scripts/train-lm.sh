#!/usr/bin/env bash
# make train-lm: the small GPT (gpt-mini: 6 layers, 6 heads, 384 wide, block 256) on the default
# Debian corpus, Debian's `fortunes` (/usr/share/games/fortunes, 2.58 MB of English text).
# The corpus is tokenized once (SentencePiece BPE, 4,096 tokens) into BUILD/data/fortunes-tok
# and kept: tokenizing is redone only when tokenizer.model, train.tok or val.tok is missing.
# Then one epoch (2,740 windows of 256 tokens, 342 steps of batch 8) of AdamW, printing the
# training loss as it goes and the validation loss (test_loss: val.tok) at the epoch's end.
# Usage: scripts/train-lm.sh BUILD [more tandem train flags, e.g. --metrics-file run.jsonl]
# Env: TANDEM_LM_EPOCHS (default 1), TANDEM_LM_CORPUS_DIR (default /usr/share/games/fortunes).
set -euo pipefail
build=${1:?usage: train-lm.sh BUILD [tandem train flags]}
shift
tandem=$build/tandem
corpus_dir=${TANDEM_LM_CORPUS_DIR:-/usr/share/games/fortunes}
out=$build/data/fortunes-tok

if [ ! -f "$out/tokenizer.model" ] || [ ! -f "$out/train.tok" ] || [ ! -f "$out/val.tok" ]; then
  # The fortune files, without the strfile indexes (.dat) and the .u8 links to the same files.
  mapfile -t corpus < <(find "$corpus_dir" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | LC_ALL=C sort)
  if [ ${#corpus[@]} -eq 0 ]; then
    echo "train-lm: no text in $corpus_dir: install Debian's fortunes (scripts/install-deps.sh does)" >&2
    exit 1
  fi
  "$tandem" tokenize --corpus "${corpus[@]}" --out "$out" --vocab-size 4096
fi
exec "$tandem" train --model gpt-mini --data "$out" --epochs "${TANDEM_LM_EPOCHS:-1}" --batch-size 8 --eval-batch-size 16 \
  --optimizer adamw --lr 1e-3 --weight-decay 0.1 --beta2 0.95 --schedule constant --log-interval 20 "$@"
