#!/bin/bash
# `tandem train` under mpirun on a small cut of Fashion-MNIST (1024 training, 301 test
# samples): 2 ranks train and only rank 0 prints and saves; 3 ranks (301 is no multiple of 3)
# report the accuracy `tandem eval` finds for the saved weights over every test sample once;
# different flags on one rank stop every rank with an error naming it; a killed rank ends the
# job (mpirun notices and names it); a hung rank (SIGSTOP) makes rank 0 stop after
# --dist-timeout naming it; Ctrl-C on mpirun ends every rank; a run stopped by SIGTERM on one
# rank checkpoints on rank 0 and resumes to the uninterrupted weights. Every mpirun runs under
# `timeout`.
# Usage: mpirun_train.sh TANDEM MPIRUN (ctest's dist_mpirun_train passes both).
set -u
tandem=$1
mpirun=${2:-mpirun}
source "$(dirname "$0")/fmnist_cut.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/tandem-mpirun.XXXXXX)
trap 'rm -rf "$work"' EXIT
fmnist_cut "$work/data" 1024 301
mpi="$mpirun --oversubscribe --bind-to none"
common=(train --data "$work/data" --model mlp --threads 1 --num-workers 0 --progress 0)
one=(--epochs 1)
fail=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok: $name"; else echo "FAILED: $name"; fail=1; fi
}

# 1. Two ranks: one banner and one epoch line (rank 0's), the weights saved once, one trace per rank.
timeout 120 $mpi -np 2 "$tandem" "${common[@]}" "${one[@]}" --batch-size 32 --save "$work/w2.safetensors" \
  --trace "$work/t.json" >"$work/two.log" 2>&1
rc=$?
check "2 ranks exit 0 (rc $rc)" test $rc -eq 0
check "2 ranks: rank 0 of 2 in the banner" grep -q "distributed: rank 0 of 2 (mpi), batch 32 per rank = 64 global" "$work/two.log"
check "2 ranks: one epoch line" test "$(grep -c '^epoch 1/1' "$work/two.log")" -eq 1
check "2 ranks: comm summary" grep -q "^distributed: 2 ranks; gradient all-reduce" "$work/two.log"
check "2 ranks: weights saved" test -s "$work/w2.safetensors"
check "2 ranks: traces of both ranks" test -s "$work/t.json" -a -s "$work/t.rank1.json"
check "2 ranks: all-reduce spans in the trace" grep -q "all-reduce bucket" "$work/t.json"

# 2. Three ranks over 301 test samples: train's final accuracy is eval's over all 301.
timeout 120 $mpi -np 3 "$tandem" "${common[@]}" "${one[@]}" --batch-size 16 --save "$work/w3.safetensors" >"$work/three.log" 2>&1
rc=$?
check "3 ranks exit 0 (rc $rc)" test $rc -eq 0
acc=$(sed -n 's/.*final test_acc \([0-9.]*%\).*/\1/p' "$work/three.log")
timeout 60 "$tandem" eval --data "$work/data" --model mlp --threads 1 --weights "$work/w3.safetensors" >"$work/eval.log" 2>&1
check "3 ranks: eval counts 301 samples" grep -q "/ 301)" "$work/eval.log"
check "3 ranks: train's test_acc $acc is eval's" grep -q "test_acc $acc " "$work/eval.log"

# 3. Different flags on rank 1: every rank stops, rank 1 names the flag.
timeout 120 $mpi -np 1 "$tandem" "${common[@]}" "${one[@]}" --lr 0.001 : -np 1 "$tandem" "${common[@]}" "${one[@]}" --lr 0.002 \
  >"$work/flags.log" 2>&1
rc=$?
check "different flags: non-zero exit (rc $rc, not 124)" test $rc -ne 0 -a $rc -ne 124
check "different flags: rank 1 names --lr" grep -q "rank 1: the flags or model differ from rank 0's: here '--lr" "$work/flags.log"

# 4. Rank 1 killed mid-run: the job ends within the timeout with an error naming rank 1.
start=$(date +%s)
timeout 120 $mpi -np 2 bash -c 'echo $$ > '"$work"'/pid.$OMPI_COMM_WORLD_RANK; exec "$0" "$@"' "$tandem" \
  "${common[@]}" --epochs 50 --batch-size 16 --dist-timeout 10 >"$work/kill.log" 2>&1 &
job=$!
for _ in $(seq 100); do [ -s "$work/pid.1" ] && grep -q "^epoch 1/50" "$work/kill.log" && break; sleep 0.2; done
kill -9 "$(cat "$work/pid.1")"
wait $job
rc=$?
took=$(($(date +%s) - start))
check "killed rank: non-zero exit (rc $rc, not 124)" test $rc -ne 0 -a $rc -ne 124
check "killed rank: error names rank 1" grep -qE "rank 1[^0-9]" "$work/kill.log"
echo "killed rank: the job ended ${took} s after it started"

# 5. Rank 1 hangs (SIGSTOP): mpirun sees nothing; rank 0 gives up after --dist-timeout 5 naming it.
rm -f "$work"/pid.*
timeout 120 $mpi -np 2 bash -c 'echo $$ > '"$work"'/pid.$OMPI_COMM_WORLD_RANK; exec "$0" "$@"' "$tandem" \
  "${common[@]}" --epochs 50 --batch-size 16 --dist-timeout 5 >"$work/hang.log" 2>&1 &
