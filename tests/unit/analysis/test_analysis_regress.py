"""regress: check parsing, pass/fail with the size of the miss, the noise rule and its edges
(pass only when the change's interval excludes a regression beyond the limit, fail only when it lies
wholly beyond, else inconclusive with why and what would settle it), refusals."""

from __future__ import annotations

import math


import pytest

from tests.fakes.results_factory import make_level, make_result, trials_block
from wattbench.analysis.regress import RegressCheck, parse_checks, regress
from wattbench.core.errors import UserError
from wattbench.metrics.figure_noise import FigureNoise

Z = 1.959963984540054


def _history(h: float, df: int = 9):
    """A history that gives every figure of every run the one-run 95% half-width ``h`` (``df``
    degrees of freedom): the ratio's interval is then ``R·e^±(√2·h)`` exactly."""
    noise = FigureNoise(h, "history", df + 1, f"history of key k: {df + 1} runs, {df} df", df, 1, "runs")
    return lambda result, level, figure: noise


def test_parse_checks():
    cs = parse_checks("j_per_output_token:+5%, output_tokens_per_s:-3%,ttft_p99_ms:+20ms,tpot_p99_ms:+0.01s,"
                      "avg_power_w:+0.05kW,failed_pct:+1pp,j_per_token:+50mJ,e2e_p99_ms:+100")
    assert [(c.metric, c.direction, c.kind) for c in cs][:3] == [
        ("j_per_output_token", "+", "relative"), ("output_tokens_per_s", "-", "relative"),
        ("ttft_p99_ms", "+", "absolute")]
    assert cs[0].threshold == pytest.approx(0.05)
    assert cs[1].threshold == pytest.approx(0.03)
    assert cs[2].threshold == 20
    assert cs[3].threshold == pytest.approx(10.0)  # 0.01 s in ms
    assert cs[4].threshold == pytest.approx(50.0)  # W
    assert cs[5].threshold == pytest.approx(1.0, rel=1e-9)
    assert cs[6].threshold == pytest.approx(0.05)  # J
    assert cs[7].threshold == 100


@pytest.mark.parametrize("bad,msg", [
    ("j_per_output_token+5%", "is not METRIC:\\+N%"),
    ("joules:+5%", "unknown metric 'joules'"),
    ("ttft_p99_ms:+20W", "unit 'W' does not fit metric 'ttft_p99_ms'"),
    ("output_tokens_per_s:5%", "is not METRIC"),
    ("", "no checks given"),
])
def test_bad_checks(bad, msg):
    with pytest.raises(UserError, match=msg):
        parse_checks(bad)


def _pair(tput_b=1000.0, power_b=600.0, ttft_b=120.0, trials_a=None, trials_b=None):
    a = make_result("base", levels=[make_level(0, value=8, output_tokens_per_s=1000.0, power_w=600.0,
                                               ttft_p99_ms=120.0, trials=trials_a)])
    b = make_result("cand", levels=[make_level(0, value=8, output_tokens_per_s=tput_b, power_w=power_b,
                                               ttft_p99_ms=ttft_b, trials=trials_b)])
    return a, b


def test_all_hold_with_a_tight_noise():
    # history ±0.5% a run: w = √2 · 0.005; J/token +2.7% -> worst +3.4% <= 5%, throughput -1% -> worst -1.7%
    a, b = _pair(tput_b=990.0, power_b=610.0)
    rep = regress(b, a, "j_per_output_token:+5%,output_tokens_per_s:-3%", history=_history(0.005))
    assert rep.passed and rep.verdict == "pass"
    assert [o.status for o in rep.outcomes] == ["pass", "pass"]
    assert rep.outcomes[1].change == pytest.approx(-0.01)
    w = math.sqrt(2) * 0.005
    assert rep.outcomes[1].worst == pytest.approx(1.0 - 0.99 * math.exp(-w), rel=1e-9)
    assert "its 95% interval excludes a change beyond -3%" in rep.outcomes[1].message
    # without any noise the same pair cannot be passed: inconclusive, and --strict judges the change itself
    rep = regress(b, a, "j_per_output_token:+5%,output_tokens_per_s:-3%")
    assert rep.verdict == "inconclusive" and not rep.passed and not rep.failed
    assert [o.status for o in rep.outcomes] == ["inconclusive", "inconclusive"]
    assert regress(b, a, "j_per_output_token:+5%,output_tokens_per_s:-3%", strict=True).passed


