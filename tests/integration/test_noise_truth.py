"""The noise rules against ground truth: the scripted streaming server with a seeded
noise on its speed (``--speed-noise``), a capacity (``--max-concurrent``) or a speed that depends on
the largest load it has seen (``--history-slow``), and a declared constant node power, so tokens/s
per kW is throughput / 0.3 kW and every change in it is a change the server was scripted to make.

- ``compare`` says "within noise" for two runs of one configuration, "beyond noise" for a real 20%
  change, and "inconclusive" (the noise unknown, and how to measure it) without trials or history;
- ``--optimize`` returns a plateau containing the true best level (every level at or above the
  server's capacity is equally efficient) and none below it;
- priming makes the level order irrelevant on the history-dependent server, and without it the
  history check warns with both figures.
"""

from __future__ import annotations

import math

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.analysis.compare import compare
from wattbench.config.run import RunConfig
from wattbench.run import run_benchmark

pytestmark = pytest.mark.slow

NODE_KW = 0.3


def _run(base: str, out, **kw):
    kw.setdefault("input_tokens", "16")
    kw.setdefault("output_tokens", "16")
    cfg = RunConfig(target=base, sensors=[f"const:node={NODE_KW * 1000:g}"], idle_s=0, register_run=False,
                    html=False, out=str(out), **kw)
    return run_benchmark(cfg)


def _per_kw(level) -> float:
    return level.energy["node"].output_tokens_per_s_per_kw


def _at(result, c: int):
    return next(lv for lv in result.levels if lv.load.target_concurrency == c and "re-measured" not in lv.label)


# ---------------------------------------------------------------- compare


NOISY = ("--ttft-ms", "20", "--itl-ms", "20", "--speed-noise", "0.03", "--noise-seed", "5", "--noise-every", "8")


def test_compare_within_noise_for_one_configuration_and_a_ratio_for_a_real_change(tmp_path):
    runs = {}
    # two starts of one configuration (the same seeded speed noise), and one 20% faster in everything
    for name, args in (("a", NOISY), ("b", NOISY),
                       ("fast", ("--ttft-ms", "16.667", "--itl-ms", "16.667") + NOISY[4:])):
        with stream_server(*args) as (base, stats):
            runs[name] = _run(base, tmp_path / name, concurrency=[4], num_requests=16, trials=4)
            factors = stats()["speed_factors"]
        assert len(factors) >= 4 and len(set(factors)) > 1  # the noise was there: a new factor every 8 streams
    same = compare([runs["a"], runs["b"]]).levels[0].decompositions[0]
    # the trials' noise, or the run-to-run floor where the trials are narrower (a repeat moves more)
    assert same.noise is not None and same.noise.basis in ("trials", "trials+floor")
    assert same.noise.within is True, same.noise
    assert same.noise.low <= 1.0 <= same.noise.high and "within noise" in same.noise.text()
    real = compare([runs["a"], runs["fast"]]).levels[0].decompositions[0]
    assert real.noise.within is False, real.noise
    assert real.per_kw_ratio == pytest.approx(1.2, rel=0.08)  # scripted: 20% more tokens at the same power
    assert real.noise.low > 1.0 and real.noise.word == "beyond noise" and "beyond noise" in real.noise.text()


def test_compare_without_trials_or_history_says_the_noise_is_unknown(tmp_path):
    res = []
    for name in ("a", "b"):
        with stream_server(*NOISY) as (base, _):
            res.append(_run(base, tmp_path / name, concurrency=[4], num_requests=12))
    d = compare(res).levels[0].decompositions[0]
    assert d.noise.within is None and d.noise.basis == "unknown" and d.noise.word == "inconclusive"
    assert "noise unknown" in d.noise.text() and "--trials" in d.noise.todo
    # with the history's run-to-run spread of the configuration (3 earlier runs, sd 2%), it is known
    d = compare(res, history=lambda r, lv, fig: (0.02, 3)).levels[0].decompositions[0]
    assert d.noise.basis == "history" and d.noise.within is not None


# ---------------------------------------------------------------- --optimize


def test_optimize_plateau_contains_the_true_best_level(tmp_path):
    # capacity 4: every level from 4 streams up makes the same tokens/s at the same power (the true
    # best, a plateau); 1 and 2 streams make 1/4 and 1/2 of it
    with stream_server("--ttft-ms", "10", "--itl-ms", "10", "--max-concurrent", "4", "--speed-noise", "0.02",
                       "--noise-seed", "3", "--noise-every", "16") as (base, _):
        res = _run(base, tmp_path / "opt", optimize="output_tokens_per_s_per_kw", concurrency=[1, 2, 4, 8, 16],
                   num_requests=32, output_tokens="8")
    opt = res.optimize
    true_best = {4, 8, 16}
    assert set(opt.plateau) & true_best and set(opt.plateau) <= true_best, opt
    assert opt.best_value in true_best and opt.recommended_value == min(opt.plateau)
    assert len(opt.remeasured) == 2 and set(opt.remeasured) <= set(opt.measured_values)
    # the lower levels are measured and far below: not on the plateau
    assert {1, 2} <= set(opt.measured_values)
    assert _per_kw(_at(res, 2)) < 0.75 * opt.best_score