job=$!
for _ in $(seq 100); do [ -s "$work/pid.1" ] && grep -q "^epoch 1/50" "$work/hang.log" && break; sleep 0.2; done
stopped=$(date +%s)
kill -STOP "$(cat "$work/pid.1")"
wait $job
rc=$?
took=$(($(date +%s) - stopped))
kill -9 "$(cat "$work/pid.1")" 2>/dev/null
check "hung rank: non-zero exit (rc $rc, not 124)" test $rc -ne 0 -a $rc -ne 124
# Rank 0 may be waiting in any collective (a bucket's barrier or all-reduce, the metrics).
check "hung rank: rank 0 names rank 1 after the timeout" \
  grep -qE "rank 0: [a-z_]+ got no answer within 5 s \(--dist-timeout\) from rank 1" "$work/hang.log"
grep -qE "got no answer" "$work/hang.log" || tail -5 "$work/hang.log"
check "hung rank: the job ended ${took} s after the stop (timeout 5 s)" test "$took" -lt 60
# 6. Ctrl-C on mpirun ends every rank.
timeout 120 $mpi -np 2 "$tandem" "${common[@]}" --epochs 200 --batch-size 16 >"$work/int.log" 2>&1 &
job=$!
for _ in $(seq 100); do grep -q "^epoch 2/200" "$work/int.log" && break; sleep 0.2; done
kill -INT "$(pgrep -P "$job" -x mpirun || echo "$job")"
start=$(date +%s)
wait $job
rc=$?
check "Ctrl-C: mpirun ends (rc $rc, not 124) within 30 s" test $rc -ne 124 -a $(($(date +%s) - start)) -lt 30
# mpirun may return while its ranks are still exiting: give them 10 s to go.
ranks_left() { pgrep -f -- "--data $work/data .*--epochs 200"; }
for _ in $(seq 100); do [ -z "$(ranks_left)" ] && break; sleep 0.1; done
check "Ctrl-C: no rank left behind (10 s after mpirun ended)" test -z "$(ranks_left)"
pkill -KILL -f -- "--data $work/data .*--epochs 200" 2>/dev/null

# 7. Checkpoints: SIGTERM to rank 1 alone mid-run; the ranks agree on the stop, rank 0 writes the
#    checkpoint; resumed on 2 ranks, the run saves the uninterrupted run's weights byte for byte.
# 50 epochs of 16 steps: a few seconds, so that the stop lands mid-run however fast the epochs go.
ck=(--epochs 50 --batch-size 32 --log-interval 2 --checkpoint-every 40)
timeout 120 $mpi -np 2 "$tandem" "${common[@]}" "${ck[@]}" --checkpoint-dir "$work/ckfull" \
  --save "$work/full.safetensors" >"$work/ckfull.log" 2>&1
rc=$?
check "checkpoints: uninterrupted run exits 0 (rc $rc)" test $rc -eq 0
rm -f "$work"/pid.*
timeout 120 $mpi -np 2 bash -c 'echo $$ > '"$work"'/pid.$OMPI_COMM_WORLD_RANK; exec "$0" "$@"' "$tandem" \
  "${common[@]}" "${ck[@]}" --checkpoint-dir "$work/ck" >"$work/ckstop.log" 2>&1 &
job=$!
for _ in $(seq 200); do [ -s "$work/pid.1" ] && grep -q "^epoch 1/50" "$work/ckstop.log" && break; sleep 0.05; done
kill -TERM "$(cat "$work/pid.1")"
wait $job
rc=$?
check "checkpoints: SIGTERM on rank 1 stops the job (rc $rc, not 124)" test $rc -ne 0 -a $rc -ne 124
check "checkpoints: rank 0 wrote the stop's checkpoint" grep -q "stopped by SIGTERM after the current step; continue with --resume" "$work/ckstop.log"
stop_ck=$(sed -n 's/^checkpoint \(.*\) (stop):.*/\1/p' "$work/ckstop.log")
check "checkpoints: the stop wrote a checkpoint (${stop_ck:-none})" test -n "$stop_ck"
check "checkpoints: only rank 0 wrote files" test -z "$(find "$work/ck" -name '*.rank*')"
timeout 120 $mpi -np 2 "$tandem" "${common[@]}" "${ck[@]}" --checkpoint-dir "$work/ck" --resume \
  --save "$work/resumed.safetensors" >"$work/ckresume.log" 2>&1
rc=$?
check "checkpoints: resumed run exits 0 (rc $rc)" test $rc -eq 0
check "checkpoints: it resumed from the stop's checkpoint" grep -q "resumed from ${stop_ck:-none}:" "$work/ckresume.log"
check "checkpoints: resumed weights are the uninterrupted run's" cmp -s "$work/full.safetensors" "$work/resumed.safetensors"
timeout 60 $mpi -np 1 "$tandem" "${common[@]}" "${ck[@]}" --checkpoint-dir "$work/ck1" --resume "$work/ck" \
  >"$work/ckworld.log" 2>&1
check "checkpoints: 1 rank refuses a 2-rank checkpoint" grep -q "saved by a run of 2 ranks, this one has 1" "$work/ckworld.log"

if [ $fail -ne 0 ] || [ -n "${SHOW_LOGS:-}" ]; then
  for f in "$work"/*.log; do echo "== $f"; tail -20 "$f"; done
fi
exit $fail
