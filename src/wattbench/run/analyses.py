"""Analyses over measured levels: energy per request and carbon (per level), energy per node
(``--ray``), the trials' mean and CI, and, over the whole run, the Pareto frontier and the
prefill/decode regression with its cross-check against the isolating pair. The formulas are in
``accounting/`` and ``analysis/``; this module calls them with the run's telemetry."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from wattbench.accounting.window import account_window
from wattbench.accounting.attribution import (
    Intervals,
    cross_check,
    fit_intervals,
    intervals_from_counters,
    intervals_from_records,
)
from wattbench.accounting.boundaries import BoundaryTotal, boundary_totals
from wattbench.accounting.carbon import apply_carbon
from wattbench.accounting.request_energy import attribute_level
from wattbench.analysis.figures import WINDOW_FIGURES, level_figures, steady_view
from wattbench.accounting.level_findings import measured_nothing, nothing_measured_why
from wattbench.results.headline import ENERGY_FIGURES
from wattbench.analysis.pareto import frontier_from_levels
from wattbench.core.errors import UserError
from wattbench.core.load_types import LevelOutcome
from wattbench.core.recordset import RecordSet
from wattbench.metrics.trials import trial_interval
from wattbench.results import rundir
from wattbench.results.headline import headline_boundary
from wattbench.core.schema import (BoundaryEnergy, CoefficientCheck, FigureKey, LevelResult, Pareto, PrefillDecode,
                                   PrefillDecodeFit, RequestRecord, TrialFigure, TrialsBlock, UnmeasuredTrial)
from wattbench.run.session import RunSession

REGRESSION_INTERVALS = 120  # client-timed intervals over the run (at least 0.5 s each)


def attribute(session: RunSession, level: LevelResult, records: Sequence[RequestRecord] | RecordSet) -> None:
    """Energy per request (accounting/request_energy.py) and carbon (accounting/carbon.py)."""
    if session.sampler is None or not level.energy:
        return
    log, pue = session.sampler.log, session.config.pue

    @functools.lru_cache(maxsize=4096)
    def totals(t0: int, t1: int) -> dict[str, BoundaryTotal]:
        return boundary_totals(log, t0, t1, pue=pue)

    def energy_fn_for(b: str) -> Callable[[int, int], float | None]:
        def f(t0: int, t1: int) -> float | None:
            t = totals(t0, t1).get(b)
            return None if t is None else t.energy_j
        return f

    attribute_level(level, records, energy_fn_for, attribute_idle=session.config.attribute_idle)
    if session.carbon is not None:
        apply_carbon(level, records, session.carbon, session.anchor.wall_ns, session.anchor.mono_ns,
                     energy_fn_for, pue)


def per_node_energy(session: RunSession, outcome: LevelOutcome, level: LevelResult
                    ) -> dict[str, dict[str, BoundaryEnergy]]:
    """The level's energy on each node of a Ray cluster."""
    from wattbench.distributed.merge import split_by_node  # lazy: the distributed package, only with --ray

    cfg = session.config
    assert session.sampler is not None  # called only for a level with energy: the run has a meter
    out = {}
    for node, sub in split_by_node(session.sampler.log).items():
        acc = account_window(sub, outcome.start_ns, outcome.end_ns, output_tokens=level.throughput.output_tokens,
                             total_tokens=level.throughput.output_tokens + level.throughput.input_tokens,
                             idle=None, price_per_kwh=cfg.price_per_kwh, pue=cfg.pue)
        out[node] = acc.energy
    return out


def _trial_cis(trials: list[LevelResult | None], only: frozenset[str] | None = None) -> dict[str, TrialFigure]:
    """Mean and 95% CI over ``trials`` of every headline figure (of the names in ``only``:
    ``metrics.trials.trial_interval``, on the log scale for a positive figure, so it never crosses
    zero): ``name`` or ``name@boundary`` -> mean, ci_low, ci_high, n (the values it is the mean of),
    scale and values, one per trial in order, None where a trial has no such figure or is None (it
    measured nothing). Each trial's own figures (``analysis.figures.level_figures``), never the
    trials block an earlier trial carried while it was the level's latest (its mean would count as a
    value again)."""
    kept = [t for t in trials if t is not None]
    boundaries: list[str | None] = [*sorted({b for t in kept for b in t.energy})] or [None]  # None: no energy
    values: dict[str, dict[int, float]] = {}
    for i, t in enumerate(trials):
        if t is None:
            continue
        for b in boundaries:
            for name, v in level_figures(t, b).items():
                if v is None or (only is not None and name not in only):
                    continue
                key = FigureKey.at(name, b, ENERGY_FIGURES).text()
                if b and name not in ENERGY_FIGURES and b != boundaries[0]:
                    continue  # boundary-free figures once
                values.setdefault(key, {})[i] = float(v)
    figures = {}
    for key, by_trial in values.items():
        c = trial_interval(by_trial.values())
        figures[key] = TrialFigure(mean=c["mean"], ci_low=c["ci95_low"], ci_high=c["ci95_high"], n=c["n"],
                                   values=[by_trial.get(i) for i in range(len(trials))],
                                   scale=c["scale"] if c["n"] > 1 else None)
    return figures


def measuring_trials(trials: list[LevelResult]) -> list[LevelResult]:
    """The trials that measured something (``accounting.level_findings.measured_nothing``): the only
    ones a mean, an interval, ``--trials auto`` or a comparison is built from."""
    return [t for t in trials if not measured_nothing(t)]


