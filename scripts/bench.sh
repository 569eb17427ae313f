#!/usr/bin/env bash
# make bench: tandem against its peers, measured in one run on this machine, with ratios.
#   training images/s      tandem train (1 epoch)    vs PyTorch torch_fmnist.py (same model, batch, threads)
#   precision              tandem train --precision fp32 | bf16 vs torch_fmnist_fast.py in the same
#                          precision (bf16: autocast), eager
#   loader images/s        bench_loader              vs torch.utils.data.DataLoader (same augmentation)
#   CPU Adam params/s      bench_adam                vs torch.optim.Adam and AdamW (default, foreach, fused;
#                                                    goal >= 1.0x fused), and the fractions of two bandwidths
#                                                    at 28 B per parameter: stream7 (Adam's 4 reads, 3 writes)
#                                                    and the float STREAM triad
#   offloaded optimizer    tandem train on virt with --optimizer-device device | cpu (delay 0, 1; fp32
#                          and bf16): images/s and the MiB per step down and up (bf16: half);
#                          TANDEM_BENCH_OFFLOAD=0 skips it
#   batch split            tandem train on two modelled virt devices alone and with --devices ... --split auto:
#                          images/s and the split's ratio to the sum (goal >= 0.9x); TANDEM_BENCH_SPLIT=0 skips it
#   ResNet training img/s  bench_resnet              vs PyTorch torch_resnet.py (same model, batch, threads,
#                          fp32 and bf16, compute only): resnet18-cifar 32x32 batch 128, resnet50 224 batch 32;
#                          TANDEM_BENCH_RESNET=0 skips it, TANDEM_BENCH_RESNET_STEPS sets the timed steps,
#                          TANDEM_BENCH_RESNET_PRECISIONS the precisions (default "fp32 bf16"); then fp32
#                          again with both sides limited to AVX2 (TANDEM_BENCH_RESNET_FLOOR=0 skips it)
#   batch norm ms/call     bench_batch_norm          vs PyTorch scripts/peers/torch_batch_norm.py (channels_last,
#                          f32 and bf16, fused ReLU); TANDEM_BENCH_BN=0 skips it
#   language model         tandem train --model gpt-mini (tokens/s) vs torch_gpt.py eager and --compile, same
#                          config and precision (scripts/bench-lm.sh); TANDEM_BENCH_LM=0 skips it
#   parameter streaming    tandem train --model gpt-mini on virt resident vs --param-device cpu: tokens/s
#                          and their ratio (goal >= 0.95x); TANDEM_BENCH_STREAM=0 skips it
#   binding                2 ranks (tcp launch) with the CPU optimizer, --bind none vs cores: ms per step
#                          (scripts/bench-bind.sh); TANDEM_BENCH_BIND=0 skips it
#   disk tier              bench_disk: raw sequential O_DIRECT write and read GB/s of TANDEM_BENCH_DISK_DIR
#                          (default /var/tmp) at the disk tier's 1 MiB requests, 8 in flight; then gpt-mini
#                          on virt with --optimizer-state-device disk there: its "disk:" line against that
#                          raw figure (goal >= 0.7x); TANDEM_BENCH_DISK=0 skips it
#   overlap efficiency     bench_overlap             max(stage time) / step time on virt (goal >= 0.95), and
#                                                    cpu images/s with num_workers 0 vs 1, 2 and auto
# PyTorch: /opt/peers/bin/python (a venv with current torch, see the peers README) when present,
# else Debian's /usr/bin/python3 with python3-torch. Set TANDEM_PEERS to the peers folder
# (default ../shared/peers) and TANDEM_BENCH_THREADS (default 2).
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
peers=${TANDEM_PEERS:-$root/../shared/peers}
threads=${TANDEM_BENCH_THREADS:-2}
py=""
for cand in /opt/peers/bin/python /usr/bin/python3; do
  if [ -x "$cand" ] && "$cand" -c 'import torch' 2>/dev/null; then py=$cand; break; fi
