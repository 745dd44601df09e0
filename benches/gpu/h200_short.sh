#!/usr/bin/env bash
# Short levels on the H200 with the closing reads (session 5, issue 25 part 1): 7 s levels, which the
# 5 s energy term of the steady-state minimum lets read `valid` where two median E2Es fit, with an
# independent NVML energy-counter observer around the run and the per-level crosscheck
# (benches/gpu/h200_default.sh's method). Reads only; never changes a GPU setting. From the repo
# root with .whl carried:
#   bash benches/gpu/h200_short.sh
# Outputs under $OUT: log.txt, short_run.tgz (stdout, result, requests, telemetry, meter log,
# crosscheck JSON).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
REPO=$PWD
export PYTHONPATH=/tmp/site:$REPO/src PYTHONUNBUFFERED=1
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,power.limit,pstate,temperature.gpu --format=csv
mkdir -p /tmp/rd && cd /tmp/rd
python3 "$REPO/benches/gpu/independent_meter.py" /tmp/rd/meter.jsonl & MP=$!
sleep 1
start=$(date +%s)
timeout 420 python3 -m wattbench run --model llama-1b -c 1,16,64 --duration 7 --warmup 2s --no-register \
  > /tmp/rd/stdout.txt 2> /tmp/rd/stderr.txt; rc=$?
echo "short levels: rc=$rc wall $(( $(date +%s) - start )) s"
kill -TERM $MP; wait $MP
cat /tmp/rd/stdout.txt; tail -5 /tmp/rd/stderr.txt
RUN=$(ls -d /tmp/rd/wattbench-results/*/ 2>/dev/null | head -1)
cd "$REPO"
[ -n "$RUN" ] && python3 benches/gpu/crosscheck.py "$RUN" /tmp/rd/meter.jsonl --json /tmp/rd/crosscheck.json
[ -n "$RUN" ] && python3 - "$RUN" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/result.json"))
for lv in r["levels"]:
    a = lv["energy"]["accelerator"]
    sw = (lv.get("steady_window") or {}).get("duration_s")
    print(f"{lv['label']}: efficiency {lv['validity']['verdict']}, steady {sw:.1f} s, E2E p50 "
          f"{lv['latency']['e2e_ms']['p50'] / 1e3:.2f} s, edges at {a['update_period_s']:.2f} s; "
          + "; ".join(f"{f['severity']} {f['kind']}" for f in lv["validity"]["findings"] if f["severity"] != "note"))
PY
tar czf "$OUT/short_run.tgz" -C /tmp rd 2>/dev/null
ls -la "$OUT"
exit $rc
