#!/usr/bin/env bash
# The three level orders of docs/validation.md part 11 on one fresh engine, with priming (the default), levels long enough
# that c=96 and c=128 are measured (session 4's 6 s levels after a 2 s warm-up measured nothing at
# those loads: every request there was a warm-up request). One device call (~8 min). Reads only;
# never changes a GPU setting. From the repo root, .whl carried:
#   bash benches/gpu/h200_orders.sh
# order1 -c 16,32,64,96,128 | order2 -c 1,2,8,128,32,64 | order3 -c 64, back to back against one
# engine started by wattbench's launcher (benches/gpu/history_runs.py, no probe), 256 in / 128 out
# with the served model's tokenizer (exact prompt lengths), 15 s levels after a 3 s warm-up (the
# issue's sizing). Outputs under $OUT: log.txt, table.md/.json (noise_table.py), orders.tgz.
source benches/gpu/preamble.sh
set -u
T0=$(date +%s)
export HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hfcache
mkdir -p /tmp/hfcache
D=/tmp/orders
timeout 560 python3 benches/gpu/history_runs.py --out $D --model llama-1b --device cuda --no-probe \
  --common "--duration 15 --warmup 3s --input-tokens 256 --output-tokens 128 --idle 2 --tokenizer {tokenizer}" \
  --run order1="-c 16,32,64,96,128" \
  --run order2="-c 1,2,8,128,32,64" \
  --run order3="-c 64" \
  --deadline-s 545
echo "orders rc=$? wall $(( $(date +%s) - T0 )) s"
nvidia-smi --query-gpu=power.limit,clocks.sm,clocks.mem,temperature.gpu --format=csv
python3 benches/gpu/noise_table.py $D --json "$OUT/table.json" | tee "$OUT/table.md"
tar czf "$OUT/orders.tgz" -C /tmp --exclude=hfcache orders 2>/dev/null
ls -la "$OUT"
echo "total wall $(( $(date +%s) - T0 )) s"