def test_failure_reports_size_of_miss():
    # J/token = P / tput: 660/950 vs 600/1000 -> +15.79%; throughput -5% (no noise: --strict judges the change)
    a, b = _pair(tput_b=950.0, power_b=660.0)
    rep = regress(b, a, "j_per_output_token:+5%,output_tokens_per_s:-3%,ttft_p99_ms:+20ms", strict=True)
    assert not rep.passed
    f = {o.check.metric: o for o in rep.failed}
    assert set(f) == {"j_per_output_token", "output_tokens_per_s"}
    jt = (660 / 950) / (600 / 1000) - 1
    assert f["j_per_output_token"].change == pytest.approx(jt)
    assert f["j_per_output_token"].miss == pytest.approx(jt - 0.05)
    assert f["output_tokens_per_s"].miss == pytest.approx(0.02)
    assert "missed by 2.00%" in f["output_tokens_per_s"].message
    assert "limit -3%" in f["output_tokens_per_s"].message
    # the one number format (core/numbers.py): not 1456.96 -> 1315.83 but 1,000 -> 950
    assert "output_tokens_per_s 1,000 -> 950 (-5.00%, inconclusive: noise unknown)" in f["output_tokens_per_s"].message
    assert f"j_per_output_token {(600 * 60) / (1000 * 60):.2f} -> 0.69 " in f["j_per_output_token"].message


def test_absolute_check():
    a, b = _pair(ttft_b=150.0)
    rep = regress(b, a, "ttft_p99_ms:+20ms", strict=True)
    assert rep.failed[0].miss == pytest.approx(10.0)
    assert "missed by 10" in rep.failed[0].message
    assert regress(b, a, "ttft_p99_ms:+40ms", strict=True).passed
    assert regress(b, a, "ttft_p99_ms:+40ms").verdict == "inconclusive"  # noise unknown: no pass


def test_noise_rule_relative():
    # throughput -5% point change with CIs of ±2% each: a repeat of a run moves more than its trials
    # (no history: the run-to-run floor, z · 2.3% = 4.5% a side, counts), so the change's interval is
    # 0.95·e^±(√2 · 0.0451) = [-10.8%, +1.25%]: its end nearest zero is under the 3% allowed, and the
    # noise-aware gate holds where the point change alone fails
    ta = trials_block({"output_tokens_per_s": (1000.0, 20.0)})
    tb = trials_block({"output_tokens_per_s": (950.0, 19.0)})
    a, b = _pair(tput_b=950.0, trials_a=ta, trials_b=tb)
    o = regress(b, a, "output_tokens_per_s:-3%").outcomes[0]
    # its nearer end is within the limit (no fail) and its far end beyond it (no pass): inconclusive
    assert o.noise_aware and o.status == "inconclusive" and o.noise_basis == "trials+floor"
    assert o.bound == pytest.approx(1.0 - 0.95 * math.exp(math.sqrt(2) * 1.959963984540054 * 0.023), rel=1e-9)
    assert o.worst == pytest.approx(1.0 - 0.95 * math.exp(-math.sqrt(2) * 1.959963984540054 * 0.023), rel=1e-9)
    assert o.bound < 0.03 < -o.change == pytest.approx(0.05)  # nearer zero than the point change
    assert "noise ±6.6% (" in o.why and "is wider than the 3% limit" in o.why
    # same point change without trials: the noise is unknown, so is the verdict; --strict fails it
    a2, b2 = _pair(tput_b=950.0)
    assert regress(b2, a2, "output_tokens_per_s:-3%").outcomes[0].status == "inconclusive"
    assert regress(b2, a2, "output_tokens_per_s:-3%", strict=True).outcomes[0].status == "fail"
    # a larger drop fails even beyond the CI; the miss is the CI bound's excess over the threshold
    tb3 = trials_block({"output_tokens_per_s": (900.0, 18.0)})
    a3, b3 = _pair(tput_b=900.0, trials_a=ta, trials_b=tb3)
    o3 = regress(b3, a3, "output_tokens_per_s:-3%").outcomes[0]
    assert o3.status == "fail" and 0.03 < o3.bound < 0.10
    assert o3.miss == pytest.approx(o3.bound - 0.03, abs=1e-12)


