"""Every per-level statistic computed from a RecordSet (columns, blocks) equals, float for float,
what the previous implementation computed from a list of RequestRecords: randomized records with
warm-up, failed, missing-usage, missing-stamp, stamp-less and multi-target requests, in a set
spilled to disk, with small stamp blocks so every statistic crosses block boundaries. The old
functions are copied here as the reference (commit 51ee3df).

Such comparisons prove a refactor, not correctness (a rule wrong in both is not seen): each one
names, in its docstring, the test that checks the same rule against figures worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

import wattbench.results.recordset as recordset_mod
from wattbench.accounting.level import count_source, oversaturation
from wattbench.accounting.level_findings import input_length_finding
from wattbench.metrics.window_tokens import stream_tokens_in_window, window_tokens
from wattbench.load.targets import per_target_summary
from wattbench.metrics.latency import stats, summarize_level
from wattbench.metrics.slo import goodput, level_check, parse_slos
from wattbench.results.recordset import RecordSet
from wattbench.results.schema import Latency, Requests, TargetStats, Throughput, TokenCount, build_record

MS = 1_000_000
TARGETS = ["http://a:1", "http://b:2", "http://c:3", None, ""]


def _records(seed: int, n: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        sent = int(rng.integers(0, 4_000)) * MS + int(rng.integers(0, MS))
        kind = rng.random()
        k = int(rng.integers(1, 40))
        gaps = rng.choice([int(rng.integers(1, 60 * MS)), 20 * MS, 0], size=k - 1, p=[0.8, 0.15, 0.05])
        chunks = (sent + int(rng.lognormal(17, 1.5)) + np.concatenate(([0], np.cumsum(gaps)))).astype(int).tolist()
        d = dict(id=i, level=0, sent_ns=sent, chunk_ns=chunks, first_token_ns=chunks[0], last_token_ns=chunks[-1],
                 end_ns=chunks[-1] + int(rng.integers(0, 3 * MS)), output_tokens=int(k * rng.integers(1, 4)),
                 input_tokens=int(rng.integers(1, 2_000)), requested_input_tokens=int(rng.integers(0, 2_000)),
                 requested_output_tokens=64, warmup=bool(rng.random() < 0.15), ok=True,
                 target=TARGETS[int(rng.integers(0, len(TARGETS)))])
        if kind < 0.1:  # failed before any content
            d.update(ok=False, chunk_ns=[], first_token_ns=None, last_token_ns=None, output_tokens=None,
                     error=["http_500", "timeout", None, ""][i % 4])
        elif kind < 0.18:  # failed mid-stream: chunks, no usage
            d.update(ok=False, output_tokens=None, input_tokens=None, error="disconnect")
        elif kind < 0.28:  # no usage
            d.update(output_tokens=None, input_tokens=None if i % 2 else d["input_tokens"])
        elif kind < 0.36:  # chunk stamps not kept: first/last only
            d.update(chunk_ns=[])
        elif kind < 0.42:  # a stamp missing
            d.update(first_token_ns=None) if i % 2 else d.update(last_token_ns=None)
        elif kind < 0.46:  # one token
            d.update(chunk_ns=chunks[:1], last_token_ns=chunks[0], output_tokens=1)
        elif kind < 0.48:
            d.update(output_tokens=0)
        out.append(build_record(**d))
    return out


# ----------------------------------------------------------------- the previous implementation

def old_stats(values_ms):
    return stats(np.asarray(values_ms, dtype=float))  # stats() of an array is unchanged


def old_window_tokens(records, start_ns, end_ns):
    out = inp = warm = edge = 0.0
    streams = estimated = 0
    m_out = m_in = 0
    for r in records:
        chunks = r.chunk_ns or []
        first, last, n_out = r.first_token_ns, r.last_token_ns, r.output_tokens
        est = False
        if first is not None or chunks:
            if n_out is None:
                n_out = len(chunks) if chunks else 1
                est = True
            if first is None:
                first = chunks[0]
            if last is None:
                last = chunks[-1] if chunks else first
            credited = stream_tokens_in_window(n_out, first, last, chunks, start_ns, end_ns)
            credited_in = 0.0
            if start_ns <= first <= end_ns:
                n_in = r.input_tokens
                if n_in is None:
                    n_in = r.requested_input_tokens or 0
                    est = est or n_in > 0
                credited_in = float(n_in)
            if credited > 0 or credited_in > 0:
                streams += 1
                estimated += int(est)
                out += credited
                inp += credited_in
                if r.warmup:
                    warm += credited
                if credited < n_out - 1e-9:
                    edge += credited
        if not r.warmup and r.ok is not False:
            end = r.last_token_ns if r.last_token_ns is not None else r.end_ns
            if end is not None and start_ns <= end <= end_ns:
                m_out += r.output_tokens or 0
                m_in += r.input_tokens or 0
    return (out, inp, warm, edge, streams, estimated, m_out, m_in)


def old_summarize_level(recs, start_ns, end_ns):
    req = Requests()
    errors: dict = {}
    ttft, e2e, tpot, itl_parts = [], [], [], []
    for r in recs:
        if r.warmup:
            req.warmup += 1
            continue
        if not r.ok:
            req.failed += 1
            key = r.error or "unknown"
            errors[key] = errors.get(key, 0) + 1
            continue
        req.completed += 1
        if r.first_token_ns is not None:
            ttft.append((r.first_token_ns - r.sent_ns) / 1e6)
        if r.last_token_ns is not None:
            e2e.append((r.last_token_ns - r.sent_ns) / 1e6)
        if r.output_tokens is not None and r.output_tokens > 1 and r.first_token_ns is not None \
                and r.last_token_ns is not None:
            tpot.append((r.last_token_ns - r.first_token_ns) / 1e6 / (r.output_tokens - 1))
        if len(r.chunk_ns) > 1:
            itl_parts.append(np.diff(np.asarray(r.chunk_ns, dtype=np.int64)) / 1e6)
    req.errors = dict(sorted(errors.items()))
    lat = Latency(ttft_ms=old_stats(ttft), tpot_ms=old_stats(tpot),
                  itl_ms=old_stats(np.concatenate(itl_parts) if itl_parts else []), e2e_ms=old_stats(e2e))
    out_tok, in_tok, warm, edge, _, est, m_out, m_in = old_window_tokens(recs, start_ns, end_ns)
    duration_s = max(0, end_ns - start_ns) / 1e9
    n_in = sum(1 for r in recs if r.ok and not r.warmup
               and (e := (r.last_token_ns if r.last_token_ns is not None else r.end_ns)) is not None
               and start_ns <= e <= end_ns)
    basis = dict(output_tokens=int(round(out_tok)), input_tokens=int(round(in_tok)), token_basis="tokens_in_window",
                 tokens_in_window=TokenCount(output=out_tok, input=in_tok, warmup_output=warm, edge_output=edge,
                                             estimated_streams=est),
                 measured_request_tokens=TokenCount(output=m_out, input=m_in))
    if duration_s > 0:
        thr = Throughput(output_tokens_per_s=out_tok / duration_s, input_tokens_per_s=in_tok / duration_s,
                         total_tokens_per_s=(out_tok + in_tok) / duration_s, requests_per_s=n_in / duration_s,
                         duration_s=duration_s, **basis)
    else:
        thr = Throughput(duration_s=0.0, **basis)
    return req, lat, thr


def old_stat_of(values, stat):
    a = np.asarray(list(values), dtype=float)
    if a.size == 0:
        return None
    if stat == "mean":
        return float(a.mean())
    if stat == "max":
        return float(a.max())
    return float(np.percentile(a, float(stat[1:])))


def old_request_figures(r):
    end = r.end_ns if r.end_ns is not None else r.last_token_ns
    tpot = None
    if r.output_tokens is not None and r.output_tokens >= 2 and r.first_token_ns is not None \
            and r.last_token_ns is not None:
        tpot = (r.last_token_ns - r.first_token_ns) / 1e6 / (r.output_tokens - 1)
    c = r.chunk_ns or []
    return {"ttft": None if r.first_token_ns is None else (r.first_token_ns - r.sent_ns) / 1e6, "tpot": tpot,
            "e2e": None if end is None else (end - r.sent_ns) / 1e6,
            "itl": [(c[i] - c[i - 1]) / 1e6 for i in range(1, len(c))]}


def old_request_meets(fig, slo):
    if slo.metric == "itl":
        if not fig["itl"]:
            return True
        v = old_stat_of(fig["itl"], slo.stat)
    else:
        v = fig[slo.metric]
        if v is None:
            return slo.metric == "tpot"
    return v <= slo.threshold_ms


def old_level_check(records, slos):
    figs = [old_request_figures(r) for r in records if r.ok and not r.warmup]
    out = {}
    for slo in slos:
        if slo.metric == "itl":
            vals = [g for f in figs for g in f["itl"]]
        else:
            vals = [f[slo.metric] for f in figs if f[slo.metric] is not None]
        observed = old_stat_of(vals, slo.stat)
        out[slo.name] = {"threshold_ms": slo.threshold_ms, "observed_ms": observed,
                         "met": observed is not None and observed <= slo.threshold_ms, "n": len(vals)}
    return out


def old_goodput_core(records, slos, window_output_tokens):
    measured = [r for r in records if not r.warmup]
    good = good_tokens = all_tokens = 0
    per_slo = {s.name: 0 for s in slos}
    for r in measured:
        if not r.ok:
            continue
        all_tokens += int(r.output_tokens or 0)
        fig = old_request_figures(r)
        ok_all = True
        for s in slos:
            if old_request_meets(fig, s):
                per_slo[s.name] += 1
            else:
                ok_all = False
        if ok_all:
            good += 1
            good_tokens += int(r.output_tokens or 0)
    good_out = window_output_tokens * (good_tokens / all_tokens) if all_tokens else 0.0
    return good, len(measured), per_slo, good_out, old_level_check(measured, slos)


# ----------------------------------------------------------------- the comparisons

@pytest.fixture(params=[(1, 600), (2, 250), (3, 40)])
def level(request, monkeypatch):
    # many stamp blocks, cut inside requests
    monkeypatch.setattr(recordset_mod.stamp_blocks, "__kwdefaults__", {"max_stamps": 97, "offsets": None})
    seed, n = request.param
    recs = _records(seed, n)
    rs = RecordSet.from_records(recs, spill_bytes=2000)
    assert rs.spilled
    sent = [r.sent_ns for r in recs]
    return recs, rs, min(sent) + 500 * MS, max(sent) - 300 * MS


def _dump(x):
    return tuple(v.model_dump() for v in x)


def test_summarize_level_equals_the_list_formula(level):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in tests/unit/metrics/test_metrics_latency.py::test_summarize_level."""
    recs, rs, t0, t1 = level
    assert _dump(summarize_level(rs, t0, t1)) == _dump(old_summarize_level(recs, t0, t1))
    assert _dump(summarize_level(recs, t0, t1)) == _dump(old_summarize_level(recs, t0, t1))  # a list still works
    for a, b in ((t1, t0), (t0, t0), (0, 10**13)):  # empty, a point, everything
        assert _dump(summarize_level(rs, a, b)) == _dump(old_summarize_level(recs, a, b))


