"""The level's outcome from RecordSet columns equals the per-record code it replaced.

``assemble_outcome`` (windows, achieved rate, mean in flight, send lags, drain) and
``accounting.steady.steady_window`` used to walk lists of ``RequestRecord`` / Python tuples; they now
compute over numpy columns of a ``RecordSet``. The old code is kept here verbatim as the reference and
both are run on randomized records — warm-up ones, failed ones, missing stamps (no first/last token,
no end), equal timestamps — in sets that spill to disk, so a wrong index, mask or tie rule shows.

Such comparisons prove a refactor, not correctness (a rule wrong in both is not seen): each one
names, in its docstring, the test that checks the same rule against figures worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from wattbench.accounting.steady import steady_window, steady_window_ns
from wattbench.load.level import assemble_outcome, mean_in_flight
from wattbench.load.link import WorkerResult
from wattbench.load.types import LevelSpec
from wattbench.metrics.latency import request_end_ns, stats
from wattbench.results.recordset import RecordSet
from wattbench.results.schema import RequestRecord, Window

# ------------------------------------------------------------------ the code before (reference)


def old_steady_window(requests, mode, target_concurrency=None, *, start_ns=None):
    reqs = list(requests)
    if not reqs:
        return None
    last_send = max(s for s, _ in reqs)
    drains = [e for _, e in reqs if e is not None and e > last_send]
    if not drains:
        return None
    end = min(drains)
    first = min(s for s, _ in reqs) if start_ns is None else start_ns
    if mode == "concurrency":
        if not target_concurrency or target_concurrency < 1:
            return None
        events = [(s, 1) for s, _ in reqs] + [(e, 0) for _, e in reqs if e is not None]
        events.sort()
        inflight = 0
        reach = None
        for t, kind in events:
            inflight += 1 if kind == 1 else -1
            if inflight >= target_concurrency:
                reach = t
                break
        if reach is None:
            return None
        start = max(reach, first)
    else:
        start = first
    if end <= start:
        return None
    return Window(start_ns=start, end_ns=end, duration_s=(end - start) / 1e9, kind="steady")


def old_mean_in_flight(records, start_ns, end_ns):
    if end_ns <= start_ns or not records:
        return None
    total = 0
    for r in records:
        e = request_end_ns(r)
        if e is None:
            continue
        a, b = max(r.sent_ns, start_ns), min(e, end_ns)
        if b > a:
            total += b - a
    return total / (end_ns - start_ns)


def old_figures(spec, records, t0_ns, stops):
    records = sorted(records, key=lambda r: r.sent_ns)
    measured = [r for r in records if not r.warmup]
    if measured:
        start_ns = min(r.sent_ns for r in measured)
        end_ns = max(request_end_ns(r) or r.sent_ns for r in measured)
    else:
        start_ns = end_ns = t0_ns
    sw = None
    if measured:
        sw = old_steady_window([(r.sent_ns, request_end_ns(r)) for r in records], spec.mode,
                               int(spec.value) if spec.mode == "concurrency" else None, start_ns=start_ns)
    rate = None
    if len(measured) > 1:
        if spec.mode == "concurrency":
            dur = (end_ns - start_ns) / 1e9
            rate = sum(1 for r in measured if r.ok) / dur if dur > 0 else None
        else:
            first = min((r.scheduled_ns if r.scheduled_ns is not None else r.sent_ns) for r in measured)
            span = (max(r.sent_ns for r in measured) - first) / 1e9
            rate = (len(measured) - 1) / span if span > 0 else None
    lags = stats([(r.sent_ns - r.scheduled_ns) / 1e6 for r in measured if r.scheduled_ns is not None])
    drain = None
    if stops and records:
        last_end = max(request_end_ns(r) or r.sent_ns for r in records)
        drain = max(0.0, (last_end - max(stops)) / 1e9)
    return {"start": start_ns, "end": end_ns, "steady": (sw.start_ns, sw.end_ns) if sw else (None, None),
            "rate": rate, "in_flight": old_mean_in_flight(records, start_ns, end_ns), "lags": lags, "drain": drain}


# ------------------------------------------------------------------ randomized records


def random_records(rng: np.random.Generator, n: int, open_loop: bool) -> list[RequestRecord]:
    out = []
    for i in range(n):
        sent = int(rng.integers(1_000, 1_000 + 40 * n))  # a narrow range: equal stamps happen
        sched = sent - int(rng.integers(0, 50)) if open_loop and rng.random() < 0.9 else None
        kind = rng.random()
        first = last = end = None
        chunks: list[int] = []
        if kind < 0.8:  # answered
            first = sent + int(rng.integers(1, 200))
            chunks = sorted(int(x) for x in rng.integers(first, first + 400, int(rng.integers(1, 6))))
            chunks[0] = first
            last = chunks[-1]
            end = last + int(rng.integers(0, 5)) if rng.random() < 0.9 else None
        elif kind < 0.9:  # failed after a while, no content
            end = sent + int(rng.integers(0, 300))
        # else: never ended (in flight when the level stopped)
        out.append(RequestRecord(id=i, level=0, sent_ns=sent, scheduled_ns=sched, first_token_ns=first,
                                 last_token_ns=last, end_ns=end, chunk_ns=chunks, warmup=bool(rng.random() < 0.15),
                                 ok=kind < 0.8 and rng.random() < 0.95, output_tokens=len(chunks) or None))
    return out


CASES = [(seed, mode) for seed in range(12) for mode in ("concurrency", "rate", "trace")]


@pytest.mark.parametrize("seed,mode", CASES)
def test_outcome_from_columns_equals_the_per_record_code(seed, mode):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in tests/unit/load/test_load_level_plan.py::test_assemble_* (windows, rates,
    saturation)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    recs = random_records(rng, n, open_loop=mode != "concurrency")
    value = float(rng.integers(1, 12)) if mode == "concurrency" else 20.0
    spec = LevelSpec(index=0, mode=mode, value=value, num_requests=n)
    stops = [int(rng.integers(1_000, 1_000 + 40 * n))] if rng.random() < 0.7 else []
    want = old_figures(spec, recs, 5, stops)
    rs = RecordSet.from_records(recs, spill_bytes=2000)
    assert rs.spilled or n < 5
    res = WorkerResult(None, 10.0, stops[0] if stops else None, False)
    out = assemble_outcome(spec, [res], 5, 20.0, 1, records=rs)
    assert (out.start_ns, out.end_ns) == (want["start"], want["end"])
    assert (out.steady_start_ns, out.steady_end_ns) == want["steady"]
    assert out.load.achieved_rate_rps == want["rate"]
    assert out.load.mean_in_flight == want["in_flight"]
    assert out.load.send_lag_ms == want["lags"]
    assert out.load.drain_s == want["drain"]
    assert out.records is rs
    # a plain list of records (what tests and Ray's actors hand over) gives the same outcome
    again = assemble_outcome(spec, [WorkerResult(recs, 10.0, stops[0] if stops else None, False)], 5, 20.0, 1)
    assert (again.steady_start_ns, again.load.mean_in_flight) == (out.steady_start_ns, out.load.mean_in_flight)
    assert mean_in_flight(recs, want["start"], want["end"]) == want["in_flight"]


@pytest.mark.parametrize("seed", range(30))
def test_steady_window_from_columns_equals_the_tuple_code(seed):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in tests/unit/accounting/test_accounting_steady.py."""
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(0, 300))
    pairs = []
    for _ in range(n):
        s = int(rng.integers(0, 5 * n + 1))
        e = None if rng.random() < 0.1 else s + int(rng.integers(0, 40))  # e == s happens
        pairs.append((s, e))
    for mode in ("concurrency", "rate"):
        for conc in (None, 0, 1, 2, int(rng.integers(1, 20)), n + 1):
            for start in (None, int(rng.integers(0, 5 * n + 1))):
                want = old_steady_window(pairs, mode, conc, start_ns=start)
                assert steady_window(pairs, mode, conc, start_ns=start) == want
                sent = np.array([s for s, _ in pairs], dtype=np.int64)
                end = np.array([-1 if e is None else e for _, e in pairs], dtype=np.int64)
                order = rng.permutation(n)  # any row order: the rule does not depend on it
                assert steady_window_ns(sent[order], end[order], mode, conc, start_ns=start) == want
