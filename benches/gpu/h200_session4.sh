#!/usr/bin/env bash
# Session 4's H200 work in two device calls (issues 24 and 25), each < 9.5 min, run back to back so
# the machine stays warm. Reads only; never changes a GPU setting. From the repo root, .whl carried:
#
#   bash benches/gpu/h200_session4.sh a    (~8 min)
#     1. the README's first command, unchanged, with the independent NVML counter (h200_default.sh):
#        every level's efficiency verdict must read valid, energy within the independent read;
#     2. the mechanism of the history dependence (docs/validation.md part 11), on ONE fresh engine,
#        no priming, 64 streams three times (without serve_probe.py: part b showed the probe, a
#        thread in the CPU-bound server process, cut c=64 throughput by ~25%):
#          x1 --prompt-salt ''   prompts P (the old behaviour: a run's prompts depend only on --seed)
#          x2 --prompt-salt ''   the same prompts P again
#          x3 (default salt)     new prompts
#        if the server's prefix cache is what moved the figure, x2 reads high and x3 reads like x1;
#     3. with priming (the default) on a second fresh engine, the three level orders back to
#        back: order1 -c 16,32,64,96,128 | order2 -c 1,2,8,128,32,64 | order3 -c 64.
#   bash benches/gpu/h200_session4.sh b    (~8 min): the noise floor at c=16 and c=64:
#        within  -c 16,64 --trials 5 (interleaved) on one engine;
#        runs1-5 -c 16,64 five runs on that same engine (across runs);
#        starts  wattbench run -c 16,64 --trials 5 --restart-engine (across engine starts).
# 256 in / 128 out, 6 s levels after a 2 s warm-up (benches/gpu/h200_noise.sh's sizing).
# Outputs under $OUT: log.txt, table.md/.json (noise_table.py), session4_<part>.tgz, and for part a
# default/ (log.txt, default_run.tgz).
set -u
PART=${1:-a}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
REPO=$PWD
T0=$(date +%s)
if [ "$PART" = a ]; then
  mkdir -p "$OUT/default"
  OUT="$OUT/default" timeout 250 bash benches/gpu/h200_default.sh; echo "default rc=$?"
fi
export PYTHONPATH=/tmp/site:$REPO/src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hfcache
mkdir -p /tmp/hfcache
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,power.limit,pstate,temperature.gpu,clocks.sm,clocks.mem,memory.used --format=csv
git -C "$REPO" log --oneline -1 2>/dev/null || true
COMMON="--duration 6 --warmup 2s --input-tokens 256 --output-tokens 128 --idle 2"
left() { echo $(( 570 - ($(date +%s) - T0) )); }
D=/tmp/session4_$PART
if [ "$PART" = a ]; then
  timeout $(left) python3 benches/gpu/history_runs.py --out $D --model llama-1b --device cuda --common "$COMMON" --no-probe \
    --run x1="-c 64 --no-prime --no-history-check --prompt-salt ''" \
    --run x2="-c 64 --no-prime --no-history-check --prompt-salt ''" \
    --run x3="-c 64 --no-prime --no-history-check" \
    --restart order1 \
    --run order1="-c 16,32,64,96,128" \
    --run order2="-c 1,2,8,128,32,64" \
    --run order3="-c 64" \
    --deadline-s $(( $(left) - 15 ))
  echo "part a rc=$? wall $(( $(date +%s) - T0 )) s"
elif [ "$PART" = b ]; then
  timeout 330 python3 benches/gpu/history_runs.py --out $D --model llama-1b --device cuda \
    --common "$COMMON --no-history-check --prime-requests 64" \
    --run within="-c 16,64 --trials 5" \
    --run run1="-c 16,64" --run run2="-c 16,64" --run run3="-c 16,64" --run run4="-c 16,64" --run run5="-c 16,64" \
    --deadline-s 320
  echo "runs rc=$? wall $(( $(date +%s) - T0 )) s"
  mkdir -p $D/runs
  s2=$(date +%s)
  timeout -s TERM $(( $(left) - 10 )) python3 -m wattbench run --model llama-1b --device cuda $COMMON --no-history-check \
    --prime-requests 64 -c 16,64 --trials 5 --restart-engine --no-register --quiet --out $D/runs/starts \
    > $D/runs/starts.stdout.txt 2> $D/runs/starts.stderr.txt
  echo "starts rc=$? wall $(( $(date +%s) - s2 )) s"
  tail -5 $D/runs/starts.stderr.txt
else
  echo "usage: bash benches/gpu/h200_session4.sh a|b"; exit 2
fi
nvidia-smi --query-gpu=power.limit,clocks.sm,clocks.mem,temperature.gpu --format=csv
python3 benches/gpu/noise_table.py $D --json "$OUT/table.json" | tee "$OUT/table.md"
tar czf "$OUT/session4_$PART.tgz" -C /tmp "$(basename $D)" 2>/dev/null
ls -la "$OUT"
echo "total wall $(( $(date +%s) - T0 )) s"
