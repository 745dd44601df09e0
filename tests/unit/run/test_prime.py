"""``run/prime.py``: which load primes a run, and the history check's verdict (made levels, no
server; the noise numbers are metrics/noise.py's, hand-derived in tests/unit/metrics/test_noise.py)."""

from __future__ import annotations

import pytest

from tests.fakes.results_factory import make_level, trials_block
from wattbench.config.run import RunConfig
from wattbench.run.prime import check_history, priming_level


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
    hc = check_history(_lv(1000.0), _lv(1160.0))  # +16%, single 20 s levels: allowed ±3.6%
    assert hc.verdict == "warn" and hc.figure == "output_tokens_per_s_per_kw@accelerator"
    assert hc.first == pytest.approx(1000.0 / 0.7, rel=1e-12) and hc.repeated == pytest.approx(1160.0 / 0.7, rel=1e-12)
    assert "history check c=2: 1,429 then 1,657 tok/s/kW (+16.0%), beyond noise ±3.6% — measured again" in hc.text
    ok = check_history(_lv(1000.0), _lv(1020.0))
    assert ok.verdict == "ok" and "within noise ±3.6%" in ok.text


def test_the_history_check_reads_interleaved_trials_first_against_the_rest():
    per_kw = [1000.0, 1150.0, 1160.0, 1140.0]  # the first trial (right after priming) well below the others
    tb = trials_block({"output_tokens_per_s_per_kw@accelerator": (sum(per_kw) / 4, 10.0)}, n=4)
    tb["figures"]["output_tokens_per_s_per_kw@accelerator"]["values"] = per_kw
    hc = check_history(_lv(1000.0, trials=tb), None)
    assert hc.verdict == "warn" and hc.repeat is None
    assert (hc.first, hc.repeated) == (pytest.approx(1150.0, rel=1e-12), pytest.approx(1000.0, rel=1e-12))
    tb["figures"]["output_tokens_per_s_per_kw@accelerator"]["values"] = [1150.0, 1152.0, 1148.0, 1151.0]
    assert check_history(_lv(1150.0, trials=tb), None).verdict == "ok"


def _open(tok_s: float, achieved: float, duration_s: float = 20.0, trials=None):
    """r=20/s with a Poisson process that sent ``achieved`` requests/s in its window: a declared-like
    700 W, so tok/s per kW follows the tokens, which follow the arrivals."""
    lv = make_level(0, mode="rate", value=20, output_tokens_per_s=tok_s, power_w=700.0, duration_s=duration_s,
                    trials=trials)
    lv.load.achieved_rate_rps = achieved
    return lv


def test_an_open_loop_is_judged_per_achieved_request_and_says_both_rates():
    """The defect: r=20 measured twice read 2,177 then 2,389 tok/s/kW (+9.8%) while the arrivals
    achieved 17.50 and 19.76 requests/s (+12.9%), and the check blamed the server ("beyond noise
    ±6.2%"). Per request achieved the server did the same work (−2.8%): within noise, and the text
    shows both rates. A server that really slowed moves the per-request figure and still warns."""
    first, repeat = _open(2177.0 * 0.7, 17.50), _open(2389.0 * 0.7, 19.76)
    closed = check_history(_lv(2177.0 * 0.7), _lv(2389.0 * 0.7))  # the same figures as a closed loop: the server moved
    assert closed.verdict == "warn"
    hc = check_history(first, repeat)
    assert hc.verdict == "ok", hc.text
    assert hc.ratio == pytest.approx((2389.0 / 19.76) / (2177.0 / 17.50), rel=1e-12)
    assert (hc.first_rate_rps, hc.repeat_rate_rps) == (pytest.approx(17.50), pytest.approx(19.76))
    assert hc.first == pytest.approx(2177.0, rel=1e-12) and hc.repeated == pytest.approx(2389.0, rel=1e-12)
    assert hc.text.startswith("history check r=20: 2,177 then 2,389 tok/s/kW at 17.5 then 19.8 req/s achieved, "
                              "per request/s -2.8%, within noise"), hc.text
    assert "per achieved request/s" in hc.basis
    slow = check_history(first, _open(1900.0 * 0.7, 19.76))  # −22% per request: the server, not the arrivals
    assert slow.verdict == "warn" and "beyond noise" in slow.text and "19.8 req/s achieved" in slow.text