done
have_peers=1
if [ -z "$py" ] || [ ! -f "$peers/torch_fmnist.py" ]; then
  have_peers=0
  echo "bench: no PyTorch peer (need $peers/torch_fmnist.py and a python with torch); tandem figures only"
else
  echo "bench: peer $($py -c 'import torch; print("PyTorch", torch.__version__)') at $py"
fi
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }'; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo
echo "== training: fmnist-cnn, batch 128, $threads threads, 1 epoch =="
"$root/$build/tandem" train --epochs 1 --threads "$threads" --progress 0 --schedule constant --optimizer adam \
  --lr 1e-3 --weight-decay 0 > "$out/tandem_train.txt" 2>&1
t_train=$(awk '/^epoch 1\/1/ { for (i = 1; i <= NF; i++) if ($i == "img/s") print $(i-1) }' "$out/tandem_train.txt")
echo "tandem   train_img_per_s ${t_train:-?}"
if [ $have_peers = 1 ]; then
  (cd "$peers" && "$py" torch_fmnist.py 1 0 "$threads") > "$out/torch_train.txt" 2>&1
  p_train=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "train_img_per_s") print $(i+1) }' "$out/torch_train.txt")
  echo "pytorch  train_img_per_s ${p_train:-?}"
  echo "ratio    training $(ratio "${t_train:-0}" "${p_train:-0}")   (goal >= 1.5x)"
fi

# Mixed precision: tandem --precision fp32 and bf16 against the fastest PyTorch script in the
# same precision (torch_fmnist_fast.py: data set in one tensor, batch-wise augmentation,
# channels_last, bf16 autocast), both measured here, now. The goals are those of the mixed-
# precision work: bf16 >= 1.5x PyTorch bf16 autocast, fp32 >= 1.3x PyTorch fp32.
echo
echo "== precision: fmnist-cnn, batch 128, $threads threads, 1 epoch, vs torch_fmnist_fast.py (eager) =="
for prec in fp32 bf16; do
  "$root/$build/tandem" train --epochs 1 --threads "$threads" --progress 0 --schedule constant --optimizer adam \
    --lr 1e-3 --weight-decay 0 --precision "$prec" > "$out/tandem_$prec.txt" 2>&1
  t_prec=$(awk '/^epoch 1\/1/ { for (i = 1; i <= NF; i++) if ($i == "img/s") print $(i-1) }' "$out/tandem_$prec.txt")
  echo "tandem   $prec train_img_per_s ${t_prec:-?}"
  if [ $have_peers = 1 ] && [ -f "$peers/torch_fmnist_fast.py" ]; then
    (cd "$peers" && "$py" torch_fmnist_fast.py 1 "$threads" "$prec" eager) > "$out/torch_fast_$prec.txt" 2>&1
    p_prec=$(awk '/^epoch 1 / { for (i = 1; i <= NF; i++) if ($i == "train_img_per_s") print $(i+1) }' "$out/torch_fast_$prec.txt")
    goal=$([ "$prec" = bf16 ] && echo 1.5 || echo 1.3)
    echo "pytorch  $prec train_img_per_s ${p_prec:-?} (torch_fmnist_fast.py 1 $threads $prec eager)"
    echo "ratio    $prec training $(ratio "${t_prec:-0}" "${p_prec:-0}")   (goal >= ${goal}x)"
  fi
