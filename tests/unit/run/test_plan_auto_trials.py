"""``run.plan.auto_rounds`` (``--trials auto``): rounds are added until every level's headline
tokens/s per kW is known within ``--precision``, or a budget ends — driven by a runner whose trials
give scripted per-kW figures, so the round it must stop at is worked out by hand (t(0.975, df):
2 4.3027, 3 3.1824, 4 2.7764)."""

from __future__ import annotations

import math

import pytest

from tests.fakes.results_factory import make_level, make_result
from wattbench.config.run import RunConfig
from wattbench.core.errors import UserError
from wattbench.core.schema import FigureTrend, Stationarity, TrialsBlock
from wattbench.metrics.trials import trial_interval
from wattbench.report.summary import answer_lines
from wattbench.run import plan

FIG = "output_tokens_per_s_per_kw@accelerator"
POWER_KW = 0.7  # make_level's 700 W at the accelerator


def _cfg(**kw):
    kw.setdefault("target", "http://127.0.0.1:9")
    kw.setdefault("history_check", False)
    kw.setdefault("prime", False)
    return RunConfig(trials="auto", **kw)


class ScriptedRunner:
    """Trial ``k`` of level ``index`` measures ``script[index][k]`` tokens/s per kW; the level is
    recorded as ``run.level`` records it (its latest trial, with the mean and CI of its trials so far)."""

    is_trace = False

    def __init__(self, result, script: dict[int, list[float]]):
        self.result, self.script = result, script
        self.calls: list[tuple] = []
        self.done: list[int] = []
        self.prime_at = None

    def prime_now(self):
        pass

    def trial(self, mode, value, index, k, n, **kw):
        self.calls.append((value, index, k, n, kw.get("label_suffix", "")))
        per_kw = self.script[index][k]
        lv = make_level(index=index, mode=mode, value=value, output_tokens_per_s=per_kw * POWER_KW)
        lv.label += kw.get("label_suffix", "")
        lv.trial = k
        vals = self.script[index][:k + 1]
        if len(vals) > 1:
            ci = trial_interval(vals)
            lv.trials = TrialsBlock.model_validate({"n": len(vals), "figures": {FIG: {
                "mean": ci["mean"], "ci_low": ci["ci95_low"], "ci_high": ci["ci95_high"], "n": len(vals),
                "values": vals}}})
        levels = self.result.levels
        pos = next((i for i, x in enumerate(levels) if x.index == index), None)
        if pos is None:
            levels.append(lv)
        else:
            levels[pos] = lv
        return lv

    def level_done(self, index):
        self.done.append(index)


# 100, 102, 98, 101, 99: the half-width reaches 1.963% at the 5th trial and not before
SCRIPT = [100.0, 102.0, 98.0, 101.0, 99.0, 100.0, 100.0, 100.0, 100.0, 100.0]
H3 = 4.3027 * 2.0 / math.sqrt(3) / 100.0  # 100, 102, 98: sd 2 -> 4.969%
H4 = 3.1824 * math.sqrt(8.75 / 3) / 2.0 / 100.25  # 2.711%
H5 = 2.7764 * math.sqrt(2.5) / math.sqrt(5) / 100.0  # 1.963%


def _run(cfg, script):
    result = make_result(levels=[])
    r = ScriptedRunner(result, script)
    plan.run_plan(cfg, result, None, [], runner=r)  # type: ignore[arg-type]
    return result, r


def test_the_rounds_stop_at_the_first_round_within_the_precision():
    assert H3 > 0.02 and H4 > 0.02 and H5 <= 0.02
    result, r = _run(_cfg(concurrency=[4, 16]), {0: SCRIPT, 1: [200.0] * 10})
    auto = result.noise.auto_trials
    assert auto.stopped == "reached" and auto.rounds == 5 and auto.trials == 10
    assert [c[:3] for c in r.calls[:4]] == [(4, 0, 0), (16, 1, 0), (4, 0, 1), (16, 1, 1)]  # interleaved rounds
    p = result.levels[0].precision
    assert p.met and p.trials == 5 and p.reached_pct == pytest.approx(H5 * 100, rel=1e-3) and p.more_trials == 0
    assert p.figure == FIG and p.asked_pct == pytest.approx(2.0)
    assert sorted(r.done) == [0, 1]  # every level complete although rounds were planned up to 10
    assert auto.seconds is not None and auto.seconds >= 0


