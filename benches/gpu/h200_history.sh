#!/usr/bin/env bash
# Why does the embedded engine's efficiency depend on what it served before (docs/validation.md part 11)?
# One device call (~8 min). Reads only; never changes a GPU setting. Run from the repo root with
# .whl carried:  bash benches/gpu/h200_history.sh
#
# Two fresh `transformers serve` processes on the llama-1b preset (256 in / 128 out, streaming
# completions), each driven by `wattbench run --target` in three phases on the SAME server:
#   A: c=64, 3 trials of 10 s   (the server as started)
#   B: c=128, one 10 s level    (the load that changed the state in the issue's runs)
#   C: c=64, 3 trials of 10 s   (after)
# server 1 with the tuned flags (CUDA graphs on: --cb-use-cuda-graph --cb-max-batch-tokens 8192
# --cb-max-memory-percent 0.5), server 2 with the same flags but --no-cb-use-cuda-graph.
# If C differs from A on server 1 and not on server 2, the state lives in the CUDA graphs.
# Server 1 then runs c=64 with 5 s and 20 s levels: the energy error against the independent
# counter by window length (what sets the steady-state minimum, docs/accounting.md).
# Beside it: nvidia-smi every 200 ms (power, SM/memory clock, temperature, utilisation, memory
# used, throttle reasons), the server's own log, and the independent NVML counter observer.
# Outputs under $OUT: log.txt, history.tgz (every run dir, smi logs, server logs, meter log).
source benches/gpu/preamble.sh
set -u
export HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hfcache \
  HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false
mkdir -p /tmp/hfcache /tmp/h && cd /tmp/h
MODEL=$(python3 -c "from wattbench.engines.presets import resolve_model; print(resolve_model('llama-1b', 'cuda')[0])")
echo "model dir: $MODEL"
# transformers 5.17's /v1/models lists only what a scan of the hub cache finds, never a directory given on
# the command line (shared/engines.md), and `run --target` checks the model is listed: serve the preset by
# repo id from a hub-cache layout instead.
snap=/tmp/hfcache/models--wattbench--llama-1b/snapshots/0000000000000000000000000000000000000000
mkdir -p "$snap" /tmp/hfcache/models--wattbench--llama-1b/refs
cp -rs "$MODEL"/. "$snap"/
echo -n 0000000000000000000000000000000000000000 > /tmp/hfcache/models--wattbench--llama-1b/refs/main
TOKDIR=$MODEL
MODEL=wattbench/llama-1b
python3 "$REPO/benches/gpu/independent_meter.py" /tmp/h/meter.jsonl & MP=$!
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,clocks.mem,temperature.gpu,temperature.memory,utilization.gpu,utilization.memory,memory.used,clocks_event_reasons.active \
  --format=csv,nounits -lms 200 > /tmp/h/smi.csv & SP=$!

common=(--tokenizer "$TOKDIR" --input-tokens 256 --output-tokens 128 --duration 10 --warmup 3s --idle 0 --sensor nvml
        --no-html --no-register --quiet --request-timeout 120)
serve() {  # $1 = label, rest = extra flags
  local label=$1; shift
  python3 -m transformers.cli.transformers serve "$MODEL" --continuous-batching --host 127.0.0.1 --port 8000 \
    --device cuda --cb-max-batch-tokens 8192 --cb-max-memory-percent 0.5 "$@" > "/tmp/h/server-$label.log" 2>&1 &
  SERVER=$!
  local t0=$(date +%s)
  for _ in $(seq 1 240); do
    python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/health', timeout=2)" 2>/dev/null && break
    kill -0 $SERVER 2>/dev/null || { echo "[$label] server exited"; tail -20 "/tmp/h/server-$label.log"; return 1; }
    sleep 0.5
  done
  echo "[$label] server pid $SERVER up after $(( $(date +%s) - t0 )) s; $(date -u +%T)"
  # one request so the first measured phase does not pay the engine's first-request initialisation
  python3 -c "import json, sys, urllib.request as u; u.urlopen(u.Request('http://127.0.0.1:8000/v1/completions', json.dumps({'model': sys.argv[1], 'prompt': 'warm up', 'max_tokens': 4}).encode(), {'Content-Type': 'application/json'}), timeout=120).read()" "$MODEL"
}
phase() {  # $1 = label, rest = wattbench flags
  local label=$1; shift
  echo "[$label] $(date -u +%T.%N | cut -c1-12) start; gpu mem $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)"
  python3 -m wattbench run -t http://127.0.0.1:8000 -m "$MODEL" "${common[@]}" --out "/tmp/h/run-$label" "$@" \
    > "/tmp/h/run-$label.txt" 2>&1
  echo "[$label] rc=$? $(date -u +%T.%N | cut -c1-12); gpu mem $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)"
}
for variant in graphs nographs; do
  if [ $variant = graphs ]; then serve $variant --cb-use-cuda-graph || continue; else serve $variant --no-cb-use-cuda-graph || continue; fi
  phase "$variant-A-c64" -c 64 --trials 3
  phase "$variant-B-c128" -c 128
  phase "$variant-C-c64" -c 64 --trials 3
  if [ $variant = graphs ]; then  # energy error against the independent counter by window length
    phase "$variant-D-c64-d5" -c 64 --trials 3 --duration 5
    phase "$variant-E-c64-d20" -c 64 --trials 2 --duration 20
  fi
  kill -TERM $SERVER; wait $SERVER 2>/dev/null
  grep -i -E "graph|captur|warmup|block|cache" "/tmp/h/server-$variant.log" | head -40
done
kill -TERM $SP $MP; wait $MP 2>/dev/null
cd "$REPO"
python3 - <<'PY'
import json, glob, os, statistics as st
rows = []
for d in sorted(glob.glob("/tmp/h/run-*/result.json")):
    r = json.load(open(d))
    label = os.path.basename(os.path.dirname(d))[4:]
    for lv in r.get("levels", []):
        en = (lv.get("energy") or {}).get("accelerator") or {}
        thr = lv.get("throughput") or {}
        lat = lv.get("latency") or {}
        rows.append((label, lv.get("trial") or 0, en.get("output_tokens_per_s_per_kw"), en.get("avg_power_w"),
                     thr.get("output_tokens_per_s"), (lat.get("tpot_ms") or {}).get("p50")))
for r in rows:
    print("%-22s trial %s  tok/s/kW %s  W %s  out tok/s %s  TPOT p50 %s" % tuple(round(x, 1) if isinstance(x, float) else x for x in r))
PY
for d in /tmp/h/run-*/; do python3 benches/gpu/crosscheck.py "$d" /tmp/h/meter.jsonl --json "$d/crosscheck.json" | tail -4; done
python3 - <<'PY'
# smi summary per phase window (the phase logs' clock is UTC wall time; smi's timestamp too)
import csv
rows = list(csv.reader(open("/tmp/h/smi.csv")))
print("smi samples:", len(rows) - 1, "header:", rows[0])
PY
tar czf "$OUT/history.tgz" -C /tmp h
ls -la "$OUT"
