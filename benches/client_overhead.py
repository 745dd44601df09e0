"""Client overhead: CPU per streamed chunk, the chunk rate one worker sustains, worker scaling.

Drives the scripted streaming server (``tests/fakes/stream_server.py``, a separate process) with
closed-loop levels of growing concurrency. For every step it reports:

- ``chunk_rate``: content chunks per second the client received over the level;
- ``cpu_us_per_chunk``: client CPU time (the busiest worker: loop-thread CPU in-process,
  process CPU for worker processes) divided by the chunks that worker received;
- ``ttft_err_ms``: the client's mean TTFT minus the true mean TTFT, per request
  ``first_token_written - sent`` with the write time recorded by the server on the same
  CLOCK_MONOTONIC: the client's own arrival-stamp error, free of the server's timer lateness;
- ``itl_err_ms`` likewise for the mean inter-token latency (server write gaps as truth);
- ``server_wake_ms``: mean time from the client's write of a request to the server reading it
  (kernel + the server process getting a CPU), shown because it grows when the host is busy;
- ``loop_lag_p99_ms``: p99 lateness of the client's 10 ms event-loop probe (how long the client
  waited for a CPU or for its own work): arrival stamps can be late by this much.

The sustainable chunk rate of one worker is the largest step whose ``ttft_err_ms`` stays within
1 ms of the error at the lightest step.

Run from the repository root::

    PYTHONPATH=src python benches/client_overhead.py --itl-ms 10 --streams 16,64,256,512,1024 --workers 1,2
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def one_step(base: str, stats, conc: int, workers: int, out_tokens: int, per_stream: int) -> dict:
    from wattbench.load.level import run_level
    from wattbench.core.load_types import LevelSpec
    from wattbench.core.target import TargetSpec
    from wattbench.metrics.latency import summarize_level
    from wattbench.workload.base import RequestSpec

    def req(i: int) -> RequestSpec:  # the first word tags the request for the server's records
        return RequestSpec(prompt=f"r{i} two three four", max_tokens=out_tokens)

    target = TargetSpec(base_url=base + "/v1", model="fake-model")
    spec = LevelSpec(index=0, mode="concurrency", value=conc, num_requests=conc * per_stream,
                     warmup_requests=conc, workers=workers)
    stats(reset=True)
    t0 = time.perf_counter()
    out = run_level(spec, target, req)
    wall = time.perf_counter() - t0
    server = stats()
    truth = stats.per_request()
    req_s, lat, thr = summarize_level(out.records, out.start_ns, out.end_ns)
    meas = [r for r in out.records if not r.warmup and r.ok]
    true_ttft = sum(truth[f"r{r.id}"][1] - r.sent_ns for r in meas) / len(meas) / 1e6
    true_itl = (
        sum(truth[f"r{r.id}"][2] - truth[f"r{r.id}"][1] for r in meas)
        / sum(len(r.chunk_ns) - 1 for r in meas) / 1e6
    )
    wake = sum(truth[f"r{r.id}"][0] - r.sent_ns for r in meas) / len(meas) / 1e6
    chunks_total = sum(len(r.chunk_ns) for r in out.records)
    first = min(r.sent_ns for r in out.records)
    last = max(r.end_ns for r in out.records)
    span_s = (last - first) / 1e9
    by_worker: dict[int, int] = {}
    for r in out.records:
        by_worker[r.worker] = by_worker.get(r.worker, 0) + len(r.chunk_ns)
    cpu_pct = out.load.client_cpu_pct_per_worker
    # CPU seconds of each worker over its level (pct of one core * its span) per chunk it got.
    us_per_chunk = [
        (cpu_pct[w] / 100.0 * span_s) / by_worker.get(w, 1) * 1e6 for w in range(len(cpu_pct))
    ]
    return {
        "streams": conc,
        "workers": out.load.workers,
        "chunk_rate": chunks_total / span_s,
        "cpu_us_per_chunk": max(us_per_chunk) if us_per_chunk else None,
        "client_cpu_pct": out.load.client_cpu_pct,
        "ttft_ms": lat.ttft_ms.mean,
        "true_ttft_ms": true_ttft,
        "ttft_err_ms": lat.ttft_ms.mean - true_ttft,
        "ttft_p99_ms": lat.ttft_ms.p99,
        "itl_ms": lat.itl_ms.mean,
        "itl_err_ms": lat.itl_ms.mean - true_itl,
        "server_wake_ms": wake,
        "loop_lag_p99_ms": out.load.client_loop_lag_ms.p99,
        "saturated": out.load.saturated,
        "server_timer_late_ms": server["token_late_ms"]["mean"],
        "failed": req_s.failed,
        "wall_s": wall,
    }


def main(argv=None) -> int:
    from tests.fakes.stream_server_proc import stream_server

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--output-tokens", type=int, default=32)
    p.add_argument("--per-stream", type=int, default=2, help="measured requests per stream")
    p.add_argument("--streams", default="16,64,256,512,1024")
    p.add_argument("--workers", default="1,2")
    p.add_argument("--server-loop", default="uvloop", choices=["asyncio", "uvloop"])
    p.add_argument("--json", default=None, help="write all steps to this file")
    a = p.parse_args(argv)
    streams = [int(x) for x in a.streams.split(",")]
    workers = [int(x) for x in a.workers.split(",")]
    rows = []
    with stream_server("--ttft-ms", str(a.ttft_ms), "--itl-ms", str(a.itl_ms), "--loop", a.server_loop) as (base, stats):
        for w in workers:
            for conc in streams:
                if conc < w:
                    continue
                row = one_step(base, stats, conc, w, a.output_tokens, a.per_stream)
                rows.append(row)
                print(
                    f"workers={row['workers']} streams={conc:5d} chunks/s={row['chunk_rate']:9.0f} "
                    f"cpu/chunk={row['cpu_us_per_chunk']:6.1f} us cpu={row['client_cpu_pct']:5.1f}% "
                    f"ttft_err={row['ttft_err_ms']:+6.2f} ms (p99 ttft {row['ttft_p99_ms']:.1f}) "
                    f"itl_err={row['itl_err_ms']:+6.3f} ms server_wake={row['server_wake_ms']:.2f} ms "
                    f"server_late={row['server_timer_late_ms']:.2f} ms "
                    f"loop_lag_p99={row['loop_lag_p99_ms']:.2f} ms "
                    f"failed={row['failed']}",
                    flush=True,
                )
    summary = {}
    for w in workers:
        mine = [r for r in rows if r["workers"] == w]
        if not mine:
            continue
        base_err = mine[0]["ttft_err_ms"]
        ok = [r for r in mine if r["ttft_err_ms"] - base_err <= 1.0 and not r["failed"]]
        summary[w] = {
            "baseline_ttft_err_ms": base_err,
            "max_chunk_rate_within_1ms": max((r["chunk_rate"] for r in ok), default=None),
            "at_streams": max((r["streams"] for r in ok), default=None),
            "cpu_us_per_chunk_median": sorted(r["cpu_us_per_chunk"] for r in mine)[len(mine) // 2],
        }
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu_model(),
        "cores": __import__("os").cpu_count(),
        "python": platform.python_version(),
        "args": vars(a),
    }
    print(json.dumps({"meta": meta, "summary": summary}, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
