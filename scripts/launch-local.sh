#!/bin/bash
# Starts N processes of one command on this machine with the variables a launcher sets, as if
# `torchrun --nproc-per-node N` or `srun -n N` (without PMI) had started them: for a machine
# without Slurm or torchrun, and for the tests that compare those launches with mpirun's.
#   torchrun: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK=0, MASTER_ADDR, MASTER_PORT
#   slurm:    SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID=0, SLURM_NTASKS, SLURM_STEP_NUM_TASKS,
#             SLURM_STEP_ID=0, SLURM_JOB_ID, SLURM_STEP_NUM_NODES=1, SLURM_TASKS_PER_NODE,
#             SLURM_STEP_TASKS_PER_NODE (no MASTER_*: tandem's defaults, 127.0.0.1 and port
#             20000 + job id % 10000)
# SIGINT, SIGTERM and SIGUSR1 reach every process (as srun passes them on); a process that
# fails (an exit status other than 0 or a stop signal's 130, 138, 143) ends the others (TERM,
# KILL 10 s later), as srun --kill-on-bad-exit and torchrun do. Exits with the highest exit
# status of the processes (as srun does). With PID_DIR set, process r writes its
# pid to $PID_DIR/pid.r before it starts the command.
# Usage: launch-local.sh torchrun|slurm N [MASTER_PORT or SLURM_JOB_ID] -- COMMAND...
set -u
style=$1 n=$2
shift 2
id=${1:-}
[ "$id" = "--" ] && id= || shift
[ "${1:-}" = "--" ] && shift
[ -n "$id" ] || id=$((20000 + RANDOM % 20000))
pids=()
for ((r = 0; r < n; r++)); do
  if [ "$style" = torchrun ]; then
    vars=(RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$id)
  else
    vars=(SLURM_PROCID=$r SLURM_LOCALID=$r SLURM_NODEID=0 SLURM_NTASKS=$n SLURM_STEP_NUM_TASKS=$n SLURM_STEP_ID=0
          SLURM_JOB_ID=$id SLURM_STEP_NUM_NODES=1 SLURM_TASKS_PER_NODE=$n SLURM_STEP_TASKS_PER_NODE=$n)
  fi
  env "${vars[@]}" bash -c '[ -n "${PID_DIR:-}" ] && echo $$ > "$PID_DIR/pid.'$r'"; exec "$@"' launch "$@" &
  pids+=($!)
done
all=("${pids[@]}")
for sig in INT TERM USR1; do trap "kill -$sig ${all[*]} 2>/dev/null" $sig; done
worst=0 killer=
while [ ${#pids[@]} -gt 0 ]; do
  ended=
  wait -n -p ended "${pids[@]}"
  rc=$?
  if [ -z "${ended:-}" ]; then
    # A trapped signal ends `wait` early (no process named): wait again. When processes end
    # while a trap runs, bash may collect their status there, and `wait -n` then names none
    # (127, again at once: a busy loop): take each such one's saved status with `wait PID`.
    [ $rc -eq 127 ] || continue
    for p in "${pids[@]}"; do
      kill -0 "$p" 2>/dev/null && continue
      wait "$p"
      rc=$? ended=$p
      break
    done
    [ -n "$ended" ] || continue
  fi
  for i in "${!pids[@]}"; do [ "${pids[$i]}" = "$ended" ] && unset 'pids[i]'; done
  pids=("${pids[@]}")
  [ $rc -gt $worst ] && worst=$rc
  if [ $rc -ne 0 ] && [ "$rc" -ne 130 ] && [ "$rc" -ne 138 ] && [ "$rc" -ne 143 ]; then
    # A failed process ends the others (srun --kill-on-bad-exit, torchrun): TERM, then KILL.
    [ ${#pids[@]} -gt 0 ] && kill -TERM "${pids[@]}" 2>/dev/null
    [ -n "$killer" ] || [ ${#pids[@]} -eq 0 ] || { (sleep 10; kill -KILL "${pids[@]}" 2>/dev/null) & killer=$!; }
  fi
done
[ -n "$killer" ] && kill "$killer" 2>/dev/null
exit $worst