def unmeasured(trials: list[LevelResult]) -> list[UnmeasuredTrial]:
    """The trials that measured nothing, each with its number (from 1) and what happened instead."""
    return [UnmeasuredTrial(trial=(t.trial if t.trial is not None else i) + 1,
                            requests=t.requests.completed + t.requests.failed + t.requests.warmup,
                            why=nothing_measured_why(t))
            for i, t in enumerate(trials) if measured_nothing(t)]


def trials_block(trials: list[LevelResult]) -> TrialsBlock:
    """Mean and 95% CI (Student t) over the trials that measured something (``measuring_trials``)
    of every headline figure, in the form compare and regress read: ``figures[name]`` and
    ``figures[name@boundary]`` -> mean, ci_low, ci_high, n (the trials it is the mean of), values
    (one per trial run, None for a trial that measured nothing: it has no figure); and
    ``figures_steady``, the window-dependent figures of each measuring trial's steady-state window
    (``analysis.figures.steady_view``), when every one has one. ``n`` counts every trial run,
    ``unmeasured`` names those that measured nothing."""
    counted = [None if measured_nothing(t) else t for t in trials]
    steady = [None if t is None else steady_view(t) for t in counted]
    has_steady = any(t is not None for t in counted) and all(
        v is not None for t, v in zip(counted, steady) if t is not None)
    return TrialsBlock(n=len(trials), confidence=0.95, figures=_trial_cis(counted),
                       figures_steady=_trial_cis(steady, WINDOW_FIGURES) if has_steady else {},
                       thermal_before=[t.thermal_before for t in trials],
                       thermal=[t.thermal if t.thermal.model_fields_set else None for t in trials],
                       host_cpu=[t.host_cpu for t in trials],
                       unmeasured=unmeasured(trials))


def run_analyses(session: RunSession) -> None:
    """Run-level analyses over the measured levels: Pareto frontier, prefill/decode regression."""
    result = session.result
    assert result is not None  # after the levels: the result exists
    if not result.levels:
        return
    b = headline_boundary(result.levels[0])
    if b:
        levels = result.levels
        pareto: dict[str, Any] = {
            "boundary": b,
            "tpot_p99": frontier_from_levels(levels, boundary=b, latency="tpot_ms", stat="p99"),
            "ttft_p99": frontier_from_levels(levels, boundary=b, latency="ttft_ms", stat="p99"),
        }
        if session.slos:
            pareto["goodput_tpot_p99"] = frontier_from_levels(
                levels, boundary=b, latency="tpot_ms", stat="p99", efficiency="goodput_per_kw")
        result.pareto = Pareto.model_validate(pareto)
    if session.sampler is not None and b:
        reg = regression(session, b)
        pd = result.prefill_decode = result.prefill_decode or PrefillDecode()
        pd.regression = PrefillDecodeFit.model_validate(reg)
        pair = pd.isolating_pair
        if pair is not None and pair.error is None and reg.get("status") == "ok":
            pd.cross_check = {k: CoefficientCheck.model_validate(v)
                              for k, v in cross_check(reg, pair.model_dump(mode="json")).items()}


def _intervals(session: RunSession, energy: Callable[[int, int], float | None]) -> tuple[Intervals, str]:
    tl = session.scraper.timeline if session.scraper is not None else None
    assert session.result is not None and session.run_dir is not None
    levels = session.result.levels
    w0, w1 = levels[0].window, levels[-1].window
    if (tl is not None and tl.available and "prompt_tokens" in tl.series and "generation_tokens" in tl.series
            and w0 is not None and w1 is not None):
        t0, t1 = w0.start_ns, w1.end_ns
        pts = [(t, v) for t, v in tl.scrapes if t0 <= t <= t1 and "prompt_tokens" in v and "generation_tokens" in v]
        return intervals_from_counters([t for t, _ in pts], [v["prompt_tokens"] for _, v in pts],
                                       [v["generation_tokens"] for _, v in pts], energy), "server counters"
    dur = sum(lv.window.duration_s for lv in levels if lv.window)
    return intervals_from_records(_RunRequests(session.run_dir), energy,
                                  interval_s=max(0.5, dur / REGRESSION_INTERVALS)), "client timing"


class _RunRequests:
    """The run's ``requests.jsonl``, read afresh (one record at a time) each time it is iterated:
    the run's records are never all in memory."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def __iter__(self) -> Iterator[RequestRecord]:
        return rundir.iter_requests(self.run_dir, notes=[])


def regression(session: RunSession, boundary: str) -> dict[str, Any]:
    """Prefill/decode regression over every measured level of the run (more spread in the token
    mix separates the two better). Token counts per interval from the server's counters when they
    were scraped, else from client timing: ``accounting.attribution.fit_intervals``' answer, or
    ``error``, each with its boundary (``PrefillDecode.regression``, as written)."""
    assert session.sampler is not None  # run_analyses asks only with a meter
    log = session.sampler.log

    def energy(t0: int, t1: int) -> float | None:
        t = boundary_totals(log, t0, t1).get(boundary)
        return None if t is None else t.energy_j

    try:
        iv, source = _intervals(session, energy)
        out = fit_intervals(iv)
        out["boundary"] = boundary
        out["token_source"] = source
        return out
    except UserError as e:
        return {"error": str(e), "boundary": boundary}
