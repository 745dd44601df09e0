#!/usr/bin/env bash
# On the H200: do the defaults meet their own rules (docs/validation.md part 13)? One device call (~8-9 min).
# Reads only; never changes a GPU setting. Run from the repo root with .whl carried:
#   bash benches/gpu/h200_findings.sh
# 1. The README's first command, unchanged (`wattbench run`, no arguments: the embedded engine,
#    c=1 and c=8 sized by default), with the independent NVML counter observer and the crosscheck
#    (benches/gpu/h200_default.sh): every level's efficiency verdict should read `valid`.
# 2. `wattbench run --target URL` with default sizing (one c=1 level) against the same engine started
#    by wattbench's launcher (benches/gpu/history_runs.py, no probe), with the served model's tokenizer
#    and without one (then prompt lengths are approximate: that finding says what to change).
# Outputs under $OUT: log.txt, PROVENANCE.json, default/ (part 1: its own log.txt, default_run.tgz and PROVENANCE.json), target/ (part 2: each run directory,
#    stdout with the summary, driver.json), verdicts.txt (every level's two verdicts and findings).
source benches/gpu/preamble.sh
set -u
mkdir -p "$OUT/default"
OUT="$OUT/default" bash "$REPO/benches/gpu/h200_default.sh"; rc1=$?
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
timeout 330 python3 "$REPO/benches/gpu/history_runs.py" --out "$OUT/target" --no-probe --common "" --budget-s 200 --deadline-s 300 \
  --run target_tokenizer="--tokenizer {tokenizer}" --run target_default=""; rc2=$?
python3 - "$OUT" <<'PY' | tee "$OUT/verdicts.txt"
import glob, json, sys, tarfile
out = sys.argv[1]
runs = []
try:
    with tarfile.open(f"{out}/default/default_run.tgz") as t:
        m = [x for x in t.getmembers() if x.name.endswith("result.json") and "wattbench-results" in x.name]
        runs.append(("README first command", json.load(t.extractfile(m[0]))))
except Exception as e:  # noqa: BLE001
    print(f"README first command: no result ({e})")
for p in sorted(glob.glob(f"{out}/target/runs/*/result.json")):
    runs.append((p.split("/")[-2], json.load(open(p))))
for name, r in runs:
    v = r["validity"]
    print(f"{name}: efficiency {v['verdict']}, latency {v.get('latency')}")
    for lv in r["levels"]:
        lvv = lv["validity"]
        sw = (lv.get("steady_window") or {}).get("duration_s")
        acc = (lv.get("energy") or {}).get("accelerator") or {}
        print(f"  {lv['label']}: efficiency {lvv['verdict']}, latency {lvv.get('latency')}; "
              f"{lv['requests']['completed']} requests, window {lv['window']['duration_s']:.1f} s, steady {sw}; "
              f"accelerator edges at {acc.get('update_period_s')} s (0.1: both shaped by the power samples)")
        for f in lvv.get("findings", []):
            print(f"    {f['severity']}: {f['kind']}: {f['text'][:160]}")
PY
echo "README first command rc=$rc1, --target runs rc=$rc2"
exit $(( rc1 != 0 || rc2 != 0 ))
