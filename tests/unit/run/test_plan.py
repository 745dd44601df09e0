"""``run.plan``: which levels a run measures, in which order, and what it judges them by — with
a fake ``measure`` that returns made levels (no server, no load)."""

from __future__ import annotations

import pytest

from tests.fakes.results_factory import make_level, make_result, trials_block
from wattbench.config.run import SEARCH_MAX_CONCURRENCY, RunConfig
from wattbench.core.errors import UserError
from wattbench.core.schema import TrialsBlock
from wattbench.run import plan


def _cfg(**kw):
    kw.setdefault("target", "http://127.0.0.1:9")
    return RunConfig(**kw)


class FakeMeasure:
    """Measures by making a level whose efficiency is ``eff(value)``; records what was asked."""

    def __init__(self, eff=lambda v: 100.0 * v):
        self.calls: list[tuple] = []
        self.eff = eff

    def __call__(self, mode, value, *, output_tokens=None, input_tokens=None, label_suffix=""):
        self.calls.append((mode, value, output_tokens, input_tokens, label_suffix))
        lengths = {"output_len": output_tokens, "input_len": input_tokens} if output_tokens else {}
        lv = make_level(index=len(self.calls) - 1, mode=mode, value=value, output_tokens_per_s=self.eff(value),
                        **lengths)
        lv.label += label_suffix
        return lv


def test_a_ladder_measures_every_level_in_order():
    cfg = _cfg(concurrency=[1, 4, 16])
    m = FakeMeasure()
    plan.run_plan(cfg, make_result(), m, [])
    assert [(c[0], c[1]) for c in m.calls] == [("concurrency", 1), ("concurrency", 4), ("concurrency", 16)]
    assert plan.planned_levels(cfg) == 3
    assert plan.planned_levels(_cfg(concurrency=[1, 4], prefill_decode_pair=True)) == 4
    assert plan.planned_levels(_cfg(sweep="auto")) is None


def test_optimize_candidates_are_the_default_ladder_up_to_max_concurrency():
    assert plan.optimize_candidates(_cfg(optimize="goodput_rps", max_concurrency=20)) == [1, 2, 4, 8, 16]
    assert plan.optimize_candidates(_cfg(optimize="goodput_rps", concurrency=[3, 5])) == [3, 5]
    assert plan.optimize_candidates(_cfg(optimize="goodput_rps", rate=[2.0, 4.0])) == pytest.approx([2.0, 4.0], rel=1e-9)


def test_optimize_records_its_candidates_on_the_result():
    cfg = _cfg(optimize="output_tokens_per_s_per_kw", concurrency=[1, 2, 4])
    result = make_result()
    plan.run_plan(cfg, result, FakeMeasure(), [])
    assert result.optimize is not None
    d = result.optimize.model_dump()
    assert d["candidates"] == [1, 2, 4] and d["ladder_size"] == 3


@pytest.mark.parametrize("kw, needle", [({"optimize": "speed"}, "--optimize 'speed'"),
                                        ({"sweep": "linear"}, "--sweep 'linear'")])
def test_a_plan_the_run_cannot_follow_is_refused_before_anything_runs(kw, needle):
    with pytest.raises(UserError, match=needle):
        plan.validate_plan(_cfg(**kw))


def test_search_figures_name_the_objective_and_mark_failed_and_oversaturated_levels():
    lv = make_level(value=8, output_tokens_per_s=1000.0, power_w=500.0)
    d = plan.search_figures(lv)
    e = lv.energy["accelerator"]
    assert d.boundary == "accelerator" and d.window_s == lv.window.duration_s
    assert d.output_tokens_per_s_per_kw == e.output_tokens_per_s_per_kw == d["output_tokens_per_s_per_kw"]
    assert d.goodput_per_kw == e.output_tokens_per_s_per_kw  # no SLO: every token is good
    assert d.ttft_p99_ms == lv.latency.ttft_ms.p99 and d.output_tokens_per_s == pytest.approx(1000.0, rel=1e-12)
    assert d.oversaturated is False and d.failed is None
    lv.stopped_early = "over-saturated: waiting queue grows"
    assert plan.search_figures(lv).oversaturated is True
    lv.requests.completed = 0
    lv.validity.reasons = ["invalid: no measured request completed (0 warm-up, 3 failed, 0 completed)"]
    assert plan.search_figures(lv).failed == "no measured request completed (0 warm-up, 3 failed, 0 completed)"