def test_the_stop_edge_is_the_asked_precision_within_1pct():
    # just above the 5th trial's half-width: stops there; just below it: one more round
    at = _run(_cfg(concurrency=[4], precision_pct=H5 * 100 * 1.005), {0: SCRIPT})[0]
    assert at.noise.auto_trials.rounds == 5
    below = _run(_cfg(concurrency=[4], precision_pct=H5 * 100 * 0.99), {0: SCRIPT})[0]
    assert below.noise.auto_trials.rounds > 5


def test_a_spread_of_zero_still_needs_three_trials():
    result, _ = _run(_cfg(concurrency=[4]), {0: [100.0] * 10})
    assert result.noise.auto_trials.rounds == 3


def test_max_trials_ends_the_rounds_and_says_what_more_would_take():
    wide = [100.0, 110.0, 90.0, 105.0, 95.0, 100.0]
    result, r = _run(_cfg(concurrency=[4], max_trials=4), {0: wide})
    auto = result.noise.auto_trials
    assert auto.stopped == "max trials" and auto.rounds == 4 and r.done == []  # the 4th trial was its last
    p = result.levels[0].precision
    # 100, 110, 90, 105: the interval is built on the log scale; its half-width, the precision
    # reached, is t(3) x sd(ln x) / 2 = 3.1824 x 8.600% / 2 = 13.69%
    logs = [math.log(x) for x in wide[:4]]
    sd = math.sqrt(sum((x - sum(logs) / 4) ** 2 for x in logs) / 3)
    h = 3.1824463 * sd / 2
    assert p.reached_pct == pytest.approx(h * 100, rel=1e-3) and not p.met
    # trials needed: the first m with t(m-1) s / sqrt(m) <= 2% (s = the log sd)
    from wattbench.metrics.trials import t_ppf
    s = sd
    m = next(m for m in range(5, 500) if t_ppf(0.975, m - 1) * s / math.sqrt(m) <= 0.02)
    assert m == 74 and p.more_trials == m - 4  # t(73) 1.9930 x 8.600% / sqrt(74) = 1.9925% <= 2%
    lines = answer_lines(result)
    assert f"±{h * 100:.1f}%; ±2% asked: not reached; about {m - 4} more trials would reach it" in lines[0]
    assert any(x.startswith("precision ±2% asked: not reached: --max-trials 4 ended it after 4 rounds (4 trials")
               for x in lines)


def test_max_time_ends_the_rounds():
    # no round ends within a microsecond of measuring: the first round's end stops it
    result, _ = _run(_cfg(concurrency=[4], max_time_s=1e-6), {0: [100.0, 110.0, 90.0] * 3})
    auto = result.noise.auto_trials
    assert auto.stopped == "max time" and auto.rounds == 1
    assert result.levels[0].precision.reached_pct is None  # one trial: no interval
    assert "c=4 no interval (1 trial measured)" in next(x for x in answer_lines(result) if x.startswith("precision"))


def test_optimize_measures_its_finalists_to_the_precision_and_ranks_them_on_those_trials():
    cfg = _cfg(concurrency=[1, 2, 4], optimize="output_tokens_per_s_per_kw")
    result = make_result(levels=[])
    searched = []

    def measure(mode, value, **kw):  # the search's single measurement of each candidate
        lv = make_level(index=len(result.levels), mode=mode, value=value, output_tokens_per_s=value * 70.0)
        result.levels.append(lv)
        searched.append(value)
        return lv

    # the finalists (4 then 2) get levels 3 and 4: 4 measures 400 per kW steadily, 2 measures 150-ish
    r = ScriptedRunner(result, {3: [400.0, 404.0, 396.0, 400.0] * 3, 4: [150.0, 151.0, 149.0] * 4})
    plan.run_plan(cfg, result, measure, [], runner=r)
    assert searched == [1, 2, 4]
    assert {c[1] for c in r.calls} == {3, 4} and all(c[4] == " re-measured" for c in r.calls)
    auto = result.noise.auto_trials
    # 4's 400, 404, 396 read ±2.48% (4.3027 x 4 / sqrt(3) / 400); with 400 again ±1.30%: the 4th round
    assert auto.stopped == "reached" and auto.rounds == 4
    assert result.optimize.remeasured == [4, 2] and result.optimize.best_value == 4
    assert result.optimize.best_score == pytest.approx(400.0)  # the finalist's trials, not its search figure


