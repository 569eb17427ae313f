#!/usr/bin/env bash
# The default language-model corpus as token shards: Debian's `fortunes`
# (/usr/share/games/fortunes, 2.58 MB of English text) tokenized once (SentencePiece BPE, 4,096
# tokens) into BUILD/data/fortunes-tok (tokenizer.model, train.tok, val.tok) and kept: tokenizing
# is redone only when one of them is missing. Prints the folder.
# Usage: scripts/lm-data.sh BUILD
# Env: TANDEM_LM_CORPUS_DIR (default /usr/share/games/fortunes).
set -euo pipefail
build=${1:?usage: lm-data.sh BUILD}
corpus_dir=${TANDEM_LM_CORPUS_DIR:-/usr/share/games/fortunes}
out=$build/data/fortunes-tok
if [ ! -f "$out/tokenizer.model" ] || [ ! -f "$out/train.tok" ] || [ ! -f "$out/val.tok" ]; then
  # The fortune files, without the strfile indexes (.dat) and the .u8 links to the same files.
  mapfile -t corpus < <(find "$corpus_dir" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | LC_ALL=C sort)
  if [ ${#corpus[@]} -eq 0 ]; then
    echo "lm-data: no text in $corpus_dir: install Debian's fortunes (scripts/install-deps.sh does)" >&2
    exit 1
  fi
  "$build/tandem" tokenize --corpus "${corpus[@]}" --out "$out" --vocab-size 4096 >&2
fi
echo "$out"
