"""Memory a load level holds per request: peak RSS of one closed-loop level against the scripted server.

Every step runs in a fresh Python process (so one step's peak does not hide the next one's): it
imports wattbench, notes its RSS, runs one closed-loop level of ``N`` requests at ``--streams``
streams in one in-process worker against the scripted streaming server
(``tests/fakes/stream_server.py``, its own process, fast tokens), and reports

- ``rss_before_mb``: RSS after imports, before the level;
- ``peak_rss_mb``: the process's peak RSS (``ru_maxrss``) after the level;
- ``bytes_per_request``: (peak − before) / N, what the level held per request at its end
  (records, their chunk stamps, the outcome).

The issue-17 goal is ≤ 500 bytes/request and a peak flat (±10%) between 20 k and 200 k requests.

Run from the repository root::

    PYTHONPATH=src python benches/level_memory.py --requests 2000,20000 --streams 64 --output-tokens 16
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _step(base: str, n: int, streams: int, out_tokens: int) -> dict:
    """One level in this process (called in a fresh child)."""
    import resource

    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from wattbench.load.level import run_level
    from wattbench.load.types import LevelSpec, TargetSpec
    from wattbench.workload.base import RequestSpec

    def rss_mb() -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def req(i: int) -> RequestSpec:
        return RequestSpec(prompt=f"r{i} two three four", max_tokens=out_tokens)

    target = TargetSpec(base_url=base + "/v1", model="fake-model")
    spec = LevelSpec(index=0, mode="concurrency", value=streams, num_requests=n, workers=1)
    before = rss_mb()
    t0 = time.perf_counter()
    out = run_level(spec, target, req)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ok = sum(1 for r in out.records if r.ok)
    chunks = sum(len(r.chunk_ns) for r in out.records)
    return {"requests": n, "ok": ok, "chunks_per_request": chunks / max(1, len(out.records)),
            "rss_before_mb": round(before, 1), "peak_rss_mb": round(peak, 1),
            "bytes_per_request": round((peak - before) * 1024 * 1024 / n), "wall_s": round(wall, 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", default="2000,20000")
    p.add_argument("--streams", type=int, default=64)
    p.add_argument("--output-tokens", type=int, default=16)
    p.add_argument("--step", default=None, help=argparse.SUPPRESS)  # base,n: run one step (child)
    p.add_argument("--json", default=None, help="write the steps to this file")
    a = p.parse_args(argv)
    if a.step:
        base, n = a.step.rsplit(",", 1)
        print(json.dumps(_step(base, int(n), a.streams, a.output_tokens)))
        return 0
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from tests.fakes.stream_server_proc import stream_server

    rows = []
    with stream_server("--ttft-ms", "0", "--itl-ms", "0") as (base, _stats):
        for n in (int(x) for x in a.requests.split(",")):
            out = subprocess.run([sys.executable, __file__, "--step", f"{base},{n}", "--streams", str(a.streams),
                                  "--output-tokens", str(a.output_tokens)], capture_output=True, text=True,
                                 check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.machine(),
            "cores": os.cpu_count(), "python": platform.python_version(),
            "loadavg": open("/proc/loadavg").read().split()[:3], "args": vars(a)}
    print(json.dumps({"meta": meta}))
    if a.json:
        Path(a.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
