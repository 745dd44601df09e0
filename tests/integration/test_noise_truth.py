"""The noise rules against ground truth: the scripted streaming server with a seeded
noise on its speed (``--speed-noise``), a capacity (``--max-concurrent``) or a speed that depends on
the largest load it has seen (``--history-slow``), and a declared constant node power, so tokens/s
per kW is throughput / 0.3 kW and every change in it is a change the server was scripted to make.

- ``compare`` says "within noise" for two runs of one configuration, "beyond noise" for a real 20%
  change, and "inconclusive" (the noise unknown, and how to measure it) without trials or history;
  a run whose host held its load generator (its level marks the per-kW figure as the client's doing)
  is never judged within or beyond noise: "inconclusive", naming that side;
- ``--optimize`` returns a plateau containing the true best level (every level at or above the
  server's capacity is equally efficient) and none below it;
- priming makes the level order irrelevant on the history-dependent server, and without it the
  history check warns with both figures.
"""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.analysis.compare import compare
from wattbench.config.run import RunConfig
from wattbench.metrics.saturation import client_bias
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
    real = compare([runs["a"], runs["fast"]]).levels[0].decompositions[0]
    # A loaded host that held a run's client (its event loop late past the guard, by a material share
    # of the window) stretched that run's every hand-off: the run marks its per-kW figure as the
    # client's doing, and no comparison of it says within or beyond noise (a 2-core CI machine at load
    # 9 read 1.13x for one configuration here). Every other pair is judged on the server's truth.
    held = {k for k, r in runs.items() if client_bias(r.levels[0], "output_tokens_per_s_per_kw", "node")}
    if {"a", "b"} & held:
        _assert_inconclusive_for_the_held_client(same, {"a": "A", "b": "B"}, held)
    else:
        # the trials' noise, or the run-to-run floor where the trials are narrower (a repeat moves more)
        assert same.noise is not None and same.noise.basis in ("trials", "trials+floor")
        assert same.noise.within is True, same.noise
        assert same.noise.low <= 1.0 <= same.noise.high and "within noise" in same.noise.text()
    if {"a", "fast"} & held:
        _assert_inconclusive_for_the_held_client(real, {"a": "A", "fast": "B"}, held)
    else:
        # scripted: 20% more tokens at the same power. The interval covers it; where the noise resolves
        # it (bound under 9%: a quiet host's is the floor's 6.4%) it reads beyond noise. A loaded host
        # that widened the trials (a run at 1.12x, its bound ±12.7%) may leave it within noise, never
        # beyond noise the wrong way.
        assert real.noise.low <= 1.2 <= real.noise.high and real.noise.high > 1.0, real.noise
        if real.noise.bound is not None and real.noise.bound < 0.09:
            assert real.noise.within is False, real.noise
            assert real.per_kw_ratio == pytest.approx(1.2, rel=0.08)
            assert real.noise.low > 1.0 and real.noise.word == "beyond noise" and "beyond noise" in real.noise.text()


def _assert_inconclusive_for_the_held_client(d, sides: dict, held: set) -> None:
    assert d.noise.word == "inconclusive" and d.noise.within is None and d.noise.basis == "client", d.noise
    for run, side in sides.items():
        assert (f"{side}'s load generator biased the figure" in d.noise.why) == (run in held), d.noise.why
    assert "quieter host" in d.noise.todo


@contextmanager
def _client_held(hold_s: float, every_s: float):
    """This process's event loops held off the CPU for ``hold_s`` every ``every_s`` (what a loaded
    host does to the load generator): a thread in one C call that never releases the GIL."""
    t0 = time.perf_counter()
    sum(range(1_000_000))
    n = int(1_000_000 * hold_s / max(time.perf_counter() - t0, 1e-4))
    stop = threading.Event()

    def hold() -> None:
        while not stop.wait(every_s):
            sum(range(n))

    th = threading.Thread(target=hold, daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()


def test_a_run_whose_host_held_its_client_is_never_judged_within_or_beyond_noise(tmp_path):
    """Two runs of one configuration (the scripted server's speed the same seeded sequence); the
    second's load generator held 0.12 s in every 0.22 s. Its closed loop sends each next request late,
    so its per-kW figure reads low although the server was as fast: the run marks the figure as its
    client's doing, and compare says "inconclusive", naming that side and what to do — where the
    verdict without the mark was "within noise" on a 0.91x or "beyond noise" on a held run whose
    trials agree."""
    runs = {}
    for name in ("a", "b"):
        with stream_server(*NOISY) as (base, _):
            if name == "a":
                runs[name] = _run(base, tmp_path / name, concurrency=[4], num_requests=16, trials=4)
            else:
                with _client_held(0.12, 0.1):
                    runs[name] = _run(base, tmp_path / name, concurrency=[4], num_requests=16, trials=4)
    lag = runs["b"].levels[0].load.client_loop_lag_ms
    assert lag.p99 is not None and lag.p99 > 100.0, lag  # the hold reached the loop-lag probe
    assert client_bias(runs["b"].levels[0], "output_tokens_per_s_per_kw", "node") is not None
    # the server's own figure (its power is declared) was untouched: the mark names the client
    assert client_bias(runs["b"].levels[0], "avg_power_w", "node") is None
    d = compare([runs["a"], runs["b"]]).levels[0].decompositions[0]
    held = {k for k, r in runs.items() if client_bias(r.levels[0], "output_tokens_per_s_per_kw", "node")}
    assert "b" in held
    _assert_inconclusive_for_the_held_client(d, {"a": "A", "b": "B"}, held)
    assert "inconclusive" in d.noise.text() and "client event-loop lag p99" in d.noise.text()


def test_compare_without_trials_or_history_says_the_noise_is_unknown(tmp_path):
    res = []
    for name in ("a", "b"):
        with stream_server(*NOISY) as (base, _):
            res.append(_run(base, tmp_path / name, concurrency=[4], num_requests=12))
    d = compare(res).levels[0].decompositions[0]
    # a run whose loaded host held its client (a one-second level: a loop 10 ms late at p99 is a
    # material share of its window) is inconclusive for that first, and says so
    held = {i for i, r in enumerate(res) if client_bias(r.levels[0], "output_tokens_per_s_per_kw", "node")}
    if held:
        _assert_inconclusive_for_the_held_client(d, {0: "A", 1: "B"}, held)
    else:
        assert d.noise.within is None and d.noise.basis == "unknown" and d.noise.word == "inconclusive"
        assert "noise unknown" in d.noise.text() and "--trials" in d.noise.todo
    # with the history's run-to-run spread of the configuration (3 earlier runs, sd 2%), it is known
    d = compare(res, history=lambda r, lv, fig: (0.02, 3)).levels[0].decompositions[0]
    if held:
        _assert_inconclusive_for_the_held_client(d, {0: "A", 1: "B"}, held)
    else:
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