done
if [ "${TANDEM_BENCH_SPLIT:-1}" != 0 ]; then
  # Modelled devices (tflops, compute=none): their speeds are set, not taken from this machine's
  # cores, so the figure shows what the split itself costs (host issue, combine, broadcast).
  echo
  echo "== batch split: fmnist-cnn, batch 128, 1 epoch on virt devices modelled at 0.1 and 0.05 TFLOP/s =="
  fast="virt:0?tflops=0.1&compute=none" slow="virt:1?tflops=0.05&compute=none"
  split_rate() { awk '/^epoch 1\/1/ { for (i = 1; i <= NF; i++) if ($i == "img/s") print $(i-1) }' "$1"; }
  common=(--epochs 1 --threads "$threads" --progress 0 --schedule constant --optimizer adam --lr 1e-3 --weight-decay 0)
  "$root/$build/tandem" train "${common[@]}" --device "$fast" > "$out/split_fast.txt" 2>&1
  "$root/$build/tandem" train "${common[@]}" --device "$slow" > "$out/split_slow.txt" 2>&1
  "$root/$build/tandem" train "${common[@]}" --devices "$fast,$slow" --split auto > "$out/split_both.txt" 2>&1
  s_fast=$(split_rate "$out/split_fast.txt") s_slow=$(split_rate "$out/split_slow.txt") s_both=$(split_rate "$out/split_both.txt")
  echo "tandem   virt:0 alone ${s_fast:-?} img/s, virt:1 alone ${s_slow:-?} img/s, split ${s_both:-?} img/s"
  grep -m1 '^split:' "$out/split_both.txt" || tail -3 "$out/split_both.txt"
  sum=$(awk -v a="${s_fast:-0}" -v b="${s_slow:-0}" 'BEGIN { print a + b }')
  echo "ratio    split vs sum of the two alone ($sum img/s): $(ratio "${s_both:-0}" "$sum")   (goal >= 0.9x)"
fi

# Language model: gpt-mini tokens/s vs torch_gpt.py eager and --compile (scripts/bench-lm.sh).
if [ "${TANDEM_BENCH_LM:-1}" != 0 ]; then
  "$root/scripts/bench-lm.sh" "$root/$build" "$([ $have_peers = 1 ] && echo "$py")" "$peers" "$threads"
fi

echo
echo "== loader: Fashion-MNIST train, pad-2 crop, flip, normalize, batch 128, shuffle =="
"$root/$build/bench_loader" | tee "$out/tandem_loader.txt"
t_best=$(awk '/img_per_s/ { for (i = 1; i <= NF; i++) if ($i == "img_per_s" && $(i+1) > m) m = $(i+1) } END { print m }' "$out/tandem_loader.txt")
if [ $have_peers = 1 ]; then
  p_best=0
  for w in 0 2; do
    (cd "$peers" && "$py" torch_loader.py $w) | tee -a "$out/torch_loader.txt"
  done
  p_best=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "loader_img_per_s" && $(i+1) > m) m = $(i+1) } END { print m }' "$out/torch_loader.txt")
  echo "ratio    loader best tandem ${t_best} vs best torch ${p_best}: $(ratio "$t_best" "$p_best")   (goal >= 20x)"
fi

echo
echo "== CPU Adam: 50M fp32 parameters, $threads threads =="
"$root/$build/bench_adam" "$threads" 50 | tee "$out/tandem_adam.txt"
# Best level per optimizer; its fractions of the stream7 ceiling (Adam's 28 B/param pattern) and
# of the triad; then torch.optim.Adam / AdamW (default, foreach, fused) measured right after.
# tandem's figure is its best of 10 steps, torch_adam.py's the median of 5: the ratios give
# both, tandem's best and its median (the like-for-like one) against the peer's median.
adam_best() { awk -v algo="$1" -v key="$2" '$1 == algo && $2 == "level" && /Mparams_per_s/ {
  for (i = 1; i <= NF; i++) { if ($i == "Mparams_per_s") x = $(i+1); if ($i == key) y = $(i+1) }
  if (x + 0 > m + 0) { m = x; v = y } } END { print v }' "$out/tandem_adam.txt"; }
stream7=$(awk '/^stream7_GBps/ { print $2 }' "$out/tandem_adam.txt")
triad=$(awk '/^triad_GBps/ { print $2 }' "$out/tandem_adam.txt")
for algo in adam adamw; do
  echo "tandem   $algo $(adam_best $algo Mparams_per_s) Mparams/s, 28 B/param: $(adam_best $algo GBps_28B) GB/s =" \
    "$(adam_best $algo ceiling_frac) of stream7 ${stream7:-?} GB/s, $(adam_best $algo triad_frac) of triad ${triad:-?} GB/s"
