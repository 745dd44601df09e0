#!/usr/bin/env bash
# H200 validation of `wattbench tune` (device tool; see docs/validation.md and docs/tune.md).
# Tunes the embedded engine's continuous-batching settings on the llama-1b preset under an SLO,
# starting from the engine's own defaults (wattbench's tuned defaults are switched off by tune).
# The space holds the hand-tuned flags (--cb-use-cuda-graph --cb-max-batch-tokens 8192
# --cb-max-memory-percent 0.5) among others; the tuner must find a configuration at least as
# efficient. NEVER touches the GPU's power limit or clocks (no --power-limit / --sm-clocks).
# One call, ~8 minutes: 5 configurations x (engine start + an --optimize load search of 6 s levels).
source benches/gpu/preamble.sh
set -u
export HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hfcache
mkdir -p /tmp/hfcache
cat > /tmp/space.json <<'JSON'
{"axes": {
  "cb-use-cuda-graph": ["default", true],
  "cb-max-batch-tokens": {"values": [8192, "default"], "when": {"cb-use-cuda-graph": true}},
  "cb-max-memory-percent": {"values": [0.5, "default"], "when": {"cb-use-cuda-graph": true}}
}}
JSON
start=$(date +%s)
timeout 520 python3 -m wattbench tune --engine transformers --model llama-1b --device cuda \
  --space /tmp/space.json --slo ttft_p99=2s,tpot_p99=100ms --concurrency 4,16,64 \
  --input-tokens 256 --output-tokens 64 --duration 6 --idle 2 --sensor nvml \
  --max-minutes 6.5 --max-repeats 0 --out /tmp/tune --db /tmp/history.db
echo "tune rc=$? wall $(( $(date +%s) - start )) s"
cp /tmp/tune/tune.json /tmp/tune/report.html "$OUT/" 2>/dev/null
nvidia-smi --query-gpu=power.limit,clocks.sm --format=csv   # unchanged: tune never set them
python3 - <<'PY'
import json
t = json.load(open("/tmp/tune/tune.json"))
print("status", t["status"], "strategy", t["strategy"], "trials", len(t["trials"]))
print(f"{'#':>2} {'configuration':58} {'status':10} {'load':>5} {'goodput/kW':>10} {'tok/s/kW':>9} {'J/tok':>7} {'p99 TTFT':>8} {'p99 TPOT':>8} {'W':>5} {'start s':>7} {'trial s':>7}")
for tr in t["trials"]:
    f = tr["figures"]; g = lambda k, fmt: (fmt % f[k]) if f.get(k) is not None else "-"
    print(f"{tr['index']:>2} {tr['label'][:58]:58} {tr['status']:10} {g('load_value','%5g'):>5} {g('goodput_per_kw','%10.0f'):>10} "
          f"{g('output_tokens_per_s_per_kw','%9.0f'):>9} {g('j_per_output_token','%7.4f'):>7} {g('ttft_p99_ms','%8.0f'):>8} "
          f"{g('tpot_p99_ms','%8.1f'):>8} {g('avg_power_w','%5.0f'):>5} {(tr.get('engine_start_s') or 0):7.1f} {(tr.get('duration_s') or 0):7.1f}")
r = t.get("recommended") or {}
print("RECOMMENDED:", r.get("label"), "|", r.get("summary"))
print("SERVE:", r.get("serve_command"))
hand = [tr for tr in t["trials"] if tr["config"] == {"cb-use-cuda-graph": True, "cb-max-batch-tokens": 8192, "cb-max-memory-percent": 0.5}]
if hand and hand[0].get("score") and r.get("score"):
    print("winner vs hand-tuned flags: %.3fx (>= 1 means at least as efficient)" % (r["score"] / hand[0]["score"]))
PY
ls -la "$OUT"
