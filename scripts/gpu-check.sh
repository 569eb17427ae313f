#!/usr/bin/env bash
# GPU check of the CUDA backend, in two steps (see docs/cuda.md):
#
#   scripts/gpu-check.sh --prepare [BUILD]   on the build machine. Configures and builds BUILD
#       (default build-gpu) for the lent GPU's architecture only (TANDEM_GPU_ARCH, default
#       90-real: sm_90, H100/H200), then copies test_cuda, tandem, bench_resnet, the shared libraries a bare
#       GPU machine lacks (not the driver, glibc, libstdc++, cuBLAS, cuDNN or NCCL, which that
#       machine's CUDA toolkit or PyTorch wheels provide), the Fashion-MNIST 10k split and a
#       photo folder of 400 JPEGs (scripts/make-photo-folder.sh, about 11 MiB) into
#       build-gpu-carry/ (with serve_load, the HTTP load client; ignored by git through /build*/; libraries over 4 MiB gzipped, unpacked
#       by the check), and prints the carry's size; fails
#       when it is over 60 MiB (the device tool carries 64 MiB with the working tree).
#       An existing BUILD is used as it is when its CMakeCache.txt has TANDEM_CUDA=ON and that
#       architecture.
#   scripts/gpu-check.sh [CARRY]              on the GPU machine, from the repository root
#       (CARRY defaults to build-gpu-carry). Prints the device name, driver and CUDA runtime
#       versions first; then runs every test of test_cuda on its own (60 s each; among them the
#       1-rank NCCL all-reduce and the non-blocking communicator's watchdog with a 1 s
#       --dist-timeout, Nccl.OneRank*, and with several GPUs one rank per GPU and a peer that
#       never joins timing out, Nccl.SeveralGpus*, which skip as expected on a machine of one
#       GPU), then one
#       epoch of `tandem train --device cuda` (90 s), then one epoch on the photo folder at
#       224 through the CPU image pipeline (decode + RandomResizedCrop on 2 loader workers,
#       pinned slots, copies to the device; 60 s), printing its images/s and data-wait share;
#       then ResNet-50 at 224, batch 32: compute only on synthetic input (bench_resnet, images/s;
#       60 s) and one epoch on the photo folder through the CPU pipeline (8 loader workers;
#       images/s and data-wait share; 60 s); one epoch each with --precision bf16 and fp16
#       (45 s each; cuDNN/cuBLAS on tensor cores, fp16 with the loss scaler); then one epoch of
#       the 10k split with each batch split
#       between the GPU and the CPU (`--devices cuda:0,cpu --split auto`, 60 s), printing the
#       shares the devices settled at; then 20 steps of a GPT-2 (124M layout) in bf16 on token
#       shards of Debian's fortunes tokenized at --prepare (tokens/s, the validation loss; 45 s)
#       and the same with --param-device cpu (blocks streamed from pinned host memory, AdamW on
#       the host; its validation loss within 0.05 of the resident run's; 45 s), and under
#       `mpirun -np 2 ... --zero 3` and `--zero 0` (2 ranks of batch 4 on the GPU, where mpirun is; the same
#       bound against the streamed run); gpt2-xl (1.56B)
#       in bf16 streamed (--offload-delay 1) with an 8 GiB device budget, then resident, 6 steps each (tokens/s,
#       the copies' hidden share, the device high-water mark; 100 s each);
#       then one epoch of `tandem train --device cuda --serve
#       --serve-device cuda` (inference on its own high-priority stream beside the training
#       step) under serve_load's 8 clients until it ends, printing req/s, p50/p99 and the
#       versions answered (45 s); then the Python module's CudaPrefetcher tests under the
#       machine's python3 and torch (python/tests/test_prefetch.py with TANDEM_REQUIRE_CUDA=1:
#       a skip is a failure; 30 s); 570 s at most in all (each step has its own timeout, cut to
#       what is left of the 570 s; the tests share 170 s, GPU_CHECK_TESTS_BUDGET).
#       Exit status 0 only when a CUDA device was found, every test passed, none was skipped
#       (except CudaNoDevice.*, which skips when a device is present) and the training run
#       and the photo, resnet, split, GPT and serving runs succeeded (serving: no failed request,
#       no version going back). Logs go to $OUT (when set) and to CARRY, and are printed.
#       Exit codes: 1 tests or training failed, 2 nothing prepared, 3 no CUDA device,
#       4 libraries missing.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
limit_mib=60
arch=${TANDEM_GPU_ARCH:-90-real}
test_timeout=${GPU_CHECK_TEST_TIMEOUT:-60}
train_timeout=${GPU_CHECK_TRAIN_TIMEOUT:-90}
photo_timeout=${GPU_CHECK_PHOTO_TIMEOUT:-60}
resnet_timeout=${GPU_CHECK_RESNET_TIMEOUT:-60}
resnet_photo_timeout=${GPU_CHECK_RESNET_PHOTO_TIMEOUT:-60}
precision_timeout=${GPU_CHECK_PRECISION_TIMEOUT:-45}
split_timeout=${GPU_CHECK_SPLIT_TIMEOUT:-60}
serve_timeout=${GPU_CHECK_SERVE_TIMEOUT:-45}
gpt_timeout=${GPU_CHECK_GPT_TIMEOUT:-45}
xl_timeout=${GPU_CHECK_XL_TIMEOUT:-100}
prefetch_timeout=${GPU_CHECK_PREFETCH_TIMEOUT:-30}
total_budget=${GPU_CHECK_BUDGET:-570}
tests_budget=${GPU_CHECK_TESTS_BUDGET:-170}
expected_skip='^CudaNoDevice\.'
# prepare(): the build-machine step, in its own file.
. "$root/scripts/gpu-check-prepare.sh"

