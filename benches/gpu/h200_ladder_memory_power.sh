#!/usr/bin/env bash
# H200 validation, round 2 (docs/validation.md part 7), ONE device call (~6-8 min):
#   (a) the README's first command unchanged (`wattbench run`, no arguments) with an independent
#       NVML counter observer around it (benches/gpu/independent_meter.py);
#   (b) a ladder (concurrency 16,64,128, 25 s levels, 5 s warm-up; the engine's tuned CUDA flags
#       are wattbench's defaults) with the observer and a `nvidia-smi -q -d POWER` poll;
#   (c) wattbench vs the independent counter per level (benches/gpu/crosscheck.py) for (a) and (b);
#   (d) the sampler's CPU cost with the real driver at the default channels (counter every 0.9 s
#       vs every 0.1 s poll) and each NVML call's own wall/CPU cost;
#   (e) memory (HBM) power: wattbench's accelerator_memory per level vs nvidia-smi's
#       "GPU Memory Power Readings" over the same window.
# Reads only; never changes a GPU setting. Run from the repo root (benches/gpu/preamble.sh: carried .whl, log.txt, PROVENANCE.json):
#   bash benches/gpu/h200_ladder_memory_power.sh
# Outputs under $OUT (7 files): log.txt, sampler_cost.jsonl, default_run.tgz, ladder_run.tgz,
# crosscheck.json, memory_power.json, summary.txt (printed last).
source benches/gpu/preamble.sh
set -u
python3 -c "import torch, transformers, pynvml; print('torch', torch.__version__, 'transformers', transformers.__version__)"
nvidia-smi -q -d POWER

