"""``--trials auto`` against ground truth: the scripted streaming server with a seeded speed noise
(``--speed-noise SD``, a new factor every 8 requests: trials of one level differ by a known jitter)
and a declared 300 W node, so every change in tokens/s per kW is one the server was scripted to
make. The rounds stop at the first one where every level's half-width (recomputed here from the
trials' own figures) is within the precision asked, and report their cost; a budget that ends them
says the precision reached and how many more trials would reach the one asked."""

from __future__ import annotations

import math
import time

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.metrics.trials import t_ppf
from wattbench.report.summary import answer_lines
from wattbench.run import run_benchmark

pytestmark = pytest.mark.slow

FIG = "output_tokens_per_s_per_kw@node"
T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 6: 2.4469, 7: 2.3646, 8: 2.3060, 9: 2.2622}


def jittery(sd: float) -> tuple[str, ...]:
    return ("--ttft-ms", "20", "--itl-ms", "20", "--speed-noise", f"{sd:g}", "--noise-seed", "5",
            "--noise-every", "8")


def _run(base: str, out, **kw):
    cfg = RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False, html=False,
                    out=str(out), input_tokens="16", output_tokens="16", concurrency=[2, 4], num_requests=8,
                    history_check=False, trials="auto", **kw)
    return run_benchmark(cfg)


def half_width(values: list[float]) -> float:
    """The relative half-width of the trials' 95% interval as the run states it and every noise rule
    reads it (``metrics.trials.rel_half_width``): the interval is built on the log scale
    (``g·e^±w``, ``g`` the geometric mean, ``w = t(0.975, n−1) · sd(ln x) / sqrt(n)``), and its
    half-width is ``w``, ``ln(high / low) / 2``."""
    n = len(values)
    logs = [math.log(v) for v in values]
    lm = sum(logs) / n
    return (T975[n - 1] if n - 1 in T975 else t_ppf(0.975, n - 1)) * math.sqrt(
        sum((x - lm) ** 2 for x in logs) / (n - 1)) / math.sqrt(n)  # past the table: the quantile function


def test_auto_stops_at_the_first_round_within_the_precision_and_reports_its_cost(tmp_path):
    t0 = time.monotonic()
    # a 2% jitter needs 3 trials for ±5%; a loaded host's client adds its own spread: room up to 30
    with stream_server(*jittery(0.02)) as (base, stats):
        res = _run(base, tmp_path / "a", precision_pct=5.0, max_trials=30)
        factors = stats()["speed_factors"]
    wall_s = time.monotonic() - t0
    assert len(set(factors)) > 3  # the jitter was there
    auto = res.noise.auto_trials
    assert auto.stopped == "reached", auto
    values = {lv.index: lv.trials.figures[FIG].values for lv in res.levels}
    k = auto.rounds
    assert 3 <= k <= 30 and all(len(v) == k for v in values.values())
    for lv in res.levels:
        h = half_width(values[lv.index])
        assert h <= 0.05, (lv.label, h)  # reached at the stop
        assert lv.precision.met and lv.precision.reached_pct == pytest.approx(h * 100, rel=1e-3)
    # not later than needed: one round fewer left some level short (or under 3 trials)
    assert k == 3 or any(half_width(v[:k - 1]) > 0.05 for v in values.values())
    # its cost: every trial counted, and seconds no more than the test's own wall clock
    assert auto.trials == 2 * k and 0 < auto.seconds < wall_s
    lines = answer_lines(res)
    assert "±5% asked: reached" in lines[0]
    assert any(x.startswith(f"precision ±5% asked: reached after {k} rounds ({2 * k} trials, ") for x in lines)


def test_a_budget_says_the_precision_reached_and_what_more_would_take(tmp_path):
    with stream_server(*jittery(0.15)) as (base, _):
        res = _run(base, tmp_path / "b", precision_pct=0.5, max_trials=3)
    auto = res.noise.auto_trials
    assert auto.stopped == "max trials" and auto.rounds == 3 and auto.trials == 6
    for lv in res.levels:
        vals = lv.trials.figures[FIG].values
        h = half_width(vals)
        p = lv.precision
        assert not p.met and p.reached_pct == pytest.approx(h * 100, rel=1e-3)
        # the trials needed from the observed spread: the first m with t(m-1) s / sqrt(m) <= 0.5%
        s = h * math.sqrt(3) / T975[2]
        m = next(m for m in range(4, 100_000) if t_ppf(0.975, m - 1) * s / math.sqrt(m) <= 0.005)
        assert p.more_trials == m - 3
    line = next(x for x in answer_lines(res) if x.startswith("precision"))
    assert line.startswith("precision ±0.5% asked: not reached: --max-trials 3 ended it after 3 rounds (6 trials")
    assert "more trials would reach it" in line


def test_max_time_ends_the_rounds_before_the_trials_budget(tmp_path):
    with stream_server(*jittery(0.15)) as (base, _):
        res = _run(base, tmp_path / "c", precision_pct=0.5, max_time_s=4.0)
    auto = res.noise.auto_trials
    assert auto.stopped == "max time" and auto.rounds < 10
    assert "--max-time 4 s ended it" in next(x for x in answer_lines(res) if x.startswith("precision"))


def test_a_declared_meter_keeps_its_uncertainty_beside_the_trials_precision(tmp_path):
    # a declared meter states ±20%, a bias common to every trial: more trials do not narrow it, so the
    # precision asked is judged on the trials' interval and said beside it
    with stream_server(*jittery(0.01)) as (base, _):
        cfg = RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False,
                        html=False, out=str(tmp_path / "m"), input_tokens="16", output_tokens="16", concurrency=[4],
                        num_requests=8, history_check=False, trials="auto", precision_pct=5.0, max_trials=20)
        res = run_benchmark(cfg)
    line = answer_lines(res)[0]
    assert res.noise.auto_trials.stopped == "reached"
    assert "from the trials; ±5% asked: reached; " in line and "with the meter's ±20%" in line