done
if [ $have_peers = 1 ]; then
  (cd "$peers" && "$py" torch_adam.py 50 "$threads") | tee "$out/torch_adam.txt"
  # torch_adam.py names the implementation "default", "{'foreach': True}" or "{'fused': True}".
  for algo in adam adamw; do
    cls=$([ $algo = adam ] && echo Adam || echo AdamW)
    t_adam=$(adam_best $algo Mparams_per_s)
    t_med=$(adam_best $algo median_Mparams_per_s)
    for impl in default foreach fused; do
      p_adam=$(awk -v cls="$cls" -v impl="$impl" '$1 == cls && index($0, impl) && /Mparams_per_s/ {
        for (i = 1; i <= NF; i++) if ($i == "Mparams_per_s") print $(i+1) }' "$out/torch_adam.txt")
      goal=$([ $impl = fused ] && echo "   (goal >= 1.0x)")
      if [ -z "$p_adam" ]; then
        echo "ratio    $algo vs torch.optim.$cls $impl: unavailable in this PyTorch"
      else
        echo "ratio    $algo tandem ${t_adam} (median ${t_med}) vs torch.optim.$cls $impl ${p_adam} Mparams/s:" \
          "$(ratio "$t_adam" "$p_adam") (median $(ratio "$t_med" "$p_adam"))$goal"
      fi
    done
  done
fi

# Batch norm on channels_last activations: the NHWC kernels, the NCHW ones on the same data and
# the old path through NCHW copies, and PyTorch's channels_last batch norm (minimum of 20 calls).
if [ "${TANDEM_BENCH_BN:-1}" = 1 ]; then
  echo
  echo "== batch norm, channels_last, fused ReLU, $threads threads (ms per call, minimum of 20) =="
  OMP_NUM_THREADS=$threads "$root/$build/bench_batch_norm" 20 | tee "$out/tandem_bn.txt"
  if [ $have_peers = 1 ]; then
    "$py" "$root/scripts/peers/torch_batch_norm.py" 20 "$threads" | tee "$out/torch_bn.txt"
    # "bn [128, 32, 28, 28] f32 fwd nhwc ms 1.6 min_ms 1.4" vs "bn [128, 32, 28, 28] f32 fwd torch ms 1.9 min_ms 1.7"
    # fields: bn $2..$5 shape, $6 dtype, $7 op, $8 way, ms $10, min_ms $12
    awk 'FNR == NR { if ($8 == "torch") p[$2 $3 $4 $5 $6 $7] = $12; next }
         $8 == "nhwc" && ($2 $3 $4 $5 $6 $7) in p {
           printf "ratio    bn %s %s %s %s %s %s torch %s ms / nhwc %s ms: %.2fx\n", $2, $3, $4, $5, $6, $7,
             p[$2 $3 $4 $5 $6 $7], $12, p[$2 $3 $4 $5 $6 $7] / $12 }' "$out/torch_bn.txt" "$out/tandem_bn.txt"
  fi
fi

