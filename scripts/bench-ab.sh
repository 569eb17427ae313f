#!/usr/bin/env bash
# Before/after: the training paths of `make bench` with two tandem programs, runs alternating,
# so that a change's effect is told from the machine's noise (both measured at the same time).
#   scripts/bench-ab.sh BEFORE/tandem AFTER/tandem [ROUNDS]
# e.g. git worktree add ../base <rev> && cmake -S ../base -B ../base/build -DCMAKE_BUILD_TYPE=Release
#      && cmake --build ../base/build --target tandem && scripts/bench-ab.sh ../base/build/tandem build/tandem 3
# Runs: fmnist-cnn 1 epoch on the cpu and on virt with --optimizer-device cpu (img/s), gpt-mini
# 40 steps on virt resident and with --param-device cpu (tokens/s; token data from lm-data.sh).
# TANDEM_BENCH_THREADS sets the threads (default 2).
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_TANDEM AFTER_TANDEM [ROUNDS]" >&2; exit 2; }
before=$1 after=$2 rounds=${3:-2}
threads=${TANDEM_BENCH_THREADS:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
for bin in "$before" "$after"; do [ -x "$bin" ] || { echo "bench-ab: $bin: not an executable" >&2; exit 2; }; done
lm=$("$root/scripts/lm-data.sh" "$(dirname "$(readlink -f "$after")")" 2>/dev/null) || lm=""
img_s() { awk '/^epoch 1\/1/ { for (i = 1; i <= NF; i++) if ($i == "img/s") print $(i-1) }'; }
tok_s() { grep -m1 -o '[0-9.]* tokens/s' | cut -d' ' -f1; }
for round in $(seq "$rounds"); do
  for which in before after; do
    bin=$before; [ $which = after ] && bin=$after
    r=$("$bin" train --epochs 1 --threads "$threads" --progress 0 --schedule constant --optimizer adam --lr 1e-3 \
      --weight-decay 0 2>&1 | img_s)
    echo "fmnist-cnn cpu img/s $which round $round ${r:-?}"
    r=$("$bin" train --device virt --epochs 1 --threads "$threads" --progress 0 --optimizer-device cpu 2>&1 | img_s)
    echo "fmnist-cnn virt --optimizer-device cpu img/s $which round $round ${r:-?}"
    [ -n "$lm" ] || continue
    for opts in "" "--param-device cpu"; do
      # shellcheck disable=SC2086
      r=$("$bin" train --model gpt-mini --data "$lm" --batch-size 8 --eval-batch-size 8 --max-steps 40 \
        --eval-interval 1000 --warmup-steps 0 --threads "$threads" --progress 0 --device virt:0 $opts 2>&1 | tok_s)
      echo "gpt-mini virt ${opts:-resident} tokens/s $which round $round ${r:-?}"
    done
  done
done
