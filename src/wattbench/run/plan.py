"""Which levels a run measures, and what it judges them by.

A fixed ladder (``--concurrency``/``--rate``), the automatic sweep (``--sweep auto``), the
SLO-aware search (``--optimize OBJECTIVE``) and the prefill/decode isolating pair. The search rules
themselves (when to stop, which level wins) are ``load/search.py``'s; this module feeds them
levels through a ``measure(mode, value, ...) -> LevelResult`` callable (``run.level.LevelRunner``)
and turns each measured level into the figures they judge (``search_figures``: a ``LevelFigures``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol
import random

from wattbench.accounting.attribution import isolating_pair
from wattbench.accounting.steady import default_num_requests as _steady_default
from wattbench.accounting.steady import steady_energy_periods
from wattbench.config.run import PAIR_DEFAULT_CONCURRENCY, SEARCH_MAX_CONCURRENCY, RunConfig
from wattbench.core.errors import UserError
from wattbench.load.plan import validate_spec
from wattbench.load.search import SearchResult, auto_sweep, optimize
from wattbench.core.load_types import LevelSpec
from wattbench.results.headline import headline_boundary, trial_ci
from wattbench.core.schema import FigureKey, FindingKind, LevelResult, Result, SearchOutcome, TokenizerInfo
from wattbench.analysis.figures import ranked_ci, ranked_figures
from wattbench.metrics.level_figures import LevelFigures
from wattbench.core.clock import now_ns
from wattbench.core.schema import AutoTrials, NoiseInfo, Precision
from wattbench.load.search import feasible_score
from wattbench.metrics.drift import figure_drift
from wattbench.metrics.slo import SLO
from wattbench.metrics.figure_noise import FigureNoise, trials_noise, with_drift
from wattbench.metrics.plateau import measured_plateau
from wattbench.metrics.precision import auto_stop, level_precision
from wattbench.run.targets import target_count
from wattbench.run.prime import (ProbeRunner, calibrate_prompts, check_history, priming_level, repeat_size,
                                 unmeasurable)
from wattbench.telemetry.base import Channel
from wattbench.workload.synthetic import SyntheticWorkload

OBJECTIVES = ("goodput_per_kw", "output_tokens_per_s_per_kw", "goodput_rps")
ENERGY_OBJECTIVES = ("goodput_per_kw", "output_tokens_per_s_per_kw")  # a figure per kW: needs a power meter
METER_FIX = ("give a power meter: --sensor nvml (NVIDIA GPUs), --sensor rapl (Intel/AMD CPUs) or, for a "
             "known draw, --sensor const:node=WATTS")
DEFAULT_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PREFILL_HEAVY = {"output_tokens": 1, "input_tokens": 1024}
DECODE_HEAVY = {"output_tokens": 512, "input_tokens": 16}


class Measure(Protocol):
    def __call__(self, mode: str, value: float, *, output_tokens: int | None = None,
                 input_tokens: int | None = None, label_suffix: str = "") -> LevelResult: ...


class PlanRunner(ProbeRunner, Protocol):
    """What the plan asks of the level runner (``run.level.LevelRunner``) beyond ``measure``: the
    priming, trials one at a time, an engine restart, a level closed early and a measurement that is
    recorded nowhere (the history check)."""

    is_trace: bool
    prime_at: tuple[str, float, int, str] | None

    def prime_now(self) -> None: ...

    def precondition(self, level: tuple[str, float, int, str]) -> None: ...

    def restart(self, before_trial: int) -> None: ...

    def trial(self, mode: str, value: float, index: int, k: int, n: int, *, output_tokens: int | None = None,
              input_tokens: int | None = None, label_suffix: str = "") -> LevelResult: ...

    def level_done(self, index: int) -> None: ...

    def unrecorded(self, mode: str, value: float, index: int, label_suffix: str, *,
                   num_requests: int | None = None, duration_s: float | None = None) -> LevelResult: ...


def pair_concurrency(cfg: RunConfig) -> int:
    """The concurrency of ``--prefill-decode-pair``'s two closed-loop levels: the run's largest
    ``--concurrency``, else ``config.run.PAIR_DEFAULT_CONCURRENCY`` (``--rate``, a search without one)."""
    return int(max(cfg.concurrency or [PAIR_DEFAULT_CONCURRENCY]))


def validate_plan(cfg: RunConfig) -> None:
    """Refuse a plan the run cannot follow, before anything is written or sent: an unknown objective
    or sweep, unsupported combinations, and every planned level — ``--prefill-decode-pair``'s too —
    through the load generator's own checks (``load.plan.validate_spec``: ``--arrival poison``, a
    rate it refuses, a concurrency below the number of targets). A level the user did not give (the
    default ladder, the top of a search, the pair's default) is named as such, with the flag to give."""
    if cfg.optimize and cfg.optimize not in OBJECTIVES:
        raise UserError(f"--optimize {cfg.optimize!r}: choose one of {', '.join(OBJECTIVES)}")
    needs = needs_meter(cfg)
    if needs is not None and cfg.no_sensors:
        what, other = needs
        raise UserError(f"{what}, and --no-sensors measures none: drop --no-sensors and {METER_FIX} (or {other})")
    if cfg.ray and cfg.rate and cfg.max_concurrency is not None:
        raise UserError("--rate with --max-concurrency is not supported with --ray yet: drop one of them")
    if cfg.auto_trials and cfg.sweep:
        raise UserError("--trials auto measures a ladder's levels (or --optimize's finalists) to a precision; "
                        "--sweep auto only finds where throughput stops growing: give --trials N, or a ladder "
                        "(-c 1,8,64) with --trials auto")
    if cfg.sweep not in (None, "auto"):
        raise UserError(f"--sweep {cfg.sweep!r}: the only sweep is 'auto' (give levels with --concurrency/--rate)")
    n_targets = target_count(cfg)
    plans = cfg.levels() if not (cfg.sweep or cfg.optimize) else [("rate", r) for r in cfg.rate] or [
        ("concurrency", c) for c in (cfg.concurrency or [n_targets])]  # a search starts at a stream per target
    defaulted = not (cfg.sweep or cfg.optimize or cfg.rate or cfg.concurrency)  # the user gave no level
    flags: list[str | None] = [f"the default level --concurrency {int(value)} (when no --concurrency is given)"
                               if defaulted else None for _, value in plans]
    fixes: list[str | None] = [f"give --concurrency {n_targets} or more" if defaulted else None for _ in plans]
    if cfg.sweep == "auto" or (cfg.optimize and not cfg.rate and not cfg.concurrency):
        # a search may climb to the top of its ladder: that level must fit the machine too
        top = cfg.max_concurrency or SEARCH_MAX_CONCURRENCY
        plans.append(("concurrency", top))
        if cfg.max_concurrency:
            flags.append(f"--max-concurrency {top} (the top of the search)")
            fixes.append(None)
        else:  # named as the default it is, not as a flag the user gave
            flags.append(f"the search's top, {top} (the default when no --max-concurrency is given)")
            fixes.append(f"give --max-concurrency {n_targets} or more, or drop targets")
    if cfg.prefill_decode_pair and not cfg.concurrency:  # the pair at its default (at the largest -c: checked above)
        pair = pair_concurrency(cfg)
        plans.append(("concurrency", pair))
        flags.append(f"--prefill-decode-pair's concurrency {pair} (its default when no --concurrency is given)")
        fixes.append(f"measure the pair in a run of its own with --concurrency {n_targets} or more (--rate takes "
                     "no --concurrency), or drop --prefill-decode-pair" if cfg.rate else
                     f"give --concurrency {n_targets} or more, or drop --prefill-decode-pair")
    for (mode, value), flag, fix in zip(plans, flags, fixes):
        validate_spec(LevelSpec(index=0, mode=mode, value=value, arrival=cfg.arrival,  # type: ignore[arg-type]
                                num_requests=cfg.num_requests, duration_s=cfg.duration_s, workers=cfg.workers,
                                speedup=cfg.speedup, warmup_s=cfg.warmup_s, warmup_requests=cfg.warmup_requests,
                                max_in_flight=cfg.max_concurrency if mode == "rate" else None), flag=flag,
                      targets=n_targets, fix=fix)


def needs_meter(cfg: RunConfig) -> tuple[str, str] | None:
    """What in the plan measures nothing without a power meter, and what to do instead:
    ``(what it does, the alternative)``, or ``None`` when every figure it asks for stands without
    one. An ``--optimize`` objective per kW ranks levels by energy; ``--prefill-decode-pair``'s only
    figures are energies (J per prefill token, J per decode token: ``accounting.attribution.
    isolating_pair``), so its two levels would load the server for nothing."""
    if cfg.optimize in ENERGY_OBJECTIVES:
        return f"--optimize {cfg.optimize} ranks levels by energy", "--optimize goodput_rps"
    if cfg.prefill_decode_pair:
        return ("--prefill-decode-pair splits energy into J per prefill token and J per decode token",
                "drop --prefill-decode-pair")
    return None


def check_meter(cfg: RunConfig, channels: list[Channel]) -> None:
    """What ``needs_meter`` names needs a power meter: with no energy or power channel
    (``channels``: the sampler's, none when nothing reads) it would measure nothing, so the run is
    refused before the priming with the fix, not after levels that cannot give its figures."""
    needs = needs_meter(cfg)
    if needs is None or any(getattr(c, "kind", None) in ("counter", "power") for c in channels):
        return
    what, other = needs
    raise UserError(f"{what}, and no power meter could be read on this machine: {METER_FIX} (or {other})")


def planned_levels(cfg: RunConfig) -> int | None:
    """How many levels the run will measure; ``None`` while a search decides as it goes."""
    if cfg.sweep or cfg.optimize:
        return None
    return len(cfg.levels()) + (2 if cfg.prefill_decode_pair else 0)


def optimize_candidates(cfg: RunConfig) -> list[float]:
    """The values ``--optimize`` chooses among: the given rates or concurrencies, else the default
    ladder from one stream per target up to ``--max-concurrency``."""
    if cfg.rate:
        return list(cfg.rate)
    top, least = cfg.max_concurrency or SEARCH_MAX_CONCURRENCY, target_count(cfg)
    return list(cfg.concurrency) or sorted({least} | {c for c in DEFAULT_LADDER if least <= c <= top})


def run_plan(cfg: RunConfig, result: Result, measure: Measure, slos: list[SLO], runner: PlanRunner | None = None
             ) -> None:
    """Measure the run's levels (each through ``measure``); a search's outcome goes on ``result``.

    With ``runner`` (``run.level.LevelRunner``) the run also measures from a known state
    (``run/prime.py``): the priming load first, a fixed ladder's ``--trials`` interleaved (level
    by level, round after round; ``--trial-order shuffled``: a seeded shuffle per round; with
    ``--restart-engine`` a fresh engine, primed again, before every round), and the history check
    after the last level."""
    mode = "rate" if cfg.rate else "concurrency"
    candidates = optimize_candidates(cfg) if cfg.optimize else None
    if runner is not None:
        prime_first(cfg, result, runner, candidates)
    if cfg.sweep == "auto":
        res = auto_sweep(lambda v: search_figures(measure("concurrency", v)), start=target_count(cfg),
                         max_value=cfg.max_concurrency or SEARCH_MAX_CONCURRENCY)
        result.sweep = SearchOutcome.model_validate(res.to_dict("output_tokens_per_s"))
    elif cfg.optimize:
        assert candidates is not None
        res = optimize(lambda v: search_figures(measure(mode, v)), candidates, objective=cfg.optimize, slos=slos)
        d = res.to_dict(cfg.optimize)
        d["candidates"] = candidates
        d["ladder_size"] = len(candidates)
        result.optimize = SearchOutcome.model_validate(d)
        _remeasure_and_plateau(cfg, result, measure, slos, mode, res, runner)
    elif runner is not None and cfg.auto_trials:
        auto_rounds(cfg, result, runner, [(index, m, v) for index, (m, v) in enumerate(cfg.levels())])
    elif runner is not None and cfg.trial_count() > 1:
        _interleaved(cfg, result, runner)
    else:
        for m, v in cfg.levels():
            measure(m, v)
    if runner is not None and cfg.history_check:
        _history_check(cfg, result, runner)


def prime_first(cfg: RunConfig, result: Result, runner: PlanRunner, candidates: list[float] | None = None) -> None:
    """Before the first level (``run/prime.py``): the prompt lengths fitted to the server where there
    is no tokenizer, the priming load, ``--precondition``'s load, and the largest level refused when
    the priming shows it cannot measure (``candidates``: the ``--optimize`` ladder). ``run`` and
    ``ab`` (each side) alike."""
    noise = result.noise = result.noise or NoiseInfo()
    prime_at = None if runner.is_trace else priming_level(cfg, candidates, SEARCH_MAX_CONCURRENCY)
    if cfg.prime and runner.is_trace:
        result.warnings.append("not primed: a trace replays its own load")
    runner.prime_at = prime_at
    # prompt lengths fitted to the server first (the priming sends them too); with or without
    # --no-prime: only --no-calibrate-prompts skips it (run/prime.calibrate_prompts)
    _calibrate(result, runner)
    runner.prime_now()
    if cfg.precondition and runner.is_trace:
        result.warnings.append("--precondition: not preconditioned (a trace replays its own load)")
    elif cfg.precondition:  # the device into its steady state (temperature, throughput) before the first level
        level = prime_at or priming_level(cfg.model_copy(update={"prime": True}), candidates,
                                          SEARCH_MAX_CONCURRENCY)
        if level is not None:
            runner.precondition(level)

    why = unmeasurable(cfg, noise.priming)  # the largest level, known before it runs
    if why:
        raise UserError(why)


def _noise(result: Result) -> NoiseInfo:
    """The result's noise block, which ``prime_first`` starts before a runner measures anything."""
    assert result.noise is not None
    return result.noise


def _interleaved(cfg: RunConfig, result: Result, runner: PlanRunner) -> None:
    """A fixed ladder's trials round by round: c=16, 64, 16, 64, … (or a seeded shuffle per round)."""
    ladder = [(index, m, v) for index, (m, v) in enumerate(cfg.levels())]
    _noise(result).trial_order = cfg.trial_order
    n = cfg.trial_count()
    for k in range(n):
        _round(cfg, runner, ladder, k, n)


def _round(cfg: RunConfig, runner: PlanRunner, ladder: list[tuple[int, str, float]], k: int, n: int,
           label_suffix: str = "") -> None:
    """Round ``k`` (of at most ``n``): one trial of every level, in the ladder's order or a seeded
    shuffle; with ``--restart-engine`` a fresh engine, primed again, before every round but the first."""
    order = list(ladder)
    if cfg.trial_order == "shuffled":
        random.Random(cfg.seed * 7919 + k).shuffle(order)
    if k > 0 and cfg.restart_engine:
        runner.restart(before_trial=k)
    for index, m, v in order:
        runner.trial(m, v, index, k, n, label_suffix=label_suffix)


def headline_precision(level: LevelResult, target: float) -> Precision:
    """How precisely ``level``'s headline figure is known: tokens/s per kW at its headline boundary
    (output tokens/s when it measured no energy), the relative 95% half-width of its trials' mean
    against ``target`` (``metrics.precision.level_precision``: how many more trials would reach it). A
    figure that drifts (``metrics.drift.figure_drift``) never reaches it: more trials of a moving
    series narrow nothing, and the drift's words say why."""
    b = headline_boundary(level)
    name = "output_tokens_per_s_per_kw" if b else "output_tokens_per_s"
    ci = trial_ci(level, name, b)
    if ci is not None and ci.mean and ci.n is not None:
        n, rel = ci.n, ci.rel_half_width  # the interval's log half-width, as every noise rule reads it
    else:
        n, rel = (1 if _measured(level) else 0), None
    drift = figure_drift(level.stationarity, name, b)  # a drifting series has no precision to reach
    p = level_precision(n, rel, target, drifting=drift is not None)
    return Precision(figure=FigureKey(name, b).text(), asked_pct=target * 100.0,
                     reached_pct=None if p.reached is None else p.reached * 100.0, trials=p.trials, met=p.met,
                     more_trials=None if p.drifting else p.more, drifting=p.drifting,
                     drift=drift[0] if drift else "")


def _measured(level: LevelResult) -> bool:
    return level.requests.completed > 0


def auto_rounds(cfg: RunConfig, result: Result, runner: PlanRunner, ladder: list[tuple[int, str, float]],
                label_suffix: str = "") -> None:
    """``--trials auto`` over ``ladder`` (``(index, mode, value)``: a fixed ladder, or the candidates
    ``--optimize`` finally ranks): rounds as ``_interleaved`` measures them, added until every
    level's headline figure is known within ``--precision`` on 3+ trials, or ``--max-trials``
    rounds, or another round would end past ``--max-time`` (``metrics.precision.auto_stop``, asked
    after each round). Each level carries its ``Precision`` (what it reached, and how many more
    trials would reach what was asked); ``Result.noise.auto_trials`` says why the rounds stopped and
    what they cost (rounds, trials, seconds)."""
    noise = _noise(result)
    noise.trial_order = cfg.trial_order
    target, n = cfg.precision(), cfg.trial_count()
    auto = AutoTrials(asked_pct=target * 100.0, max_trials=n, max_time_s=cfg.max_time_s)
    noise.auto_trials = auto
    t0 = now_ns()
    k = 0
    while True:
        r0 = now_ns()
        _round(cfg, runner, ladder, k, n, label_suffix)
        k += 1
        t1 = now_ns()
        levels = {lv.index: lv for lv in result.levels}
        precisions = []
        for index, _, _ in ladder:
            lv = levels.get(index)
            if lv is None:
                continue
            lv.precision = headline_precision(lv, target)
            if lv.precision.trials == 0:  # no trial of it measured: no figure to be precise about
                continue
            precisions.append(level_precision(lv.precision.trials, None if lv.precision.reached_pct is None
                                              else lv.precision.reached_pct / 100.0, target,
                                              drifting=lv.precision.drifting))
        auto.rounds, auto.seconds = k, (t1 - t0) / 1e9
        auto.trials = sum(p.trials for p in precisions)
        why = auto_stop(precisions, k, max_trials=n, elapsed_s=(t1 - t0) / 1e9, max_time_s=cfg.max_time_s,
                        round_s=(t1 - r0) / 1e9)
        if why is not None:
            auto.stopped = why
            break
    if k < n:  # the rounds stopped before the last one planned: each level is complete now
        for index, _, _ in ladder:
            runner.level_done(index)


REMEASURE_TOP = 2


def _remeasure_and_plateau(cfg: RunConfig, result: Result, measure: Measure, slos: list[SLO], mode: str,
                           res: SearchResult, runner: PlanRunner | None = None) -> None:
    """``--optimize``: measure the best two candidates again (the decision rests on two
    measurements each, as ``tune`` does), then the plateau — every value whose score is within
    noise of the best (``metrics/plateau.measured_plateau``) — and the recommended value: the
    lowest load on it. Every score is the figure the answer reports (``search_figures``: the
    trials' mean under ``--trials``, with the trials' CI as its noise). The recommendation is one
    value, ``recommended_value``, set whenever the search chose one. A level the noise cannot place
    against the best (``metrics/noise.judge``: inconclusive — unknown noise, < 2 df, a bound over
    ±25%) is never on the plateau: with none within noise the recommendation is the best score,
    and the reason names the inconclusive levels and what to do."""
    opt, objective = result.optimize, cfg.optimize
    assert opt is not None and objective is not None  # run_plan recorded the search it ran
    scored = [(v, feasible_score(f, objective, slos)) for v, f in res.measured]
    ranked = sorted({v: s for v, s in scored if s is not None}.items(), key=lambda t: (-t[1], t[0]))
    top = [v for v, _ in ranked[:REMEASURE_TOP]]
    measurements = []
    for v, f in res.measured:
        s = feasible_score(f, objective, slos)
        if s is not None and not (runner is not None and cfg.auto_trials and v in top):
            measurements.append((v, s, _window_s(f), _noise_of(f, objective)))
    if runner is not None and cfg.auto_trials:
        # --trials auto: the candidates ranked last are measured to the precision asked, interleaved,
        # and ranked on those trials alone (the search's single measurement of them is left out)
        first = len(result.levels)
        auto_rounds(cfg, result, runner, [(first + i, mode, v) for i, v in enumerate(top)], " re-measured")
        remeasured = [next(lv for lv in result.levels if lv.index == first + i) for i in range(len(top))]
    else:
        remeasured = [measure(mode, v, label_suffix=" re-measured") for v in top]
    for v, lv in zip(top, remeasured):
        f = search_figures(lv)
        s = feasible_score(f, objective, slos)
        opt.remeasured.append(v)
        if s is not None:
            measurements.append((v, s, _window_s(f), _noise_of(f, objective)))
        else:
            opt.recommend_reason = f"the re-measured {v:g} missed the SLO or failed this time"
    pl, basis = measured_plateau(measurements)
    if pl is None:
        opt.recommended_value = opt.best_value
        return
    opt.best_value = pl.best
    opt.best_score = (pl.scores or {}).get(pl.best)
    opt.noise_basis = basis
    cands = opt.candidates or []
    opt.top_of_ladder = bool(cands) and pl.best >= max(cands)
    opt.recommended_score = (pl.scores or {}).get(pl.recommended)
    opt.plateau = list(pl.values)
    opt.recommended_value = pl.recommended
    opt.recommend_reason = (opt.recommend_reason + "; " if opt.recommend_reason else "") + pl.reason


def _noise_of(fig: LevelFigures, objective: str) -> FigureNoise | None:
    return fig.objective_noise.get(objective)


def _window_s(fig: LevelFigures) -> float | None:
    return fig.window_s


def _calibrate(result: Result, runner: PlanRunner) -> None:
    """Without a tokenizer: synthetic prompt lengths fitted to the server's count
    (``run/prime.calibrate_prompts``), recorded in the result before anything is measured."""
    if not hasattr(runner, "session"):  # a test's stand-in runner
        return
    cal = calibrate_prompts(runner)
    if cal is None:
        return
    result.prompt_calibration = cal
    if cal.refused:  # the server miscounted the probes, or stalled them: a warning of the run, not only a note
        result.warnings.append(f"prompt lengths not calibrated: {cal.reason}")
    wl = runner.workload
    if cal.used and isinstance(wl, SyntheticWorkload):  # used: a synthetic workload's lengths were fitted
        result.prompt_length_source = wl.token_source
        if result.workload is not None:
            result.workload.token_source = wl.token_source
            result.workload.tokenizer = TokenizerInfo.model_validate(wl.ts.describe())


def _history_check(cfg: RunConfig, result: Result, runner: PlanRunner) -> None:
    """The run's first level again after the others (or its own trials when they interleave):
    ``run/prime.check_history`` says whether its figure moved by more than noise."""
    firsts = [lv for lv in result.levels if lv.index == 0]
    keys = {(lv.load.mode, lv.load.target_concurrency or lv.load.target_rate_rps) for lv in result.levels}
    if not firsts or len(keys) < 2:
        return
    first, noise = firsts[0], _noise(result)
    if first.trials is not None and noise.trial_order is not None and first.trials.n >= 3:
        hc = check_history(first, None, cfg.precision() if cfg.auto_trials else None)
    else:
        v = first.load.target_concurrency if first.load.mode == "concurrency" else first.load.target_rate_rps
        if v is None:
            return

        n, dur = repeat_size(cfg, first)
        repeat = runner.unrecorded(first.load.mode, v, first.index, " history check", num_requests=n,
                                   duration_s=dur)
        hc = check_history(first, repeat, cfg.precision() if cfg.auto_trials else None)
    # a finding about the run's state, judged in the run's verdict (accounting.level_findings.history_finding)
    noise.history_check = hc


def search_figures(level: LevelResult) -> LevelFigures:
    """What the searches judge a level by: every figure as the answer reports it
    (``analysis.figures.ranked_figures``: the trials' mean under ``--trials``, the rule ``tune``
    ranks by too, at the level's headline boundary) — the latency percentiles an SLO is checked on
    included, so a level is ranked and judged on the figures its answer line shows — with why it
    failed, whether it over-saturated, its window and each objective's noise."""
    r = ranked_figures(level)
    failed = None
    if level.requests.completed == 0:  # a failed level, not a missing one (load/search.py)
        failed = _no_request_reason(level) or "no measured request completed"
    oversaturated = bool(level.oversaturation and level.oversaturation.oversaturated) or str(
        level.stopped_early or "").startswith("over-saturated")
    noise = {name: _trials_noise(level, name, r.boundary) for name in OBJECTIVES}
    return r.with_figures({}, failed=failed, oversaturated=oversaturated,
                          window_s=level.window.duration_s if level.window else None, objective_noise=noise)


def _trials_noise(level: LevelResult, name: str, boundary: str | None) -> FigureNoise | None:
    """The trials' CI of a ranked figure as a ``metrics.figure_noise.FigureNoise`` (None without trials);
    goodput per kW without an SLO is the output tokens/s per kW's (``analysis.figures.ranked_ci``)."""
    drift = figure_drift(level.stationarity, name, boundary)
    if level.trials is None or level.trials.n < 2:
        return with_drift(None, drift)
    ci = ranked_ci(level, name, boundary)
    return with_drift(None, drift) if ci is None else trials_noise(ci.mean, ci.low, ci.high, ci.n, drift=drift)


def _no_request_reason(level: LevelResult) -> str | None:
    return next((f.text for f in level.validity.findings
                 if f.kind == FindingKind.NO_COMPLETED or (f.kind == FindingKind.LEGACY and "no measured request" in f.text)), None)


def _pair_figures(lv: LevelResult, b: str | None) -> dict[str, float | int | None]:
    e = lv.energy.get(b) if b else None
    if e is None:  # an error text is a sentence, never a leaked key name
        why = _no_request_reason(lv) or lv.energy_unavailable_reason or f"no {b or 'power'} energy was measured in it"
        raise UserError(f"the {lv.label} level has no energy to split ({why})")
    return {"dynamic_energy_j": e.dynamic_energy_j, "energy_j": e.energy_j, "idle_power_w": e.idle_power_w,
            "duration_s": lv.window.duration_s if lv.window else None,
            "input_tokens": lv.throughput.input_tokens, "output_tokens": lv.throughput.output_tokens}


def prefill_decode_pair(cfg: RunConfig, measure: Measure) -> dict[str, Any]:
    """Two extra levels that isolate prefill (max_tokens=1) and decode (short prompts, long outputs)
    at the run's largest concurrency, solved exactly as a cross-check of the regression. Returns the
    solved pair, or ``{"error": sentence}``."""
    conc = pair_concurrency(cfg)
    pre = measure("concurrency", conc, **PREFILL_HEAVY, label_suffix=" prefill-heavy")
    dec = measure("concurrency", conc, **DECODE_HEAVY, label_suffix=" decode-heavy")
    b = headline_boundary(pre) or headline_boundary(dec)
    try:
        pair = isolating_pair(_pair_figures(pre, b), _pair_figures(dec, b))
        pair["boundary"] = b
        pair["levels"] = [pre.index, dec.index]
    except UserError as e:
        pair = {"error": str(e)}
    except (KeyError, TypeError) as e:
        pair = {"error": f"the isolating pair could not be solved: a figure it needs is missing "
                         f"({type(e).__name__} {e})"}
    failed = [lv.label for lv in (pre, dec) if lv.requests.completed == 0]
    if failed:
        pair["failed_levels"] = failed
    return pair


def default_num_requests(mode: str, value: float, levels: Sequence[LevelResult] = ()) -> int:
    """A level with neither --num-requests nor --duration: sized so its steady state can earn a
    ``valid`` verdict (``accounting.steady.default_num_requests``), from the median E2E and the
    meter's update period measured at the previous level."""
    e2e_s = period_s = None
    if levels:
        prev = levels[-1]
        e2e_s = prev.latency.e2e_ms.p50 / 1e3 if prev.latency.e2e_ms.p50 else None
        period_s = steady_energy_periods(prev.energy.values())
    return _steady_default(mode, value, e2e_s, period_s)