def test_the_prefill_decode_pair_runs_at_the_largest_concurrency_and_solves():
    m = FakeMeasure()
    pair = plan.prefill_decode_pair(_cfg(concurrency=[2, 32]), m)
    assert [(c[1], c[2], c[3], c[4]) for c in m.calls] == [(32, 1, 1024, " prefill-heavy"),
                                                           (32, 512, 16, " decode-heavy")]
    assert "error" not in pair, pair
    assert pair["levels"] == [0, 1] and pair["boundary"] == "accelerator"


def test_a_pair_level_without_energy_is_an_error_sentence_naming_it():
    m = FakeMeasure()

    def measure(*a, **k):
        lv = m(*a, **k)
        if "decode" in k.get("label_suffix", ""):
            lv.energy = {}
            lv.energy_unavailable_reason = "the meter stopped"
        return lv
    pair = plan.prefill_decode_pair(_cfg(concurrency=[4]), measure)
    assert pair["error"] == "the concurrency=4 decode-heavy level has no energy to split (the meter stopped)"


def test_default_level_size_follows_the_previous_levels_latency():
    from wattbench.accounting.steady import default_num_requests

    prev = make_level(value=4)
    e2e_s = prev.latency.e2e_ms.p50 / 1e3
    periods = [e.update_period_s for e in prev.energy.values() if e.update_period_s]
    assert plan.default_num_requests("concurrency", 8, [prev]) == default_num_requests(
        "concurrency", 8, e2e_s, max(periods) if periods else None)
    assert plan.default_num_requests("concurrency", 8) == default_num_requests("concurrency", 8, None, None)


class FakeRunner:
    """The level runner's surface the plan drives (priming, interleaved trials, the history
    check), recording the calls; each trial makes a level of efficiency ``eff(value)``."""

    is_trace = False

    def __init__(self, result, eff=lambda v: 100.0 * v):
        self.result, self.eff = result, eff
        self.calls: list[tuple] = []
        self.prime_at = None

    def prime_now(self):
        self.calls.append(("prime", self.prime_at))

    def restart(self, before_trial):
        self.calls.append(("restart", before_trial))
        self.prime_now()

    def trial(self, mode, value, index, k, n, **_):
        self.calls.append(("trial", value, index, k))
        lv = make_level(index=index, mode=mode, value=value, output_tokens_per_s=self.eff(value))
        lv.trial = k
        if k > 0:  # the trials so far, as run.level records them (every trial of the fake is alike)
            per_kw = lv.energy["accelerator"].output_tokens_per_s_per_kw
            tb = trials_block({"output_tokens_per_s_per_kw@accelerator": (per_kw, 0.0)}, n=k + 1)
            tb["figures"]["output_tokens_per_s_per_kw@accelerator"]["values"] = [per_kw] * (k + 1)
            lv.trials = TrialsBlock.model_validate(tb)
        levels = self.result.levels
        pos = next((i for i, x in enumerate(levels) if x.index == index), None)
        if pos is None:
            levels.append(lv)
        else:
            levels[pos] = lv
        return lv

    def unrecorded(self, mode, value, index, suffix, num_requests=None, duration_s=None):
        self.calls.append(("repeat", value, index, num_requests, duration_s))
        return make_level(index=index, mode=mode, value=value, output_tokens_per_s=self.eff(value))


def test_trials_over_a_ladder_interleave_round_by_round_after_one_priming():
    cfg = _cfg(concurrency=[16, 64], trials=3)
    result = make_result(levels=[])
    r = FakeRunner(result)
    plan.run_plan(cfg, result, FakeMeasure(), [], runner=r)
    assert r.calls[0] == ("prime", ("concurrency", 64, 128, "the run's largest concurrency, 2 rounds of its streams"))
    trials = [c[1:] for c in r.calls if c[0] == "trial"]
    assert trials == [(16, 0, 0), (64, 1, 0), (16, 0, 1), (64, 1, 1), (16, 0, 2), (64, 1, 2)]
    assert result.noise.trial_order == "interleaved"
    # three interleaved trials: the history check reads the first level's own (first vs the others),
    # no repeat level is measured
    assert not any(c[0] == "repeat" for c in r.calls)
    hc = result.noise.history_check
    # the first trial against the two others: a spread of 1 degree of freedom cannot judge
    # (metrics/noise.judge: inconclusive), never "within noise"
    assert hc.repeat is None and hc.verdict == "unknown" and hc.ratio == pytest.approx(1.0)
    assert "inconclusive" in hc.text