def test_window_tokens_equals_the_per_stream_loop(level):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in tests/unit/metrics/test_window_tokens.py."""
    recs, rs, t0, t1 = level
    for a, b in ((t0, t1), (t0 + 7 * MS, t0 + 900 * MS), (t1, t0), (0, 10**13)):
        wt = window_tokens(rs, a, b)
        got = (wt.output_tokens, wt.input_tokens, wt.warmup_output_tokens, wt.edge_output_tokens, wt.streams,
               wt.estimated_streams, wt.measured_output_tokens, wt.measured_input_tokens)
        assert got == old_window_tokens(recs, a, b)
        assert wt.output_tokens > 0 or b < a


def test_goodput_and_level_check_equal_the_per_request_loop(level):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in tests/unit/metrics/test_slo_goodput.py."""
    recs, rs, t0, t1 = level
    for spec in ("ttft_p99=900ms,tpot_p50=12ms", "itl_p99=40ms", "itl_mean=25ms,e2e_p95=1.5s", "itl_max=55ms",
                 "itl_p50=20ms,itl_p90=45ms,ttft_mean=2s,e2e_max=4s,tpot_p95=30ms"):
        slos = parse_slos(spec)
        g = goodput(rs, slos, 10.0, window_output_tokens=12_345.0)
        good, n, per_slo, good_out, lv = old_goodput_core(recs, slos, 12_345.0)
        assert (g["good_requests"], g["total_requests"], g["per_slo"], g["output_tokens_per_s"] * 10.0) == \
               (good, n, per_slo, pytest.approx(good_out, rel=1e-15))
        assert g["output_tokens_per_s"] == good_out / 10.0
        assert g["level"] == lv == level_check(recs, slos) == level_check(rs, slos)
        assert 0 < good < n or spec.startswith("itl_p50")  # the SLOs split the requests


