#!/usr/bin/env bash
# --bind's effect (make bench runs it; alone: scripts/bench-bind.sh [BUILD]): 2 ranks on this
# machine (scripts/launch-local.sh, torchrun's variables, tcp), the CPU optimizer
# (--optimizer-device cpu on virt: the update thread, its OpenMP team and the loader worker
# of each rank), `--bind none` against `--bind cores`: milliseconds per step from rank 0's
# epoch line, runs alternating (none, cores) TANDEM_BENCH_BIND_ROUNDS times (default 3), the
# best and the median of each, and their ratio. The compute threads are not bound (--threads).
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${TANDEM_BENCH_BIND_STEPS:-100}
rounds=${TANDEM_BENCH_BIND_ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== binding: 2 ranks, fmnist-cnn on virt, --optimizer-device cpu, batch 64 per rank, $steps steps, 1 thread each =="
for ((round = 1; round <= rounds; round++)); do
  for bind in none cores; do
    "$root/scripts/launch-local.sh" torchrun 2 $((30000 + RANDOM % 20000)) -- "$root/$build/tandem" train \
      --device virt --optimizer-device cpu --batch-size 64 --max-steps "$steps" --eval-interval 100000 \
      --threads 1 --num-workers 1 --progress 0 --bind "$bind" >"$out/run.txt" 2>&1 ||
      { echo "bench-bind: the run failed:"; tail -3 "$out/run.txt"; exit 1; }
    grep -m1 '^binding' "$out/run.txt" | sed 's/^/  /' >"$out/binding.$bind"
    secs=$(awk '/^epoch / { for (i = 1; i <= NF; i++) if ($i == "s" || $i ~ /^s$/) print $(i-1) }' "$out/run.txt" | tail -1)
    ms=$(awk -v s="${secs:-0}" -v n="$steps" 'BEGIN { printf "%.2f", 1000 * s / n }')
    echo "round $round --bind $bind ms_per_step $ms" | tee -a "$out/times.txt"
  done
done
cat "$out/binding.cores"
# The best and the median of each (mawk has no sort: sort does it).
stat() {  # BIND -> "best median"
  awk -v b="$1" '$4 == b { print $6 }' "$out/times.txt" | sort -n |
    awk '{ v[NR] = $1 } END { printf "%s %s", v[1], v[int((NR + 1) / 2)] }'
}
read -r best_none med_none <<<"$(stat none)"
read -r best_cores med_cores <<<"$(stat cores)"
awk -v bn="$best_none" -v mn="$med_none" -v bc="$best_cores" -v mc="$med_cores" 'BEGIN {
  printf "ratio    --bind cores vs none, ms per step: best %.2f vs %.2f (%.3fx), median %.2f vs %.2f (%.3fx)\n",
         bc, bn, (bc > 0 ? bn / bc : 0), mc, mn, (mc > 0 ? mn / mc : 0) }'