def test_shuffled_trial_order_is_seeded_and_restarts_prime_again():
    cfg = _cfg(concurrency=[1, 2, 4], trials=3, trial_order="shuffled", seed=7)
    orders = []
    for _ in range(2):
        result = make_result(levels=[])
        r = FakeRunner(result)
        plan.run_plan(cfg, result, FakeMeasure(), [], runner=r)
        orders.append([c[1] for c in r.calls if c[0] == "trial"])
    assert orders[0] == orders[1]  # the same seed, the same order
    rounds = [orders[0][i:i + 3] for i in (0, 3, 6)]
    assert all(sorted(x) == [1, 2, 4] for x in rounds) and len({tuple(x) for x in rounds}) > 1
    launched = RunConfig(concurrency=[1, 2], trials=2, restart_engine=True)
    result = make_result(levels=[])
    r = FakeRunner(result)
    plan.run_plan(launched, result, FakeMeasure(), [], runner=r)
    kinds = [c[0] for c in r.calls]
    assert kinds[:4] == ["prime", "trial", "trial", "restart"] and kinds[4] == "prime"


def test_the_history_check_measures_the_first_level_again_after_a_ladder():
    cfg = _cfg(concurrency=[1, 8])
    result = make_result(levels=[])
    r = FakeRunner(result)
    flat = FakeMeasure(eff=lambda v: 500.0)

    def measure(mode, value, **kw):
        lv = flat(mode, value, **kw)
        lv.index = len(result.levels)
        result.levels.append(lv)
        return lv
    plan.run_plan(cfg, result, measure, [], runner=r)
    # a quarter of the first level's requests (make_level completed 60 s x 500 tok/s / 128 = 234)
    assert ("repeat", 1, 0, 59, None) in r.calls
    hc = result.noise.history_check
    assert hc.level == "concurrency=1" and hc.verdict == "warn"  # the fake repeat runs at 100 tok/s, not 500
    # a finding about the run's state, judged like any other (not a warning line beside it)
    assert hc.text not in result.warnings
    from wattbench.accounting.level_findings import run_validity

    v = run_validity(result)
    (f,) = [f for f in v.findings if f.kind == "history_check"]
    assert f.severity == "warn" and f.effect_pct == pytest.approx(-80.0) and v.verdict == "warn"
    one = make_result(levels=[])
    r1 = FakeRunner(one)
    plan.run_plan(_cfg(concurrency=[4]), one, FakeMeasure(), [], runner=r1)
    assert one.noise.history_check is None and not any(c[0] == "repeat" for c in r1.calls)  # one level: no order


REPLICAS = ["http://127.0.0.1:9", "http://127.0.0.1:10"]


def test_a_concurrency_below_the_number_of_targets_is_refused_by_the_plan():
    """Every planned closed-loop level needs a stream per target: refused with the plan, before the
    run sends anything (a level with fewer streams would leave a replica unloaded)."""
    with pytest.raises(UserError, match=r"^--concurrency 1 is below the number of targets \(2\): .*drop targets"):
        plan.validate_plan(_cfg(targets=REPLICAS, concurrency=[4, 1]))
    with pytest.raises(UserError, match=r"^--max-concurrency 1 \(the top of the search\) is below the number of "
                                        r"targets \(2\)"):
        plan.validate_plan(_cfg(targets=REPLICAS, sweep="auto", max_concurrency=1))
    plan.validate_plan(_cfg(targets=REPLICAS, concurrency=[2, 8]))
    plan.validate_plan(_cfg(targets=REPLICAS, sweep="auto"))  # the search starts at one stream per target
    # the search's default top, not a --max-concurrency the user gave: named as the default, with the flag to give
    many = [f"http://127.0.0.1:{9 + i}" for i in range(SEARCH_MAX_CONCURRENCY + 1)]
    with pytest.raises(UserError, match=rf"^the search's top, {SEARCH_MAX_CONCURRENCY} \(the default when no "
                                        rf"--max-concurrency is given\) is below the number of targets "
                                        rf"\({len(many)}\): .*give --max-concurrency {len(many)} or more"):
        plan.validate_plan(_cfg(targets=many, sweep="auto"))
    plan.validate_plan(_cfg(targets=REPLICAS, rate=[0.5]))  # an open loop deals requests, not streams
    plan.validate_plan(_cfg(concurrency=[1]))


