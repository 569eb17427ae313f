#!/usr/bin/env bash
# The feature-composition matrix: every pair of 18 training features (and each feature alone)
# on a tiny GPT, each cell recorded as
#   works                  exit 0 and a finite train and test loss in the epoch line;
#   refused: LINE          exit 2 before the first step, with exactly one error line (a line
#                          that every rank of an mpirun job prints counts once; mpirun
#                          exits 2 too: the job is aborted with the rank's exit code);
#   BROKEN: WHY            anything else: a crash, a hang (killed by `timeout`), a non-finite
#                          loss, another exit status, more than one error line, an
#                          error after training started.
# A working cell that holds one of the features documented as bit-identical to the resident
# run (CPU optimizer, streamed parameters, recompute, CPU-held activations, checkpoint and
# resume) is also checked for identity: its --save file against the run of the cell's other
# features alone (or the plain run), and for checkpoints the resumed run's file against the
# uninterrupted one's. docs/composition.md holds the committed table and says more.
#
# Usage: scripts/compose-matrix.sh [--update] TANDEM OUTDIR [MPIEXEC]
#   TANDEM   the tandem binary;  OUTDIR  scratch folder (cells/*, matrix.tsv, matrix.md);
#   MPIEXEC  mpirun for the distributed cells (default: mpirun on PATH; "none": skip them).
#   --update rewrite the table in docs/composition.md from this run.
# Without --update the run is compared with the table in docs/composition.md; exit status:
#   0 every cell as committed, no BROKEN cell;
#   1 a BROKEN cell, or a cell that differs from the committed table (each one is printed);
#   77 (skipped) everything that ran is as committed, but mpirun is missing, so the
#      distributed cells did not run.
# Env: MATRIX_JOBS (runs at once, default 2), MATRIX_TIMEOUT (seconds per run, default 120),
#      MATRIX_ONLY (a regex of cell names to run, e.g. 'cpuopt|^bf16$'; only those are compared;
#      not with --update), MATRIX_DOC (the page to compare with or update).
set -u
mode=check
if [ "${1:-}" = "--update" ]; then mode=update; shift; fi
if [ $# -lt 2 ]; then
  sed -n '2,/^set -u/p' "$0" | sed '$d'
  exit 2
fi
tandem=$(realpath "$1")
out=$(realpath -m "$2")
mpiexec=${3:-mpirun}
here=$(cd "$(dirname "$0")/.." && pwd)
doc=${MATRIX_DOC:-$here/docs/composition.md}
jobs_at_once=${MATRIX_JOBS:-2}
limit=${MATRIX_TIMEOUT:-120}
only=${MATRIX_ONLY:-}
[ -x "$tandem" ] || { echo "compose-matrix: $tandem is not an executable" >&2; exit 2; }
if [ "$mpiexec" != none ] && ! command -v "$mpiexec" >/dev/null 2>&1; then mpiexec=none; fi
if [ "$mode" = update ] && [ -n "$only" ]; then
  echo "compose-matrix: --update rewrites the whole table: run every cell (no MATRIX_ONLY)" >&2
  exit 2
fi
if [ "$mode" = update ] && [ "$mpiexec" = none ]; then
  echo "compose-matrix: --update needs mpirun (the distributed cells would be lost)" >&2
  exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GOMP_SPINCOUNT=10000
rm -rf "$out/cells"
mkdir -p "$out/cells" "$out/data"

# ---- The features: names and flags (docs/composition.md describes them) -------------------------
features=(accum cpuopt delay stream recomp actcpu bf16 fp16 clip mom16 split place ckpt serve dp zero1 zero3 gcomp)
# Each feature's flags as "--flag value" pairs; delay, ckpt and serve also depend on the cell.
declare -A flagset=(
  [accum]="--grad-accum-steps 2" [cpuopt]="--optimizer-device cpu" [stream]="--param-device cpu"
  [recomp]="--recompute blocks" [actcpu]="--recompute blocks --activations-device cpu"
  [bf16]="--precision bf16" [fp16]="--precision fp16" [clip]="--clip-grad-norm 1"
  [mom16]="--optimizer-moments bf16" [split]="--devices virt:0,virt:1 --split 2,2"
  [place]="--place transformer.h.1=virt:1" [dp]="" [zero1]="--zero 1"
  [zero3]="--zero 3 --param-device cpu" [gcomp]="--grad-compression bf16")
distributed=" dp zero1 zero3 gcomp "
# Documented as giving the resident run's bits: their cells are checked for identity.
identical=" cpuopt stream recomp actcpu ckpt "
# Same mode family: one feature already is (or excludes) the other; not run as pairs.
dropped=" dp+zero1 dp+zero3 dp+gcomp zero1+zero3 bf16+fp16 recomp+actcpu stream+zero3 cpuopt+delay "
# The tiny GPT every cell trains: 2 blocks of width 32, windows of 32 tokens, batch 4, 4 steps
# (--max-steps 4 unless a feature says otherwise).
base=(train --model gpt2 --n-layer 2 --n-head 2 --n-embd 32 --block-size 32 --data "$out/data"
      --batch-size 4 --eval-batch-size 4 --warmup-steps 1 --lr 1e-3 --seed 1 --device virt:0
      --threads 1 --num-workers 0 --progress 0)

is_dropped() { [[ "$dropped" == *" $1+$2 "* || "$dropped" == *" $2+$1 "* ]]; }
in_set() { [[ "$1" == *" $2 "* ]]; }

# The flags of feature F in a cell beside feature P (empty: alone); DIR the cell's folder.
feature_flags() {
  local f=$1 p=$2 dir=$3
  case $f in
    delay)  # its home: the host optimizer, or the streamed parameters' when the partner streams
      if [ "$p" = stream ] || [ "$p" = zero3 ]; then echo "--param-device cpu --offload-delay 1"
      else echo "--optimizer-device cpu --offload-delay 1"; fi ;;
    ckpt) echo "--checkpoint-dir $dir/ck --checkpoint-every 2 --keep-checkpoints 64" ;;
    serve)  # 40 steps, so that a request can be answered while it trains
      echo "--serve 127.0.0.1:0 --port-file $dir/port --serve-threads 1 --publish-every 1 --max-steps 40" ;;
    *) echo "${flagset[$f]:-}" ;;
  esac
}