# ResNets, compute only, the same steps as the peer script (random input made once, SGD momentum
# 0.9 with weight decay, 2 warm-up steps, then the timed ones); fp32 and bf16 (torch: autocast)
# on both sides. TANDEM_BENCH_RESNET_PRECISIONS narrows the list (e.g. "fp32").
if [ "${TANDEM_BENCH_RESNET:-1}" = 1 ]; then
  rsteps=${TANDEM_BENCH_RESNET_STEPS:-5}
  for prec in ${TANDEM_BENCH_RESNET_PRECISIONS:-fp32 bf16}; do
    for spec in "resnet18-cifar 32 128" "resnet50 224 32"; do
      set -- $spec
      echo
      echo "== training: $1 ${2}x${2}, batch $3, $threads threads, $prec, $rsteps timed steps =="
      "$root/$build/bench_resnet" "$1" "$2" "$3" "$threads" "$rsteps" cpu "$prec" | tee "$out/tandem_resnet.txt"
      t_res=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "train_img_per_s") print $(i+1) }' "$out/tandem_resnet.txt")
      if [ $have_peers = 1 ] && [ -f "$peers/torch_resnet.py" ]; then
        "$py" "$peers/torch_resnet.py" "$1" "$2" "$3" "$threads" "$prec" "$rsteps" 2>&1 | tail -1 | tee "$out/torch_resnet.txt"
        p_res=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "train_img_per_s") print $(i+1) }' "$out/torch_resnet.txt")
        echo "ratio    $1 $prec training $(ratio "${t_res:-0}" "${p_res:-0}")   (goal >= 1.0x)"
      fi
    done
  done
  # The same fp32 comparison with both sides limited to tandem's floor (AVX2 + FMA): what an
  # AVX2-only CPU runs (docs/cpu.md). TANDEM_BENCH_RESNET_FLOOR=0 skips it.
  if [ "${TANDEM_BENCH_RESNET_FLOOR:-1}" = 1 ]; then
    for spec in "resnet18-cifar 32 128" "resnet50 224 32"; do
      set -- $spec
      echo
      echo "== training at the avx2 floor: $1 ${2}x${2}, batch $3, $threads threads, fp32, $rsteps timed steps =="
      TANDEM_MAX_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 "$root/$build/bench_resnet" "$1" "$2" "$3" "$threads" "$rsteps" cpu fp32 \
        | tee "$out/tandem_resnet.txt"
      t_res=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "train_img_per_s") print $(i+1) }' "$out/tandem_resnet.txt")
      if [ $have_peers = 1 ] && [ -f "$peers/torch_resnet.py" ]; then
        ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 "$py" "$peers/torch_resnet.py" "$1" "$2" "$3" "$threads" fp32 "$rsteps" \
          2>&1 | tail -1 | tee "$out/torch_resnet.txt"
        p_res=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "train_img_per_s") print $(i+1) }' "$out/torch_resnet.txt")
        echo "ratio    $1 fp32 training at avx2 $(ratio "${t_res:-0}" "${p_res:-0}")   (goal >= 1.1x)"
      fi
    done
  fi
  set --
fi

# The CPU-offloaded optimizer on the virtual device (its compute shares these cores with the
# update thread, so this shows the cost of the pipeline rather than a GPU's gain).
if [ "${TANDEM_BENCH_OFFLOAD:-1}" = 1 ]; then
  echo
  echo "== offloaded optimizer: fmnist-cnn on virt, 1 epoch, $threads threads =="
  for opts in "--optimizer-device device" "--optimizer-device cpu --offload-delay 0" \
              "--optimizer-device cpu --offload-delay 1" "--optimizer-device device --precision bf16" \
              "--optimizer-device cpu --offload-delay 0 --precision bf16" \
              "--optimizer-device cpu --offload-delay 1 --precision bf16"; do
    # shellcheck disable=SC2086
    "$root/$build/tandem" train --device virt --epochs 1 --threads "$threads" --progress 0 $opts > "$out/offload.txt" 2>&1
    # The banner's offload note: "per step X MiB of <dtype> gradients down, Y MiB of parameters up".
    awk -v o="$opts" '/^epoch 1\/1/ { for (i = 1; i <= NF; i++) { if ($i == "img/s") ips = $(i-1); if ($i == "test_acc") acc = $(i+1) } }
      /gradients down/ { for (i = 1; i <= NF; i++) { if ($i == "step") down = $(i+1); if ($i == "down,") up = $(i+1) } }
      END { printf "virt %-58s train_img_per_s %s test_acc %s", o, ips, acc
            if (down != "") printf " MiB_per_step_down %s up %s", down, up
            printf "\n" }' "$out/offload.txt"
  done
fi