def test_noise_rule_relative_false_alarms_and_power():
    """What a noise-aware gate must do, checked against the truth rather than its formula: runs
    drawn 1,000 times (seeded) with 3% noise, five trials each (mean and t-based 95% half width
    from metrics.trials.ci95), gated at ``output_tokens_per_s:-3%``. A candidate whose true drop
    is exactly the 3% allowed fails at most ~2.5% of the time (the one-sided tail of a 95% CI;
    none here, where the run-to-run floor widens each side's noise to 4.5%), one with no drop never, and a true 10% drop is caught most of the time (85%
    here). A gate without the CI fails about half at the threshold; one three times as wide
    rarely catches the 10% drop."""
    import numpy as np

    from wattbench.metrics.trials import ci95

    rng = np.random.default_rng(7)

    def run(name: str, tput: float):
        c = ci95(rng.normal(tput, 0.03 * tput, 5))
        return make_result(name, levels=[make_level(0, value=8, output_tokens_per_s=c["mean"], power_w=600.0,
                                                    ttft_p99_ms=120.0, trials=trials_block(
                                                        {"output_tokens_per_s": (c["mean"], c["half_width"])}))])

    def fail_rate(true_ratio: float, n: int = 1000) -> float:
        return sum(regress(run("cand", 1000.0 * true_ratio), run("base", 1000.0), "output_tokens_per_s:-3%")
                   .outcomes[0].status == "fail" for _ in range(n)) / n

    assert fail_rate(0.97) <= 0.04
    assert fail_rate(1.0, n=300) == pytest.approx(0.0, abs=1e-12)
    # these synthetic runs share no slow state, yet a repeat of a real run moves by at least the
    # run-to-run floor (2.3% sd): counted, it costs some power here (85% -> 69%)
    assert fail_rate(0.90) >= 0.60


def test_a_tight_noise_passes_no_change_and_never_fails_it():
    """The other side of the gate, against the truth: runs whose figure has a 0.5% sd, with a
    history that knows it (20 df): the ratio's bound is e^(√2 · t(0.975, 20) · 0.5%) − 1 = 1.5%,
    so a run with no true change passes ``-3%`` unless it reads 1.5% low by chance (about 1% of
    the time), and never fails; a true drop of exactly the 3% allowed passes at most ~2.5% of the
    time (the interval's one-sided tail: 1.7% here) and is mostly inconclusive; a true 10% drop
    always fails."""
    import numpy as np

    from wattbench.metrics.trials import t_ppf

    rng = np.random.default_rng(11)
    hist = _history(t_ppf(0.975, 20) * 0.005, df=20)

    def status(true_ratio: float) -> str:
        b, a = (make_result(n, levels=[make_level(0, value=8, output_tokens_per_s=float(t), power_w=600.0)])
                for n, t in (("cand", 1000.0 * true_ratio * math.exp(rng.normal(0, 0.005))),
                             ("base", 1000.0 * math.exp(rng.normal(0, 0.005)))))
        return regress(b, a, "output_tokens_per_s:-3%", history=hist).outcomes[0].status

    same = [status(1.0) for _ in range(300)]
    assert same.count("fail") == 0 and same.count("pass") / 300 >= 0.95
    at_limit = [status(0.97) for _ in range(300)]
    assert at_limit.count("pass") / 300 <= 0.04 and at_limit.count("inconclusive") / 300 >= 0.9
    assert all(status(0.90) == "fail" for _ in range(50))


