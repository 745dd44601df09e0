"""Sampler CPU overhead: the sampler thread's own CPU time as % of one core.

    PYTHONPATH=src python benches/telemetry_sampler_overhead.py [--seconds 10] [--rates 10,50]

Cases: (a) one scripted sensor (2 readings per poll): the sampler's own loop cost;
(b) NvmlSensor over the fake pynvml with 8 GPUs (counter + 3 power fields per GPU per poll,
aux gauges every 1 s, sample buffer every 0.5 s): the adapter's Python cost without the driver
(on a real H200 each counter read also waits ~4-5 ms in the driver, mostly off-CPU).
Prints one JSON line per case.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fakes"))

from telemetry_nvml import FakeGPU, FakeNvml  # noqa: E402
from telemetry_scripted import ScriptedSensor  # noqa: E402

from wattbench.telemetry.nvml import NvmlSensor  # noqa: E402
from wattbench.telemetry.sampler import Sampler  # noqa: E402


def run(case: str, rate_hz: float, seconds: float) -> dict:
    if case == "scripted":
        sensors = [ScriptedSensor()]
    else:
        sensors = [NvmlSensor(nvml=FakeNvml(gpus=[FakeGPU() for _ in range(8)]))]
    sm = Sampler(sensors, interval_s=1.0 / rate_hz)
    sm.start()
    time.sleep(seconds)
    log = sm.stop()
    o = sm.overhead()
    return {"case": case, "rate_hz": rate_hz, "seconds": round(o["wall_s"], 3), "polls": o["reads"],
            "readings": len(log), "cpu_s": round(o["cpu_s"], 4), "cpu_pct_of_core": round(o["cpu_pct_of_core"], 3),
            "cpu_us_per_poll": round(1e6 * o["cpu_s"] / max(o["reads"], 1), 1),
            "missed_deadlines": o["missed_deadlines"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rates", default="10,50")
    ap.add_argument("--cases", default="scripted,nvml-fake-8gpu")
    a = ap.parse_args()
    print(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                      "processor": platform.processor()}))
    for case in a.cases.split(","):
        for r in a.rates.split(","):
            print(json.dumps(run(case, float(r), a.seconds)), flush=True)


if __name__ == "__main__":
    main()