# Parameters at home on the host (--param-device cpu) against the same GPT resident on virt
# with real compute: each block uploaded into a device slot before its compute and its
# gradients downloaded after, AdamW on the host; the copies run on virt's copy streams beside
# the compute on these cores. Runs alternate (resident, streamed, twice); the best of each.
if [ "${TANDEM_BENCH_STREAM:-1}" = 1 ]; then
  echo
  echo "== parameter streaming: gpt-mini on virt, batch 8, 40 steps, $threads threads =="
  lmdata=$("$root/scripts/lm-data.sh" "$root/$build" 2>"$out/lmdata.txt") || { tail -2 "$out/lmdata.txt"; lmdata=""; }
  if [ -n "$lmdata" ]; then
    for round in 1 2; do
      for opts in "--device virt:0" "--device virt:0 --param-device cpu"; do
        # shellcheck disable=SC2086
        "$root/$build/tandem" train --model gpt-mini --data "$lmdata" --batch-size 8 --eval-batch-size 8 \
          --max-steps 40 --eval-interval 1000 --warmup-steps 0 --threads "$threads" --progress 0 $opts \
          > "$out/stream.txt" 2>&1
        rate=$(grep -m1 -o '[0-9.]* tokens/s' "$out/stream.txt" | tail -1 | cut -d' ' -f1)
        echo "virt gpt-mini ${opts#--device virt:0} round $round tokens_per_s ${rate:-?}" | tr -s ' ' | tee -a "$out/stream_rates.txt"
      done
    done
    awk '/tokens_per_s/ { r = $NF; if ($3 == "--param-device") { if (r > s) s = r } else if (r > d) d = r }
         END { if (d > 0) printf "ratio    streamed vs resident tokens/s: %.3fx (%s vs %s; goal >= 0.95x)\n", s / d, s, d }' \
      "$out/stream_rates.txt"
  fi
fi

# --bind: the CPU optimizer's step time with each rank's update thread and loader worker bound
# to its cores, against unbound (scripts/bench-bind.sh); TANDEM_BENCH_BIND=0 skips it.
if [ "${TANDEM_BENCH_BIND:-1}" = 1 ]; then
  echo
  "$root/scripts/bench-bind.sh" "$build"
fi

# The disk tier: the folder's raw bandwidth at the tier's request size and depth, then a run
# whose optimizer state lives there (the disk's busy-time rates of its "disk:" line).
if [ "${TANDEM_BENCH_DISK:-1}" = 1 ]; then
  disk_dir=${TANDEM_BENCH_DISK_DIR:-/var/tmp}
  echo
  echo "== disk tier: raw O_DIRECT on $disk_dir (1 MiB requests, 8 in flight) vs --optimizer-state-device disk =="
  "$root/$build/bench_disk" "$disk_dir" 1024 1024 8 | tee "$out/disk_raw.txt"
  lmdata=${lmdata:-$("$root/scripts/lm-data.sh" "$root/$build" 2>"$out/lmdata.txt")}
  if [ -n "$lmdata" ]; then
    "$root/$build/tandem" train --model gpt-mini --data "$lmdata" --batch-size 8 --eval-batch-size 8 \
      --max-steps 20 --eval-interval 1000 --warmup-steps 0 --threads "$threads" --progress 0 --device virt:0 \
      --optimizer-device cpu --optimizer-state-device disk --offload-dir "$disk_dir" > "$out/disk_run.txt" 2>&1
    grep '^disk:' "$out/disk_run.txt" | tee -a "$out/disk_raw.txt"
    awk '/^disk write_GBps/ { w = $3; r = $5 }
         /^disk: read/ { for (i = 1; i <= NF; i++) if ($i ~ /^GB\/s/) { if (!rr) rr = $(i-1); else if (!ww) ww = $(i-1) } }
         END { if (r > 0 && w > 0) printf "ratio    disk tier read %.2fx, write %.2fx of raw (goal >= 0.7x)\n", rr / r, ww / w }' \
      "$out/disk_raw.txt"
  fi
fi