@pytest.mark.parametrize("check, cand", [("output_tokens_per_s:-3%", {"output_tokens_per_s": 960.0}),
                                         ("avg_power_w:+5%", {"power_w": 624.0}),
                                         ("ttft_p99_ms:+20ms", {"ttft_p99_ms": 150.0})])
@pytest.mark.parametrize("edge", ["pass", "fail"])
def test_the_limit_edges_cannot_move_by_1_percent(check, cand, edge):
    """The change's interval against the limit, at both edges, for a falling, a rising and an
    absolute check: a limit 1% inside or outside the exact edge flips the verdict. Each side's
    noise is ±2% (a history); the pairs: throughput 1000 → 960 tok/s, power 600 → 624 W, p99 TTFT
    120 → 150 ms."""
    c = parse_checks(check)[0]
    h = 0.02
    base = {"output_tokens_per_s": 1000.0, "power_w": 600.0, "ttft_p99_ms": 120.0}
    a = make_result("base", levels=[make_level(0, value=8, **base)])
    b = make_result("cand", levels=[make_level(0, value=8, **{**base, **cand})])
    A, B = {"output_tokens_per_s": (1000.0, 960.0), "avg_power_w": (600.0, 624.0),
            "ttft_p99_ms": (120.0, 150.0)}[c.metric]
    if c.kind == "relative":  # the change's interval R·e^±w − 1, read in the bad direction
        w = math.sqrt(2) * h
        lo, hi = B / A * math.exp(-w) - 1.0, B / A * math.exp(w) - 1.0
        near, far = (lo, hi) if c.direction == "+" else (-hi, -lo)
    else:  # change ± sqrt((h·a)² + (h·b)²)
        hw = math.sqrt((h * A) ** 2 + (h * B) ** 2)
        near, far = B - A - hw, B - A + hw
    assert 0 < near < far  # the whole interval lies in the bad direction: either end can be the limit
    at = far if edge == "pass" else near
    outcome = {}
    for k in (0.99, 1.01):
        chk = RegressCheck(metric=c.metric, direction=c.direction, kind=c.kind, threshold=at * k, text=check)
        o = regress(b, a, [chk], history=_history(h)).outcomes[0]
        assert (o.baseline, o.candidate) == pytest.approx((A, B), rel=1e-9)
        outcome[k] = o.status
    if edge == "pass":  # pass needs the interval's far end within the limit
        assert outcome == {0.99: "inconclusive", 1.01: "pass"}
    else:  # fail needs its near end beyond the limit
        assert outcome == {0.99: "fail", 1.01: "inconclusive"}


