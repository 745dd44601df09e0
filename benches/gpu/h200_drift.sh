#!/usr/bin/env bash
# Drift and its cause on the H200 (docs/accounting.md §10b, §10c): the embedded engine's defaults
# (the README's model) at one level, --trials 3, measured twice from a cold device — first without
# --precondition, then with it — and each level's stationarity printed (the trends with their 99%
# intervals, whether a figure drifted, the cause the run recorded: temperature, SM clock, throttle
# reasons, the server's queue; each trial's thermal state; the precondition record). Reads only;
# never changes a GPU setting (--precondition only sends load). From the repo root with .whl
# carried (benches/gpu/preamble.sh: wheels, log, PROVENANCE.json):
#   bash benches/gpu/h200_drift.sh
# Outputs under $OUT: log.txt, drift_runs.tgz (both run directories, their stdout and stderr).
# DRIFT_ARGS overrides the run arguments (default: --model llama-1b -c 64 --duration 20 --trials 3).
source benches/gpu/preamble.sh
set -u
DRIFT_ARGS=${DRIFT_ARGS:---model llama-1b -c 64 --duration 20 --trials 3 --no-register}
rm -rf /tmp/dr && mkdir -p /tmp/dr && cd /tmp/dr  # a warm machine keeps /tmp: start empty
rc=0
for name in cold precondition; do
  extra=""
  [ "$name" = precondition ] && extra="--precondition"
  start=$(date +%s)
  # shellcheck disable=SC2086  # DRIFT_ARGS is a list of arguments
  timeout 900 python3 -m wattbench run $DRIFT_ARGS $extra --out "/tmp/dr/$name" \
    > "/tmp/dr/$name.stdout.txt" 2> "/tmp/dr/$name.stderr.txt" || rc=$?
  echo "$name: rc=$rc wall $(( $(date +%s) - start )) s"
  cat "/tmp/dr/$name.stdout.txt"; tail -5 "/tmp/dr/$name.stderr.txt"
  python3 - "/tmp/dr/$name" <<'PY'
import json, sys
from pathlib import Path
res = json.loads(next(Path(sys.argv[1]).rglob("result.json")).read_text())
pc = (res.get("noise") or {}).get("precondition")
if pc:
    print(f"  precondition: settled={pc['settled']} {pc.get('duration_s') or 0:.0f} s, {pc['rounds']} loads, "
          f"{pc.get('temperature_c')} °C, slope {pc.get('slope_c_per_min')} °C/min: {pc['reason']}")
for lv in res["levels"]:
    st = lv.get("stationarity") or {}
    print(f"  {lv['label']}: cause: {st.get('cause')}; todo: {st.get('todo')}; other state: {st.get('other_state')}")
    for f in st.get("trends", []):
        print(f"    {f['figure']}@{f.get('boundary')}: {f['change_pct']:+.2f}% [{f['ci_low_pct']:+.2f}, "
              f"{f['ci_high_pct']:+.2f}] over {f['span_s']:.0f} s; trials {f.get('trials_change_pct')} "
              f"{f.get('trial_values')}; moves={f['moves']} drifting={f['drifting']}")
    for k, th in enumerate((lv.get("trials") or {}).get("thermal") or []):
        th = th or {}
        print(f"    trial {k + 1}: {th.get('max_temperature_c')} °C, SM {th.get('mean_sm_clock_mhz')} MHz, "
              f"throttle {th.get('throttle_reasons_seen')}, CPU {th.get('cpu_mhz')} MHz")
    for f in lv["validity"]["findings"]:
        if f["kind"] in ("drift", "thermal_state", "warmup_estimate"):
            print(f"    {f['severity']}: {f['text']}")
PY
done
cd "$REPO"
tar czf "$OUT/drift_runs.tgz" -C /tmp dr 2>/dev/null
ls -la "$OUT"
exit $rc