def test_per_target_summary_is_summarize_level_per_target(level):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in
    tests/unit/load/test_load_targets.py::test_per_target_summary_partitions_the_total."""
    recs, rs, t0, t1 = level
    got = per_target_summary(rs, t0, t1, targets=["http://idle:9"])
    groups: dict = {"http://idle:9": []}
    for r in recs:
        groups.setdefault(r.target or "", []).append(r)
    want = {k: TargetStats(requests=a, latency=b, throughput=c)
            for k in sorted(groups) for a, b, c in [old_summarize_level(groups[k], t0, t1)]}
    assert list(got) == list(want) and {k: v.model_dump() for k, v in got.items()} == \
           {k: v.model_dump() for k, v in want.items()}


def test_count_source_oversaturation_and_input_lengths(level):
    recs, rs, t0, t1 = level
    done = [r for r in recs if r.ok and not r.warmup]
    assert count_source(rs) == ("missing" if any(r.output_tokens is None for r in done) else "usage") == "missing"
    assert count_source([r for r in done if r.output_tokens is not None]) == "usage"

    class Spec:
        mode = "rate"

    class Outcome:
        start_ns, end_ns, records = t0, t1, rs

    ms = [r for r in recs if not r.warmup]
    sent = np.sort(np.array([r.sent_ns for r in ms]))
    ends = np.sort(np.array([(r.last_token_ns if r.last_token_ns is not None else r.end_ns) or r.end_ns or t1
                             for r in ms]))
    grid = np.arange(t0, t1, 100_000_000, dtype=np.int64)
    backlog = np.searchsorted(sent, grid, side="right") - np.searchsorted(ends, grid, side="right")
    from wattbench.load.saturation import is_oversaturated
    want = is_oversaturated(((grid - t0) / 1e9).tolist(), backlog.tolist())
    assert oversaturation(Spec, Outcome).to_dict() == want.to_dict()

    sel = [r for r in recs if not r.warmup and r.ok and r.input_tokens is not None and r.requested_input_tokens]
    asked, got = sum(r.requested_input_tokens for r in sel), sum(r.input_tokens for r in sel)
    f = input_length_finding(rs, "approx")
    diff = 100.0 * (got - asked) / asked
    # a warn beyond 10%, a note with the measured difference within it (accounting/level_findings.py)
    assert f is not None and f.severity == ("warn" if abs(diff) > 10.0 else "note"), (f, diff)
    assert f.effect_pct == pytest.approx(diff, rel=1e-12)
    assert f"asked {asked / len(sel):.0f}, the server counted {got / len(sel):.0f}" in f.text


def test_itl_percentiles_over_many_blocks_and_pairwise_nodes(monkeypatch):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in tests/unit/metrics/test_quantiles.py (numpy's own figures). ITL pooled over more
    gaps than one pairwise node (65,536), read in small stamp blocks."""
    monkeypatch.setattr(recordset_mod.stamp_blocks, "__kwdefaults__", {"max_stamps": 4_099, "offsets": None})
    rng = np.random.default_rng(11)
    recs = []
    for i in range(1_500):
        c = (i * MS + np.concatenate(([0], np.cumsum(rng.integers(0, 80 * MS, 60))))).tolist()
        recs.append(build_record(id=i, level=0, sent_ns=i * MS - 5, chunk_ns=c, first_token_ns=c[0],
                                 last_token_ns=c[-1], end_ns=c[-1], output_tokens=61, input_tokens=3))
    rs = RecordSet.from_records(recs, spill_bytes=2000)
    assert _dump(summarize_level(rs, 0, 10**13)) == _dump(old_summarize_level(recs, 0, 10**13))
    assert math.isclose(summarize_level(rs, 0, 10**13)[1].itl_ms.count, 90_000)