# ---- Token shards: ids (7 i + i / 13) mod 64, as the tests' (vocabulary 64) --------------------
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }
crc32() { gzip -c <"$1" | tail -c 8 | head -c 4; }  # gzip's trailer: the CRC-32, little-endian
write_shard() {  # PATH FIRST COUNT
  local path=$1 first=$2 n=$3
  printf '%b' "$(awk -v a="$first" -v n="$n" 'BEGIN { for (i = a; i < a + n; i++) printf "\\x%02x\\x00", (7 * i + int(i / 13)) % 64 }')" >"$path.payload"
  { printf 'TNDMTOKS'; printf '%b' "$(le32 1)$(le32 64)$(le32 64)$(le32 2)$(le32 "$n")$(le32 0)"
    crc32 "$path.payload"; head -c 24 /dev/zero; } >"$path.head"
  { cat "$path.head"; crc32 "$path.head"; cat "$path.payload"; } >"$path"
  rm -f "$path.payload" "$path.head"
}
write_shard "$out/data/train.tok" 0 2500
write_shard "$out/data/val.tok" 2500 300

# ---- Running one cell ---------------------------------------------------------------------------
# Distinct error lines of LOG, the scratch folder's path written OUT.
error_lines() { grep -ai 'error:' "$1" | sed "s|$out|OUT|g" | sort -u; }