def test_a_noise_wider_than_the_limit_is_inconclusive_never_pass_within_noise():
    """±18% interval (each side a history of ±e^(ln 1.18 / √2)), the figure unchanged (-1%), limit
    3%: compare says "within noise", but the gate cannot tell a 3% regression from none. The line
    names the noise and the limit; what would settle it: the smallest effect the noise resolves
    (±18.0%) and how many runs of each side would resolve ±3% — counted here from the Student t
    (scipy), not from the code's own helper."""
    from scipy.stats import t as student

    h = math.log(1.18) / math.sqrt(2)
    a, b = _pair(tput_b=990.0)
    rep = regress(b, a, "output_tokens_per_s:-3%", history=_history(h, df=5))
    o = rep.outcomes[0]
    assert o.word == "within noise" and o.noise.bound == pytest.approx(0.18, rel=1e-12)
    assert "within noise" in rep.answers[0]  # compare's word for the same pair, unchanged
    assert o.status == "inconclusive" and rep.verdict == "inconclusive" and not rep.failed
    assert "within noise" not in o.message and "pass" not in o.message
    assert "noise ±18.0% (history of key k: 6 runs, 5 df) is wider than the 3% limit" in o.why
    assert "the current noise resolves only effects beyond ±18.0%" in o.settle
    # one run's spread s = h / t(0.975, 5); m runs a side reach ln(1.03)/√2 when t(0.975, 5 + m − 1)·s/√m does
    s, aim = h / student.ppf(0.975, 5), math.log(1.03) / math.sqrt(2)
    m = next(m for m in range(2, 10_000) if student.ppf(0.975, 4 + m) * s / math.sqrt(m) <= aim)
    more = f"{m - 1} more runs"
    assert f"to resolve ±3%: {more} of the baseline ({m} in all), {more} of the run ({m} in all)" in o.settle
    assert o.settle in o.message and o.why in o.message
    assert rep.todo and "more runs of each configuration" in rep.todo  # the advice in words, once
    # the same noise and change at a 25% limit: its interval lies within it, a pass
    assert regress(b, a, "output_tokens_per_s:-25%", history=_history(h, df=5)).outcomes[0].status == "pass"


def test_noise_rule_absolute():
    ta = trials_block({"ttft_p99_ms": (120.0, 6.0)})
    tb = trials_block({"ttft_p99_ms": (150.0, 8.0)})
    a, b = _pair(ttft_b=150.0, trials_a=ta, trials_b=tb)
    o = regress(b, a, "ttft_p99_ms:+20ms").outcomes[0]
    assert o.bound == pytest.approx(30 - 10.0)  # sqrt(6²+8²) = 10
    assert o.worst == pytest.approx(30 + 10.0)
    assert o.status == "inconclusive"  # [+20, +40] ms: neither within +20 ms nor wholly beyond it
    assert "the change lies within its noise (±10.0) of the ttft_p99_ms:+20ms limit" in o.why
    o2 = regress(b, a, "ttft_p99_ms:+15ms").outcomes[0]
    assert o2.status == "fail" and o2.miss == pytest.approx(5.0)
    assert regress(b, a, "ttft_p99_ms:+40ms").outcomes[0].status == "pass"


def test_an_absolute_noise_wider_than_its_limit_says_so_in_the_limits_unit():
    """+3 ms with ±10 ms of noise (sqrt(6² + 8²)) against a +5 ms limit: the interval [-7, +13] ms
    reaches past the limit on one side only, and its ±10 ms is wider than the 5 ms limit — the
    sentence names the noise in milliseconds, as the relative one names it in percent."""
    ta = trials_block({"ttft_p99_ms": (120.0, 6.0)})
    tb = trials_block({"ttft_p99_ms": (123.0, 8.0)})
    a, b = _pair(ttft_b=123.0, trials_a=ta, trials_b=tb)
    o = regress(b, a, "ttft_p99_ms:+5ms").outcomes[0]
    assert o.bound == pytest.approx(3 - 10.0) and o.worst == pytest.approx(3 + 10.0)
    assert o.status == "inconclusive"
    assert o.why.startswith("noise ±10.0 (")
    assert o.why.endswith(") is wider than the ttft_p99_ms:+5ms limit: it cannot tell a change of that size from none")


def test_regress_refuses_workload_change_but_not_engine_upgrade():
    a = make_result("base")
    b = make_result("cand", engine_version="0.12.0", driver="590.10")
    rep = regress(b, a, "output_tokens_per_s:-3%", strict=True)
    assert rep.passed
    assert {f.id for f in rep.findings} >= {"engine_changed", "driver_changed"}
    assert [p.field for p in rep.incomparable] == ["engine_version"]
    c = make_result("cand2", workload="summarize")
    with pytest.raises(UserError, match="run and its baseline are not comparable: workload differs"):
        regress(c, a, "output_tokens_per_s:-3%")
    assert regress(c, a, "output_tokens_per_s:-3%", force=True).forced


