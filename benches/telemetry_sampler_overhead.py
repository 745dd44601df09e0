"""Sampler CPU overhead: the sampler threads' own CPU time as % of one core.

    PYTHONPATH=src python benches/telemetry_sampler_overhead.py [--seconds 10] [--rates 10,50]
        [--cases scripted,nvml-fake-8gpu,nvml-fake-h200cost,nvml-real] [--counter-every 0.9,0]

Cases:
  scripted            one scripted sensor (2 readings per poll): the sampler's own loop cost.
  nvml-fake-8gpu      NvmlSensor over the fake pynvml with 8 GPUs: the adapter's Python cost alone
                      (no driver: this is NOT what a real GPU costs).
  nvml-fake-h200cost  one fake GPU whose energy-counter read burns 4.5 ms of thread CPU, as one
                      read does on an H200 (driver 580: 4-5 ms, spent on-CPU in the driver); the
                      other calls cost their Python time only. Shows what the counter's read rate
                      does to the cost, on any machine.
  nvml-real           NvmlSensor over the real driver (pynvml), every GPU, default channels.
                      Reported per GPU: the goal is <= 1% of one core per GPU.

``--counter-every`` lists the counter read periods to try for the nvml cases (0.9 s is the
default; 0 reads it at every poll, as before). Prints one JSON line per case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]  # the fakes by their one name, tests.fakes.X

from tests.fakes.fake_nvml import FakeGPU, FakeNvml  # noqa: E402
from tests.fakes.scripted_sensor import ScriptedSensor  # noqa: E402

from wattbench.telemetry.nvml import COUNTER_EVERY_S, NvmlSensor  # noqa: E402
from wattbench.telemetry.sampler import Sampler  # noqa: E402

H200_COUNTER_READ_CPU_S = 0.0045  # measured on an H200, driver 580 (docs/benchmarks.md)


class CostlyCounterNvml(FakeNvml):
    """The fake NVML with an H200's on-CPU cost per energy-counter read."""

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        end = time.thread_time() + H200_COUNTER_READ_CPU_S
        while time.thread_time() < end:
            pass
        return super().nvmlDeviceGetTotalEnergyConsumption(h)


def sensors_for(case: str, counter_every_s: float):
    if case == "scripted":
        return [ScriptedSensor(poll_interval_s=None, update_period_s=None)], 1
    if case == "nvml-fake-8gpu":
        return [NvmlSensor(nvml=FakeNvml(gpus=[FakeGPU() for _ in range(8)]), counter_every_s=counter_every_s)], 8
    if case == "nvml-fake-h200cost":
        return [NvmlSensor(nvml=CostlyCounterNvml(gpus=[FakeGPU()]), counter_every_s=counter_every_s)], 1
    if case == "nvml-real":
        import pynvml

        pynvml.nvmlInit()
        n = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return [NvmlSensor(counter_every_s=counter_every_s)], n
    raise SystemExit(f"unknown case {case!r}")


def run(case: str, rate_hz: float, seconds: float, counter_every_s: float) -> dict:
    sensors, gpus = sensors_for(case, counter_every_s)
    sm = Sampler(sensors, interval_s=1.0 / rate_hz)
    sm.start()
    time.sleep(seconds)
    log = sm.stop()
    o = sm.overhead()
    counters = [c.id for c in log.channels.values() if c.kind == "counter"]
    return {"case": case, "rate_hz": rate_hz, "counter_every_s": counter_every_s if case != "scripted" else None,
            "gpus": gpus, "channels": len(log.channels), "seconds": round(o["wall_s"], 3), "polls": o["reads"],
            "readings": len(log), "counter_reads": sum(len(log.series(c)[0]) for c in counters),
            "cpu_s": round(o["cpu_s"], 4), "cpu_pct_of_core": round(o["cpu_pct_of_core"], 3),
            "cpu_pct_of_core_per_gpu": round(o["cpu_pct_of_core"] / gpus, 3),
            "cpu_us_per_poll": round(1e6 * o["cpu_s"] / max(o["reads"], 1), 1),
            "missed_deadlines": o["missed_deadlines"], "problems": sm.problems[:3]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rates", default="10,50")
    ap.add_argument("--cases", default="scripted,nvml-fake-8gpu,nvml-fake-h200cost")
    ap.add_argument("--counter-every", default=f"{COUNTER_EVERY_S},0")
    a = ap.parse_args()
    print(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                      "processor": platform.processor(), "cpus": os.cpu_count(),
                      "loadavg": open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else None}))
    for case in a.cases.split(","):
        for r in a.rates.split(","):
            periods = [float(x) for x in a.counter_every.split(",")] if case != "scripted" else [0.0]
            for ce in periods:
                print(json.dumps(run(case, float(r), a.seconds, ce)), flush=True)


if __name__ == "__main__":
    main()
