import pytest

from wattbench.metrics.request_latency import inter_chunk_gaps_ms, per_request_latencies
from wattbench.metrics.timeline import in_flight_steps, output_tokens_per_s_buckets
from wattbench.core.schema import RequestRecord

MS = 1_000_000


def rec(**kw):
    base = dict(id=0, level=0, sent_ns=1000 * MS)
    base.update(kw)
    return RequestRecord(**base)


def test_per_request_latencies_from_timestamps():
    r = rec(first_token_ns=1050 * MS, last_token_ns=1350 * MS, end_ns=1360 * MS, output_tokens=7,
            chunk_ns=[1050 * MS, 1100 * MS, 1350 * MS], scheduled_ns=998 * MS)
    lat = per_request_latencies(r)
    assert lat["ttft_ms"] == pytest.approx(50.0)
    assert lat["e2e_ms"] == pytest.approx(360.0)
    assert lat["tpot_ms"] == pytest.approx(300.0 / 6)
    assert lat["itl_mean_ms"] == pytest.approx(150.0)
    assert lat["itl_max_ms"] == pytest.approx(250.0)
    assert lat["send_lag_ms"] == pytest.approx(2.0)
    assert lat["chunks"] == 3
    assert inter_chunk_gaps_ms(r) == pytest.approx([50.0, 250.0])


def test_per_request_latencies_missing_parts_are_none():
    failed = rec(ok=False, error="connect")
    lat = per_request_latencies(failed)
    assert lat["ttft_ms"] is None and lat["e2e_ms"] is None and lat["tpot_ms"] is None
    assert lat["itl_mean_ms"] is None and lat["chunks"] == 0
    one_token = rec(first_token_ns=1010 * MS, last_token_ns=1010 * MS, output_tokens=1, chunk_ns=[1010 * MS])
    assert per_request_latencies(one_token)["tpot_ms"] is None
    # no end_ns: e2e ends at the last token
    assert per_request_latencies(one_token)["e2e_ms"] == pytest.approx(10.0)


def test_tokens_per_s_buckets_spread_tokens_over_chunks():
    s = 0
    # 4 tokens in 2 chunks at 0.5 s and 1.5 s -> 2 tokens in each 1 s bucket
    a = RequestRecord(id=0, level=0, sent_ns=0, output_tokens=4, chunk_ns=[int(0.5e9), int(1.5e9)])
    # no chunk times: 6 tokens at the last token time (2.2 s)
    b = RequestRecord(id=1, level=0, sent_ns=0, output_tokens=6, last_token_ns=int(2.2e9))
    # failed without tokens: ignored
    c = RequestRecord(id=2, level=0, sent_ns=0, ok=False)
    t, tps = output_tokens_per_s_buckets([a, b, c], s, int(2.5e9), 1.0)
    assert t.tolist() == [0, int(1e9), int(2e9)]
    # last bucket is 0.5 s long: 6 tokens / 0.5 s
    assert tps.tolist() == pytest.approx([2.0, 2.0, 12.0])


def test_tokens_per_s_buckets_rejects_bad_bucket():
    with pytest.raises(ValueError):
        output_tokens_per_s_buckets([], 0, 10, 0.0)
    t, v = output_tokens_per_s_buckets([], 10, 10, 1.0)
    assert t.size == 0 and v.size == 0


def test_in_flight_steps_ends_before_sends_at_same_time():
    rs = [
        RequestRecord(id=0, level=0, sent_ns=0, end_ns=10),
        RequestRecord(id=1, level=0, sent_ns=10, end_ns=30),
        RequestRecord(id=2, level=0, sent_ns=5),  # never ended
    ]
    t, n = in_flight_steps(rs)
    assert t.tolist() == [0, 5, 10, 10, 30]
    assert n.tolist() == [1, 2, 1, 2, 1]


def test_records_written_without_chunk_stamps():
    """A run written without --keep-chunks: no chunk stamps. Tokens/s spreads the tokens evenly from
    first to last token (window_tokens rule 2); the chunk count and ITL figures are unknown (None),
    not zero; the other latencies are unchanged."""
    r = rec(first_token_ns=int(0.5e9), last_token_ns=int(1.5e9), end_ns=int(1.6e9), output_tokens=5, sent_ns=0)
    # 5 tokens at 0.5, 0.75, 1.0, 1.25, 1.5 s: two in [0, 1), three in [1, 2)
    t, tps = output_tokens_per_s_buckets([r], 0, int(2e9), 1.0)
    assert tps.tolist() == pytest.approx([2.0, 3.0])
    lat = per_request_latencies(r)
    assert lat["chunks"] is None and lat["itl_mean_ms"] is None and lat["itl_max_ms"] is None
    assert lat["ttft_ms"] == pytest.approx(500.0) and lat["tpot_ms"] == pytest.approx(250.0)
    with_stamps = r.model_copy(update={"chunk_ns": [int(0.5e9), int(1.5e9)]})
    assert per_request_latencies(with_stamps)["chunks"] == 2
