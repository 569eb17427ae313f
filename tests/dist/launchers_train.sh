#!/bin/bash
# `tandem train` launched three ways on this machine (loopback): by mpirun (the mpi
# communicator), and by torchrun's and srun's variables (scripts/launch-local.sh sets them as
# those launchers do; the tcp communicator meets at MASTER_ADDR:MASTER_PORT). 2 and 3 ranks each
# way save the same weights byte for byte. Launchers that disagree stop with exit 2 and one
# line naming both variables. A rank of a tcp launch that is killed or hangs is named by rank 0. Requeue: SIGUSR1 to every rank of a 2-rank run (what Slurm's
# --signal=USR1@90 does) makes each finish its step, checkpoint and exit 138; the same command
# again (--resume auto) ends with the uninterrupted run's weights byte for byte, for a tcp
# launch and for mpirun (which passes SIGUSR1 on to its ranks).
# Usage: launchers_train.sh TANDEM [MPIRUN]   (ctest's dist_launchers passes both; without
# MPIRUN, or "none", the mpirun runs are left out and the launches are compared with each other)
set -u
tandem=$1
mpirun=${2:-none}
here=$(cd "$(dirname "$0")" && pwd)
launch=$here/../../scripts/launch-local.sh
source "$here/fmnist_cut.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/tandem-launch.XXXXXX)
trap 'rm -rf "$work"' EXIT
fmnist_cut "$work/data" 1024 301
base=(train --data "$work/data" --model mlp --threads 1 --num-workers 0 --progress 0)
common=("${base[@]}" --dist-timeout 60)
fail=0
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok: $name"; else echo "FAILED: $name"; fail=1; fi
}
port() { echo $((30000 + RANDOM % 20000)); }
mpi=none
[ "$mpirun" != none ] && command -v "$mpirun" >/dev/null && mpi="$mpirun --oversubscribe --bind-to none"

# 1. The same training, 2 and 3 ranks, three launches: the same weights.
for n in 2 3; do
  run=(--epochs 1 --batch-size 16 --seed 3)
  if [ "$mpi" != none ]; then
    timeout 120 $mpi -np $n "$tandem" "${common[@]}" "${run[@]}" --save "$work/mpi$n.safetensors" >"$work/mpi$n.log" 2>&1
    check "$n ranks, mpirun: exit 0 (rc $?)" test -s "$work/mpi$n.safetensors"
  fi
  timeout 120 "$launch" torchrun $n "$(port)" -- "$tandem" "${common[@]}" "${run[@]}" \
    --save "$work/torch$n.safetensors" >"$work/torch$n.log" 2>&1
  rc=$?
  check "$n ranks, torchrun's variables: exit 0 (rc $rc)" test $rc -eq 0
  check "$n ranks, torchrun's variables: rank 0 of $n (tcp)" grep -q "distributed: rank 0 of $n (tcp)" "$work/torch$n.log"
  timeout 120 "$launch" slurm $n "$((RANDOM + 100000))" -- "$tandem" "${common[@]}" "${run[@]}" \
    --save "$work/slurm$n.safetensors" >"$work/slurm$n.log" 2>&1
  rc=$?
  check "$n ranks, srun's variables: exit 0 (rc $rc)" test $rc -eq 0
  ref=$work/torch$n.safetensors
  if [ "$mpi" != none ]; then
    ref=$work/mpi$n.safetensors
    check "$n ranks: torchrun's launch saves mpirun's weights" cmp -s "$ref" "$work/torch$n.safetensors"
  fi
  check "$n ranks: srun's launch saves the same weights" cmp -s "$ref" "$work/slurm$n.safetensors"
done

# 2. Two launchers that disagree: exit 2, one line naming both variables.
env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(port) SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_ID=0 \
  timeout 60 "$tandem" "${common[@]}" --epochs 1 >"$work/conflict.log" 2>&1
rc=$?
check "conflicting launchers: exit 2 (rc $rc)" test $rc -eq 2
check "conflicting launchers: one line naming RANK=1 and SLURM_PROCID=0" \
  test "$(grep -c 'RANK=1 (torchrun) but SLURM_PROCID=0 (slurm)' "$work/conflict.log")" -eq 1 -a \
  "$(wc -l <"$work/conflict.log")" -eq 1

# 2b. A tcp launch whose rank 1 is killed, or hangs (SIGSTOP): rank 0 names it and the job ends.
for how in KILL STOP; do
  rm -rf "$work/pids" && mkdir -p "$work/pids"
  PID_DIR=$work/pids timeout 120 "$launch" torchrun 2 "$(port)" -- "$tandem" "${base[@]}" --epochs 200 \
    --batch-size 16 --dist-timeout 5 >"$work/$how.log" 2>&1 &
  job=$!
  for _ in $(seq 200); do [ -s "$work/pids/pid.1" ] && grep -q "^epoch 1/200" "$work/$how.log" && break; sleep 0.05; done
  kill -$how "$(cat "$work/pids/pid.1")"
  start=$(date +%s)
  wait $job
  rc=$?
  took=$(($(date +%s) - start))
  kill -KILL "$(cat "$work/pids/pid.1")" 2>/dev/null
  check "tcp, rank 1 SIG$how: the job fails (rc $rc, not 124) within 60 s ($took s)" \
    test $rc -ne 0 -a $rc -ne 124 -a $took -lt 60
  if [ $how = KILL ]; then
    check "tcp, rank 1 killed: rank 0 names it" grep -qE "rank 0: [a-z_]+: rank 1 closed its connection" "$work/$how.log"
  else
    check "tcp, rank 1 hangs: rank 0 names it after --dist-timeout 5" \
      grep -qE "rank 0: [a-z_]+ got no answer within 5 s \(--dist-timeout\) from rank 1" "$work/$how.log"
  fi