# The folder holding `name` among the known places: the CUDA toolkit, the driver's folder,
# the system's library folder, then NVIDIA's Python wheels of the interpreters that are there.
# No search of the whole file system.
find_lib_dir() {
  local name=$1 d
  local dirs=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib
              /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64)
  local py site
  for py in python3 /opt/torch/.venv/bin/python3; do
    command -v "$py" >/dev/null || continue
    for site in $("$py" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
      for d in "$site"/nvidia/*/lib; do [ -d "$d" ] && dirs+=("$d"); done
    done
  done
  for d in "${dirs[@]}"; do
    [ -e "$d/$name" ] && { echo "$d"; return 0; }
  done
  return 1
}

elapsed() { echo $(( $(date +%s) - start )); }
# A step's timeout: its own, or what is left of the whole budget if less (at least 1 s).
within() { local left=$((total_budget - $(elapsed))); [ "$left" -lt "$1" ] && echo $((left > 1 ? left : 1)) || echo "$1"; }
# A photo run's outcome from its exit code, timeout and log: "ok: data-wait share X%, N images/s",
# a timeout, or the failure's first error line.
photo_outcome() {
  case $1 in
    0) echo "ok: $(grep -m1 -o 'data-wait share [0-9.]*%' "$3"), $(grep -m1 -o '[0-9]* images/s$' "$3")" ;;
    124|137) echo "TIMED OUT after ${2}s" ;;
    *) echo "FAILED (exit $1): $(grep -m1 -E '^\[|rror' "$3")" ;;
  esac
}

run_check() {
  local carry=${1:-$root/build-gpu-carry}
  start=$(date +%s)
  local logdir=${OUT:-$carry}
  [ -n "${OUT:-}" ] || [ -d "$carry" ] || logdir=${TMPDIR:-/tmp}
  mkdir -p "$logdir" 2>/dev/null || logdir=${TMPDIR:-/tmp}
  local log=$logdir/gpu-check.log
  : >"$log"
  exec 3>&1 4>&2 > >(tee -a "$log") 2>&1
  tee_pid=$!
  trap 'exec 1>&3 2>&4; wait "$tee_pid" 2>/dev/null' EXIT  # the log's last lines reach the screen

  echo "== gpu-check on $(hostname) at $(date -u '+%Y-%m-%d %H:%M:%S UTC') =="
  # 1. The device, the driver and the runtime, before anything else.
  local gpus=0
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/  device: /'
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  else
    echo "  nvidia-smi: not installed"
    gpus=$(ls /dev/nvidia[0-9]* 2>/dev/null | wc -l)
  fi
  # One GPU: the N-rank NCCL test has no second rank to run; it skips as expected.
  [ "$gpus" -lt 2 ] && expected_skip="$expected_skip|^Nccl\.SeveralGpus"
  if [ "$gpus" -eq 0 ]; then
    echo "gpu-check: FAILED: no CUDA device (nvidia-smi lists no GPU, or it is missing and there is no /dev/nvidia*)"
    echo "gpu-check: log: $log"
    exit 3
  fi
  [ -x "$carry/test_cuda" ] && [ -x "$carry/tandem" ] || {
    echo "gpu-check: FAILED: $carry/test_cuda or tandem not found: run scripts/gpu-check.sh --prepare on the build machine and carry build-gpu-carry"
    exit 2
  }
  local gz
  for gz in "$carry"/lib/*.gz; do
    [ -f "$gz" ] || continue
    gzip -dc "$gz" > "${gz%.gz}.tmp" && mv "${gz%.gz}.tmp" "${gz%.gz}" && rm -f "$gz" ||
      { echo "gpu-check: FAILED: cannot unpack $gz"; exit 4; }
  done
  local libpath=$carry/lib dir lib missing_libs=0 found=""
  for lib in libcuda.so.1 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
    if dir=$(find_lib_dir "$lib"); then
      found+="  $lib: $dir"$'\n'
      case ":$libpath:" in *":$dir:"*) ;; *) libpath=$libpath:$dir ;; esac
    elif [ "$lib" = libcuda.so.1 ]; then
      found+="  $lib: not in the known places (the loader's own path decides)"$'\n'
    else
      found+="  $lib: not found in the known places"$'\n'
      missing_libs=1
    fi
  done
  export LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  local unresolved
  unresolved=$(ldd "$carry/test_cuda" "$carry/tandem" 2>&1 | grep "not found" | sort -u)
  if [ -n "$unresolved" ] || [ "$missing_libs" -ne 0 ]; then
    printf '%s' "$found"
    echo "gpu-check: FAILED: libraries missing:"
    echo "${unresolved:-  (see above)}"
    exit 4
  fi
  local info
  info=$(timeout 60 "$carry/tandem" info 2>&1)
  echo "$info" | grep -E "CUDA runtime|cuda" | sed 's/^ */  /'
  printf '%s' "$found"
  if ! echo "$info" | grep -q "^  *cuda:0"; then
    echo "gpu-check: FAILED: no CUDA device visible to tandem (driver/runtime mismatch or no access): $(echo "$info" | grep -o 'no device:.*' | head -1)"
    exit 3
  fi

  # 2. Every test on its own, with a timeout each.
  echo "== test_cuda: each test alone, ${test_timeout}s each =="
  local tlog=$logdir/gpu-check-tests.log
  : >"$tlog"
  local names=() suite="" line
  while IFS= read -r line; do
    if [[ $line =~ ^([A-Za-z0-9_/]+)\.( |$) ]]; then suite=${BASH_REMATCH[1]}; continue; fi
    [[ -n $suite && $line =~ ^\ \ ([A-Za-z0-9_/]+) ]] && names+=("$suite.${BASH_REMATCH[1]}")
  done < <("$carry/test_cuda" --gtest_list_tests 2>>"$tlog")
  local passed=0 failed=0 skipped=0 expected=0 notrun=0 t out rc left bad=()
  local tests_start
  tests_start=$(elapsed)
  for t in "${names[@]}"; do
    left=$((tests_budget - $(elapsed) + tests_start))
    if [ "$left" -lt 5 ]; then
      notrun=$((notrun + 1)); bad+=("$t (not run: time budget)"); continue
    fi
    [ "$left" -gt "$test_timeout" ] && left=$test_timeout
    out=$(timeout "$left" "$carry/test_cuda" --gtest_filter="$t" 2>&1)
    rc=$?
    printf '%s\n' "---- $t (exit $rc)" "$out" >>"$tlog"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      failed=$((failed + 1)); bad+=("$t (timed out after ${left}s)"); echo "  TIMEOUT $t"
    elif [ $rc -ne 0 ]; then
      failed=$((failed + 1)); bad+=("$t (failed, exit $rc)"); echo "  FAILED  $t"
      echo "$out" | grep -E "Failure|error|Expected|Which is|actual" | head -8 | sed 's/^/          /'
    elif echo "$out" | grep -q '^\[  SKIPPED \] '; then
      if [[ $t =~ $expected_skip ]]; then
        expected=$((expected + 1)); echo "  skipped $t (expected with a device)"
      else
        skipped=$((skipped + 1)); bad+=("$t (skipped: $(echo "$out" | grep -A1 'Skipped' | tail -1))"); echo "  SKIPPED $t"
      fi
    elif echo "$out" | grep -q '^\[  PASSED  \] 1 test'; then
      passed=$((passed + 1)); echo "  ok      $t"
    else
      failed=$((failed + 1)); bad+=("$t (no result)"); echo "  ??      $t"
    fi
  done
  local tests_s=$(elapsed)

  # 3. One epoch of training on the 10k split.
  echo "== tandem train --device cuda (1 epoch, 10k images, ${train_timeout}s) =="
  local trlog=$logdir/gpu-check-train.log train="not run" train_rc=1
  if [ -f "$carry/data/train-images-idx3-ubyte.gz" ]; then
    local t0=$(date +%s)
    # --show-utilization: the epoch line carries NVML's GPU utilisation and memory.
    timeout "$(within $train_timeout)" "$carry/tandem" train --device cuda --epochs 1 --data "$carry/data" --progress 0 \
      --show-utilization --metrics-file "$logdir/gpu-check-train.jsonl" >"$trlog" 2>&1
    train_rc=$?
    tail -n 12 "$trlog"
    case $train_rc in
      0) train="ok" ;;
      124|137) train="TIMED OUT after ${train_timeout}s" ;;
      *) train="FAILED (exit $train_rc): $(grep -m1 -E '^\[|rror' "$trlog")" ;;
    esac
    train="$train in $(( $(date +%s) - t0 ))s"
  else
    train="not run: $carry/data has no Fashion-MNIST files"
  fi

  # 3b. Mixed precision on the device: one epoch each of --precision bf16 and fp16 (the loss
  # scaler's scale and skipped steps in the epoch line); a failure fails the check.
  local prec_summary=() prec_failed=0 p
  for p in bf16 fp16; do
    echo "== tandem train --device cuda --precision $p (1 epoch, 10k images, ${precision_timeout}s) =="
    local plog=$logdir/gpu-check-train-$p.log prc=1
    if [ -f "$carry/data/train-images-idx3-ubyte.gz" ]; then
      timeout "$(within $precision_timeout)" "$carry/tandem" train --device cuda --epochs 1 --data "$carry/data" --progress 0 \
        --precision "$p" >"$plog" 2>&1
      prc=$?
      tail -n 4 "$plog"
    fi
    case $prc in
      0) prec_summary+=("$p ok: $(grep -m1 -o '[0-9]* img/s' "$plog")$(grep -m1 -o '  loss_scale .*' "$plog")") ;;
      *) prec_summary+=("$p FAILED (exit $prc): $(grep -m1 -E '^\[|rror' "$plog" 2>/dev/null)"); prec_failed=1 ;;
    esac
  done

  # 4. The CPU image pipeline feeding the device: JPEG decode + RandomResizedCrop 224 + flip +
  # normalize on 2 loader workers into pinned slots, copied ahead on the copy stream.
  echo "== tandem train --device cuda on the photo folder at 224 (1 epoch, 2 loader workers, ${photo_timeout}s) =="
  local phlog=$logdir/gpu-check-photos.log photos="not run" photo_rc=1
  if [ -d "$carry/photos/train" ]; then
    local t1=$(date +%s)
    timeout "$(within $photo_timeout)" "$carry/tandem" train --device cuda --epochs 1 --data "$carry/photos" --model mlp \
      --image-size 224 --batch-size 32 --eval-batch-size 64 --num-workers 2 --progress 0 \
      --trace "$logdir/gpu-check-photos-trace.json" >"$phlog" 2>&1
    photo_rc=$?
    grep -E '^(epoch|  data-wait|advice)' "$phlog"
    photos="$(photo_outcome "$photo_rc" "$photo_timeout" "$phlog") in $(( $(date +%s) - t1 ))s"
  else
    photos="not run: $carry/photos has no photo folder (see --prepare's output)"
  fi

  # 5. ResNet-50 at 224, batch 32: compute only (synthetic input made once on the device), then
  # one epoch on the photo folder fed by the CPU image pipeline.
  echo "== bench_resnet resnet50 224 batch 32 --device cuda (synthetic, ${resnet_timeout}s) =="
  local rslog=$logdir/gpu-check-resnet.log resnet="not run" resnet_rc=1
  if [ -x "$carry/bench_resnet" ]; then
    timeout "$(within $resnet_timeout)" "$carry/bench_resnet" resnet50 224 32 2 20 cuda >"$rslog" 2>&1
    resnet_rc=$?
    cat "$rslog"
    case $resnet_rc in
      0) resnet="ok: $(grep -o 'train_img_per_s [0-9.]*' "$rslog") images/s" ;;
      124|137) resnet="TIMED OUT after ${resnet_timeout}s" ;;
      *) resnet="FAILED (exit $resnet_rc): $(tail -1 "$rslog")" ;;
    esac
  else
    resnet="not run: $carry has no bench_resnet (prepare again)"
  fi
  echo "== tandem train --device cuda --model resnet50 on the photo folder at 224 (1 epoch, 8 loader workers, ${resnet_photo_timeout}s) =="
  local rplog=$logdir/gpu-check-resnet-photos.log rphotos="not run" rphoto_rc=1
  if [ -d "$carry/photos/train" ]; then
    local t2=$(date +%s)
    timeout "$(within $resnet_photo_timeout)" "$carry/tandem" train --device cuda --epochs 1 --data "$carry/photos" \
      --model resnet50 --image-size 224 --batch-size 32 --eval-batch-size 64 --num-workers 8 --progress 0 \
      --optimizer sgd --lr 0.05 --nesterov --weight-decay 5e-5 --no-decay-bn-bias \
      --trace "$logdir/gpu-check-resnet-photos-trace.json" >"$rplog" 2>&1
    rphoto_rc=$?
    grep -E '^(epoch|  data-wait|advice)' "$rplog"
    rphotos="$(photo_outcome "$rphoto_rc" "$resnet_photo_timeout" "$rplog") in $(( $(date +%s) - t2 ))s"
  else
    rphotos="not run: $carry/photos has no photo folder (see --prepare's output)"
  fi

  # The CPU as a device next to the GPU: each batch split by measured speed.
  echo "== tandem train --devices cuda:0,cpu --split auto (1 epoch, 10k images, ${split_timeout}s) =="
  local splog=$logdir/gpu-check-split.log split="not run" split_rc=1
  if [ -f "$carry/data/train-images-idx3-ubyte.gz" ]; then
    local t3=$(date +%s)
    timeout "$(within $split_timeout)" "$carry/tandem" train --devices cuda:0,cpu --split auto --epochs 1 --data "$carry/data" \
      --progress 0 >"$splog" 2>&1
    split_rc=$?
    grep -E '^(thread budget|split|epoch|done)' "$splog"
    case $split_rc in
      0) split="ok: $(grep -m1 '^split:' "$splog")" ;;
      124|137) split="TIMED OUT after ${split_timeout}s" ;;
      *) split="FAILED (exit $split_rc): $(grep -m1 -E '^\[|rror' "$splog")" ;;
    esac
    split="$split in $(( $(date +%s) - t3 ))s"
  else
    split="not run: $carry/data has no Fashion-MNIST files"
  fi

  # A GPT-2 (124M layout, the shards' 4,096-token vocabulary) in bf16 for 20 optimizer steps:
  # the transformer kernels, the fused classifier and AdamW on the device; tokens/s.
  echo "== tandem train --device cuda --model gpt2 --precision bf16 on token shards (20 steps, ${gpt_timeout}s) =="
  local gptlog=$logdir/gpu-check-gpt.log gpt="not run" gpt_rc=1
  if [ -f "$carry/tokens/train.tok" ]; then
    local t5=$(date +%s)
    timeout "$(within $gpt_timeout)" "$carry/tandem" train --device cuda --model gpt2 --data "$carry/tokens" --precision bf16 \
      --max-steps 20 --eval-interval 10 --batch-size 8 --eval-batch-size 8 --lr 3e-4 --schedule constant --progress 0 \
      >"$gptlog" 2>&1
    gpt_rc=$?
    grep -E '^(tandem train|precision|step|epoch|done)' "$gptlog"
    case $gpt_rc in
      0) gpt="ok: $(grep -m1 -o '[0-9]* tokens/s' "$gptlog"), $(grep -o 'val_loss [0-9.]*' "$gptlog" | tail -1)" ;;
      124|137) gpt="TIMED OUT after ${gpt_timeout}s" ;;
      *) gpt="FAILED (exit $gpt_rc): $(grep -m1 -E '^\[|rror' "$gptlog")" ;;
    esac
    gpt="$gpt in $(( $(date +%s) - t5 ))s"
  else
    gpt="not run: $carry/tokens has no token shards (see --prepare's output)"
  fi

  # The same run with the parameters at home in pinned host memory (--param-device cpu): the
  # blocks streamed through three device slots, AdamW on the host (the device's AdamW kernel
  # rounds differently, so the check is the validation loss); tokens/s beside the resident run's.
  echo "== tandem train --device cuda --model gpt2 --precision bf16 --param-device cpu (20 steps, ${gpt_timeout}s) =="
  local gslog=$logdir/gpu-check-gpt-streamed.log streamed="not run" streamed_rc=1
  if [ "$gpt_rc" -eq 0 ]; then
    local t6=$(date +%s)
    timeout "$(within $gpt_timeout)" "$carry/tandem" train --device cuda --model gpt2 --data "$carry/tokens" --precision bf16 \
      --max-steps 20 --eval-interval 10 --batch-size 8 --eval-batch-size 8 --lr 3e-4 --schedule constant --progress 0 \
      --param-device cpu >"$gslog" 2>&1
    streamed_rc=$?
    grep -E '^(parameters|memory plan|  total|step|epoch|done)' "$gslog"
    case $streamed_rc in
      0) local va vb
         va=$(grep -o 'val_loss [0-9.]*' "$gptlog" | tail -1 | cut -d' ' -f2)
         vb=$(grep -o 'val_loss [0-9.]*' "$gslog" | tail -1 | cut -d' ' -f2)
         if awk -v a="${va:-nan}" -v b="${vb:-nan}" 'BEGIN { d = a - b; exit !(a == a + 0 && b == b + 0 && d < 0.05 && d > -0.05) }'; then
           streamed="ok: $(grep -m1 -o '[0-9]* tokens/s' "$gslog") (resident $(grep -m1 -o '[0-9]* tokens/s' "$gptlog")), val_loss $vb (resident $va)"
         else
           streamed="FAILED: val_loss $vb against the resident run's $va (expected within 0.05)"
           streamed_rc=1
         fi ;;
      124|137) streamed="TIMED OUT after ${gpt_timeout}s" ;;
      *) streamed="FAILED (exit $streamed_rc): $(grep -m1 -E '^\[|rror' "$gslog")" ;;
    esac
    streamed="$streamed in $(( $(date +%s) - t6 ))s"
  else
    streamed="not run: the resident gpt2 run failed"
  fi

  # --zero 3 under mpirun, 2 ranks on the one GPU (host state sharded, blocks all-gathered
  # into pinned stages): the same 20 steps' val_loss as the streamed run, within 0.05.
  echo "== mpirun -np 2 tandem train --device cuda:0 --model gpt2 --precision bf16 --param-device cpu --zero 3 =="
  local zlog=$logdir/gpu-check-gpt-zero3.log zero3="not run: no mpirun here" mpirun_bin
  mpirun_bin=$(command -v mpirun || true)
  if [ -n "$mpirun_bin" ] && [ "$streamed_rc" -eq 0 ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout "$(within $gpt_timeout)" "$mpirun_bin" --oversubscribe \
      -np 2 "$carry/tandem" train --device cuda:0 --model gpt2 --data "$carry/tokens" --precision bf16 --max-steps 20 \
      --eval-interval 10 --batch-size 4 --eval-batch-size 8 --lr 3e-4 --schedule constant --progress 0 --param-device cpu \
      --zero 3 >"$zlog" 2>&1
    local zrc=$? za zb
    grep -E '^(ZeRO-3|step|done|distributed: 2)' "$zlog"
    za=$(grep -o 'val_loss [0-9.]*' "$gslog" | tail -1 | cut -d' ' -f2); zb=$(grep -o 'val_loss [0-9.]*' "$zlog" | tail -1 | cut -d' ' -f2)
    zero3="FAILED (exit $zrc, val_loss ${zb:-none} against ${za:-none}): $(grep -m1 -E '^\[|rror' "$zlog")"
    [ $zrc -eq 0 ] && awk -v a="${za:-nan}" -v b="${zb:-nan}" 'BEGIN { d = a - b; exit !(a == a + 0 && b == b + 0 && d < 0.05 && d > -0.05) }' &&
      zero3="ok: $(grep -m1 -o '[0-9]* tokens/s' "$zlog") on rank 0, val_loss $zb (streamed $za)"
    # Plain data parallel (--zero 0): whole host homes on each rank, each part's host
    # gradients all-reduced before its update; the same bound.
    local dlog=$logdir/gpu-check-gpt-stream-dp.log drc db
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout "$(within $gpt_timeout)" "$mpirun_bin" --oversubscribe \
      -np 2 "$carry/tandem" train --device cuda:0 --model gpt2 --data "$carry/tokens" --precision bf16 --max-steps 20 \
      --eval-interval 10 --batch-size 4 --eval-batch-size 8 --lr 3e-4 --schedule constant --progress 0 --param-device cpu \
      >"$dlog" 2>&1
    drc=$?; db=$(grep -o 'val_loss [0-9.]*' "$dlog" | tail -1 | cut -d' ' -f2)
    if [ $drc -eq 0 ] && awk -v a="${za:-nan}" -v b="${db:-nan}" 'BEGIN { d = a - b; exit !(a == a + 0 && b == b + 0 && d < 0.05 && d > -0.05) }'; then
      zero3="$zero3; --zero 0 streamed: val_loss $db"
    else
      zero3="FAILED: --zero 0 streamed (exit $drc, val_loss ${db:-none} against ${za:-none}): $(grep -m1 -E '^\[|rror' "$dlog"); --zero 3: $zero3"
    fi
  fi

  # gpt2-xl (1.56B) in bf16 with its parameters at home on the host and the device planned
  # at 8 GiB (--device-memory-budget: the plan must fit it; the pool is not capped), 6 steps
  # with --trace and the host AdamW delayed one step (--offload-delay 1, so that it overlaps the
  # next step's forward and backward): tokens/s, the share of the copies hidden behind compute,
  # the advice and the device's high-water mark from the metrics file; then the same model
  # resident, 6 steps.
  echo "== gpt2-xl bf16 --param-device cpu --offload-delay 1 with an 8 GiB device budget, then resident (6 steps each, ${xl_timeout}s) =="
  local xllog=$logdir/gpu-check-xl.log xl="not run" xl_rc=1
  if [ -f "$carry/tokens/train.tok" ]; then
    local t7=$(date +%s) xlflags="--device cuda --model gpt2-xl --data $carry/tokens --precision bf16 --max-steps 6
      --eval-interval 100 --batch-size 4 --eval-batch-size 4 --block-size 512 --lr 1e-4 --schedule constant --progress 0"
    # shellcheck disable=SC2086
    timeout "$(within $xl_timeout)" "$carry/tandem" train $xlflags --param-device cpu --offload-delay 1 --device-memory-budget 8GiB \
      --trace "$logdir/gpu-check-xl.trace.json" --metrics-file "$logdir/gpu-check-xl.jsonl" >"$xllog" 2>&1
    xl_rc=$?
    grep -E '^(parameters|  total|  copies|  host optimizer|advice|epoch|done)' "$xllog"
    if [ "$xl_rc" -eq 0 ]; then
      local peak
      peak=$(grep -o '"device_peak_reserved_bytes":[0-9]*' "$logdir/gpu-check-xl.jsonl" | tail -1 | cut -d: -f2)
      # shellcheck disable=SC2086
      timeout "$(within $xl_timeout)" "$carry/tandem" train $xlflags >"$xllog.resident" 2>&1
      xl="ok: streamed $(grep -m1 -o '[0-9]* tokens/s' "$xllog"), resident $(grep -m1 -o '[0-9]* tokens/s' "$xllog.resident" || echo "failed (exit $?)"); $(grep -m1 -o '[0-9]*% of their time hidden' "$xllog") behind compute; device high-water $(( ${peak:-0} / 1048576 )) MiB"
    else
      case $xl_rc in
        124|137) xl="TIMED OUT after ${xl_timeout}s" ;;
        *) xl="FAILED (exit $xl_rc): $(grep -m1 -E '^\[|rror' "$xllog")" ;;
      esac
    fi
    xl="$xl in $(( $(date +%s) - t7 ))s"
  else
    xl="not run: $carry/tokens has no token shards (see --prepare's output)"
  fi

  # The Python module's CUDA prefetcher (python/tandem/prefetch.py, torch only) under the
  # machine's own torch: copies on a side stream, the loop's stream waiting on their events.
  echo "== tandem.data.CudaPrefetcher under python3's torch (${prefetch_timeout}s) =="
  local pflog=$logdir/gpu-check-prefetch.log prefetch="not run" prefetch_rc=1
  TANDEM_REQUIRE_CUDA=1 PYTHONPATH="$root/python/tests" timeout "$(within $prefetch_timeout)" \
    python3 "$root/python/tests/test_prefetch.py" >"$pflog" 2>&1
  prefetch_rc=$?
  tail -4 "$pflog"
  case $prefetch_rc in
    0) prefetch="ok: $(grep -m1 -E '^Ran [0-9]+ tests' "$pflog"), $(tail -1 "$pflog")" ;;
    124|137) prefetch="TIMED OUT after ${prefetch_timeout}s" ;;
    *) prefetch="FAILED (exit $prefetch_rc): $(grep -m1 -E '^(FAIL|ERROR):' "$pflog")" ;;
  esac

  # Serving while training on the one GPU: inference on a stream of its own at the greatest
  # priority (--serve-device cuda) beside the training step on the default stream, under a
  # closed loop of 8 clients (serve_load --until-gone) until the epoch ends.
  echo "== tandem train --device cuda --serve --serve-device cuda under 8 clients (1 epoch, ${serve_timeout}s) =="
  local svlog=$logdir/gpu-check-serve.log sllog=$logdir/gpu-check-serve-load.log serving="not run" serve_rc=1
  if [ -f "$carry/data/train-images-idx3-ubyte.gz" ] && [ -x "$carry/serve_load" ]; then
    local t4=$(date +%s) port_file=$logdir/gpu-check-serve.port port="" spid load_rc=1 i
    rm -f "$port_file"
    timeout "$(within $serve_timeout)" "$carry/tandem" train --device cuda --epochs 1 --data "$carry/data" --progress 0 \
      --serve 127.0.0.1:0 --serve-device cuda --publish-every 20 --port-file "$port_file" >"$svlog" 2>&1 &
    spid=$!
    for i in $(seq 300); do  # the port once the server listens (30 s at most)
      [ -s "$port_file" ] && { port=$(cat "$port_file"); break; }
      kill -0 "$spid" 2>/dev/null || break
      sleep 0.1
    done
    if [ -n "$port" ]; then
      timeout "$(within $serve_timeout)" "$carry/serve_load" "$port" 2000 8 --until-gone >"$sllog" 2>&1
      load_rc=$?
    fi
    wait "$spid"
    serve_rc=$?
    grep -E '^(serving on|epoch|served|publish to first answer)' "$svlog"
    cat "$sllog" 2>/dev/null
    case $serve_rc in
      0) if [ "$load_rc" -eq 0 ]; then
           serving="ok: $(awk '{ for (i = 1; i < NF; i++) if ($i ~ /^(req_per_s|p50_ms|p99_ms|versions|failures)$/) printf "%s %s ", $i, $(i+1) }' "$sllog")"
         else
           serving="FAILED: the load client saw failed requests or versions going back (exit $load_rc): $(tail -1 "$sllog" 2>/dev/null)"
           serve_rc=1
         fi ;;
      124|137) serving="TIMED OUT after ${serve_timeout}s" ;;
      *) serving="FAILED (exit $serve_rc): $(grep -m1 -E '^\[|rror' "$svlog")" ;;
    esac
    serving="$serving in $(( $(date +%s) - t4 ))s"
  else
    serving="not run: $carry has no Fashion-MNIST files or no serve_load (prepare again)"
  fi

  echo "== summary =="
  echo "  device:   $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "  tests:    ${#names[@]} listed: $passed passed, $failed failed, $skipped skipped, $notrun not run, $expected skipped as expected (${tests_s}s)"
  local b
  for b in "${bad[@]}"; do echo "    - $b"; done
  echo "  training: $train"
  echo "  NVML:     $(grep -m1 -o 'gpu [0-9]*% [0-9.]*/[0-9.]* GiB' "$trlog" 2>/dev/null || echo "no figures (see $trlog)")"
  echo "  photos:   $photos"
  echo "  resnet50: synthetic $resnet; photos $rphotos"
  for p in "${prec_summary[@]}"; do echo "  precision: $p"; done
  echo "  split:    $split"
  echo "  gpt2:     $gpt"
  echo "  streamed: $streamed"
  echo "  zero 3:   $zero3"
  echo "  gpt2-xl:  $xl"
  echo "  serving:  $serving"
  echo "  prefetch: $prefetch"
  echo "  logs:     $log, $tlog, $trlog, $phlog, $splog, $svlog"
  if [ "${#names[@]}" -eq 0 ] || [ $((failed + skipped + notrun)) -ne 0 ] || [ "$passed" -eq 0 ] || [ "$train_rc" -ne 0 ] ||
     [ "$photo_rc" -ne 0 ] || [ "$resnet_rc" -ne 0 ] || [ "$rphoto_rc" -ne 0 ] || [ "$prec_failed" -ne 0 ] ||
     [ "$split_rc" -ne 0 ] || [ "$serve_rc" -ne 0 ] || [ "$gpt_rc" -ne 0 ] || [ "$streamed_rc" -ne 0 ] || [[ $zero3 == FAILED* ]] || [ "$xl_rc" -ne 0 ] || [ "$prefetch_rc" -ne 0 ]; then
    echo "gpu-check: FAILED (${#names[@]} tests listed, $failed failed, $skipped skipped, $notrun not run; training exit $train_rc, photo run exit $photo_rc, resnet50 exit $resnet_rc, resnet50 photo run exit $rphoto_rc, precision failed $prec_failed, split run exit $split_rc, serving run exit $serve_rc, gpt2 run exit $gpt_rc, streamed gpt2 run exit $streamed_rc, zero 3 ${zero3%%:*}, gpt2-xl streamed run exit $xl_rc, prefetcher tests exit $prefetch_rc)"
    exit 1
  fi
  echo "gpu-check: PASSED in $(elapsed)s"
}

case "${1:-}" in
  --prepare) shift; prepare "$@" ;;
  -h|--help) sed -n '2,51p' "$0" ;;
  *) run_check "$@" ;;
esac
