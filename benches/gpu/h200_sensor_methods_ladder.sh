#!/usr/bin/env bash
# H200 validation, part 1 (device tool; see docs/validation.md): sensor methods, then the embedded
# engine (llama-1b preset on CUDA) at concurrency 1,16,64,256 with an independent NVML observer.
# Reads only; never changes a GPU setting.
source benches/gpu/preamble.sh
set -u
export HF_HUB_OFFLINE=1 HF_HUB_CACHE=/tmp/hfcache
mkdir -p /tmp/hfcache
timeout 60 python3 -m wattbench sensors --json > "$OUT/sensors.json"; echo "sensors rc=$?"
timeout 200 python3 benches/gpu/sensor_methods.py "$OUT/sensor_methods.json" --windows 3 --seconds 8 --interval 0.05; echo "methods rc=$?"
python3 benches/gpu/independent_meter.py "$OUT/meter.jsonl" & MP=$!
sleep 1
timeout 330 python3 -m wattbench run --concurrency 1,16,64,256 --input-tokens 256 --output-tokens 128 \
  --warmup 3s --idle 5 --no-register --out /tmp/run1 --quiet; echo "run rc=$?"
kill -TERM $MP; wait $MP
python3 benches/gpu/crosscheck.py /tmp/run1 "$OUT/meter.jsonl" --json "$OUT/crosscheck.json"
python3 -c "
import json; r=json.load(open('/tmp/run1/result.json'))
print(r['status'], r['server'].get('effective_config'))
for l in r['levels']:
    e=l['energy'].get('accelerator',{}); t=l['throughput']; la=l['latency']
    print(l['label'], 'out tok/s %.1f'%t['output_tokens_per_s'], 'W %.1f'%(e.get('avg_power_w') or 0), 'J/tok %.4f'%(e.get('j_per_output_token') or 0),
          'tok/s/kW %.0f'%(e.get('output_tokens_per_s_per_kw') or 0), 'ttft p50 %.0f'%(la['ttft_ms']['p50'] or 0), 'tpot p50 %.1f'%(la['tpot_ms']['p50'] or 0),
          'verdict', l['validity']['verdict'], l['validity']['reasons'][:3], 'xcheck', (e.get('cross_check') or {}).get('diff_pct'))
"
tar czf "$OUT/run1.tgz" -C /tmp run1 --exclude=engine-scratch
ls -la "$OUT"
