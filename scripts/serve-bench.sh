#!/usr/bin/env bash
# Serving benchmark (make bench-serve): the reference CNN (fmnist-cnn) served over HTTP on this
# machine, alone and while it trains, with the threads split stated.
#   1. training alone:   tandem train, 1 epoch of Fashion-MNIST, --threads T          -> images/s
#                        (run again after 3, so that a change in the machine's other load shows)
#   2. serving alone:    tandem serve on those weights, serve_load R requests from C clients
#                        (closed loop, PNG bodies, keep-alive)                        -> req/s, p50, p99
#                        and, when wrk is installed, wrk for 10 s on one PNG          -> req/s, latency
#   3. train and serve:  tandem train --serve (--publish-every P) under serve_load until the
#                        epoch ends                                                   -> req/s, p50, p99,
#                        failures, versions answered, training images/s and its share of the
#                        mean of the two runs of (1),
#                        publish-to-first-answer time; /metrics parsed with prometheus_client
#                        (peers venv) when present
# Knobs: TANDEM_SERVE_THREADS (training threads, default 1), TANDEM_SERVE_SERVE_THREADS (inference
# threads, 1), TANDEM_SERVE_CLIENTS (8), TANDEM_SERVE_REQUESTS (10000), TANDEM_SERVE_PUBLISH (20).
# Timing figures mean something only on an idle machine: the script prints the load average.
set -uo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/$build"
threads=${TANDEM_SERVE_THREADS:-1}
sthreads=${TANDEM_SERVE_SERVE_THREADS:-1}
clients=${TANDEM_SERVE_CLIENTS:-8}
requests=${TANDEM_SERVE_REQUESTS:-10000}
publish=${TANDEM_SERVE_PUBLISH:-20}
py=/opt/peers/bin/python
for t in tandem serve_load; do
  [ -x "$bin/$t" ] || { echo "serve-bench: $bin/$t missing: build it first (cmake --build $build --target $t)"; exit 2; }
done
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$out"; }
trap cleanup EXIT
wait_port() {  # FILE PID: the port once FILE holds it
  for _ in $(seq 600); do
    [ -s "$1" ] && { cat "$1"; return 0; }
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
field() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i+1) }' "$2" | tail -1; }
epoch_rate() { awk '/^epoch 1\/1/ { for (i = 1; i <= NF; i++) if ($i == "img/s") print $(i-1) }' "$1"; }

echo "serve-bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "threads: training --threads $threads (+1 loader worker), inference --serve-threads $sthreads, 8 HTTP threads, $clients client threads (same machine)"

echo
echo "== 1. training alone: fmnist-cnn, batch 128, 1 epoch, --threads $threads =="
"$bin/tandem" train --epochs 1 --threads "$threads" --progress 0 --save "$out/w.safetensors" > "$out/train.txt" 2>&1 ||
  { cat "$out/train.txt"; exit 1; }
alone=$(epoch_rate "$out/train.txt")
echo "train_img_per_s $alone"

echo
echo "== 2. serving alone: tandem serve, $requests requests from $clients clients =="
"$bin/tandem" serve --weights "$out/w.safetensors" --listen 127.0.0.1:0 --port-file "$out/port1" \
  --serve-threads "$sthreads" > "$out/serve.txt" 2>&1 &
pids+=($!)
port=$(wait_port "$out/port1" $!) || { cat "$out/serve.txt"; exit 1; }
"$bin/serve_load" "$port" "$requests" "$clients" | tee "$out/load1.txt"
if command -v wrk >/dev/null 2>&1; then
  printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = "%s"\n' \
    "$("$py" -c 'print([[[0]*28]*28])' 2>/dev/null || python3 -c 'print([[[0]*28]*28])')" > "$out/post.lua"
  wrk -t 2 -c "$clients" -d 10s --latency -s "$out/post.lua" "http://127.0.0.1:$port/v1/predict" | \
    awk '/Requests\/sec|50%|99%|requests in|Non-2xx/ { print "wrk " $0 }'
else
  echo "wrk: not installed (apt-get install wrk), skipped"
fi
kill -TERM "${pids[0]}"; wait "${pids[0]}" 2>/dev/null

echo
echo "== 3. training while serving: train --serve --publish-every $publish under load until the epoch ends =="
"$bin/tandem" train --epochs 1 --threads "$threads" --progress 0 --serve 127.0.0.1:0 --port-file "$out/port2" \
  --publish-every "$publish" --serve-threads "$sthreads" > "$out/train_serve.txt" 2>&1 &
tpid=$!
pids+=($tpid)
port=$(wait_port "$out/port2" $tpid) || { cat "$out/train_serve.txt"; exit 1; }
( sleep 20; curl -s "http://127.0.0.1:$port/metrics" > "$out/metrics.txt" ) &
"$bin/serve_load" "$port" "$requests" "$clients" --until-gone | tee "$out/load2.txt"
wait $tpid
grep -E "^epoch|^served|^publish to first answer" "$out/train_serve.txt"
loaded=$(epoch_rate "$out/train_serve.txt")
echo
echo "== 1 again. training alone =="
"$bin/tandem" train --epochs 1 --threads "$threads" --progress 0 > "$out/train2.txt" 2>&1 || { cat "$out/train2.txt"; exit 1; }
alone2=$(epoch_rate "$out/train2.txt")
echo "train_img_per_s $alone2"
echo
awk -v a="$alone" -v c="$alone2" -v b="$loaded" 'BEGIN { m = (a + c) / 2; if (m > 0) printf "training under serving load: %s img/s = %.0f%% of %.0f img/s alone (mean of %s and %s; goal >= 80%%)\n", b, 100 * b / m, m, a, c }'
echo "requests $(field requests "$out/load2.txt"), failures $(field failures "$out/load2.txt"), versions answered $(field versions "$out/load2.txt"), p99 $(field p99_ms "$out/load2.txt") ms, versions going back $(field backwards "$out/load2.txt")"
if [ -s "$out/metrics.txt" ] && [ -x "$py" ] && "$py" -c 'import prometheus_client' 2>/dev/null; then
  "$py" -c 'import sys
from prometheus_client.parser import text_string_to_metric_families as parse
fams = list(parse(open(sys.argv[1]).read()))
print("metrics: prometheus_client parsed %d families, %d samples" % (len(fams), sum(len(f.samples) for f in fams)))' "$out/metrics.txt"
else
  echo "metrics: prometheus_client not in $py (or no /metrics text), parse check skipped"
fi
echo "serve-bench: load average $(cut -d' ' -f1-3 /proc/loadavg) at end"