echo "== (d) sampler cost, real driver, default channels"
python3 - > /tmp/nvml_calls.json <<'PY'
import json, time, pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
calls = {
    "energy_counter": lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h),
    "fields_186_185": lambda: pynvml.nvmlDeviceGetFieldValues(h, [186, 185]),
    "fields_186_185_mem185": lambda: pynvml.nvmlDeviceGetFieldValues(h, [186, 185, (185, 2)]),
    "power_usage": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
    "samples": lambda: pynvml.nvmlDeviceGetSamples(h, 0, 0),
    "temperature": lambda: pynvml.nvmlDeviceGetTemperature(h, 0),
}
out = {}
for name, fn in calls.items():
    w, c = [], []
    for _ in range(40):
        a, ca = time.perf_counter_ns(), time.thread_time_ns()
        try:
            fn()
        except pynvml.NVMLError as e:
            out[name] = {"error": str(e)}
            break
        w.append(time.perf_counter_ns() - a); c.append(time.thread_time_ns() - ca)
        time.sleep(0.01)
    if w:
        w.sort(); c.sort()
        out[name] = {"wall_ms_median": w[len(w) // 2] / 1e6, "cpu_ms_median": c[len(c) // 2] / 1e6, "n": len(w)}
for fid in (185, 186):
    for scope in (0, 1, 2):
        v = pynvml.nvmlDeviceGetFieldValues(h, [(fid, scope)])[0]
        out[f"field{fid}_scope{scope}"] = {"nvmlReturn": v.nvmlReturn,
                                           "value_w": v.value.uiVal / 1000 if v.nvmlReturn == 0 else None}
print(json.dumps({"nvml_calls": out}))
PY
cat /tmp/nvml_calls.json
{ cat /tmp/nvml_calls.json
  timeout 60 python3 benches/telemetry_sampler_overhead.py --cases nvml-real --rates 10 --seconds 15 --counter-every 0.9,0
} > "$OUT/sampler_cost.jsonl"; echo "sampler rc=$?"
cat "$OUT/sampler_cost.jsonl"

echo "== (a) the README's first command, unchanged"
rm -rf /tmp/r2a && mkdir -p /tmp/r2a && cd /tmp/r2a  # a warm machine keeps /tmp: start empty
python3 "$REPO/benches/gpu/independent_meter.py" /tmp/r2a/meter.jsonl & MP=$!
sleep 1
timeout 300 python3 -m wattbench run > /tmp/r2a/stdout.txt 2> /tmp/r2a/stderr.txt; echo "default run rc=$?"
kill -TERM $MP; wait $MP
cat /tmp/r2a/stdout.txt; tail -5 /tmp/r2a/stderr.txt
RUN_A=$(ls -d /tmp/r2a/wattbench-results/*/ 2>/dev/null | head -1)
cd "$REPO"

echo "== (b) ladder with the observer and nvidia-smi's memory power"
python3 benches/gpu/independent_meter.py /tmp/meter_b.jsonl & MP=$!
( while true; do t=$(python3 -c "import time; print(time.perf_counter_ns())"); echo "T $t"; nvidia-smi -q -d POWER; sleep 0.5; done ) > /tmp/smi_power_b.txt 2>&1 & SP=$!
sleep 1
timeout 330 python3 -m wattbench run --concurrency 16,64,128 --duration 25 --warmup 5s --input-tokens 256 \
  --output-tokens 128 --idle 5 --no-register --out /tmp/r2b --quiet; echo "ladder rc=$?"
kill -TERM $MP; kill $SP; wait $MP

echo "== (c) crosscheck"
[ -n "$RUN_A" ] && python3 benches/gpu/crosscheck.py "$RUN_A" /tmp/r2a/meter.jsonl --json /tmp/xa.json
python3 benches/gpu/crosscheck.py /tmp/r2b /tmp/meter_b.jsonl --json /tmp/xb.json
python3 - <<'PY' > "$OUT/crosscheck.json"
import json
out = {}
for k, p in (("default_run", "/tmp/xa.json"), ("ladder", "/tmp/xb.json")):
    try:
        out[k] = json.load(open(p))
    except OSError:
        out[k] = None
print(json.dumps(out, indent=1))
PY

echo "== (e) memory power vs nvidia-smi"
python3 - > "$OUT/memory_power.json" <<'PY'
import json, re
polls, cur, section = [], None, None
for line in open("/tmp/smi_power_b.txt"):
    if line.startswith("T "):
        cur = {"t_ns": int(line.split()[1])}; polls.append(cur); section = None; continue
    s = line.strip()
    if s.endswith("Power Readings") or s.startswith("GPU Memory Power Readings") or s.startswith("GPU Power Readings"):
        section = "mem" if "Memory" in s else ("board" if s.startswith("GPU Power") else None); continue
    m = re.match(r"(Average Power Draw|Instantaneous Power Draw|Power Draw)\s*:\s*([0-9.]+) W", s)
    if m and cur is not None and section:
        cur.setdefault(f"{section}_{m.group(1).split()[0].lower()}_w", float(m.group(2)))
r = json.load(open("/tmp/r2b/result.json"))
rows = []
for lv in r["levels"]:
    w = lv.get("window") or {}
    a, b = w.get("start_ns"), w.get("end_ns")
    inside = [p for p in polls if a is not None and a <= p["t_ns"] <= b]
    mem = lv["energy"].get("accelerator_memory") or {}
    acc = lv["energy"].get("accelerator") or {}
    def mean(k):
        v = [p[k] for p in inside if k in p]
        return sum(v) / len(v) if v else None
    smi_mem = mean("mem_average_w")
    rows.append({"level": lv["label"], "duration_s": w.get("duration_s"), "smi_polls": len(inside),
                 "wattbench_memory_w": mem.get("avg_power_w"), "wattbench_memory_j": mem.get("energy_j"),
                 "wattbench_memory_uncertainty_pct": mem.get("uncertainty_pct"),
                 "wattbench_board_w": acc.get("avg_power_w"), "smi_memory_avg_w": smi_mem,
                 "smi_board_avg_w": mean("board_average_w"), "smi_board_instant_w": mean("board_instantaneous_w"),
                 "diff_pct": (100 * (mem["avg_power_w"] - smi_mem) / smi_mem
                              if smi_mem and mem.get("avg_power_w") is not None else None),
                 "split": (lv.get("extra") or {}).get("power_split")})
print(json.dumps({"levels": rows, "smi_polls": len(polls), "first_poll": polls[0] if polls else None}, indent=1))
PY

tar czf "$OUT/ladder_run.tgz" -C /tmp r2b meter_b.jsonl smi_power_b.txt xb.json 2>/dev/null
[ -n "$RUN_A" ] && tar czf "$OUT/default_run.tgz" -C /tmp r2a xa.json 2>/dev/null

python3 - <<'PY' | tee "$OUT/summary.txt"
import glob, json, os
out = os.environ["OUT"]
print("== summary (H200 round 2)")
for line in open(f"{out}/sampler_cost.jsonl"):
    d = json.loads(line)
    if "nvml_calls" in d:
        for k, v in d["nvml_calls"].items():
            print(f"nvml {k:<24} {v}")
    elif d.get("case") == "nvml-real":
        print(f"sampler real driver, counter every {d['counter_every_s'] or 'poll (0.1)'} s: {d['cpu_pct_of_core_per_gpu']:.2f}% "
              f"of a core per GPU ({d['gpus']} GPU, {d['channels']} channels, {d['counter_reads']} counter reads "
              f"in {d['seconds']} s)")
x = json.load(open(f"{out}/crosscheck.json"))
for run, rows in x.items():
    for r in rows or []:
        print(f"crosscheck {run:<12} {r['level']:<16} {r['duration_s']:6.1f} s  wattbench {r['wattbench_j']} J  "
              f"independent {r['independent_nvml_j']} J  diff {r['diff_pct']}%")
for p, name in ((glob.glob("/tmp/r2a/wattbench-results/*/result.json"), "default"), (["/tmp/r2b/result.json"], "ladder")):
    for f in p:
        try:
            r = json.load(open(f))
        except OSError:
            continue
        print(f"{name} run: status {r['status']} {r.get('status_detail') or ''} model {r['server'].get('model')} "
              f"transformers {r['server'].get('version')}")
        for lv in r["levels"]:
            e = lv["energy"].get("accelerator", {}); m = lv["energy"].get("accelerator_memory", {})
            st = lv.get("steady_window") or {}
            print(f"  {lv['label']:<16} out tok/s {lv['throughput']['output_tokens_per_s']:8.1f}  "
                  f"W {e.get('avg_power_w') or 0:6.1f}  mem W {m.get('avg_power_w') or 0:5.1f}  "
                  f"J/out tok {e.get('j_per_output_token') or 0:.4f}  verdict {lv['validity']['verdict']} "
                  f"{lv['validity']['reasons'][:2]}  steady {st.get('duration_s')} s")
mp = json.load(open(f"{out}/memory_power.json"))
for r in mp["levels"]:
    print(f"memory {r['level']:<16} wattbench {r['wattbench_memory_w']} W vs nvidia-smi {r['smi_memory_avg_w']} W "
          f"({r['smi_polls']} polls) diff {r['diff_pct']}%  board {r['wattbench_board_w']} W")
PY
ls -la "$OUT"