done

# 3. Requeue: SIGUSR1 mid-run to every rank, then the same command resumes (--resume auto).
requeue() {  # NAME LAUNCH...: the launch command before tandem's arguments
  local name=$1
  shift
  local ck=(--epochs 30 --batch-size 32 --log-interval 2 --checkpoint-every 40 --resume auto)
  "$@" "$tandem" "${common[@]}" "${ck[@]}" --checkpoint-dir "$work/$name.full" --save "$work/$name.full.safetensors" \
    >"$work/$name.full.log" 2>&1
  check "$name: uninterrupted run (fresh under --resume auto) exits 0 (rc $?)" test -s "$work/$name.full.safetensors"
  mkdir -p "$work/$name.pids"
  PID_DIR=$work/$name.pids "$@" "$tandem" "${common[@]}" "${ck[@]}" --checkpoint-dir "$work/$name.ck" \
    --save "$work/$name.resumed.safetensors" >"$work/$name.stop.log" 2>&1 &
  local job=$!
  for _ in $(seq 300); do grep -q "^epoch 2/30" "$work/$name.stop.log" && break; sleep 0.05; done
  kill -USR1 "$(pgrep -P "$job" | head -n 1)"  # to the launcher under `timeout`: it passes it on
  wait $job
  local rc=$?
  check "$name: SIGUSR1 stops the run with 138 (rc $rc)" test $rc -eq 138
  check "$name: rank 0 checkpointed and says so" grep -q "stopped by SIGUSR1 after the current step" "$work/$name.stop.log"
  check "$name: no weights saved by the stopped run" test ! -e "$work/$name.resumed.safetensors"
  "$@" "$tandem" "${common[@]}" "${ck[@]}" --checkpoint-dir "$work/$name.ck" --save "$work/$name.resumed.safetensors" \
    >"$work/$name.resume.log" 2>&1
  check "$name: the requeued run exits 0 (rc $?)" test -s "$work/$name.resumed.safetensors"
  check "$name: it resumed from the stop's checkpoint" grep -q "^resumed from $work/$name.ck/step-" "$work/$name.resume.log"
  check "$name: resumed weights are the uninterrupted run's" \
    cmp -s "$work/$name.full.safetensors" "$work/$name.resumed.safetensors"
}
requeue torchrun timeout 120 "$launch" torchrun 2 "$(port)" --
[ "$mpi" != none ] && requeue mpirun timeout 120 $mpi -np 2

# 4. examples/slurm/train.sbatch as Slurm would run it: srun and scontrol stand-ins (srun starts the
#    tasks with srun's variables and passes signals on), SIGUSR1 to srun as --signal=USR1@90 sends
#    it; the script requeues, and its second run ends with the uninterrupted run's weights.
mkdir -p "$work/bin"
printf '#!/bin/bash\nwhile [ "${1:0:2}" = "--" ]; do shift; done\nexec "%s" slurm "$SLURM_NTASKS" "$SLURM_JOB_ID" -- "$@"\n' \
  "$launch" >"$work/bin/srun"
printf '#!/bin/bash\ncase $1 in show) echo 127.0.0.1 ;; requeue) echo "$2" >>"%s/requeued" ;; esac\n' "$work" \
  >"$work/bin/scontrol"
ln -s "$(realpath "$tandem")" "$work/bin/tandem"
chmod +x "$work/bin/srun" "$work/bin/scontrol"
sbatch_run() {  # JOB_ID CHECKPOINTS LOG
  env PATH="$work/bin:$PATH" SLURM_JOB_ID=$1 SLURM_JOB_NODELIST=localhost SLURM_NTASKS=2 \
    TANDEM_DATA="$work/data" TANDEM_EPOCHS=30 TANDEM_CHECKPOINTS="$2" \
    TANDEM_ARGS="--model mlp --num-workers 0 --progress 0 --log-interval 2 --dist-timeout 60" \
    timeout 120 bash "$here/../../examples/slurm/train.sbatch" >"$3" 2>&1
}
jobid=$((RANDOM + 1000))
sbatch_run $jobid "$work/sb.full" "$work/sbatch.full.log"
check "sbatch: uninterrupted job exits 0 (rc $?)" test -s "$work/sb.full/final.safetensors"
jobid=$((jobid + 1))
sbatch_run $jobid "$work/sb.ck" "$work/sbatch.stop.log" &
job=$!
for _ in $(seq 300); do grep -q "^epoch 2/30" "$work/sbatch.stop.log" && break; sleep 0.05; done
kill -USR1 "$(pgrep -f "launch-local.sh slurm 2 $jobid" | head -n 1)"
wait $job
rc=$?
check "sbatch: SIGUSR1 ends the job with 138 (rc $rc)" test $rc -eq 138
check "sbatch: the script requeued the job" test -s "$work/requeued"
sbatch_run $jobid "$work/sb.ck" "$work/sbatch.resume.log"
check "sbatch: the requeued job resumed from the stop's checkpoint (rc $?)" grep -q "^resumed from $work/sb.ck/step-" "$work/sbatch.resume.log"
check "sbatch: the requeued job ends with the uninterrupted job's weights" \
  cmp -s "$work/sb.full/final.safetensors" "$work/sb.ck/final.safetensors"

if [ $fail -ne 0 ] || [ -n "${SHOW_LOGS:-}" ]; then
  for f in "$work"/*.log; do echo "== $f"; tail -20 "$f"; done
fi
exit $fail