def test_each_requests_own_itl_statistic(level):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in tests/unit/metrics/test_slo_goodput.py::test_itl_slo_per_request_uses_own_gaps.
    goodput's per-request ITL figure (the request's own gaps) for every stat, row by row."""
    from wattbench.metrics import slo as slo_mod

    recs, rs, _, _ = level
    done = np.array([r.ok and not r.warmup for r in recs])
    for stat in ("mean", "max", "p50", "p90", "p95", "p99"):
        want = [old_stat_of(old_request_figures(r)["itl"], stat) if d else None for r, d in zip(recs, done)]
        got = slo_mod._own_itl(rs, done, stat)
        assert [None if (np.isnan(v) or v is None) else float(v) for v in got] == \
               [None if w is None else w for w in want]


def test_window_sums_add_streams_in_row_order():
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in
    tests/unit/metrics/test_window_tokens.py::test_adjacent_windows_add_up_to_the_whole. Streams cut at
    the window's edges credit fractions (n * inside / chunks); their sum is the
    sequential sum of the per-stream loop, not a pairwise one, over thousands of rows in a block."""
    rng = np.random.default_rng(23)
    recs = []
    for i in range(3_000):
        k = int(rng.integers(2, 9))
        c = sorted(int(x) for x in rng.integers(0, 2_000 * MS, k))
        recs.append(build_record(id=i, level=0, sent_ns=0, chunk_ns=c, first_token_ns=c[0], last_token_ns=c[-1],
                                 end_ns=c[-1], output_tokens=int(rng.integers(1, 500)), input_tokens=7,
                                 warmup=bool(i % 3 == 0)))
    rs = RecordSet.from_records(recs, spill_bytes=2000)
    for a, b in ((500 * MS, 1_500 * MS), (1, 1_999 * MS)):
        wt = window_tokens(rs, a, b)
        assert (wt.output_tokens, wt.input_tokens, wt.warmup_output_tokens, wt.edge_output_tokens, wt.streams,
                wt.estimated_streams, wt.measured_output_tokens, wt.measured_input_tokens) == \
               old_window_tokens(recs, a, b)