# ---------------------------------------------------------------- priming and the history check


HISTORY = ("--ttft-ms", "10", "--itl-ms", "10", "--history-slow", "1.5", "--history-threshold", "8")


def test_priming_makes_level_order_irrelevant_and_the_history_check_warns_without_it(tmp_path):
    out = {}
    for name, conc, prime in (("up", [2, 8], True), ("down", [8, 2], True), ("cold", [2, 8], False)):
        with stream_server(*HISTORY) as (base, stats):  # a fresh server each: slow until 8 streams ran
            out[name] = _run(base, tmp_path / name, concurrency=conc, num_requests=16, prime=prime)
            out[name + "_stats"] = stats()
    up, down, cold = out["up"], out["down"], out["cold"]
    assert up.noise.priming.value == 8 and up.noise.priming.completed == 16
    assert cold.noise.priming is None
    # primed, c=2 reads the same whichever level came first
    assert _per_kw(_at(up, 2)) == pytest.approx(_per_kw(_at(down, 2)), rel=0.12)
    # unprimed, the first level ran on the slow (cold) server: 1/1.5 of the primed figure
    assert _per_kw(_at(cold, 2)) < 0.8 * _per_kw(_at(up, 2))
    hc = cold.noise.history_check
    assert hc.verdict == "warn" and hc.ratio > 1.3, hc
    assert f"{hc.first:,.0f} then {hc.repeated:,.0f}" in hc.text  # both figures
    # a finding of the run with its size, judged by materiality: it moves the run's verdict
    (f,) = [f for f in cold.validity.findings if f.kind == "history_check"]
    assert f.text == hc.text and f.severity == "warn" and f.effect_pct == pytest.approx(100 * (hc.ratio - 1))
    assert cold.validity.verdict == "warn" and hc.text not in cold.warnings
    assert hc.repeat is not None and hc.repeat.requests.completed == 8  # a quarter of the first level's 16, at least 8
    # primed, the repeat of the first level agrees with it (the server was warm throughout)
    assert up.noise.history_check.ratio == pytest.approx(1.0, abs=0.15)
    # the server's own record: the priming took it through 8 streams before the first measured request
    first_sent = min(r for r in [up.levels[0].window.start_ns])
    assert out["up_stats"]["history_slow_until_ns"] < first_sent


def test_two_runs_on_a_wandering_server_are_compared_as_repeats_not_as_their_trials(tmp_path):
    """A server whose speed wanders slowly (±10%, a new factor every 2 s): two runs of one
    configuration, five trials each. Their trials share the state they fell in, so the comparison
    never counts their interval alone: its noise is at least the run-to-run floor a side (z · 2.3%),
    and the sentence names the basis it used."""
    from wattbench.metrics.figure_noise import RUN_TO_RUN_FLOOR_REL_SD, Z_975

    runs = {}
    with stream_server("--ttft-ms", "10", "--itl-ms", "10", "--wander", "0.1", "--wander-every", "2",
                       "--wander-seed", "5") as (base, stats):
        for name in ("a", "b"):
            runs[name] = _run(base, tmp_path / name, concurrency=[4], num_requests=16, trials=5)
        factors = stats()["wander_factors"]
    assert len(factors) >= 3 and max(factors) / min(factors) > 1.02  # the server wandered across the runs
    n = compare([runs["a"], runs["b"]]).levels[0].decompositions[0].noise
    floor_bound = math.exp(math.sqrt(2) * Z_975 * RUN_TO_RUN_FLOOR_REL_SD) - 1.0  # 6.6%
    assert n.bound is not None and n.bound >= floor_bound * (1 - 1e-9)
    if n.basis == "trials+floor":  # the trials were narrower than a repeat: the floor counted, said so
        assert n.bound == pytest.approx(floor_bound, rel=1e-9)
        assert "run-to-run floor ±4.5% over the within-run trials'" in n.basis_text
        assert "share its slow state" in n.basis_text
    else:  # the trials were wider than the floor: theirs counted
        assert n.basis == "trials" and n.basis_text.startswith("within-run trials (5 trials, 4 df)")
