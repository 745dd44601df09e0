"""An independent observer for validating wattbench's GPU energy on a real GPU.

Runs in its own process beside a wattbench run and records, on the same CLOCK_MONOTONIC that
wattbench uses (``time.perf_counter_ns`` on Linux):
  * the NVML total-energy counter of every GPU every 20 ms (raw pynvml, no wattbench code), and
  * ``nvidia-smi --query-gpu=power.draw`` polled once a second (the way people usually measure).

Usage: python independent_meter.py OUT.jsonl [--seconds S]   (stops on SIGTERM/SIGINT)
Each line: {"t_ns": ..., "src": "nvml"|"smi", "gpu": i, "energy_mj"|"power_w": ...}
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pynvml

stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
signal.signal(signal.SIGINT, lambda *a: stop.set())


def smi_loop(out, lock):
    nxt = time.perf_counter()
    while not stop.is_set():
        t0 = time.perf_counter_ns()
        p = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,power.draw", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
        )
        t1 = time.perf_counter_ns()
        for line in p.stdout.strip().splitlines():
            idx, w = [x.strip() for x in line.split(",")]
            try:
                rec = {"t_ns": (t0 + t1) // 2, "src": "smi", "gpu": int(idx), "power_w": float(w)}
            except ValueError:
                continue
            with lock:
                out.write(json.dumps(rec) + "\n")
        nxt += 1.0
        stop.wait(max(0.0, nxt - time.perf_counter()))


def main() -> None:
    path = sys.argv[1]
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 1e9
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    lock = threading.Lock()
    end = time.perf_counter() + seconds
    with open(path, "w", buffering=1) as out:
        th = threading.Thread(target=smi_loop, args=(out, lock), daemon=True)
        th.start()
        nxt = time.perf_counter()
        while not stop.is_set() and time.perf_counter() < end:
            for i, h in enumerate(handles):
                t0 = time.perf_counter_ns()
                e = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
                t1 = time.perf_counter_ns()
                with lock:
                    out.write(json.dumps({"t_ns": (t0 + t1) // 2, "src": "nvml", "gpu": i, "energy_mj": e}) + "\n")
            nxt += 0.02
            time.sleep(max(0.0, nxt - time.perf_counter()))
        stop.set()
        th.join(timeout=5)


if __name__ == "__main__":
    main()
