"""Memory and time of the per-request energy split (``accounting.request_energy.attribute_level``) on one level.

Builds ``N`` synthetic requests over a ``--window-s`` window (prompt and output tokens, chunk stamps
for ``--chunked`` of them, the rest spread between first and last token; three tenants, tags, two
models), a meter whose energy follows them (idle power plus J per prompt and per output token), and
splits one boundary's window energy over them (the default 1 s intervals on a 100 ms meter), then
puts carbon on each record (``accounting.carbon.apply_carbon``'s per-request part). Reported, for
the split and carbon together:

- ``tracemalloc_peak_mb``: the peak of Python allocations during the call (the records are built
  before tracing starts, so this is what the split itself needs);
- ``wall_s``: the same call's wall time in a second, untraced run (tracemalloc slows Python code).

``--form set`` passes the records as a spilled ``RecordSet`` (what a level hands over since the record spool);
``--form list`` as a list of ``RequestRecord`` (what the code took before; run it against an older
checkout with ``PYTHONPATH=<old>/src`` to measure the old code).

Run from the repository root::

    PYTHONPATH=src python benches/request_energy_memory.py --requests 200000 --form set
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
import tracemalloc
from types import SimpleNamespace

import numpy as np

S = 1_000_000_000
MS = 1_000_000


def records(n: int, window_s: float, chunked: float, seed: int = 1):
    from wattbench.core.schema import RequestRecord

    rng = np.random.default_rng(seed)
    sent = np.sort(rng.uniform(0, window_s - 5, n) * S).astype(np.int64)
    for i in range(n):
        first = int(sent[i] + rng.uniform(30, 300) * MS)
        n_out = int(rng.integers(8, 128))
        itl = int(rng.uniform(10, 30) * MS)
        last = first + itl * (n_out - 1)
        chunks = list(range(first, last + 1, itl)) if rng.random() < chunked else []
        yield RequestRecord(id=i, level=0, sent_ns=int(sent[i]), first_token_ns=first, last_token_ns=last,
                            end_ns=last + MS, chunk_ns=chunks, input_tokens=int(rng.integers(16, 2048)),
                            output_tokens=n_out, tenant=("acme", "globex", "initech")[i % 3],
                            tags=["batch"] if i % 4 == 0 else [], model=("m1", "m2")[i % 2])


def meter(n: int, window_s: float, seed: int = 1):
    """Energy over [a, b): 80 W idle plus 0.004 J per prompt token and 0.25 J per output token at their times
    (the same draws as ``records``, so the fit recovers the split)."""
    rng = np.random.default_rng(seed)
    sent = np.sort(rng.uniform(0, window_s - 5, n) * S).astype(np.int64)
    t, e = [], []
    for i in range(n):
        first = int(sent[i] + rng.uniform(30, 300) * MS)
        n_out = int(rng.integers(8, 128))
        itl = int(rng.uniform(10, 30) * MS)
        rng.random()
        n_in = int(rng.integers(16, 2048))
        t.append(first)
        e.append(0.004 * n_in)
        t.append(first + itl * (n_out - 1) // 2)
        e.append(0.25 * n_out)
    order = np.argsort(t)
    tt, cum = np.array(t)[order], np.concatenate([[0.0], np.cumsum(np.array(e)[order])])
    return lambda a, b: 80.0 * (b - a) / S + cum[np.searchsorted(tt, b)] - cum[np.searchsorted(tt, a)]


def level(f, window_s: float):
    w = SimpleNamespace(start_ns=0, end_ns=int(window_s * S), duration_s=window_s)
    be = SimpleNamespace(energy_j=f(0, w.end_ns), idle_power_w=80.0, update_period_s=0.1,
                         carbon_intensity_g_per_kwh=400.0)
    return SimpleNamespace(window=w, energy={"accelerator": be}, attribution={}, energy_steady={},
                           steady_window=None, requests=SimpleNamespace(completed=0))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--window-s", type=float, default=300.0)
    ap.add_argument("--chunked", type=float, default=0.5, help="share of requests with chunk stamps")
    ap.add_argument("--form", choices=("set", "list"), default="set")
    a = ap.parse_args()
    from wattbench.accounting.carbon import apply_carbon
    from wattbench.accounting.request_energy import attribute_level

    f = meter(a.requests, a.window_s)
    out = {"requests": a.requests, "window_s": a.window_s, "form": a.form, "loadavg": os.getloadavg()}
    for traced in (True, False):
        if a.form == "set":
            from wattbench.core.recordset import RecordSet

            recs = RecordSet.from_records(records(a.requests, a.window_s, a.chunked))
            out["spilled"] = recs.spilled
        else:
            recs = list(records(a.requests, a.window_s, a.chunked))
        lv = level(f, a.window_s)
        gc.collect()
        if traced:
            tracemalloc.start()
        t = time.perf_counter()
        attribute_level(lv, recs, lambda b: f)
        apply_carbon(SimpleNamespace(**{**vars(lv), "window": None}), recs, None, 0, 0, lambda b: f, 1.0)
        dt = time.perf_counter() - t
        if traced:
            out["tracemalloc_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
            tracemalloc.stop()
        else:
            out["wall_s"] = round(dt, 2)
        att = lv.attribution["accelerator"]
        out["weighting"], out["split_requests"], out["energy_j"] = att.weighting, att.requests, att.energy_j
        del recs
    print(json.dumps(out))


if __name__ == "__main__":
    main()