# Classifies one run: prints "works", "refused<TAB>LINE" or "BROKEN<TAB>WHY".
classify() {  # LOG RC [mpi]
  local log=$1 rc=$2 errs n epoch loss
  errs=$(error_lines "$log")
  n=$(printf '%s' "$errs" | grep -c . || true)
  epoch=$(grep -a '^epoch ' "$log" | tail -1)
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then printf 'BROKEN\thang: killed after %s s\n' "$limit"; return; fi
  if [ "$rc" -eq 0 ]; then
    [ -n "$epoch" ] || { printf 'BROKEN\texit 0 without an epoch line\n'; return; }
    [ "$n" -eq 0 ] || { printf 'BROKEN\texit 0 with an error line: %s\n' "$(head -1 <<<"$errs")"; return; }
    loss=$(sed -nE 's/.*train_loss ([^ ]+) .*test_loss ([^ ]+) .*/\1 \2/p' <<<"$epoch")
    if ! awk -v l="$loss" 'BEGIN { n = split(l, v, " "); if (n != 2) exit 1
         for (i = 1; i <= 2; i++) if (v[i] !~ /^-?[0-9]+\.[0-9]+$/) exit 1 }'; then
      printf 'BROKEN\tnon-finite or missing loss: %s\n' "$epoch"; return
    fi
    echo works; return
  fi
  # Under mpirun a refusal aborts the job with the code it has in one process (2).
  if [ "$rc" -eq 2 ]; then
    if [ -n "$epoch" ] || grep -qa 'expected a finite loss' <<<"$errs"; then
      printf 'BROKEN\tstopped after training started: %s\n' "$(head -1 <<<"$errs")"; return
    fi
    [ "$n" -eq 1 ] && { printf 'refused\t%s\n' "$errs"; return; }
    printf 'BROKEN\texit 2 with %s error lines: %s\n' "$n" "$(paste -sd'|' <<<"$errs")"; return
  fi
  local why="exit $rc"
  [ "$rc" -gt 128 ] && why+=" (SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128))))"
  [ "$n" -gt 0 ] && why+=": $(head -1 <<<"$errs")"
  printf 'BROKEN\t%s\n' "$why"
}

