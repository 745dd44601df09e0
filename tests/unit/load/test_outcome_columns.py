"""The level's outcome (``assemble_outcome``: windows, achieved rate, mean in flight, send lags,
drain) and ``accounting.steady.steady_window`` computed over numpy columns of a ``RecordSet``, on
randomized records: warm-up ones, failed ones, missing stamps (no first/last token, no end), equal
timestamps, in sets that spill to disk, so that a wrong index, mask or tie rule shows.

Properties that must hold whatever the figures (a list and a spilled set agree, the row order does
not matter, in-flight time adds up over adjacent spans, the steady window lies after the last send
and at the target concurrency), and golden outputs (``tests/fixtures/golden/outcome_columns.json``,
every figure on fixed seeds; ``tests/golden.py`` says how to regenerate). The rules on figures worked
out by hand: tests/unit/load/test_load_level_plan.py::test_assemble_* and
tests/unit/accounting/test_accounting_steady.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests import golden
from wattbench.accounting.steady import steady_window, steady_window_ns
from wattbench.load.level import assemble_outcome, mean_in_flight
from wattbench.load.link import WorkerResult
from wattbench.core.load_types import LevelSpec
from wattbench.metrics.latency import request_end_ns
from wattbench.core.recordset import RecordSet
from wattbench.core.schema import RequestRecord

GOLDEN = "outcome_columns"
ABOUT = ("What load.level.assemble_outcome and accounting.steady.steady_window compute on the seeded records of "
         "tests/unit/load/test_outcome_columns.py. Written from the column code when it was checked equal, figure "
         "for figure, to the previous per-record code on these inputs; the rules themselves are pinned by the "
         "hand-worked tests named in that file's docstring and by its properties.")
REGEN = "WATTBENCH_REGEN_GOLDEN=1 python -m pytest tests/unit/load/test_outcome_columns.py -k golden"


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


CASES = [(seed, mode) for seed in range(6) for mode in ("concurrency", "rate", "trace")]


def _case(seed, mode):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    recs = random_records(rng, n, open_loop=mode != "concurrency")
    value = float(rng.integers(1, 12)) if mode == "concurrency" else 20.0
    spec = LevelSpec(index=0, mode=mode, value=value, num_requests=n)
    stops = [int(rng.integers(1_000, 1_000 + 40 * n))] if rng.random() < 0.7 else []
    return recs, spec, stops


def _outcome(spec, recs, stops, records=None):
    res = WorkerResult(None if records is not None else recs, 10.0, stops[0] if stops else None, False)
    return assemble_outcome(spec, [res], 5, 20.0, 1, records=records)


def _figures(out) -> dict:
    return {"start": out.start_ns, "end": out.end_ns, "steady": [out.steady_start_ns, out.steady_end_ns],
            "rate": out.load.achieved_rate_rps, "in_flight": out.load.mean_in_flight,
            "lags": out.load.send_lag_ms.model_dump() if hasattr(out.load.send_lag_ms, "model_dump")
            else out.load.send_lag_ms, "drain": out.load.drain_s}


@pytest.mark.parametrize("seed,mode", CASES)
def test_outcome_holds_its_rules_from_a_spilled_set_and_from_a_list(seed, mode):
    """The window runs from the first measured send to the last measured end; the drain is the time
    from the stop to the last end of any stream; the mean in flight is the in-flight time over the
    window divided by its length, and splits exactly over two halves; a spilled set and a plain list
    (what tests and Ray's actors hand over) give the same outcome."""
    recs, spec, stops = _case(seed, mode)
    rs = RecordSet.from_records(recs, spill_bytes=2000)
    assert rs.spilled or len(recs) < 5
    out = _outcome(spec, recs, stops, records=rs)
    assert out.records is rs
    assert _figures(_outcome(spec, recs, stops)) == _figures(out)
    measured = [r for r in recs if not r.warmup]
    ends = {r.id: request_end_ns(r) for r in recs}
    if measured:
        assert out.start_ns == min(r.sent_ns for r in measured)
        assert out.end_ns == max(ends[r.id] or r.sent_ns for r in measured)
    if stops:
        assert out.load.drain_s == pytest.approx(max(0.0, (max(ends[r.id] or r.sent_ns for r in recs) - stops[0]) / 1e9))
    a, b = out.start_ns, out.end_ns
    if b > a:
        busy = sum(max(0, min(e, b) - max(r.sent_ns, a)) for r in recs if (e := ends[r.id]) is not None)
        assert out.load.mean_in_flight == pytest.approx(busy / (b - a), rel=1e-12)
        m = (a + b) // 2
        if a < m < b:
            halves = mean_in_flight(rs, a, m) * (m - a) + mean_in_flight(rs, m, b) * (b - m)
            assert halves == pytest.approx(busy, rel=1e-9)
    if spec.mode == "concurrency" and len(measured) > 1 and b > a:
        assert out.load.achieved_rate_rps == pytest.approx(sum(r.ok for r in measured) / ((b - a) / 1e9))


@pytest.mark.parametrize("seed,mode", CASES)
def test_outcome_golden(seed, mode):
    """Every figure of the outcome on fixed records (equal stamps, missing ends), against the golden file."""
    recs, spec, stops = _case(seed, mode)
    golden.check_part(GOLDEN, f"outcome seed={seed} mode={mode}",
                      _figures(_outcome(spec, recs, stops, records=RecordSet.from_records(recs, spill_bytes=2000))),
                      about=ABOUT, regenerate=REGEN)


def _pairs(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(0, 300))
    pairs = []
    for _ in range(n):
        s = int(rng.integers(0, 5 * n + 1))
        e = None if rng.random() < 0.1 else s + int(rng.integers(0, 40))  # e == s happens
        pairs.append((s, e))
    concs = (None, 0, 1, 2, int(rng.integers(1, 20)), n + 1)
    starts = (None, int(rng.integers(0, 5 * n + 1)))
    return rng, n, pairs, concs, starts


@pytest.mark.parametrize("seed", range(12))
def test_steady_window_holds_its_rules_in_any_row_order(seed):
    """The window ends at the first end after the last send (never before it) and starts at the
    first send or ``start_ns`` (open loop), or once the target concurrency is in flight (closed loop,
    never before ``start_ns``); a concurrency below 1 has no window; the tuple form and the column
    form in any row order agree."""
    rng, n, pairs, concs, starts = _pairs(seed)
    sent = np.array([s for s, _ in pairs], dtype=np.int64)
    end = np.array([-1 if e is None else e for _, e in pairs], dtype=np.int64)
    for mode in ("concurrency", "rate"):
        for conc in concs:
            for start in starts:
                w = steady_window(pairs, mode, conc, start_ns=start)
                order = rng.permutation(n)
                assert steady_window_ns(sent[order], end[order], mode, conc, start_ns=start) == w
                if w is None:
                    continue
                last_send = max(s for s, _ in pairs)
                assert w.end_ns == min(e for _, e in pairs if e is not None and e > last_send)
                assert w.duration_s == (w.end_ns - w.start_ns) / 1e9 > 0
                first = min(s for s, _ in pairs) if start is None else start
                if mode == "rate":
                    assert w.start_ns == first
                else:
                    assert conc and conc >= 1 and w.start_ns >= first
                    if w.start_ns > first:  # the target reached at the start (ends before sends at a tie), not before
                        def in_flight(t):
                            return sum(s <= t for s, _ in pairs) - sum(e is not None and e <= t for _, e in pairs)
                        assert in_flight(w.start_ns) >= conc > in_flight(w.start_ns - 1)


@pytest.mark.parametrize("seed", range(12))
def test_steady_window_golden(seed):
    """The steady window for every mode, concurrency and start on fixed pairs, against the golden file."""
    _, n, pairs, concs, starts = _pairs(seed)
    got = [[mode, conc, start, None if w is None else [w.start_ns, w.end_ns]]
           for mode in ("concurrency", "rate") for conc in concs for start in starts
           for w in [steady_window(pairs, mode, conc, start_ns=start)]]
    golden.check_part(GOLDEN, f"steady seed={seed}", got, about=ABOUT, regenerate=REGEN)