echo
echo "== overlap: efficiency on virt (input-bound, compute-bound); cpu images/s without and with the pipeline =="
"$root/$build/bench_overlap" | tee "$out/tandem_overlap.txt"
awk '/^overlap / { e = $4; printf "goal     overlap %s efficiency %s %s\n", $2, e, (e >= 0.95 ? "(>= 0.95: met)" : "(goal >= 0.95: missed)") }
     /^cpu_pipeline num_workers 0 / { base = $5 } /^cpu_pipeline num_workers (1|2) / { if ($5 > best) best = $5 }
     END { if (base > 0) printf "ratio    cpu pipeline best of 1-2 workers vs none: %.2fx\n", best / base }' "$out/tandem_overlap.txt"

# The image pipeline on real photos (scripts/make-photo-folder.sh: 5,000 JPEGs of about 500x375
# cut from Debian's mate-backgrounds, made once into TANDEM_PHOTOS, default <build>/photos, and
# packed beside it). TANDEM_BENCH_IMAGES=0 skips it.
if [ "${TANDEM_BENCH_IMAGES:-1}" = 1 ]; then
  echo
  echo "== images: decode + RandomResizedCrop 224 + flip + normalize, batch 64, 2 workers =="
  photos=${TANDEM_PHOTOS:-$root/$build/photos}
  if [ ! -d "$photos/train" ]; then
    BUILD_DIR="$root/$build" "$root/scripts/make-photo-folder.sh" "$photos" > "$out/photos.txt" 2>&1 ||
      { echo "bench: make-photo-folder failed:"; tail -3 "$out/photos.txt"; }
  fi
  if [ ! -f "$photos.packed/manifest.json" ]; then
    "$root/$build/tandem" pack "$photos" "$photos.packed" | tail -1
  fi
  "$root/$build/bench_images" "$photos" "$photos.packed" 4 2>/dev/null | tee "$out/tandem_images.txt"
  figure() { awk -v s="$1" -v w="$2" '$1 == "images" && $3 == s && $5 == w { print $9 }' "$out/tandem_images.txt"; }
  raw=$(awk '/decode_full_1thread/ { print $4 }' "$out/tandem_images.txt")
  t_folder=$(figure folder 2)
  t_packed=$(figure packed 2)
  echo "ratio    folder 2 workers ${t_folder:-?} vs ceiling 2 x ${raw:-?} (raw full decode x workers): $(ratio "${t_folder:-0}" "$(awk -v r="${raw:-0}" 'BEGIN { print 2 * r }')")   (goal >= 0.9x)"
  echo "ratio    packed vs folder, 2 workers: $(ratio "${t_packed:-0}" "${t_folder:-0}")   (goal >= 1.0x)"
  if [ $have_peers = 1 ]; then
    p_best=0
    for mode in pil tvio; do
      "$py" "$root/scripts/peers/torchvision_folder.py" "$photos/train" 2 224 64 40 "$mode" 2>&1 | tail -1 |
        tee -a "$out/torch_images.txt"
    done
    p_best=$(awk '/^torchvision_folder/ { for (i = 1; i <= NF; i++) if ($i == "img_per_s" && $(i+1) > m) m = $(i+1) } END { print m + 0 }' "$out/torch_images.txt")
    echo "ratio    folder 2 workers vs torchvision ImageFolder + DataLoader (best of pil, tvio) ${p_best}: $(ratio "${t_folder:-0}" "$p_best")   (goal >= 2x)"
    "$py" "$root/scripts/peers/dali_folder.py" "$photos/train" 2 224 64 40 2>&1 | tail -1 | tee "$out/dali_images.txt"
    d_rate=$(awk '/^dali_folder threads/ { for (i = 1; i <= NF; i++) if ($i == "img_per_s") print $(i+1) }' "$out/dali_images.txt")
    if [ -n "$d_rate" ]; then
      echo "ratio    folder 2 workers vs DALI CPU pipeline (2 threads) ${d_rate}: $(ratio "${t_folder:-0}" "$d_rate")"
    else
      echo "ratio    vs DALI: not measured ($(cat "$out/dali_images.txt"))"
    fi
  fi
fi
