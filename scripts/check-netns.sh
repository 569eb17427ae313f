#!/bin/bash
# Two "machines" on this one: network namespaces tandemA (10.77.0.1) and tandemB (10.77.0.2)
# joined by a veth pair, and `mpirun` across them over TCP with a hostfile, as on two real
# hosts. Open MPI starts the remote rank through its rsh launcher; here the launcher is a small
# script that enters the other namespace (`ip netns exec`) instead of ssh-ing into a host.
# The run is 1 epoch of the mlp on 2048 Fashion-MNIST images, 1 rank per "host"; it passes when
# mpirun exits 0 and rank 0 reports 2 ranks; then 3 ranks (2 on A, 1 on B) under mpirun, and the
# 2- and 3-rank runs launched with torchrun's and with srun's variables (the tcp communicator)
# must save mpirun's weights byte for byte. Needs root and CAP_NET_ADMIN (ip netns); exits 77
# (skipped) without.
# Usage: scripts/check-netns.sh [TANDEM] [MPIRUN]     (defaults build/tandem, mpirun)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tandem=$(realpath "${1:-$root/build/tandem}")
mpirun=${2:-mpirun}
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "check-netns: SKIPPED: needs root and ip netns"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/tandem-netns.XXXXXX)
a=tandemA$$ b=tandemB$$
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$a" 2>/dev/null; then
  echo "check-netns: SKIPPED: cannot make network namespaces here (no CAP_NET_ADMIN?)"
  exit 77
fi
ip netns add "$b" || exit 1
ip link add "va$$" type veth peer name "vb$$" || exit 1
ip link set "va$$" netns "$a" && ip link set "vb$$" netns "$b"
ip -n "$a" addr add 10.77.0.1/24 dev "va$$" && ip -n "$b" addr add 10.77.0.2/24 dev "vb$$"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "va$$" up && ip -n "$b" link set "vb$$" up
ip -n "$a" route get 10.77.0.2 >/dev/null || { echo "check-netns: FAILED: no route from $a to 10.77.0.2"; exit 1; }

# The launcher Open MPI calls as `agent [ssh options] HOST COMMAND...`.
cat >"$work/agent" <<AGENT
#!/bin/bash
while [ "\${1:0:1}" = "-" ]; do shift; done
host=\$1; shift
case \$host in
  10.77.0.1) ns=$a ;;
  10.77.0.2) ns=$b ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns /bin/sh -c "\$*"
AGENT
chmod +x "$work/agent"
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$work/hostfile"

# A small cut of Fashion-MNIST (tests/dist/mpirun_train.sh makes the same kind).
src=/usr/share/datasets/fashion-mnist
python3 - "$src" "$work/data" <<'PY' || exit 1
import gzip, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
for split, n in (("train", 2048), ("t10k", 500)):
    for kind, head in (("images-idx3", 16), ("labels-idx1", 8)):
        with gzip.open(f"{src}/{split}-{kind}-ubyte.gz") as f:
            h = bytearray(f.read(head))
            size = n * (784 if head == 16 else 1)
            body = f.read(size)
        h[4:8] = struct.pack(">I", n)
        with open(f"{dst}/{split}-{kind}-ubyte", "wb") as f:
            f.write(bytes(h) + body)
PY
timeout 180 ip netns exec "$a" "$mpirun" --hostfile "$work/hostfile" -np 2 --bind-to none \
  --mca plm_rsh_agent "$work/agent" --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
  --mca oob_tcp_if_include 10.77.0.0/24 \
  "$tandem" train --data "$work/data" --model mlp --epochs 1 --batch-size 32 --threads 1 --num-workers 0 \
  --progress 0 --dist-timeout 60 --save "$work/mpi.safetensors" >"$work/run.log" 2>&1
rc=$?
cat "$work/run.log"
# The gradients crossed the link: host B's end received at least the 32 steps' all-reduces' share.
rx=$(ip -n "$b" -s link show "vb$$" | awk '/RX:/ { getline; print $1; exit }')
if [ $rc -ne 0 ] || ! grep -q "distributed: rank 0 of 2 (mpi)" "$work/run.log" || [ "${rx:-0}" -lt 4000000 ]; then
  echo "check-netns: FAILED (mpirun exit $rc, ${rx:-?} bytes received on 10.77.0.2)"
  exit 1
fi
train=(train --data "$work/data" --model mlp --epochs 1 --batch-size 32 --threads 1 --num-workers 0 --progress 0
       --dist-timeout 60)
# 3 ranks under mpirun: 2 on host A (10.77.0.1), 1 on host B.
printf '10.77.0.1 slots=2\n10.77.0.2 slots=1\n' >"$work/hostfile3"
timeout 180 ip netns exec "$a" "$mpirun" --hostfile "$work/hostfile3" -np 3 --bind-to none --oversubscribe \
  --mca plm_rsh_agent "$work/agent" --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 \
  --mca oob_tcp_if_include 10.77.0.0/24 "$tandem" "${train[@]}" --save "$work/mpi3.safetensors" >"$work/run3.log" 2>&1 ||
  { tail -5 "$work/run3.log"; echo "check-netns: FAILED: mpirun -np 3 across the namespaces"; exit 1; }
# The same trainings launched without MPI, with torchrun's and then srun's variables: 2 ranks one
# per namespace, 3 ranks two on A and one on B (rank 0 at MASTER_ADDR 10.77.0.1); the tcp
# communicator across the link saves mpirun's weights byte for byte.
for n in 2 3; do
  ref=$work/mpi.safetensors
  [ $n = 3 ] && ref=$work/mpi3.safetensors
  for style in torchrun slurm; do
    port=$((30000 + RANDOM % 20000))
    for ((r = 0; r < n; r++)); do
      ns=$a node=0 local=$r nodes_tasks="$((n - 1)),1"
      [ $r = $((n - 1)) ] && ns=$b node=1 local=0
      if [ $style = torchrun ]; then
        vars=(RANK=$r WORLD_SIZE=$n LOCAL_RANK=$local LOCAL_WORLD_SIZE=$([ $node = 0 ] && echo $((n - 1)) || echo 1)
              GROUP_RANK=$node)
      else
        vars=(SLURM_PROCID=$r SLURM_NTASKS=$n SLURM_STEP_NUM_TASKS=$n SLURM_LOCALID=$local SLURM_NODEID=$node
              SLURM_STEP_ID=0 SLURM_STEP_NUM_NODES=2 SLURM_STEP_TASKS_PER_NODE=$nodes_tasks)
      fi
      ip netns exec "$ns" env "${vars[@]}" MASTER_ADDR=10.77.0.1 MASTER_PORT=$port timeout 180 "$tandem" \
        "${train[@]}" --save "$work/$style$n.safetensors" >"$work/$style$n.$r.log" 2>&1 &
    done
    wait
    if ! grep -q "distributed: rank 0 of $n (tcp)" "$work/$style$n.0.log" || ! cmp -s "$ref" "$work/$style$n.safetensors"; then
      tail -5 "$work/$style$n".*.log
      echo "check-netns: FAILED: the $n-rank $style launch over 10.77.0.1 did not save mpirun's weights"
      exit 1
    fi
    echo "check-netns: $n ranks, $style launch (tcp across the namespaces): mpirun's weights byte for byte"
  done
done
echo "check-netns: PASSED: 2 ranks on 2 network namespaces over TCP (10.77.0.1, 10.77.0.2); $rx bytes reached 10.77.0.2"
