"""Memory and time of one level's statistics (``summarize_level``) over a spilled RecordSet.

Builds a ``RecordSet`` of ``--requests`` completed requests with ``--chunks`` chunk stamps each
(spilled to a temporary directory, as a long level's would be), then, in this process:

- ``tracemalloc_peak_mb``: the peak of Python-traced allocations (numpy arrays included) during
  ``summarize_level(records, start, end)``, above what was allocated before it;
- ``wall_s``: the same call's wall time, without tracemalloc (best of ``--repeat``).

Run it with the sources to measure (the ``src`` of this tree, or of an older commit unpacked
elsewhere, to compare)::

    PYTHONPATH=src python benches/stats_memory.py --requests 200000 --chunks 16
    git archive 51ee3df src | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/src python benches/stats_memory.py
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
import tracemalloc

import numpy as np


def build(n: int, chunks: int, seed: int = 1):
    from wattbench.core.recordset import RecordSet

    rng = np.random.default_rng(seed)
    rs = RecordSet()
    sent = np.sort(rng.integers(0, 3_600 * 10**9, n))
    ttft = rng.integers(20 * 10**6, 400 * 10**6, n)
    gaps = rng.integers(5 * 10**6, 40 * 10**6, (n, chunks - 1))
    for i in range(n):
        first = int(sent[i] + ttft[i])
        c = [first] + (first + np.cumsum(gaps[i])).tolist()
        rs.append({"id": i, "level": 0, "sent_ns": int(sent[i]), "first_token_ns": first, "last_token_ns": c[-1],
                   "end_ns": c[-1] + 10**5, "chunk_ns": c, "output_tokens": chunks, "input_tokens": 128,
                   "requested_input_tokens": 128, "requested_output_tokens": chunks, "ok": True,
                   "warmup": i < n // 100, "token_source": "usage"})
    return rs, int(sent[0]), int(sent[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    from wattbench.metrics.latency import summarize_level

    t = time.perf_counter()
    rs, t0, t1 = build(a.requests, a.chunks)
    build_s = time.perf_counter() - t
    walls = []
    for _ in range(a.repeat):
        gc.collect()
        t = time.perf_counter()
        req, lat, thr = summarize_level(rs, t0, t1)
        walls.append(time.perf_counter() - t)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    summarize_level(rs, t0, t1)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    print(json.dumps({
        "requests": a.requests, "chunks": a.chunks, "spilled": rs.spilled, "build_s": round(build_s, 1),
        "tracemalloc_peak_mb": round(peak / 2**20, 1), "bytes_per_request": round(peak / a.requests),
        "wall_s": round(min(walls), 2), "completed": req.completed, "itl_count": lat.itl_ms.count,
        "itl_p99_ms": lat.itl_ms.p99, "output_tokens": thr.output_tokens,
        "loadavg_1m": os.getloadavg()[0], "python": platform.python_version(),
    }))


if __name__ == "__main__":
    main()
