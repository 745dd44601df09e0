"""Log the GPU's state every 0.5 s (NVML) on the run's monotonic clock, for the history study.

    python3 benches/gpu/gpu_state_log.py OUT.jsonl [--period 0.5] [--gpu 0]

One JSON line per poll: ``t_ns`` (``perf_counter_ns``, the clock of wattbench's level windows),
memory used/total, GPU and memory temperature, SM and memory clocks, power (instant) and the
energy counter, GPU/memory utilisation, throttle reasons (bitmask), performance state, and each
compute process's GPU memory (``procs``: pid -> bytes). Reads only. Stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import json
import signal
import sys
import time


def main() -> int:
    import argparse

    import pynvml as n

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--period", type=float, default=0.5)
    ap.add_argument("--gpu", type=int, default=0)
    a = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(a.gpu)

    def safe(fn, *args):
        try:
            return fn(*args)
        except n.NVMLError:
            return None

    mem_temp_field = getattr(n, "NVML_FI_DEV_MEMORY_TEMP", 82)
    throttle = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
    with open(a.out, "a", buffering=1) as f:
        f.write(json.dumps({"kind": "anchor", "t_ns": time.perf_counter_ns(), "wall_ns": time.time_ns(),
                            "name": safe(n.nvmlDeviceGetName, h)}) + "\n")
        nxt = time.perf_counter()
        while not stop:
            t = time.perf_counter_ns()
            rec = {"t_ns": t}
            m = safe(n.nvmlDeviceGetMemoryInfo, h)
            if m is not None:
                rec["mem_used_b"], rec["mem_total_b"] = m.used, m.total
            rec["temp_c"] = safe(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU)
            fv = safe(n.nvmlDeviceGetFieldValues, h, [mem_temp_field])
            if fv and fv[0].nvmlReturn == 0:
                rec["mem_temp_c"] = fv[0].value.uiVal
            rec["sm_mhz"] = safe(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_SM)
            rec["mem_mhz"] = safe(n.nvmlDeviceGetClockInfo, h, n.NVML_CLOCK_MEM)
            p = safe(n.nvmlDeviceGetPowerUsage, h)
            rec["power_w"] = p / 1000 if p is not None else None
            e = safe(n.nvmlDeviceGetTotalEnergyConsumption, h)
            rec["energy_j"] = e / 1000 if e is not None else None
            u = safe(n.nvmlDeviceGetUtilizationRates, h)
            if u is not None:
                rec["util_gpu"], rec["util_mem"] = u.gpu, u.memory
            rec["throttle"] = safe(throttle, h)
            rec["pstate"] = safe(n.nvmlDeviceGetPerformanceState, h)
            procs = safe(n.nvmlDeviceGetComputeRunningProcesses, h) or []
            rec["procs"] = {str(pr.pid): pr.usedGpuMemory for pr in procs}
            f.write(json.dumps(rec) + "\n")
            nxt += a.period
            time.sleep(max(0.0, nxt - time.perf_counter()))
    n.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
