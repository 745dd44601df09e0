import pytest

from wattbench.core.errors import UserError
from wattbench.metrics.slo import SLO, figures_meet, goodput, level_check, parse_slos, request_figures
from wattbench.core.schema import RequestRecord
from wattbench.metrics.level_figures import LevelFigures

MS = 1_000_000


def rec(i, ttft_ms, tpot_ms, out=11, ok=True, warmup=False, chunk_gaps_ms=None):
    sent = 1_000 * MS * i
    first = sent + int(ttft_ms * MS)
    last = first + int(tpot_ms * MS * (out - 1))
    if chunk_gaps_ms is None:
        chunks = [first + int(k * tpot_ms * MS) for k in range(out)]
    else:
        chunks = [first]
        for g in chunk_gaps_ms:
            chunks.append(chunks[-1] + int(g * MS))
        last = chunks[-1]
    return RequestRecord(id=i, level=0, sent_ns=sent, first_token_ns=first if ok else None,
                         last_token_ns=last if ok else None, end_ns=last + MS if ok else None,
                         chunk_ns=chunks if ok else [], output_tokens=out if ok else None, ok=ok,
                         warmup=warmup, error=None if ok else "http_500")


def test_parse():
    s = parse_slos("ttft_p99=500ms, tpot_p99=50ms,e2e_p95=2s,itl_p50=0.02s,ttft_mean=1.5e2ms")
    assert [(x.metric, x.stat, x.threshold_ms) for x in s] == [
        ("ttft", "p99", 500.0), ("tpot", "p99", 50.0), ("e2e", "p95", 2000.0), ("itl", "p50", 20.0),
        ("ttft", "mean", 150.0)]
    assert parse_slos(None) == [] and parse_slos("") == []


@pytest.mark.parametrize("bad", ["ttft_p99=500", "ttft_p98=5ms", "latency_p99=5ms", "ttft_p99=5h",
                                 "ttft_p99=-5ms", "ttft_p99=0ms", "ttft_p99", "ttft_p99=5ms,ttft_p99=6ms"])
def test_parse_bad(bad):
    with pytest.raises(UserError):
        parse_slos(bad)


def test_unit_hint():
    with pytest.raises(UserError, match="add a unit"):
        parse_slos("ttft_p99=500")


def test_request_figures():
    f = request_figures(rec(0, 120, 20, out=11))
    assert f["ttft"] == pytest.approx(120) and f["tpot"] == pytest.approx(20)
    assert f["e2e"] == pytest.approx(120 + 200 + 1)
    assert len(f["itl"]) == 10


def test_goodput_counts_requests_meeting_every_slo():
    records = [
        rec(0, 100, 20),   # good
        rec(1, 600, 20),   # ttft too slow
        rec(2, 100, 60),   # tpot too slow
        rec(3, 450, 49),   # good
        rec(4, 100, 20, ok=False),  # failed: never good
        rec(5, 100, 20, out=21),    # good, 21 tokens
        rec(6, 900, 90, warmup=True),  # ignored
    ]
    slos = parse_slos("ttft_p99=500ms,tpot_p99=50ms")
    g = goodput(records, slos, duration_s=10.0, avg_power_w={"accelerator": 400.0, "node": None})
    assert g.good_requests == 3 and g.total_requests == 6
    assert g.requests_per_s == pytest.approx(0.3)
    assert g.output_tokens_per_s == pytest.approx((11 + 11 + 21) / 10)
    assert g.fraction == pytest.approx(0.5)
    assert g.per_slo == {"ttft_p99": 4, "tpot_p99": 4}
    assert g.per_kw["accelerator"].output_tokens_per_s_per_kw == pytest.approx(4.3 / 0.4)
    assert g.per_kw["accelerator"].requests_per_s_per_kw == pytest.approx(0.3 / 0.4)
    assert g.per_kw["node"].output_tokens_per_s_per_kw is None
    # level-level: p99 of ttft over the 5 successful requests is near the 600 ms outlier
    assert g.level["ttft_p99"].met is False
    assert g.level["ttft_p99"].observed_ms == pytest.approx(600 - 0.04 * (600 - 450), rel=1e-6)
    assert g.all_met is False


def test_goodput_on_the_window_token_basis():
    """With the window's tokens (every stream, warm-up leftovers too) goodput scales them by the
    share of the measured requests' tokens that met every SLO: the same basis as J/token."""
    records = [rec(0, 100, 20), rec(1, 600, 20), rec(2, 100, 20, out=21), rec(3, 100, 20, ok=False),
               rec(4, 900, 90, warmup=True)]
    slos = parse_slos("ttft_p99=500ms")
    g = goodput(records, slos, duration_s=10.0, avg_power_w={"accelerator": 500.0}, window_output_tokens=150.0)
    # measured successful tokens 11 + 11 + 21 = 43, of which 32 met the SLO
    assert g.token_basis == "tokens_in_window"
    assert g.output_tokens_per_s == pytest.approx(150.0 * 32 / 43 / 10.0)
    assert g.per_kw["accelerator"].output_tokens_per_s_per_kw == pytest.approx(150.0 * 32 / 43 / 10.0 / 0.5)
    assert g.requests_per_s == pytest.approx(0.2)  # requests stay the measured ones
    assert goodput(records, slos, 10.0).token_basis == "measured_request_tokens"


def test_itl_slo_per_request_uses_own_gaps():
    r_ok = rec(0, 10, 0, out=5, chunk_gaps_ms=[10, 10, 10, 10])
    r_spike = rec(1, 10, 0, out=5, chunk_gaps_ms=[10, 10, 10, 200])
    g = goodput([r_ok, r_spike], parse_slos("itl_max=100ms"), 1.0)
    assert g.good_requests == 1
    g2 = goodput([r_ok, r_spike], parse_slos("itl_p50=100ms"), 1.0)
    assert g2.good_requests == 2
    lv = level_check([r_ok, r_spike], [SLO("itl", "p50", 100.0)])
    assert lv["itl_p50"]["observed_ms"] == pytest.approx(10) and lv["itl_p50"]["n"] == 8


def test_single_token_answers_are_not_held_to_tpot():
    r = rec(0, 100, 0, out=1)
    assert goodput([r], parse_slos("tpot_p99=1ms"), 1.0).good_requests == 1


def test_figures_meet_and_bad_duration():
    slos = parse_slos("ttft_p99=500ms,tpot_p50=50ms")
    assert figures_meet(LevelFigures(ttft_p99_ms=499, tpot_p50_ms=50), slos)
    assert not figures_meet(LevelFigures(ttft_p99_ms=501, tpot_p50_ms=10), slos)
    assert not figures_meet(LevelFigures(ttft_p99_ms=100), slos)
    with pytest.raises(UserError):
        goodput([], slos, 0)
