"""regress: check parsing, pass/fail with the size of the miss, the noise rule, refusals."""

from __future__ import annotations

import math


import pytest

from tests.fakes.results_factory import make_level, make_result, trials_block
from wattbench.analysis.regress import parse_checks, regress
from wattbench.core.errors import UserError


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


def test_all_hold():
    a, b = _pair(tput_b=990.0, power_b=610.0)
    rep = regress(b, a, "j_per_output_token:+5%,output_tokens_per_s:-3%")
    assert rep.passed
    assert [o.status for o in rep.outcomes] == ["pass", "pass"]
    assert rep.outcomes[1].change == pytest.approx(-0.01)


def test_failure_reports_size_of_miss():
    # J/token = P / tput: 660/950 vs 600/1000 -> +15.79%; throughput -5%
    a, b = _pair(tput_b=950.0, power_b=660.0)
    rep = regress(b, a, "j_per_output_token:+5%,output_tokens_per_s:-3%,ttft_p99_ms:+20ms")
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
    rep = regress(b, a, "ttft_p99_ms:+20ms")
    assert rep.failed[0].miss == pytest.approx(10.0)
    assert "missed by 10" in rep.failed[0].message
    assert regress(b, a, "ttft_p99_ms:+40ms").passed


def test_noise_rule_relative():
    # throughput -5% point change with CIs of ±2% each: a repeat of a run moves more than its trials
    # (no history: the run-to-run floor, z · 2.3% = 4.5% a side, counts), so the change's interval is
    # 0.95·e^±(√2 · 0.0451) = [-10.8%, +1.25%]: its end nearest zero is under the 3% allowed, and the
    # noise-aware gate holds where the point change alone fails
    ta = trials_block({"output_tokens_per_s": (1000.0, 20.0)})
    tb = trials_block({"output_tokens_per_s": (950.0, 19.0)})
    a, b = _pair(tput_b=950.0, trials_a=ta, trials_b=tb)
    o = regress(b, a, "output_tokens_per_s:-3%").outcomes[0]
    assert o.noise_aware and o.status == "pass" and o.noise_basis == "trials+floor"
    assert o.bound == pytest.approx(1.0 - 0.95 * math.exp(math.sqrt(2) * 1.959963984540054 * 0.023), rel=1e-9)
    assert o.bound < 0.03 < -o.change == pytest.approx(0.05)  # nearer zero than the point change
    # same point change without trials fails
    a2, b2 = _pair(tput_b=950.0)
    assert regress(b2, a2, "output_tokens_per_s:-3%").outcomes[0].status == "fail"
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
    1.6% here), one with no drop never, and a true 10% drop is caught most of the time (85%
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


def test_noise_rule_absolute():
    ta = trials_block({"ttft_p99_ms": (120.0, 6.0)})
    tb = trials_block({"ttft_p99_ms": (150.0, 8.0)})
    a, b = _pair(ttft_b=150.0, trials_a=ta, trials_b=tb)
    o = regress(b, a, "ttft_p99_ms:+20ms").outcomes[0]
    assert o.bound == pytest.approx(30 - 10.0)  # sqrt(6²+8²) = 10
    assert o.status == "pass"
    o2 = regress(b, a, "ttft_p99_ms:+15ms").outcomes[0]
    assert o2.status == "fail" and o2.miss == pytest.approx(5.0)


def test_regress_refuses_workload_change_but_not_engine_upgrade():
    a = make_result("base")
    b = make_result("cand", engine_version="0.12.0", driver="590.10")
    rep = regress(b, a, "output_tokens_per_s:-3%")
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
    assert regress(b, a, "avg_power_w:+5%").passed
    rep = regress(b, a, "avg_power_w:+5%", window="steady")
    assert rep.window == "steady" and rep.failed[0].miss == pytest.approx(0.05)


def test_carbon_per_million_tokens_is_a_regress_metric_and_a_compare_ratio():
    """Carbon: same energy, a dirtier grid: the carbon check fails, J/token holds; compare gives the ratio."""
    from wattbench.analysis.compare import decompose
    from wattbench.metrics.carbon import carbon_g_per_million_tokens

    a, b = _pair()
    for res, g in ((a, 200.0), (b, 300.0)):
        lv = res.levels[0]
        be = lv.energy["accelerator"]
        be.carbon_g_per_million_output_tokens = carbon_g_per_million_tokens(be.energy_j, lv.throughput.output_tokens, g)
    rep = regress(b, a, "carbon_g_per_million_output_tokens:+10%,j_per_output_token:+5%")
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
    o = regress(b, a, "output_tokens_per_s:-3%").outcomes[0]
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