def test_the_default_level_below_the_number_of_targets_names_what_was_defaulted():
    """No ``--concurrency`` and two targets: the default level (one stream) is refused naming it as
    the default, with the flag to give, not as a ``--concurrency 1`` the user never typed."""
    with pytest.raises(UserError) as e:
        plan.validate_plan(_cfg(targets=REPLICAS))
    assert str(e.value) == ("the default level --concurrency 1 (when no --concurrency is given) is below the number "
                            "of targets (2): some targets would get no stream; give --concurrency 2 or more")
    # the user's own level keeps the user's flag
    with pytest.raises(UserError, match=r"^--concurrency 1 is below the number of targets \(2\)"):
        plan.validate_plan(_cfg(targets=REPLICAS, concurrency=[1]))
    plan.validate_plan(_cfg(targets=REPLICAS[:1]))  # one target: the default level serves it


def test_the_prefill_decode_pairs_levels_are_checked_with_the_plan():
    """``--prefill-decode-pair`` measures two closed-loop levels at the largest ``--concurrency``,
    else at ``PAIR_DEFAULT_CONCURRENCY`` (8): with ``--rate`` (which takes no ``--concurrency``) and
    more targets than that, its levels cannot run; refused with the plan, naming the pair and what
    to do, at 9 targets and not at 8."""
    many = [f"http://127.0.0.1:{9 + i}" for i in range(plan.PAIR_DEFAULT_CONCURRENCY + 1)]
    assert plan.pair_concurrency(_cfg(rate=[2.0])) == plan.PAIR_DEFAULT_CONCURRENCY == 8
    assert plan.pair_concurrency(_cfg(concurrency=[4, 16, 2])) == 16
    with pytest.raises(UserError) as e:
        plan.validate_plan(_cfg(targets=many, rate=[2.0], prefill_decode_pair=True))
    assert str(e.value) == ("--prefill-decode-pair's concurrency 8 (its default when no --concurrency is given) is "
                            "below the number of targets (9): some targets would get no stream; measure the pair in "
                            "a run of its own with --concurrency 9 or more (--rate takes no --concurrency), or drop "
                            "--prefill-decode-pair")
    with pytest.raises(UserError, match=r"^--prefill-decode-pair's concurrency 8 .* give --concurrency 9 or more, or "
                                        r"drop --prefill-decode-pair$"):
        plan.validate_plan(_cfg(targets=many, sweep="auto", prefill_decode_pair=True))
    plan.validate_plan(_cfg(targets=many[:8], rate=[2.0], prefill_decode_pair=True))  # 8 streams for 8 targets
    plan.validate_plan(_cfg(targets=many, rate=[2.0]))  # no pair: an open loop deals requests, not streams
    plan.validate_plan(_cfg(targets=many, concurrency=[9], prefill_decode_pair=True))  # the pair at 9 streams
    # the pair measures at the concurrency the plan checked
    m = FakeMeasure()
    plan.prefill_decode_pair(_cfg(rate=[2.0], prefill_decode_pair=True), m)
    assert [c[:2] for c in m.calls] == [("concurrency", 8), ("concurrency", 8)]


def test_a_search_over_replicas_starts_at_one_stream_per_target():
    three = REPLICAS + ["http://127.0.0.1:11/v1/"]
    assert plan.optimize_candidates(_cfg(targets=three, optimize="goodput_rps", max_concurrency=20)) == [3, 4, 8, 16]
    m = FakeMeasure(eff=lambda v: 100.0 * v if v <= 8 else 800.0)
    plan.run_plan(_cfg(targets=REPLICAS, sweep="auto", max_concurrency=64), make_result(), m, [])
    assert [c[1] for c in m.calls][:3] == [2, 4, 8]
