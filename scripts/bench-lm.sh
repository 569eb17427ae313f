#!/usr/bin/env bash
# The language-model part of make bench: training tokens/s of gpt-mini (6 layers, 6 heads, 384
# wide, block 256) on the default corpus's token shards (scripts/lm-data.sh), AdamW, batch 16,
# against ../shared/peers/torch_gpt.py in the same config and precision (random tokens of the
# same vocabulary: the data does not change the compute), eager and --compile.
# Both sides run WARMUP + STEPS steps and time the last STEPS: tandem from its --metrics-file
# windows of 5 steps after the first WARMUP steps (the harmonic mean: equal tokens per window),
# the peer over its timed steps. Precisions: fp32, and bf16 where the CPU has bf16 instructions
# (`tandem info` says how bf16 is computed; emulated bf16 is not a fair race for either side).
# Goals (issue: language models): >= 1.3x PyTorch eager, >= 1.0x torch.compile.
# Usage: scripts/bench-lm.sh BUILD PYTHON PEERS_DIR THREADS   (PYTHON empty: tandem figures only)
# Env: TANDEM_BENCH_LM_STEPS (default 20), TANDEM_BENCH_LM_WARMUP (default 5).
set -uo pipefail
build=${1:?usage: bench-lm.sh BUILD PYTHON PEERS_DIR THREADS}
py=${2:-}
peers=${3:-}
threads=${4:-2}
steps=${TANDEM_BENCH_LM_STEPS:-20}
warmup=${TANDEM_BENCH_LM_WARMUP:-5}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }'; }

data=$("$here/lm-data.sh" "$build") || { echo "bench-lm: no token data"; exit 0; }
vocab=$(od -An -tu4 -j16 -N4 "$data/train.tok" | tr -d ' ')
precisions="fp32"
if "$build/tandem" info 2>/dev/null | grep -qi "bf16.*native\|native bf16"; then precisions="fp32 bf16"; fi
echo
echo "== language model: gpt-mini, block 256, batch 16, vocab $vocab, AdamW, $threads threads, $steps timed steps =="
for prec in $precisions; do
  "$build/tandem" train --model gpt-mini --data "$data" --batch-size 16 --max-steps $((warmup + steps)) \
    --optimizer adamw --lr 1e-3 --weight-decay 0.1 --beta2 0.95 --schedule constant --threads "$threads" \
    --precision "$prec" --progress 0 --log-interval 5 --eval-batch-size 16 --metrics-file "$out/t_$prec.jsonl" \
    > "$out/t_$prec.txt" 2>&1 || { echo "bench-lm: tandem train failed:"; tail -3 "$out/t_$prec.txt"; continue; }
  t_rate=$(python3 - "$out/t_$prec.jsonl" "$warmup" <<'PY'
import json, sys
rates = []
for line in open(sys.argv[1]):
    j = json.loads(line)
    if "tokens_per_s" in j and j.get("global_step", 0) > int(sys.argv[2]) and j.get("type", "") != "epoch":
        rates.append(j["tokens_per_s"])
print(f"{len(rates) / sum(1 / r for r in rates):.1f}" if rates else "0")
PY
)
  echo "tandem   $prec train_tokens_per_s $t_rate"
  [ -n "$py" ] && [ -f "$peers/torch_gpt.py" ] || continue
  for mode in eager compile; do
    flag=$([ $mode = compile ] && echo --compile)
    "$py" "$peers/torch_gpt.py" --layers 6 --heads 6 --embd 384 --block 256 --vocab "$vocab" --batch 16 \
      --steps "$steps" --warmup "$warmup" --threads "$threads" --precision "$prec" $flag > "$out/p_${prec}_$mode.txt" 2>&1
    p_rate=$(sed -n 's/^torch_gpt tokens_per_s \([0-9.]*\).*/\1/p' "$out/p_${prec}_$mode.txt")
    goal=$([ $mode = compile ] && echo 1.0 || echo 1.3)
    echo "pytorch  $prec $mode train_tokens_per_s ${p_rate:-? ($(tail -1 "$out/p_${prec}_$mode.txt"))}"
    echo "ratio    $prec language model vs torch $mode $(ratio "${t_rate:-0}" "${p_rate:-0}")   (goal >= ${goal}x)"
  done
done
