"""Latency statistics and the per-level summary, on hand-computed records."""

import numpy as np
import pytest

from wattbench.metrics.latency import stats, summarize_level
from wattbench.core.schema import RequestRecord

MS = 1_000_000


def test_stats_values():
    s = stats([1.0, 2.0, 3.0, 4.0, 10.0])
    assert s.count == 5 and s.mean == pytest.approx(4.0)
    assert s.p50 == pytest.approx(3.0, rel=1e-9) and s.max == pytest.approx(10.0, rel=1e-9) and s.min == pytest.approx(1.0, rel=1e-9)
    assert s.p90 == pytest.approx(np.percentile([1, 2, 3, 4, 10], 90))
    assert s.std == pytest.approx(np.std([1, 2, 3, 4, 10]))


def test_stats_empty():
    s = stats([])
    assert s.count == 0 and s.mean is None and s.p99 is None


def rec(i, sent, chunks, out=None, inp=10, ok=True, warm=False, err=None):
    return RequestRecord(
        id=i, level=0, sent_ns=sent * MS, chunk_ns=[c * MS for c in chunks],
        first_token_ns=chunks[0] * MS if chunks else None,
        last_token_ns=chunks[-1] * MS if chunks else None,
        end_ns=(chunks[-1] + 1) * MS if chunks else (sent + 5) * MS,
        output_tokens=out, input_tokens=inp, ok=ok, warmup=warm, error=err,
    )


def test_summarize_level():
    records = [
        rec(0, 0, [100, 110, 130], out=3),  # ttft 100, e2e 130, tpot 15, itl 10, 20
        rec(1, 50, [90, 94], out=5),  # ttft 40, e2e 44, tpot 1, itl 4 (2 chunks, 5 tokens)
        rec(2, 0, [10, 20], out=2, warm=True),  # warm-up: excluded
        rec(3, 60, [], ok=False, err="http_500"),
        rec(4, 70, [80], ok=False, err="disconnect"),
        rec(5, 70, [85], ok=False, err="disconnect"),
    ]
    req, lat, thr = summarize_level(records, 0, 200 * MS)
    assert (req.completed, req.failed, req.warmup) == (2, 3, 1)
    assert req.errors == {"disconnect": 2, "http_500": 1}
    assert lat.ttft_ms.count == 2 and lat.ttft_ms.mean == pytest.approx(70.0)
    assert lat.e2e_ms.mean == pytest.approx(87.0)
    assert lat.tpot_ms.mean == pytest.approx(8.0)
    assert lat.itl_ms.count == 3 and lat.itl_ms.mean == pytest.approx(34 / 3)
    assert thr.duration_s == pytest.approx(0.2)
    # tokens produced in the window by every stream: 3 + 5 measured, 2 of the warm-up stream, one
    # chunk each from the two disconnected streams (no usage: counted by chunk, estimated)
    assert thr.token_basis == "tokens_in_window"
    assert thr.output_tokens == 12 and thr.output_tokens_per_s == pytest.approx(60.0)
    assert thr.tokens_in_window.warmup_output == pytest.approx(2.0)
    assert thr.tokens_in_window.estimated_streams == 2
    assert thr.input_tokens_per_s == pytest.approx(250.0)  # five prefills ended in the window
    # the measured requests' own count, kept beside
    assert thr.measured_request_tokens.output == 8 and thr.measured_request_tokens.input == 20
    assert thr.requests_per_s == pytest.approx(10.0)


def test_throughput_counts_tokens_produced_in_window():
    records = [rec(0, 0, [100, 110], out=2), rec(1, 0, [150, 300], out=4)]
    _, lat, thr = summarize_level(records, 0, 200 * MS)
    # request 1: 2 tokens per chunk, its first chunk inside the window
    assert thr.output_tokens == 4 and lat.ttft_ms.count == 2
    assert thr.measured_request_tokens.output == 2  # only request 0 ended inside


def test_missing_usage_gives_no_tpot_and_chunk_counted_tokens():
    records = [rec(0, 0, [100, 110, 120], out=None, inp=None)]
    _, lat, thr = summarize_level(records, 0, 200 * MS)
    assert lat.tpot_ms.count == 0 and lat.itl_ms.count == 2
    assert thr.output_tokens == 3 and thr.tokens_in_window.estimated_streams == 1
    assert thr.measured_request_tokens.output == 0


def test_itl_from_chunks_read_in_bunches_is_unmeasured_not_zero():
    from wattbench.metrics.latency import itl_stats
    from wattbench.metrics.quantiles import Blocks

    bunched = Blocks.of([0.0, 0.0, 0.0, 40.0] * 25)  # 75% of the gaps in one read: p50 would read 0 ms
    st = itl_stats(bunched)
    assert st.count == 100 and st.p50 is None  # was 0.0
    assert st.p90 == pytest.approx(40.0) and st.p99 == pytest.approx(40.0)  # above the zeros: kept
    assert st.mean == pytest.approx(10.0) and "75% of the 100 gaps" in st.unmeasured and "ITL p50 " in st.unmeasured
    few = Blocks.of([0.0] * 9 + [10.0] * 91)  # 9% zeros: no reported percentile among them
    ok = itl_stats(few)
    assert ok.unmeasured is None and ok.p50 == pytest.approx(10.0)
