#!/usr/bin/env bash
# Compares two builds of tandem in one run on this machine: training images/s (cpu and virt,
# 1 epoch of the reference CNN), loader images/s (bench_loader) and CPU Adam Mparams/s
# (bench_adam). Runs alternate old, new, old, new ... so that a change in the machine's load
# hits both alike; each figure is the best of its repeats, and the ratio is new / old.
# It also checks that both builds print the same per-epoch figures (loss, accuracy).
# Usage: scripts/bench-compare.sh OLD_BUILD_DIR NEW_BUILD_DIR [repeats, default 2]
#   e.g. git worktree add /tmp/old <commit>; build it in /tmp/old/build; then
#        scripts/bench-compare.sh /tmp/old/build build
# Environment: TANDEM_BENCH_THREADS (default 2).
set -uo pipefail
old=${1:?usage: bench-compare.sh OLD_BUILD_DIR NEW_BUILD_DIR [repeats]}
new=${2:?usage: bench-compare.sh OLD_BUILD_DIR NEW_BUILD_DIR [repeats]}
reps=${3:-2}
threads=${TANDEM_BENCH_THREADS:-2}
for b in "$old" "$new"; do
  for exe in tandem bench_loader bench_adam; do
    [ -x "$b/$exe" ] || { echo "bench-compare: $b/$exe not found (build both trees first)" >&2; exit 2; }
  done
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# best VALUE of FIELD over files: the number after the word FIELD on lines matching PATTERN.
best() {
  local pattern=$1 field=$2; shift 2
  awk -v p="$pattern" -v f="$field" '$0 ~ p { for (i = 1; i < NF; i++) if ($i == f && $(i+1) + 0 > m) m = $(i+1) + 0 }
    END { print m + 0 }' "$@"
}
# images/s of a train log: the number before "img/s" on the epoch line.
train_ips() {
  awk '/^epoch 1\/1/ { for (i = 2; i <= NF; i++) if ($i == "img/s" && $(i-1) + 0 > m) m = $(i-1) + 0 } END { print m + 0 }' "$@"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }

status=0
for dev in cpu virt; do
  for r in $(seq 1 "$reps"); do
    for side in old new; do
      b=$old; [ $side = new ] && b=$new
      "$b/tandem" train --device $dev --epochs 1 --threads "$threads" --progress 0 > "$out/train_${dev}_${side}_$r.txt" 2>&1
    done
  done
  o=$(train_ips "$out"/train_${dev}_old_*.txt); n=$(train_ips "$out"/train_${dev}_new_*.txt)
  echo "train $dev   old $o img/s   new $n img/s   new/old $(ratio "$n" "$o")"
  fo=$(grep '^epoch 1/1' "$out/train_${dev}_old_1.txt" | sed 's/[0-9.,]* img\/s.*//')
  fn=$(grep '^epoch 1/1' "$out/train_${dev}_new_1.txt" | sed 's/[0-9.,]* img\/s.*//')
  if [ "$fo" = "$fn" ] && [ -n "$fo" ]; then
    echo "train $dev   same epoch figures: $fo"
  else
    echo "train $dev   DIFFERENT epoch figures:"; echo "  old: $fo"; echo "  new: $fn"; status=1
  fi
done

for r in $(seq 1 "$reps"); do
  for side in old new; do
    b=$old; [ $side = new ] && b=$new
    "$b/bench_loader" > "$out/loader_${side}_$r.txt" 2>/dev/null
    "$b/bench_adam" "$threads" 50 > "$out/adam_${side}_$r.txt" 2>/dev/null
  done
done
for w in 0 1 2; do
  o=$(best "num_workers $w " img_per_s "$out"/loader_old_*.txt); n=$(best "num_workers $w " img_per_s "$out"/loader_new_*.txt)
  echo "loader num_workers $w   old $o img/s   new $n img/s   new/old $(ratio "$n" "$o")"
done
o=$(best "^adam level" Mparams_per_s "$out"/adam_old_*.txt); n=$(best "^adam level" Mparams_per_s "$out"/adam_new_*.txt)
echo "adam (best level)   old $o Mparams/s   new $n Mparams/s   new/old $(ratio "$n" "$o")"
exit $status
