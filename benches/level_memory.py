"""Memory a load level holds per request: peak RSS of one closed-loop level against the scripted server.

Every step runs in a fresh Python process (so one step's peak does not hide the next one's): it
imports wattbench, notes its RSS, runs one closed-loop level of ``N`` requests at ``--streams``
streams in one in-process worker against the scripted streaming server
(``tests/fakes/stream_server.py``, its own process, fast tokens), then what the runner does with
the level (``run/level.py``): ``accounting.level.account_level`` (window, statistics, tokens in the
window, energy from a declared 500 W meter) and its findings, the per-request energy split
(``accounting.request_energy.attribute_level``), and ``requests.jsonl`` written (streamed, without
chunk stamps) to a temporary directory. It reports

- ``rss_before_mb``: RSS after imports, before the level;
- ``peak_rss_level_mb``: the peak RSS (``ru_maxrss``) when the level ended;
- ``peak_rss_account_mb``, ``peak_rss_attribute_mb``: the peak RSS after the accounting and
  after the per-request energy split;
- ``peak_rss_mb``: the peak RSS after the write (the step's peak);
- ``bytes_per_request``: (peak − before) / N;
- ``level_s``, ``account_s``, ``write_s``: wall time of the level, of its accounting (statistics,
  energy, per-request split), of writing ``requests.jsonl``.

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
    """One level and its accounting in this process (called in a fresh child)."""
    import resource
    import tempfile

    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    from tests.fakes.scripted_sensor import build_log, grid, power_channel
    from wattbench.accounting.level import LevelContext, account_level, add_level_findings, count_source
    from wattbench.accounting.request_energy import attribute_level
    from wattbench.accounting.boundaries import boundary_totals
    from wattbench.load.level import run_level
    from wattbench.core.load_types import LevelSpec
    from wattbench.core.target import TargetSpec
    from wattbench.results import rundir
    from wattbench.workload.base import RequestSpec

    def rss_mb() -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def peak_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def req(i: int) -> RequestSpec:
        return RequestSpec(prompt=f"r{i} two three four", max_tokens=out_tokens)

    target = TargetSpec(base_url=base + "/v1", model="fake-model")
    spec = LevelSpec(index=0, mode="concurrency", value=streams, num_requests=n, workers=1)
    before = rss_mb()
    t0 = time.perf_counter()
    out = run_level(spec, target, req)
    t_level = time.perf_counter() - t0
    peak_level = peak_mb()
    # the runner's order: account, attribute per request, write requests.jsonl (run/level.py)
    t1 = time.perf_counter()
    ts = grid(out.start_ns / 1e9 - 1.0, out.end_ns / 1e9 + 1.0, 0.1)  # a declared 500 W meter
    log = build_log((power_channel("p"), ts, [500.0] * len(ts)))
    lv = account_level(0, spec, out, LevelContext(log=log), count_source(out.records))
    add_level_findings(lv, spec, out, "approx")
    peak_account = peak_mb()

    def energy_fn_for(b: str):
        def f(a: int, z: int) -> float | None:
            t = boundary_totals(log, a, z).get(b)
            return None if t is None else t.energy_j
        return f

    attribute_level(lv, out.records, energy_fn_for)
    t_account = time.perf_counter() - t1
    peak_attribute = peak_mb()
    t2 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        rundir.append_requests(d, out.records, keep_chunks=False)
        jsonl_mb = os.path.getsize(os.path.join(d, rundir.REQUESTS_FILE)) / 1e6
    t_write = time.perf_counter() - t2
    peak = peak_mb()
    c = out.records.columns("ok", "n_chunks")
    return {"requests": n, "ok": int(c["ok"].sum()), "chunks_per_request": float(c["n_chunks"].mean()),
            "completed": lv.requests.completed, "output_tokens": lv.throughput.output_tokens,
            "rss_before_mb": round(before, 1), "peak_rss_level_mb": round(peak_level, 1),
            "peak_rss_account_mb": round(peak_account, 1), "peak_rss_attribute_mb": round(peak_attribute, 1),
            "peak_rss_mb": round(peak, 1), "bytes_per_request": round((peak - before) * 1024 * 1024 / n),
            "requests_jsonl_mb": round(jsonl_mb, 1), "spilled": out.records.spilled,
            "level_s": round(t_level, 2), "account_s": round(t_account, 2), "write_s": round(t_write, 2)}


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