def test_sweep_with_auto_trials_is_refused():
    with pytest.raises(UserError, match="--trials auto"):
        plan.validate_plan(_cfg(sweep="auto"))


@pytest.mark.parametrize("typed, trials", [("auto", "auto"), ("AUTO", "auto"), (" 3 ", 3), ("1", 1), (None, 1), (4, 4)])
def test_trials_reads_a_count_or_auto(typed, trials):
    assert RunConfig(target="http://x", trials=typed).trials == trials


@pytest.mark.parametrize("kw, msg", [
    ({"trials": "x"}, "--trials 'x': give a whole number of trials (--trials 3) or auto"),
    ({"trials": "2.5"}, "--trials '2.5'"),
    ({"trials": 0}, "--trials must be >= 1"),
    ({"trials": 3, "precision_pct": 2.0}, "--precision bounds --trials auto"),
    ({"max_time_s": 60.0}, "--max-time bounds --trials auto"),
    ({"trials": "auto", "max_trials": 2}, "--max-trials 2 with --trials auto"),
    ({"trials": "auto", "precision_pct": 0.0}, "--precision must be > 0"),
    ({"trials": "auto", "precision_pct": 100.0}, "--precision must be > 0 and < 100"),
])
def test_bad_trials_options_are_one_line(kw, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        RunConfig(target="http://x", **kw)


def test_the_auto_defaults():
    cfg = RunConfig(target="http://x", trials="auto")
    assert cfg.auto_trials and cfg.trial_count() == 10 and cfg.precision() == pytest.approx(0.02)
    fixed = RunConfig(target="http://x", trials=3)
    assert not fixed.auto_trials and fixed.trial_count() == 3


class DriftingRunner(ScriptedRunner):
    """Its level's per-kW figure drifts (the stationarity block ``accounting.drift`` writes)."""

    def trial(self, mode, value, index, k, n, **kw):
        lv = super().trial(mode, value, index, k, n, **kw)
        lv.stationarity = Stationarity(trials=k + 1, cause="GPU temperature 58→79 °C", trends=[FigureTrend(
            figure="output_tokens_per_s_per_kw", boundary="accelerator", change_pct=-6.0, trials_change_pct=-6.0,
            moves=True, drifting=True)])
        return lv


def test_a_drifting_level_never_reaches_its_precision():
    # the figures alone would be within 2% at the 3rd trial (100, 100.5, 99.5: ±1.2%); the drift keeps it open
    result = make_result(levels=[])
    r = DriftingRunner(result, {0: [100.0, 100.5, 99.5, 100.0, 100.2]})
    plan.run_plan(_cfg(concurrency=[4], max_trials=5), result, None, [], runner=r)  # type: ignore[arg-type]
    auto = result.noise.auto_trials
    assert auto.stopped == "max trials" and auto.rounds == 5
    p = result.levels[0].precision
    assert p.drifting and not p.met and p.more_trials is None and p.reached_pct is not None and p.reached_pct < 2
    assert p.drift.startswith("drifts -6.0% over its 5 trials (GPU temperature")
    lines = answer_lines(result)
    assert "±2% asked: not reached, it drifts -6.0%" in lines[0]
    assert "c=4 ±" in next(x for x in lines if x.startswith("precision")) and "(it drifts -6.0%" in lines[1]


def test_the_history_check_says_what_would_resolve_the_precision_asked():
    # three trials (100, 100.5, 99.5: ±1.24%) reach ±5%; the first trial against the other two rests
    # on 1 degree of freedom: inconclusive, and it says what ±5% (the run's precision) would take
    result, _ = _run(_cfg(concurrency=[4, 16], precision_pct=5.0, history_check=True),
                     {0: [100.0, 100.5, 99.5] * 3, 1: [200.0] * 9})
    assert result.noise.auto_trials.rounds == 3
    hc = result.noise.history_check
    assert hc.verdict == "unknown" and "inconclusive" in hc.text
    assert "the current noise resolves only effects beyond ±" in hc.text and "to resolve ±5%:" in hc.text
