"""Compare NVML's power methods on a real GPU over idle, steady and bursty load (docs/validation.md part 2).

For each window the GPU's energy is computed four ways from ONE wattbench sampling session
(NvmlSensor + Sampler, the code a run uses), all by ``wattbench.accounting``:
  counter   — nvmlDeviceGetTotalEnergyConsumption deltas (the reference),
  instant   — trapezoid of the instant power field (186),
  average   — trapezoid of the 1 s average power field (185),
  samples   — trapezoid of the drained power sample buffer (nvmlDeviceGetSamples),
and the relative difference of each against the counter is printed and written as JSON.
The sampler's own CPU time is reported too (thread CPU seconds per wall second).

Loads (PyTorch bf16 matmuls on the GPU): ``idle`` (nothing), ``steady`` (back-to-back
8192^3 products), ``bursty`` (150 ms on / 350 ms off). Three windows of each, 8 s per window.

Usage: python benches/gpu/sensor_methods.py OUT.json [--windows 3] [--seconds 8] [--interval 0.05]
Never changes any GPU setting.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import torch

from wattbench.accounting.counters import counter_energy
from wattbench.accounting.integrate import power_energy
from wattbench.core.clock import now_ns
from wattbench.telemetry.nvml import NvmlSensor
from wattbench.telemetry.sampler import Sampler


def arg(name, default, cast=float):
    return cast(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def load(kind: str, stop: threading.Event) -> None:
    if kind == "idle":
        stop.wait()
        return
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    while not stop.is_set():
        if kind == "steady":
            for _ in range(20):
                a @ b
            torch.cuda.synchronize()
        else:  # bursty: ~150 ms of work, 350 ms idle
            t_end = time.perf_counter() + 0.15
            while time.perf_counter() < t_end:
                for _ in range(5):
                    a @ b
                torch.cuda.synchronize()
            stop.wait(0.35)


def main() -> None:
    out_path = sys.argv[1]
    windows = int(arg("--windows", 3, int))
    seconds = arg("--seconds", 8.0)
    interval = arg("--interval", 0.05)
    sensor = NvmlSensor(indices=[0], samples=True)
    sampler = Sampler([sensor], interval_s=interval)
    problems = sampler.open()
    sampler.start()
    chans = {c.id.rsplit(".", 1)[1]: c.id for c in sampler.channels if c.id.startswith("nvml.gpu0.")}
    time.sleep(2.0)
    rows = []
    for kind in ("idle", "steady", "bursty"):
        for w in range(windows):
            stop = threading.Event()
            th = threading.Thread(target=load, args=(kind, stop), daemon=True)
            th.start()
            time.sleep(1.0)  # let the load settle before the window opens
            t0 = now_ns()
            time.sleep(seconds)
            t1 = now_ns()
            stop.set()
            th.join()
            time.sleep(1.5)  # samples after the window bracket its end
            log = sampler.log
            row = {"load": kind, "window": w, "duration_s": (t1 - t0) / 1e9}
            ts, vs = log.series(chans["energy"])
            n = min(len(ts), len(vs))
            ref = counter_energy(ts[:n], vs[:n], t0, t1).energy_j
            row["counter_j"] = ref
            for q in ("power_instant", "power_avg", "power_samples", "power", "memory_power"):
                if q not in chans:
                    continue
                ts, vs = log.series(chans[q])
                n = min(len(ts), len(vs))
                e = power_energy(ts[:n], vs[:n], t0, t1).energy_j
                row[f"{q}_j"] = e
                if q != "memory_power" and e is not None and ref:
                    row[f"{q}_diff_pct"] = 100.0 * (e - ref) / ref
            row["avg_power_w"] = ref / row["duration_s"] if ref else None
            rows.append(row)
            print(json.dumps(row), flush=True)
    log = sampler.stop()
    overhead = sampler.overhead()
    summary = {}
    for kind in ("idle", "steady", "bursty"):
        sel = [r for r in rows if r["load"] == kind]
        summary[kind] = {
            k: sum(r[k] for r in sel if r.get(k) is not None) / max(1, sum(1 for r in sel if r.get(k) is not None))
            for k in ("avg_power_w", "power_instant_diff_pct", "power_avg_diff_pct", "power_samples_diff_pct")
        }
    doc = {
        "gpu": torch.cuda.get_device_name(0),
        "interval_s": interval,
        "channels": sorted(chans),
        "problems": problems,
        "sensor_describe": sensor.describe(),
        "rows": rows,
        "summary_mean": summary,
        "sampler_overhead": overhead,
        "readings": len(log),
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=2, default=str)
    print("SUMMARY", json.dumps(summary, indent=1))
    print("OVERHEAD", json.dumps(overhead, default=str))


if __name__ == "__main__":
    main()
