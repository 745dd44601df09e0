"""The crediting rule of ``metrics.window_tokens`` on hand-made records (ground truth by hand)."""

from __future__ import annotations

import pytest

from wattbench.metrics.window_tokens import stream_tokens_in_window, window_tokens
from wattbench.core.schema import RequestRecord

MS = 1_000_000


def rec(i, sent_ms, chunks_ms, *, out=None, inp=10, warmup=False, ok=True, keep_chunks=True):
    ch = [int(c * MS) for c in chunks_ms]
    return RequestRecord(
        id=i, level=0, warmup=warmup, ok=ok, sent_ns=int(sent_ms * MS),
        first_token_ns=ch[0] if ch else None, last_token_ns=ch[-1] if ch else None,
        end_ns=(ch[-1] + MS) if ch else int(sent_ms * MS) + MS,
        chunk_ns=ch if keep_chunks else [], output_tokens=out if out is not None else (len(ch) if ok else None),
        input_tokens=inp if ok else None, requested_input_tokens=inp,
    )


def test_warmup_stream_inside_the_window_is_credited_pro_rata():
    # warm-up stream: 10 tokens at 0,10,...,90 ms; measured stream: 5 tokens at 50..90 ms
    warm = rec(0, -20, range(0, 100, 10), warmup=True)
    meas = rec(1, 45, range(50, 100, 10))
    wt = window_tokens([warm, meas], 45 * MS, 90 * MS)
    # warm-up tokens at 50..90 (5) + the measured stream's 5
    assert wt.output_tokens == pytest.approx(10.0)
    assert wt.warmup_output_tokens == pytest.approx(5.0)
    assert wt.edge_output_tokens == pytest.approx(5.0)  # the warm-up stream is cut at the start edge
    assert wt.measured_output_tokens == 5  # the old count: measured requests only
    assert wt.input_tokens == 10  # only the measured stream's prefill ended inside
    assert wt.measured_input_tokens == 10
    assert wt.streams == 2 and wt.estimated_streams == 0


def test_chunks_carrying_several_tokens_spread_usage_evenly():
    # 4 chunks, usage says 12 tokens: 3 per chunk; window holds chunks 2 and 3
    r = rec(0, 0, [10, 20, 30, 40], out=12)
    wt = window_tokens([r], 15 * MS, 35 * MS)
    assert wt.output_tokens == pytest.approx(6.0)
    assert wt.input_tokens == 0  # first token at 10 ms, before the window
    assert wt.measured_output_tokens == 0  # it ended after the window


def test_first_last_only_spreads_evenly_between_them():
    # no chunk stamps: 11 tokens evenly from 0 to 100 ms -> one every 10 ms
    r = rec(0, -5, [0, 100], out=11, keep_chunks=False)
    assert window_tokens([r], 0, 100 * MS).output_tokens == pytest.approx(11.0)
    assert window_tokens([r], 25 * MS, 55 * MS).output_tokens == pytest.approx(3.0)  # 30, 40, 50
    assert window_tokens([r], 30 * MS, 50 * MS).output_tokens == pytest.approx(3.0)  # edges inclusive
    assert window_tokens([r], 101 * MS, 200 * MS).output_tokens == pytest.approx(0.0, rel=1e-9)


def test_single_token_stream_counts_at_its_first_token():
    r = rec(0, 0, [10], out=1)
    assert window_tokens([r], 10 * MS, 20 * MS).output_tokens == pytest.approx(1.0, rel=1e-9)
    assert window_tokens([r], 11 * MS, 20 * MS).output_tokens == pytest.approx(0.0, rel=1e-9)


def test_cut_stream_without_usage_counts_its_chunks_and_says_so():
    # a stream cut at a deadline: 7 chunks received, no usage, not ok
    r = rec(0, 0, [10, 20, 30, 40, 50, 60, 70], ok=False)
    wt = window_tokens([r], 0, 45 * MS)
    assert wt.output_tokens == pytest.approx(4.0)
    assert wt.estimated_streams == 1
    assert wt.input_tokens == 10  # requested prompt length, estimated
    assert wt.measured_output_tokens == 0  # failed requests are not in the latency population


def test_stream_without_content_credits_nothing():
    r = rec(0, 0, [], ok=False)
    wt = window_tokens([r], 0, 100 * MS)
    assert wt.output_tokens == 0 and wt.input_tokens == 0 and wt.streams == 0


def test_adjacent_windows_add_up_to_the_whole():
    recs = [rec(i, i * 7, [i * 7 + 3 + 11 * k for k in range(9)], out=9 + i, warmup=i % 3 == 0) for i in range(12)]
    whole = window_tokens(recs, 0, 10**12)
    assert whole.output_tokens == pytest.approx(sum(r.output_tokens for r in recs))
    cut = 61 * MS + 500_000  # between two chunk stamps: no chunk on the edge
    a = window_tokens(recs, 0, cut)
    b = window_tokens(recs, cut + 1, 10**12)
    assert a.output_tokens + b.output_tokens == pytest.approx(whole.output_tokens)


def test_mappings_are_accepted_like_records():
    r = rec(0, 0, [10, 20, 30], out=6)
    d = r.model_dump()
    assert window_tokens([d], 15 * MS, 30 * MS) == window_tokens([r], 15 * MS, 30 * MS)


def test_empty_or_reversed_window():
    r = rec(0, 0, [10, 20], out=2)
    assert window_tokens([r], 30 * MS, 10 * MS).output_tokens == pytest.approx(0.0, rel=1e-9)
    assert stream_tokens_in_window(5, None, None, [], 0, 10) == pytest.approx(0.0, rel=1e-9)