def test_unmeasured_metric_is_bad_input():
    a, b = _pair()
    with pytest.raises(UserError, match="goodput_rps is not measured in both runs"):
        regress(b, a, "goodput_rps:-5%")


def test_regress_steady_window():
    from tests.fakes.results_factory import make_energy

    a, b = _pair()
    tp = a.levels[0].throughput
    a.levels[0].energy_steady = {"accelerator": make_energy("accelerator", 600.0, 50.0, tp.output_tokens,
                                                            tp.input_tokens)}
    b.levels[0].energy_steady = {"accelerator": make_energy("accelerator", 660.0, 50.0, tp.output_tokens,
                                                            tp.input_tokens)}
    assert regress(b, a, "avg_power_w:+5%", strict=True).passed
    rep = regress(b, a, "avg_power_w:+5%", window="steady", strict=True)
    assert rep.window == "steady" and rep.failed[0].miss == pytest.approx(0.05)


def test_carbon_per_million_tokens_is_a_regress_metric_and_a_compare_ratio():
    """Carbon: same energy, a dirtier grid: the carbon check fails, J/token holds; compare gives the ratio."""
    from wattbench.analysis.ratios import decompose
    from wattbench.metrics.carbon import carbon_g_per_million_tokens

    a, b = _pair()
    for res, g in ((a, 200.0), (b, 300.0)):
        lv = res.levels[0]
        be = lv.energy["accelerator"]
        be.carbon_g_per_million_output_tokens = carbon_g_per_million_tokens(be.energy_j, lv.throughput.output_tokens, g)
    rep = regress(b, a, "carbon_g_per_million_output_tokens:+10%,j_per_output_token:+5%", history=_history(0.01))
    assert [o.status for o in rep.outcomes] == ["fail", "pass"]
    assert rep.outcomes[0].change == pytest.approx(0.5)
    d = decompose(a.levels[0], b.levels[0], "accelerator", "cand")
    assert d.carbon_per_million_output_tokens_ratio == pytest.approx(1.5)
    assert "carbon per million output tokens 1.50×" in d.text()


def test_a_trials_run_is_judged_by_its_trial_mean():
    """With --trials the regress value is the trials' mean (the headline rule), not the last trial's:
    the last trial alone (950 tok/s) would fail -3%; the means (1000 vs 990) hold."""
    ta = trials_block({"output_tokens_per_s": (1000.0, 5.0)})
    tb = trials_block({"output_tokens_per_s": (990.0, 5.0)})
    a, b = _pair(tput_b=950.0, trials_a=ta, trials_b=tb)
    o = regress(b, a, "output_tokens_per_s:-3%", strict=True).outcomes[0]
    assert (o.baseline, o.candidate) == pytest.approx((1000.0, 990.0), rel=1e-12) and o.status == "pass"


def test_a_noise_aware_miss_names_the_interval_edge_it_is_judged_on():
    # throughput -10% with ±2% trials on either side: the change's interval is about -10% ± 2.06%, so
    # the gate judges its end nearest no change (about -7.94%), 4.94 points past the -3% limit, and says so
    ta = trials_block({"output_tokens_per_s": (1000.0, 20.0)})
    tb = trials_block({"output_tokens_per_s": (900.0, 18.0)})
    a, b = _pair(tput_b=900.0, trials_a=ta, trials_b=tb)
    o = regress(b, a, "output_tokens_per_s:-3%").outcomes[0]
    edge = o.change_ci[1]  # a drop: the upper end is the one nearest no change
    assert o.status == "fail" and edge == pytest.approx(-o.bound)
    assert f"missed by {abs(edge) * 100 - 3:.2f}%" in o.message
    assert f"(judged on {edge * 100:.2f}%, the 95% interval's end nearest no change: the change is at least that)" \
        in o.message
    strict = regress(b, a, "output_tokens_per_s:-3%", strict=True).outcomes[0]
    assert "missed by 7.00%" in strict.message and "judged on -" not in strict.message
