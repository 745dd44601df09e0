#!/usr/bin/env bash
# H200 validation, part 2 (device tool; docs/validation.md): the embedded engine (llama-1b preset on
# CUDA) with the chat and summarize workloads side by side, and the prefill/decode split
# (regression over the run + the isolating pair). Reads only; never changes a GPU setting.
source benches/gpu/preamble.sh
set -u
export HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hfcache
mkdir -p /tmp/hfcache
for w in ${WORKLOADS:-chat summarize}; do
  extra=""
  [ "$w" = summarize ] && extra="--prefill-decode-pair"
  timeout ${TMO:-270} python3 -m wattbench run --workload $w --api chat --concurrency ${LEVELS:-16,64} --num-requests ${NREQ:-128} \
    --warmup 3s --idle 5 --no-register --out /tmp/run_$w --quiet $extra; echo "$w rc=$?"
done
python3 - <<'PY'
import json
for w in ("chat", "summarize"):
    try:
        r = json.load(open(f"/tmp/run_{w}/result.json"))
    except OSError:
        continue
    print("==", w, r["status"], r["extra"].get("workload", {}).get("name"))
    for l in r["levels"]:
        e = l["energy"].get("accelerator", {}); t = l["throughput"]; la = l["latency"]
        print(f"{l['label']:<32} in {t['input_tokens_per_s']:9.0f} tok/s out {t['output_tokens_per_s']:7.0f} tok/s "
              f"W {e.get('avg_power_w') or 0:6.1f} J/out {e.get('j_per_output_token') or 0:.4f} J/tok {e.get('j_per_token') or 0:.5f} "
              f"out tok/s/kW {e.get('output_tokens_per_s_per_kw') or 0:7.0f} ttft p50 {la['ttft_ms']['p50'] or 0:7.0f} "
              f"tpot p50 {la['tpot_ms']['p50'] or 0:6.1f} {l['validity']['verdict']}")
    print(json.dumps(r["extra"].get("prefill_decode"), indent=1))
PY
for w in ${WORKLOADS:-chat summarize}; do cp /tmp/run_$w/result.json "$OUT/result_$w.json" 2>/dev/null; done
ls -la "$OUT"
