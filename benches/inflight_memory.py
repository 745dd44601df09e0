"""Memory a load generator holds per request in flight, and per worker process: the figures behind
``load.plan.BYTES_PER_IN_FLIGHT`` / ``BYTES_PER_WORKER`` / ``BYTES_PER_ARRIVAL`` (the bound exists because
``-c 99999999999999999999`` once filled 23.8 GB before the kernel's OOM killer ended the run).

Every step runs in a fresh Python process. A step imports wattbench, runs a 4-request level to
load the client (aiohttp, uvloop), notes its RSS, then runs one closed-loop level of ``C`` streams
× one request each in one in-process worker against the scripted streaming server
(``tests/fakes/stream_server.py``, its own process) whose first token comes after ``--ttft-ms``:
every stream is in flight at once for that long. A thread samples the step's RSS every 20 ms; the
step reports

- ``rss_before_mb``: after imports and the warm-up level;
- ``rss_in_flight_mb``: the largest RSS sampled while the level ran;
- ``bytes_per_in_flight``: (in flight − before) / C — a connection, its request and response
  state, the coroutine, the record being built.

Then ``worker_rss_mb``: the RSS of one spawned load-worker process once it is ready (what
``--workers N`` costs before any stream), and ``bytes_per_arrival``: what one materialized
open-loop arrival of the default workload (256-token prompt, ``workload.presets.load_workload``
with approximate lengths) holds, from ``tracemalloc`` over 20,000 of them.

Run from the repository root::

    PYTHONPATH=src python benches/inflight_memory.py --streams 256,1024 --json benches/data/inflight_memory/inflight_memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _step(base: str, streams: int) -> dict:
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from wattbench.load.level import run_level
    from wattbench.core.load_types import LevelSpec
    from wattbench.core.target import TargetSpec
    from wattbench.workload.base import RequestSpec

    def req(i: int) -> RequestSpec:
        return RequestSpec(prompt=f"r{i} " + "word " * 200, max_tokens=8)

    target = TargetSpec(base_url=base + "/v1", model="fake-model", request_timeout_s=120)
    run_level(LevelSpec(index=0, mode="concurrency", value=4, num_requests=4, workers=1), target, req)
    before = _rss_mb()
    peak = [before]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    t0 = time.perf_counter()
    out = run_level(LevelSpec(index=1, mode="concurrency", value=streams, num_requests=streams, workers=1),
                    target, req)
    level_s = time.perf_counter() - t0
    stop.set()
    th.join()
    ok = int(out.records.columns("ok")["ok"].sum())
    return {"streams": streams, "ok": ok, "rss_before_mb": round(before, 1), "rss_in_flight_mb": round(peak[0], 1),
            "bytes_per_in_flight": round((peak[0] - before) * 1024 * 1024 / streams), "level_s": round(level_s, 2)}


def _worker_rss() -> float:
    """RSS of one spawned load worker once it reported ready (imports done)."""
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from wattbench.load.executor import SubprocessExecutor
    from wattbench.load.plan import WorkerPlan
    from wattbench.core.target import TargetSpec

    plan = WorkerPlan(0, 0, "concurrency", TargetSpec(base_url="http://127.0.0.1:9/v1", model="m"), concurrency=1)
    ex = SubprocessExecutor([plan], None)
    ex.prepare()
    try:
        return _rss_mb(ex.procs[0].pid)
    finally:
        for p in ex.procs:
            p.kill()
        ex.close()


def _arrival_bytes(n: int = 20_000) -> int:
    """Bytes one materialized open-loop arrival of the default workload holds (tracemalloc)."""
    import tracemalloc

    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from wattbench.workload.presets import load_workload
    from wattbench.workload.tokenizer import open_token_source

    wl = load_workload(None, open_token_source(None), 0)
    it = wl.specs(n, start=0)
    tracemalloc.start()
    a = tracemalloc.take_snapshot()
    held = [(i, i * 0.001, s, False) for i, s in enumerate(it)]
    b = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in b.compare_to(a, "filename"))
    assert len(held) == n
    return round(grown / n)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", default="256,1024")
    p.add_argument("--ttft-ms", type=float, default=3000.0)
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)  # base,streams: one step (child)
    p.add_argument("--json", default=None, help="write the results to this file")
    a = p.parse_args(argv)
    if a.step:
        base, n = a.step.rsplit(",", 1)
        print(json.dumps(_step(base, int(n))))
        return 0
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from tests.fakes.stream_server_proc import stream_server

    rows = []
    with stream_server("--ttft-ms", str(a.ttft_ms), "--itl-ms", "1") as (base, _stats):
        for c in (int(x) for x in a.streams.split(",")):
            out = subprocess.run([sys.executable, __file__, "--step", f"{base},{c}"], capture_output=True,
                                 text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    worker = round(_worker_rss(), 1)
    arrival = _arrival_bytes()
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.machine(),
            "cores": os.cpu_count(), "python": platform.python_version(),
            "loadavg": open("/proc/loadavg").read().split()[:3], "args": vars(a)}
    doc = {"meta": meta, "rows": rows, "worker_rss_mb": worker, "bytes_per_arrival": arrival}
    print(json.dumps({"worker_rss_mb": worker, "bytes_per_arrival": arrival, "meta": meta}))
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
