#!/usr/bin/env bash
# The official `openai` Python client against `tandem serve`: openai_client.sh TANDEM SCRIPT.
# Tokenizes a made-up corpus, trains a tiny GPT on it for 300 steps (a second or two) (--save), serves it on a
# loopback port and runs SCRIPT (openai_client.py) with the server's base URL under
# TANDEM_OPENAI_PYTHON (default /opt/peers/bin/python). Exit 77 (skipped) when that Python or
# its openai package is missing.
set -euo pipefail
tandem=$1
script=$2
python=${TANDEM_OPENAI_PYTHON:-/opt/peers/bin/python}
if [ ! -x "$python" ]; then
  echo "serve_openai_client: skipped: no $python (python3 -m venv /opt/peers && /opt/peers/bin/pip install openai)"
  exit 77
fi
if ! "$python" -c "import openai" 2>/dev/null; then
  echo "serve_openai_client: skipped: $python has no openai package (/opt/peers/bin/pip install openai)"
  exit 77
fi
dir=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
# word_corpus(900, 7) of tests/data/text_corpus.h: 8 of 20 words per line.
"$python" - "$dir/corpus.txt" <<'PY'
import sys
words = ("the quick brown fox jumps over lazy dog and a cat sat on mat while rain fell softly "
         "upon city").split()
x, out = 7, []
for line in range(900):
    row = []
    for w in range(8):
        x = (x * 1103515245 + 12345) % 2**32
        row.append(words[(x >> 16) % 20])
    out.append(" ".join(row) + ".\n")
open(sys.argv[1], "w").write("".join(out))
PY
if ! "$tandem" tokenize --corpus "$dir/corpus.txt" --out "$dir/tok" --vocab-size 300 > "$dir/log.txt" 2>&1; then
  # A sanitizer build cannot load the SentencePiece module (dlopen with RTLD_DEEPBIND).
  if grep -q "Sanitizer refuses" "$dir/log.txt"; then
    echo "serve_openai_client: skipped: $(grep -m1 'Sanitizer refuses' "$dir/log.txt")"
    exit 77
  fi
  cat "$dir/log.txt"
  exit 1
fi
"$tandem" train --model gpt-mini --n-layer 2 --n-head 2 --n-embd 32 --block-size 64 --data "$dir/tok" \
  --max-steps 300 --batch-size 8 --lr 3e-3 --threads 1 --progress 0 --save "$dir/lm.safetensors" \
  >> "$dir/log.txt" 2>&1
"$tandem" serve --weights "$dir/lm.safetensors" --listen 127.0.0.1:0 --port-file "$dir/port" \
  --serve-threads 1 --max-completion-tokens 32 > "$dir/serve.txt" 2>&1 &
server=$!
for _ in $(seq 1200); do
  [ -s "$dir/port" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$dir/serve.txt"; exit 1; }
  sleep 0.05
done
[ -s "$dir/port" ] || { echo "tandem serve did not start"; cat "$dir/serve.txt"; exit 1; }
status=0
"$python" "$script" "http://127.0.0.1:$(cat "$dir/port")/v1" || status=$?
[ "$status" -eq 0 ] || cat "$dir/serve.txt"
exit "$status"
