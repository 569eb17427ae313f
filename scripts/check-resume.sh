#!/usr/bin/env bash
# Checks that a run stopped with kill -9 in the middle of epoch 3 and resumed with --resume
# gives the same final weights (SHA-256 of the --save file) and the same per-epoch figures as
# the uninterrupted run, on cpu and on virt with --optimizer-device cpu (delay 0 and the one-step
# delayed update, --offload-delay 1).
#   scripts/check-resume.sh [BUILD_DIR]     (default build; MODEL=mlp|fmnist-cnn, EPOCHS=4)
# Exit status 0 when every case matches, 1 otherwise.
set -u
BIN="${1:-build}/tandem"
MODEL="${MODEL:-mlp}"
EPOCHS="${EPOCHS:-4}"
EVERY="${EVERY:-50}"
[ -x "$BIN" ] || { echo "check-resume: $BIN not found (build the tandem target first)" >&2; exit 1; }
WORK="$(mktemp -d /tmp/check-resume.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
COMMON=(train --model "$MODEL" --epochs "$EPOCHS" --threads 1 --progress 0)

# The figures of each epoch line, without the timing columns (img/s, seconds).
figures() { grep -E '^epoch [0-9]+/' "$@" | sed -E 's/  [0-9]+ img\/s  [0-9.]+ s$//'; }
done_line() { grep '^done:' "$1" | sed -E 's/, wall .*$//'; }

# Prints the manifest's "epoch" and "step" as "E S", or nothing.
position() {
  [ -f "$1/latest.json" ] || return 0
  tr -d ' \n' < "$1/latest.json" | sed -E 's/.*"epoch":([0-9]+).*"step":([0-9]+).*/\1 \2/'
}

status=0
check() {
  local name="$1"; shift
  local dir="$WORK/$name"
  mkdir -p "$dir"
  echo "== $name: ${COMMON[*]} $*"
  "$BIN" "${COMMON[@]}" "$@" --save "$dir/full.safetensors" > "$dir/full.log" 2>&1 ||
    { echo "uninterrupted run failed:"; tail -3 "$dir/full.log"; status=1; return; }

  "$BIN" "${COMMON[@]}" "$@" --checkpoint-dir "$dir/ck" --checkpoint-every "$EVERY" \
    --save "$dir/resumed.safetensors" > "$dir/killed.log" 2>&1 &
  local pid=$! pos=""
  # Wait for a checkpoint taken inside epoch 3, then kill -9 a random moment later.
  while kill -0 "$pid" 2>/dev/null; do
    pos="$(position "$dir/ck")"
    [ -n "$pos" ] && [ "${pos% *}" -eq 3 ] && [ "${pos#* }" -gt 0 ] && break
    sleep 0.02
  done
  sleep "0.$((RANDOM % 3))$((RANDOM % 10))"
  if ! kill -9 "$pid" 2>/dev/null; then echo "the run ended before it was killed"; status=1; return; fi
  wait "$pid" 2>/dev/null
  echo "killed with kill -9 at epoch/step of the manifest: $(position "$dir/ck"); in the folder: $(ls "$dir/ck" | tr '\n' ' ')"

  "$BIN" "${COMMON[@]}" "$@" --checkpoint-dir "$dir/ck" --checkpoint-every "$EVERY" --resume \
    --save "$dir/resumed.safetensors" > "$dir/resumed.log" 2>&1 ||
    { echo "resumed run failed:"; tail -3 "$dir/resumed.log"; status=1; return; }
  grep -E '^resumed from|^warning' "$dir/resumed.log"
  grep -E '^checkpoint' "$dir/resumed.log" | tail -1

  local a b
  a="$(sha256sum < "$dir/full.safetensors" | cut -c1-64)"
  b="$(sha256sum < "$dir/resumed.safetensors" | cut -c1-64)"
  echo "sha256 uninterrupted $a"
  echo "sha256 resumed       $b"
  # Epochs 1-2 come from the killed run's output, 3 and on from the resumed one's.
  figures "$dir/full.log" > "$dir/full.fig"
  { figures "$dir/killed.log" | awk '$2+0 < 3'; figures "$dir/resumed.log"; } | sort -u -k2,2n > "$dir/resumed.fig"
  done_line "$dir/full.log" >> "$dir/full.fig"
  done_line "$dir/resumed.log" >> "$dir/resumed.fig"
  if [ "$a" = "$b" ] && diff "$dir/full.fig" "$dir/resumed.fig" > /dev/null; then
    echo "SAME weights and per-epoch figures:"
    sed 's/^/  /' "$dir/resumed.fig"
  else
    echo "DIFFERENT:"
    diff "$dir/full.fig" "$dir/resumed.fig"
    status=1
  fi
}

check cpu --device cpu
check virt-offload --device virt --optimizer-device cpu
check virt-offload-delay1 --device virt --optimizer-device cpu --offload-delay 1 --bucket-cap-mb 0.05
[ "$status" -eq 0 ] && echo "check-resume: all cases match" || echo "check-resume: MISMATCH"
exit "$status"
