"""``run/prime.py``: which load primes a run, and the history check's verdict (made levels, no
server; the noise numbers are metrics/noise.py's, hand-derived in tests/unit/metrics/test_noise.py)."""

from __future__ import annotations

import pytest

from tests.fakes.results_factory import make_level, trials_block
from wattbench.config import RunConfig
from wattbench.run.prime import judge, priming_level


def _cfg(**kw):
    kw.setdefault("target", "http://127.0.0.1:9")
    return RunConfig(**kw)


def test_a_ladder_is_primed_at_its_largest_concurrency_for_two_rounds():
    assert priming_level(_cfg(concurrency=[16, 1, 64])) == (
        "concurrency", 64, 128, "the run's largest concurrency, 2 rounds of its streams")
    assert priming_level(_cfg(concurrency=[1, 2]))[:3] == ("concurrency", 2, 8)  # at least 8 requests
    assert priming_level(_cfg(concurrency=[8], prime_requests=5))[:3] == ("concurrency", 8, 5)
    assert priming_level(_cfg(concurrency=[8], prime=False)) is None
    assert priming_level(_cfg())[:3] == ("concurrency", 1, 8)  # a --target run's default level


def test_a_search_is_primed_at_the_top_of_what_it_may_measure():
    assert priming_level(_cfg(optimize="goodput_rps"), [1, 2, 4, 32])[:3] == ("concurrency", 32, 64)
    assert priming_level(_cfg(sweep="auto", max_concurrency=16))[:3] == ("concurrency", 16, 32)
    assert priming_level(_cfg(sweep="auto"), search_max=256)[:3] == ("concurrency", 256, 512)


def test_an_open_loop_is_primed_at_its_largest_rate_never_with_more_than_a_level():
    def level(cfg):  # (mode, rate, requests), the rate compared with a tolerance
        mode, rate, requests = priming_level(cfg)[:3]
        return mode, pytest.approx(rate, rel=1e-12), requests

    assert level(_cfg(rate=[2.0, 20.0])) == ("rate", 20, 200)  # 10 s of 20/s
    assert level(_cfg(rate=[20.0], duration_s=3)) == ("rate", 20, 60)
    assert level(_cfg(rate=[500.0], num_requests=24)) == ("rate", 500, 24)
    assert level(_cfg(rate=[float("inf")], num_requests=10)) == ("rate", float("inf"), 10)


def _lv(tok_s, trials=None, duration_s=20.0):
    # 700 W at the accelerator: tok/s per kW = tok/s / 0.7
    return make_level(0, value=2, output_tokens_per_s=tok_s, power_w=700.0, duration_s=duration_s, trials=trials)


def test_the_history_check_warns_with_both_figures_beyond_the_noise():
    hc = judge(_lv(1000.0), _lv(1160.0))  # +16%, single 20 s levels: allowed ±3.6%
    assert hc.verdict == "warn" and hc.figure == "output_tokens_per_s_per_kw@accelerator"
    assert hc.first == pytest.approx(1000.0 / 0.7, rel=1e-12) and hc.repeated == pytest.approx(1160.0 / 0.7, rel=1e-12)
    assert "history check c=2: 1,429 then 1,657 tok/s/kW (+16.0%), beyond noise ±3.6% — measured again" in hc.text
    ok = judge(_lv(1000.0), _lv(1020.0))
    assert ok.verdict == "ok" and "within noise ±3.6%" in ok.text


def test_the_history_check_reads_interleaved_trials_first_against_the_rest():
    per_kw = [1000.0, 1150.0, 1160.0, 1140.0]  # the first trial (right after priming) well below the others
    tb = trials_block({"output_tokens_per_s_per_kw@accelerator": (sum(per_kw) / 4, 10.0)}, n=4)
    tb["figures"]["output_tokens_per_s_per_kw@accelerator"]["values"] = per_kw
    hc = judge(_lv(1000.0, trials=tb), None)
    assert hc.verdict == "warn" and hc.repeat is None
    assert (hc.first, hc.repeated) == (pytest.approx(1150.0, rel=1e-12), pytest.approx(1000.0, rel=1e-12))
    tb["figures"]["output_tokens_per_s_per_kw@accelerator"]["values"] = [1150.0, 1152.0, 1148.0, 1151.0]
    assert judge(_lv(1150.0, trials=tb), None).verdict == "ok"
