"""Several targets: routing, validation and per-target statistics (no network)."""

from __future__ import annotations

from collections import Counter

import pytest

from wattbench.core.errors import UserError
from wattbench.load.targets import check_targets, per_target_summary, run_level_multi, weighted_route
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.metrics.latency import summarize_level
from wattbench.core.schema import RequestRecord

MS = 1_000_000


def test_equal_weights_are_round_robin():
    r = weighted_route([1, 1, 1])
    assert [r(k) for k in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_weighted_route_shares_and_spread():
    r = weighted_route([3, 1])
    seq = [r(k) for k in range(400)]
    assert Counter(seq) == {0: 300, 1: 100}
    # spread evenly: never two picks of the light target in a row, never 4 heavy in a row
    assert "1,1" not in ",".join(map(str, seq))
    assert "0,0,0,0" not in ",".join(map(str, seq))
    # random access after the fact gives the same answers
    assert [r(k) for k in (399, 0, 5)] == [seq[399], seq[0], seq[5]]


def test_weighted_route_any_window_within_one():
    w = [5, 2, 1]
    r = weighted_route(w)
    seq = [r(k) for k in range(800)]
    for m in (8, 13, 50):
        for s in range(0, 700, 37):
            c = Counter(seq[s : s + m])
            for i, x in enumerate(w):
                assert abs(c[i] - m * x / 8) <= 2


def _t(url: str) -> TargetSpec:
    return TargetSpec(base_url=url, model="m")


def test_check_targets_refuses_duplicates_and_bad_weights():
    a, b = _t("http://127.0.0.1:1/v1"), _t("http://127.0.0.1:2/v1")
    assert check_targets([a, b]) == pytest.approx([1.0, 1.0], rel=1e-9)
    with pytest.raises(UserError, match="given twice"):
        check_targets([a, _t("http://127.0.0.1:1/v1")])
    with pytest.raises(UserError, match="one weight per"):
        check_targets([a, b], [1])
    with pytest.raises(UserError, match="positive"):
        check_targets([a, b], [1, 0])
    with pytest.raises(UserError, match="at least one"):
        check_targets([])


def test_concurrency_below_target_count_is_refused():
    a, b, c = (_t(f"http://127.0.0.1:{p}/v1") for p in (1, 2, 3))
    with pytest.raises(UserError, match="below the number of targets"):
        run_level_multi(LevelSpec(index=0, mode="concurrency", value=2, num_requests=4), [a, b, c], [])


def _rec(i: int, target: str, sent: int, ttft: int, n_chunks: int, itl: int, ok: bool = True) -> RequestRecord:
    chunks = [sent + ttft + k * itl for k in range(n_chunks)]
    return RequestRecord(
        id=i, level=0, target=target, sent_ns=sent, first_token_ns=chunks[0], last_token_ns=chunks[-1],
        end_ns=chunks[-1] + 1, chunk_ns=chunks, input_tokens=4, output_tokens=n_chunks, ok=ok,
        error=None if ok else "http_500",
    )


def test_per_target_summary_partitions_the_total():
    A, B = "http://a/v1", "http://b/v1"
    recs = [_rec(i, A, i * 10 * MS, 20 * MS, 5, 2 * MS) for i in range(6)]
    recs += [_rec(100 + i, B, i * 15 * MS, 90 * MS, 3, 7 * MS) for i in range(4)]
    recs.append(_rec(200, B, 5 * MS, 90 * MS, 3, 7 * MS, ok=False))
    start, end = 0, max(r.last_token_ns for r in recs)
    per = per_target_summary(recs, start, end, targets=[A, B, "http://idle/v1"])
    assert set(per) == {A, B, "http://idle/v1"}
    assert per[A].latency.ttft_ms.mean == pytest.approx(20.0)
    assert per[B].latency.ttft_ms.mean == pytest.approx(90.0)
    assert per[A].latency.itl_ms.mean == pytest.approx(2.0)
    assert per[B].latency.itl_ms.mean == pytest.approx(7.0)
    assert per[B].requests.failed == 1 and per[B].requests.completed == 4
    assert per["http://idle/v1"].requests.completed == 0
    req, lat, thr = summarize_level(recs, start, end)
    assert sum(p.requests.completed for p in per.values()) == req.completed == 10
    assert sum(p.throughput.requests_per_s for p in per.values()) == pytest.approx(thr.requests_per_s)
    # tokens produced in the window, the failed stream's 3 included (the server generated them)
    assert sum(p.throughput.output_tokens for p in per.values()) == thr.output_tokens == 6 * 5 + 4 * 3 + 3
    assert thr.measured_request_tokens.output == 6 * 5 + 4 * 3
    assert lat.ttft_ms.mean == pytest.approx((6 * 20 + 4 * 90) / 10)
