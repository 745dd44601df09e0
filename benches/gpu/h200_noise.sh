#!/usr/bin/env bash
# The noise floor and the level-order check on the H200 (docs/validation.md parts 11c-11d), with priming (the
# default) and the embedded engine (transformers serve, llama-1b preset, the tuned flags
# --cb-use-cuda-graph --cb-max-batch-tokens 8192 --cb-max-memory-percent 0.5 that wattbench adds on
# CUDA), 256 in / 128 out (no tokenizer, as in the table), 6 s levels after a 2 s warm-up.
# TWO device calls, each < 9 min (one does not fit: 30+ levels of >= 10 s, five engine starts and
# three level orders need ~13 min):
#
#   bash benches/gpu/h200_noise.sh orders   (~7 min) one engine start; on that one server:
#       order1 -c 16,32,64,96,128 | order2 -c 1,2,8,128,32,64 | order3 -c 64   (each primed at its
#       largest level, history check on) — with priming the three orders must agree within noise;
#       then within -c 16,64 --trials 5 (interleaved): the within-run spread at both loads.
#   bash benches/gpu/h200_noise.sh repeat   (<= 8.8 min; a run cut by its time limit keeps what it
#       measured and the table says n) runs1..5: -c 16,64 five times on one server
#       (across runs); then `wattbench run -c 16,64 --trials 5 --restart-engine` (wattbench starts
#       the engine five times: across engine starts, each start primed). --prime-requests 64 (one
#       round of 64 streams) keeps the call inside the budget.
#
# Every run is primed, prompts are unique per run (the run's prompt salt). Beside the runs the
# driver (benches/gpu/history_runs.py) logs NVML every 0.5 s, nvidia-smi's CSV, and the probes
# inside the server (CUDA graph captures, prefix-cache hits, allocator), as h200_mechanism.sh does.
# Reads only; never changes a GPU setting. Run from the repo root (benches/gpu/preamble.sh: carried .whl, log.txt, PROVENANCE.json).
# Outputs under $OUT: log.txt, table.md + table.json (benches/gpu/noise_table.py over this call's
# part), noise_<part>.tgz (every run directory, the driver's logs and summaries).
source benches/gpu/preamble.sh
set -u
PART=${1:-orders}
export HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hfcache
mkdir -p /tmp/hfcache
COMMON="--duration 6 --warmup 2s --input-tokens 256 --output-tokens 128 --idle 2"
start=$(date +%s)
if [ "$PART" = orders ]; then
  D=/tmp/noise_orders
  timeout 500 python3 benches/gpu/history_runs.py --out $D --model llama-1b --device cuda --common "$COMMON" \
    --run order1="-c 16,32,64,96,128" \
    --run order2="-c 1,2,8,128,32,64" \
    --run order3="-c 64" \
    --run within="-c 16,64 --trials 5 --no-history-check" \
    --budget-s 330 --deadline-s 490
  echo "orders rc=$? wall $(( $(date +%s) - start )) s"
elif [ "$PART" = repeat ]; then
  D=/tmp/noise_repeat
  timeout 240 python3 benches/gpu/history_runs.py --out $D --model llama-1b --device cuda \
    --common "$COMMON --no-history-check --prime-requests 64" \
    --run run1="-c 16,64" --run run2="-c 16,64" --run run3="-c 16,64" --run run4="-c 16,64" --run run5="-c 16,64" \
    --budget-s 200 --deadline-s 235
  echo "runs rc=$? wall $(( $(date +%s) - start )) s"
  mkdir -p $D/runs
  s2=$(date +%s)
  timeout -s TERM 270 python3 -m wattbench run --model llama-1b --device cuda $COMMON --no-history-check --prime-requests 64 \
    -c 16,64 --trials 5 --restart-engine --no-register --no-html --quiet --out $D/runs/starts \
    > $D/runs/starts.stdout.txt 2> $D/runs/starts.stderr.txt
  echo "starts rc=$? wall $(( $(date +%s) - s2 )) s"
  tail -5 $D/runs/starts.stderr.txt
else
  echo "usage: bash benches/gpu/h200_noise.sh orders|repeat"; exit 2
fi
nvidia-smi --query-gpu=power.limit,clocks.sm,clocks.mem,temperature.gpu --format=csv
python3 benches/gpu/noise_table.py $D --json "$OUT/table.json" | tee "$OUT/table.md"
tar czf "$OUT/noise_$PART.tgz" -C /tmp "$(basename $D)" 2>/dev/null
ls -la "$OUT"
echo "total wall $(( $(date +%s) - start )) s"