# Runs tandem with ARGS under `timeout` (and mpirun when the array mpi is set: each rank
# writes its exit status to DIR/rank<r>.rc, since mpirun's own status is not the ranks').
launch_run() {  # DIR ARGS...
  local dir=$1
  shift
  rm -f "$dir"/rank*.rc
  if [ ${#mpi[@]} -eq 0 ]; then "${launch[@]}" "$tandem" "$@"; return; fi
  "${launch[@]}" "${mpi[@]}" sh -c '"$0" "$@"; s=$?; echo $s >"'"$dir"'/rank$OMPI_COMM_WORLD_RANK.rc"; exit $s' \
    "$tandem" "$@"
}

# A run's exit status: a hang's (124, 137), else the first rank's that failed (rank 0 first),
# else the launcher's.
exit_status() {  # DIR RC
  local s
  if [ "$2" -ne 124 ] && [ "$2" -ne 137 ]; then
    for s in $(cat "$1/rank0.rc" "$1/rank1.rc" 2>/dev/null); do
      [ "$s" -ne 0 ] && { echo "$s"; return; }
    done
  fi
  echo "$2"
}

# Runs cell NAME (A or A+B): writes cells/NAME/{cmd,log,result}; result is
# "STATUS<TAB>DETAIL<TAB>SERVED" (SERVED: a request answered while training, for serve cells).
run_cell() {
  local name=$1 a=${1%%+*} b= dir=$out/cells/$1
  [[ "$name" == *+* ]] && b=${name#*+}
  mkdir -p "$dir"
  local -a args=("${base[@]}") launch=(timeout -k 5 "$limit")
  local -A seen=()
  local f p pair
  for f in $a $b; do
    p=$b; [ "$f" = "$b" ] && p=$a
    local -a fl=($(feature_flags "$f" "$p" "$dir"))
    for ((i = 0; i < ${#fl[@]}; i += 2)); do
      pair="${fl[i]} ${fl[i+1]}"
      [ -n "${seen[$pair]:-}" ] && continue
      seen[$pair]=1
      args+=("${fl[i]}" "${fl[i+1]}")
    done
  done
  [[ " ${args[*]} " == *" --max-steps "* ]] || args+=(--max-steps 4)
  local -a mpi=()
  if in_set "$distributed" "$a" || { [ -n "$b" ] && in_set "$distributed" "$b"; }; then
    if [ "$mpiexec" = none ]; then printf 'skipped\tmpirun missing\t\n' >"$dir/result"; return; fi
    mpi=("$mpiexec" --oversubscribe --bind-to none -np 2)
  fi
  printf '%q ' "${launch[@]}" "${mpi[@]}" "$tandem" "${args[@]}" --save "$dir/w.safetensors" >"$dir/cmd"
  echo >>"$dir/cmd"
  local served=
  launch_run "$dir" "${args[@]}" --save "$dir/w.safetensors" >"$dir/log" 2>&1 &
  local job=$!
  if [ "$a" = serve ] || [ "$b" = serve ]; then  # one completion request while it trains
    served=no
    while kill -0 "$job" 2>/dev/null; do
      if [ -s "$dir/port" ] && curl -s -m 5 -o "$dir/answer" "http://127.0.0.1:$(cat "$dir/port")/v1/completions" \
           -d '{"prompt": [1, 2, 3], "max_tokens": 2, "temperature": 0}' && grep -q choices "$dir/answer"; then
        served=yes; break
      fi
      sleep 0.05
    done
  fi
  wait "$job"
  local rc=$? result
  rc=$(exit_status "$dir" "$rc")
  result=$(classify "$dir/log" "$rc" ${mpi:+mpi})
  if [ "$result" = works ] && { [ "$a" = serve ] || [ "$b" = serve ]; } && ! grep -qa '^serving on http' "$dir/log"; then
    result=$(printf 'BROKEN\tthe server did not start')
  fi
  if [ "$result" = works ] && { [ "$a" = ckpt ] || [ "$b" = ckpt ]; }; then  # resume from step 2
    cp "$dir/w.safetensors" "$dir/full.safetensors" 2>/dev/null
    printf '%q ' "${launch[@]}" "${mpi[@]}" "$tandem" "${args[@]}" --resume "$dir/ck/step-0000000002.safetensors" \
      --save "$dir/w.safetensors" >>"$dir/cmd"
    echo >>"$dir/cmd"
    rm -f "$dir/port"
    launch_run "$dir" "${args[@]}" --resume "$dir/ck/step-0000000002.safetensors" \
      --save "$dir/w.safetensors" >"$dir/log2" 2>&1
    rc=$(exit_status "$dir" $?)
    result=$(classify "$dir/log2" "$rc" ${mpi:+mpi})
    case $result in
      works) grep -qa '^resumed from ' "$dir/log2" || result=$(printf 'BROKEN\tthe resumed run did not say it resumed') ;;
      refused*) result="refused	resume: ${result#refused	}" ;;
      BROKEN*) result="BROKEN	resume: ${result#BROKEN	}" ;;
    esac
  fi
  [[ "$result" == *$'\t'* ]] || result+=$'\t-'
  printf '%s\t%s\n' "$result" "${served:--}" >"$dir/result"
}

# The cell whose weights a working cell must equal: the run of its features that are not
# documented as identical (or the plain run), or nothing when two such features remain.
reference_of() {  # CELL
  local a=${1%%+*} b= rest=()
  [[ "$1" == *+* ]] && b=${1#*+}
  in_set "$identical" "$a" || { [ -n "$b" ] && in_set "$identical" "$b"; } || return 0
  for f in $a $b; do in_set "$identical" "$f" || rest+=("$f"); done
  case ${#rest[@]} in 0) echo base ;; 1) echo "${rest[0]}" ;; esac
}

# ---- The cells ----------------------------------------------------------------------------------
cells=(base)
for ((i = 0; i < ${#features[@]}; i++)); do
  cells+=("${features[i]}")
  for ((j = i + 1; j < ${#features[@]}; j++)); do
    is_dropped "${features[i]}" "${features[j]}" || cells+=("${features[i]}+${features[j]}")
  done
done
if [ -n "$only" ]; then
  sel=(base)
  for c in "${cells[@]}"; do [[ "$c" =~ $only ]] && [ "$c" != base ] && sel+=("$c"); done
  for c in "${sel[@]}"; do  # and the runs they are compared with
    r=$(reference_of "$c")
    [ -n "$r" ] && [[ " ${sel[*]} " != *" $r "* ]] && sel+=("$r")
  done
  cells=("${sel[@]}")
fi
start=$(date +%s)
echo "compose-matrix: ${#cells[@]} cells (the plain run, features alone, pairs), $jobs_at_once at once"
for c in "${cells[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_at_once" ]; do wait -n; done
  run_cell "$c" &
done
wait
took=$(($(date +%s) - start))

# ---- Identity: the cell's --save file against the run of its other features alone ---------------
tsv=$out/matrix.tsv
printf 'cell\tresult\tidentity\tdetail\n' >"$tsv"
for c in "${cells[@]}"; do
  [ "$c" = base ] && continue
  IFS=$'\t' read -r status detail served <"$out/cells/$c/result"
  [ "$detail" = - ] && detail=
  identity=-
  ref=$(reference_of "$c")
  if [ "$status" = works ] && [ -n "$ref" ]; then
    if [ ! -f "$out/cells/$ref/result" ] || [ "$(cut -f1 "$out/cells/$ref/result")" != works ]; then
      identity=unchecked
    elif cmp -s "$out/cells/$c/w.safetensors" "$out/cells/$ref/w.safetensors" &&
         { [ ! -f "$out/cells/$c/full.safetensors" ] || cmp -s "$out/cells/$c/full.safetensors" "$out/cells/$c/w.safetensors"; }; then
      identity=identical
    else
      identity=differs
      detail="weights differ from $ref's"
      [ -f "$out/cells/$c/full.safetensors" ] && ! cmp -s "$out/cells/$c/full.safetensors" "$out/cells/$c/w.safetensors" &&
        detail="the resumed run's weights differ from the uninterrupted run's"
    fi
  fi
  [ "$status" = works ] && [ "$served" = no ] && detail="the run ended before a request was answered"
  [ "$status" = works ] && [ "$served" = yes ] && detail="answered a completion request"
  printf '%s\t%s\t%s\t%s\n' "$c" "$status" "$identity" "$detail" >>"$tsv"
done
base_result=$(cut -f1,2 "$out/cells/base/result")
[ "${base_result%%	*}" = works ] || echo "compose-matrix: the plain run itself fails: $base_result (cells/base/log)"

# ---- The Markdown table -------------------------------------------------------------------------
tsv_field() { awk -F'\t' -v c="$1" -v k="$2" '$1 == c { print $k }' "$tsv"; }
render() {  # the generated part of docs/composition.md
  local works identical_n refused broken skipped
  works=$(awk -F'\t' '$2 == "works"' "$tsv" | wc -l)
  identical_n=$(awk -F'\t' '$3 == "identical"' "$tsv" | wc -l)
  refused=$(awk -F'\t' '$2 == "refused"' "$tsv" | wc -l)
  broken=$(awk -F'\t' '$2 == "BROKEN"' "$tsv" | wc -l)
  skipped=$(awk -F'\t' '$2 == "skipped"' "$tsv" | wc -l)
  local alone pairs
  alone=$(awk -F'\t' 'NR > 1 && $1 !~ /[+]/' "$tsv" | wc -l)
  pairs=$(awk -F'\t' 'NR > 1 && $1 ~ /[+]/' "$tsv" | wc -l)
  echo "Counts over the $alone features alone and $pairs pairs: **$works work** ($identical_n of them" \
       "checked bit-identical), **$refused refused**, **$broken BROKEN**$([ "$skipped" -gt 0 ] && echo ", $skipped skipped")."
  echo
  # Footnotes: the distinct refusal and BROKEN lines, numbered in order of first appearance.
  awk -F'\t' 'NR > 1 && ($2 == "refused" || $2 == "BROKEN") && !($4 in n) { n[$4] = ++k; print $4 }' "$tsv" >"$out/notes"
  local -A note=()
  local k=0 line
  while IFS= read -r line; do k=$((k + 1)); note[$line]=$k; done <"$out/notes"
  local header="| |" rule="|---|" row cell r a b f g
  for f in "${features[@]}"; do header+=" ${f} |"; rule+="---|"; done
  echo "$header"; echo "$rule"
  for f in "${features[@]}"; do
    row="| **$f** |"
    for g in "${features[@]}"; do
      if [ "$f" = "$g" ]; then cell=$f
      elif is_dropped "$f" "$g"; then row+=" — |"; continue
      else
        cell="$f+$g"; [ -n "$(tsv_field "$cell" 1)" ] || cell="$g+$f"
      fi
      r=$(tsv_field "$cell" 2)
      case $r in
        works) case $(tsv_field "$cell" 3) in identical) row+=" works, bit-identical |" ;;
                 differs) row+=" works, not bit-identical |" ;; *) row+=" works |" ;; esac ;;
        refused) row+=" refused [${note[$(tsv_field "$cell" 4)]}] |" ;;
        BROKEN) row+=" **BROKEN** [${note[$(tsv_field "$cell" 4)]}] |" ;;
        *) row+=" ${r:-?} |" ;;
      esac
    done
    echo "$row"
  done
  echo
  k=0
  while IFS= read -r line; do
    k=$((k + 1))
    echo "$k. \`$line\`"
  done <"$out/notes"
  echo
  echo "The cells, machine-readable (\`compose-matrix.sh\` compares a run with this block):"
  echo
  echo '```tsv'
  awk -F'\t' 'BEGIN { OFS = "\t" } NR > 1 { print $1, $2, $3, ($2 == "works" ? "" : $4) }' "$tsv"
  echo '```'
}
render >"$out/matrix.md"
echo "compose-matrix: ${took} s; table in $out/matrix.md, $out/matrix.tsv"
broken_n=$(awk -F'\t' '$2 == "BROKEN"' "$tsv" | wc -l)
while IFS=$'\t' read -r c r _ d; do  # each BROKEN cell with its command lines
  [ "$r" = BROKEN ] || continue
  echo "BROKEN: $c: $d"
  sed 's/^/  /' "$out/cells/$c/cmd"
done <"$tsv"
grep -m1 '^Counts' "$out/matrix.md"

begin='<!-- compose-matrix:begin (generated by scripts/compose-matrix.sh --update) -->'
end='<!-- compose-matrix:end -->'
if [ "$mode" = update ]; then
  grep -qF "$begin" "$doc" && grep -qF "$end" "$doc" || { echo "compose-matrix: no markers in $doc" >&2; exit 2; }
  awk -v b="$begin" -v e="$end" -v gen="$out/matrix.md" '
    $0 == b { print; while ((getline l < gen) > 0) print l; skip = 1; next }
    $0 == e { skip = 0 }
    !skip { print }' "$doc" >"$doc.tmp" && mv "$doc.tmp" "$doc"
  echo "compose-matrix: rewrote the table in $doc"
  exit $((broken_n > 0))
fi

# ---- Against the committed table ----------------------------------------------------------------
committed=$out/committed.tsv
awk -v b="$begin" -v e="$end" '$0 == b { on = 1; next } $0 == e { on = 0 }
  on && /^```tsv/ { t = 1; next } on && t && /^```/ { t = 0 } on && t' "$doc" >"$committed"
changed=0
show() {  # RESULT IDENTITY DETAIL, as the table says it
  case $1:$2 in
    works:identical) echo "works, bit-identical" ;; works:differs) echo "works, not bit-identical" ;;
    works:unchecked) echo "works (identity unchecked)" ;; works:*) echo works ;; *) echo "$1: $3" ;;
  esac
}
while IFS=$'\t' read -r c r id d; do
  [ "$c" = cell ] && continue
  [ "$r" = skipped ] && continue
  [ "$r" = works ] && d=
  IFS=$'\t' read -r _ r0 id0 d0 <<<"$(awk -F'\t' -v c="$c" '$1 == c' "$committed")"
  [ "$id" = - ] && id=
  [ "${id0:-}" = - ] && id0=
  if [ "$r" != "${r0:-}" ] || [ "$id" != "${id0:-}" ] || [ "$d" != "${d0:-}" ]; then
    changed=$((changed + 1))
    echo "changed: $c: committed '$(show "${r0:-missing}" "${id0:-}" "${d0:-}")', now '$(show "$r" "$id" "$d")'"
  fi
done <"$tsv"
if [ -z "$only" ]; then  # a committed cell this run does not have (a feature renamed or gone)
  while IFS=$'\t' read -r c r0 id0 d0; do
    awk -F'\t' -v c="$c" '$1 == c { found = 1 } END { exit !found }' "$tsv" && continue
    changed=$((changed + 1))
    echo "changed: $c: committed '$(show "$r0" "${id0#-}" "$d0")', now not run"
  done <"$committed"
fi
if [ "$changed" -gt 0 ]; then
  echo "compose-matrix: $changed cell(s) differ from docs/composition.md; if the change is meant (a pair that" \
       "now works, a new refusal), run scripts/compose-matrix.sh --update TANDEM OUTDIR and update the notes"
fi
[ "$broken_n" -gt 0 ] || [ "$changed" -gt 0 ] && exit 1
if [ "$mpiexec" = none ]; then
  echo "SKIPPED: mpirun not found: the distributed cells (dp, zero1, zero3, gcomp) did not run; the others match"
  exit 77
fi
echo "compose-matrix: every cell as committed"
exit 0