def test_an_open_loops_trials_are_judged_per_achieved_request_each():
    # each trial's figure follows its own arrivals: 125 tok/s/kW per request/s, ±1% of measurement
    # noise in two of the later trials (a spread of exactly zero would measure no noise at all)
    per_kw = [2000.0, 2200.0 * 1.01, 2310.0 * 0.99, 2090.0]
    rps = [16.0, 17.6, 18.48, 16.72]
    tb = trials_block({"output_tokens_per_s_per_kw@accelerator": (sum(per_kw) / 4, 100.0),
                       "requests_per_s": (sum(rps) / 4, 1.0)}, n=4)
    tb["figures"]["output_tokens_per_s_per_kw@accelerator"]["values"] = per_kw
    tb["figures"]["requests_per_s"]["values"] = rps
    hc = check_history(_open(2000.0 * 0.7, 16.0, trials=tb), None)
    assert hc.ratio == pytest.approx(1.0, rel=1e-12) and hc.verdict == "ok", hc.text
    assert hc.first_rate_rps == pytest.approx(sum(rps[1:]) / 3) and hc.repeat_rate_rps == pytest.approx(16.0)


# ---------------------------------------------------------------- the calibration's fit


def test_the_fit_goes_through_two_lengths():
    from wattbench.run.prime import fit_calibration

    # 2.1 tokens per word + 7: 48 words -> 107.8, 96 words -> 208.6
    a, b = fit_calibration([48, 96], [107.8, 208.6])
    assert a == pytest.approx(2.1) and b == pytest.approx(7.0)
    a, b = fit_calibration([48], [96.0])  # one length: a ratio through the origin
    assert (a, b) == (pytest.approx(2.0), pytest.approx(0.0, abs=1e-12))


@pytest.mark.parametrize("counts,says", [
    ([0.0, 0.0], "counted 0 prompt tokens for the probes of 48 words, below one token a probe"),
    ([1.0, 1.0], "counted 1 prompt tokens for the probes of 48 words and 1 for those of 96: the count does not grow"),
    ([7.0, 7.0], "counted 7 prompt tokens for the probes of 48 words and 7 for those of 96"),
    ([300.0, 200.0], "the count does not grow with the words"),
    ([7.0, 8.0], "0.0208 tokens per word, outside the 0.25-8 any tokenizer counts"),  # 48 words a token
    ([100.0, 1000.0], "18.8 tokens per word, outside"),
    ([float("nan"), 5.0], "counted nan prompt tokens"),
])
def test_a_fit_no_tokenizer_makes_is_refused_naming_the_probes(counts, says):
    from wattbench.run.prime import fit_calibration

    with pytest.raises(ValueError) as e:
        fit_calibration([48, 96], counts)
    assert says in str(e.value)


def test_a_prompt_never_gets_more_than_four_words_a_token():
    from wattbench.workload.tokenizer import MAX_WORDS_PER_TOKEN, ApproxTokenizer

    ts = ApproxTokenizer()
    ts.calibrate(0.25, -300.0)  # the band's edge, a large negative overhead: (8 + 300) × 4 words for 8 tokens
    assert ts.words_for(8) == int(MAX_WORDS_PER_TOKEN * 8) and ts.words_for(30_000) == 120_000  # not 121,200
    with pytest.raises(ValueError, match="not a calibration"):
        ts.calibrate(1 / 145, 0.0)  # `prompt_tokens: 1` on every probe once fitted this
