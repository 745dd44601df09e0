"""Headline figures of a load level, by name, and the trial confidence intervals behind them.

Compare, regress and diagnosis all read a level through :func:`headline`, so a metric name means
the same thing everywhere (``docs/compare.md`` lists them). Energy figures are read at one power
boundary from ``LevelResult.energy`` (the full measurement window), or — after
:func:`select_window` with ``"steady"`` — in each level's :func:`steady_view`, where every figure
that depends on the window (energy, token rates, goodput tokens) is the steady-state window's.

Trials (``--trials N``) put per-figure means and confidence intervals in
``level.trials`` (``core.schema.TrialsBlock``); :func:`headline` reads a figure the block holds
as its mean (the headline rule, ``results.headline``)::

    {"n": 5, "confidence": 0.95,
     "figures": {"output_tokens_per_s": {"mean": 1000.0, "ci_low": 980.0, "ci_high": 1020.0},
                 "avg_power_w@accelerator": {"mean": 700.0, "ci_low": 690.0, "ci_high": 710.0}}}

An energy figure is keyed ``name@boundary``; a plain ``name`` key for an energy figure is read as
belonging to every boundary (a run that measured one boundary).
"""

from __future__ import annotations

from typing import Any
import difflib

from wattbench.results.headline import (
    ENERGY_FIGURES,
    TrialCI,
    common_headline_boundary,
    point,
    trial_ci,
)
from wattbench.core.schema import BoundaryEnergy, FigureKey, LevelResult, Result, TokenCount
from wattbench.metrics.level_figures import LevelFigures
from wattbench.metrics.efficiency import tokens_per_s_from_per_kw, tokens_per_s_from_per_kwh
from wattbench.metrics.slo import good_output_share, goodput_in_window
from wattbench.core.errors import UserError
from wattbench.results.headline import headline_boundary

THROUGHPUT_FIGURES = ("output_tokens_per_s", "input_tokens_per_s", "total_tokens_per_s", "requests_per_s")
LATENCY_KINDS = ("ttft", "tpot", "itl", "e2e")
LATENCY_STATS = ("mean", "p50", "p90", "p95", "p99", "max")
OTHER_FIGURES = (
    "failed_pct",
    "goodput_rps",
    "goodput_output_tokens_per_s",
    "goodput_fraction",  # share of the level's requests that met every SLO (0..1)
    "mean_running",
    "mean_waiting",
    "client_cpu_pct",
    "max_temp_c",
    "sm_clock_mhz",
    "gpu_utilization_pct",
)


def all_metric_names() -> list[str]:
    names = list(THROUGHPUT_FIGURES) + list(ENERGY_FIGURES)
    names += [f"{k}_{s}_ms" for k in LATENCY_KINDS for s in LATENCY_STATS]
    names += list(OTHER_FIGURES)
    return names


METRIC_NAMES = frozenset(all_metric_names())


def metric_suggestions(name: str, limit: int = 8) -> list[str]:
    """Known metric names close to an unknown ``name``: the closest spellings first, then every name
    sharing its first word (``tpot`` -> all six ``tpot_*_ms``), at most ``limit``."""
    names = all_metric_names()
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.75)
    head = name.split("_")[0]
    close += [n for n in names if n.split("_")[0] == head and n not in close]
    return close[:limit]

# figures where a higher value is better (used to phrase findings and table arrows)
HIGHER_IS_BETTER = frozenset(
    {"output_tokens_per_s", "input_tokens_per_s", "total_tokens_per_s", "requests_per_s",
     "output_tokens_per_s_per_kw", "tokens_per_kwh", "output_tokens_per_kwh", "goodput_rps",
     "goodput_output_tokens_per_s", "goodput_per_kw", "goodput_fraction"}
)


def _num(v: Any) -> float | None:
    """A number from a gauge summary: a plain number or a dict with ``mean``."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, dict):
        for key in ("mean", "avg", "value"):
            if key in v:
                return _num(v[key])
    return None


def throttle_reasons(level: LevelResult) -> list[str]:
    """The capping reasons seen in a level (power or thermal capping: ``accounting/thermal.py``)."""
    return list(level.thermal.capping_reasons_seen)


def common_boundary(results: list[Result]) -> str | None:
    """The boundary runs are read side by side at: the headline rule over every level of every run
    (``results.headline.common_headline_boundary``)."""
    return common_headline_boundary(lv for r in results for lv in r.levels)


def reported_figures(level: LevelResult, boundary: str | None) -> LevelFigures:
    """Every named figure of a level (None where not measured): with ``--trials``, each figure the
    trials block holds is its mean over the trials (``results.headline.point``), the others the last
    trial's."""
    own = level_figures(level, boundary)
    if level.trials is None:
        return own
    return own.with_figures({name: point(level, name, boundary if name in ENERGY_FIGURES else None, v)
                             for name, v in own.items()})


def ranked_figures(level: LevelResult, boundary: str | None = None, has_slo: bool | None = None
                   ) -> LevelFigures:
    """The figures a level is ranked by and reported with — the one rule ``--optimize``, ``--sweep
    auto`` (``run/plan.search_figures``) and ``tune`` (``tune/score.trial_figures``) share: every
    figure as the answer quotes it (``reported_figures``: the trials' mean under ``--trials``, not the last
    trial's), read at ``boundary`` (default: the level's headline boundary). ``goodput_per_kw``
    without an SLO (``has_slo`` False; None: whether the level carries a goodput block) is the
    output tokens/s per kW: every completed token is good. ``LevelFigures.boundary`` is the
    boundary read (None when the level measured no energy)."""
    b = boundary or headline_boundary(level)
    h = reported_figures(level, b)
    if has_slo is None:
        has_slo = level.goodput is not None
    every_token_good: dict[str, float | None] = {}
    if h.goodput_per_kw is None and not has_slo:
        every_token_good["goodput_per_kw"] = h.output_tokens_per_s_per_kw
    if not has_slo:
        every_token_good["goodput_output_tokens_per_s"] = h.output_tokens_per_s
    return h.with_figures(every_token_good, boundary=b)


def ranked_ci(level: LevelResult, name: str, boundary: str | None, has_slo: bool | None = None) -> TrialCI | None:
    """The trials' CI of a figure ``ranked_figures`` reports, by the same rule: ``goodput_per_kw``
    without an SLO (``has_slo`` as there) is the output tokens/s per kW's CI. ``boundary`` is read
    for the energy figures only. None without a trials block (or a CI) for the figure."""
    if has_slo is None:
        has_slo = level.goodput is not None
    ci = trial_ci(level, name, boundary if name in ENERGY_FIGURES else None)
    if ci is None and name == "goodput_per_kw" and not has_slo:
        ci = trial_ci(level, "output_tokens_per_s_per_kw", boundary)
    return ci


def goodput_per_kw(level: LevelResult, boundary: str | None) -> float | None:
    """Goodput output tokens/s per kW of one measurement of a level at ``boundary``: the good share
    of its output tokens (``metrics.slo.good_output_share``) times the window's output tokens/s per
    kW there — the rule ``metrics.slo.goodput`` applies when it writes the block's ``per_kw``, so
    the stored figure is read where the block has the boundary, and the rule applied where it does
    not (a block written without that boundary). None without a goodput block, at a boundary without
    per-token figures, or where the share is unknown."""
    gp = level.goodput
    if gp is None or boundary is None:
        return None
    if boundary in gp.per_kw:
        return gp.per_kw_at(boundary)
    e = level.energy.get(boundary)
    share = good_output_share(gp, level.throughput)
    if e is None or e.output_tokens_per_s_per_kw is None or share is None:
        return None
    return share * e.output_tokens_per_s_per_kw


def level_figures(level: LevelResult, boundary: str | None) -> LevelFigures:
    """Every named figure of one measurement of a level (its last trial's with ``--trials``), read
    from the level's own fields, never its trials block, at ``boundary``."""
    out: dict[str, float | None] = {}
    tp = level.throughput
    for name in THROUGHPUT_FIGURES:
        out[name] = float(getattr(tp, name))
    lat = level.latency
    for kind in LATENCY_KINDS:
        st = getattr(lat, f"{kind}_ms")
        for s in LATENCY_STATS:
            v = getattr(st, s)
            out[f"{kind}_{s}_ms"] = None if v is None else float(v)
    e = level.energy.get(boundary) if boundary else None
    gp = level.goodput
    for name in ENERGY_FIGURES:
        if name == "goodput_per_kw":
            v = goodput_per_kw(level, boundary)
        else:
            v = getattr(e, name) if e is not None else None
        out[name] = None if v is None else float(v)
    req = level.requests
    total = req.completed + req.failed
    out["failed_pct"] = 100.0 * req.failed / total if total else None
    out["goodput_rps"] = gp.requests_per_s if gp is not None else None
    out["goodput_output_tokens_per_s"] = gp.output_tokens_per_s if gp is not None else None
    out["goodput_fraction"] = gp.fraction if gp is not None else None
    sm = level.server_metrics
    out["mean_running"] = sm.mean_running_requests
    out["mean_waiting"] = sm.mean_waiting_requests
    out["client_cpu_pct"] = level.load.client_cpu_pct
    th = level.thermal
    out["max_temp_c"] = th.max_temperature_c
    out["sm_clock_mhz"] = th.mean_sm_clock_mhz
    out["gpu_utilization_pct"] = th.mean_gpu_utilization_pct
    return LevelFigures(boundary=boundary).with_figures(out)


# the figures whose value depends on the window they are read over: a steady view replaces each
WINDOW_FIGURES = frozenset(ENERGY_FIGURES) | {"output_tokens_per_s", "input_tokens_per_s", "total_tokens_per_s",
                                              "goodput_output_tokens_per_s"}


def _window_token_rates(energy: dict[str, BoundaryEnergy]) -> tuple[float, float] | None:
    """(output, total) tokens/s of the window ``energy`` was accounted over, from a boundary with
    per-token figures (every such boundary divides the same tokens): None without one."""
    for e in energy.values():
        out = tokens_per_s_from_per_kw(e.output_tokens_per_s_per_kw, e.avg_power_w)
        total = tokens_per_s_from_per_kwh(e.tokens_per_kwh, e.avg_power_w)
        if out is not None:
            return out, total if total is not None else out
    return None


def steady_view(level: LevelResult) -> LevelResult | None:
    """The level as its steady-state window reads it (a copy; None without steady energy figures):
    the one rule that makes every window-dependent figure (``WINDOW_FIGURES``) of one window, so a
    per-kW figure is the throughput of the same window over its power.

    - energy: ``energy_steady``;
    - token rates (output, input, total tokens/s and the window's token counts): the steady
      window's, recovered from its per-kW and per-kWh figures (``metrics.efficiency``), which
      accounting computed from the tokens inside that window; request rates and latencies stay the
      level's (they describe its measured requests);
    - goodput: the good share of the output tokens (``metrics.slo.good_output_share``) of the
      steady window's tokens/s and tokens/s per kW (``metrics.slo.goodput_in_window``); a block
      whose share cannot be recovered (written on the older ``measured_request_tokens`` basis) has
      no steady figure and is left out;
    - trials: the window-dependent figures are the trials' steady ones
      (``TrialsBlock.figures_steady``); a file written before they were kept has none, so those
      figures read as this trial's, without a CI.
    """
    if not level.energy_steady:
        return None
    out = level.model_copy(deep=True)
    share = good_output_share(level.goodput, level.throughput) if level.goodput is not None else None
    out.energy = out.energy_steady
    duration = level.steady_window.duration_s if level.steady_window is not None else None
    rates = _window_token_rates(out.energy)
    tp = out.throughput
    if rates is not None:
        tp.output_tokens_per_s, tp.total_tokens_per_s = rates
        tp.input_tokens_per_s = max(rates[1] - rates[0], 0.0)
        if duration:
            tp.duration_s = duration
            tp.output_tokens = int(round(tp.output_tokens_per_s * duration))
            tp.input_tokens = int(round(tp.input_tokens_per_s * duration))
            tp.tokens_in_window = TokenCount(output=tp.output_tokens_per_s * duration,
                                             input=tp.input_tokens_per_s * duration)
    if out.goodput is not None:
        out.goodput = (goodput_in_window(out.goodput, share, out.energy, tp.output_tokens_per_s, duration)
                       if share is not None and rates is not None else None)
    if out.trials is not None:
        kept = {k: v for k, v in out.trials.figures.items() if FigureKey.parse(k).figure not in WINDOW_FIGURES}
        out.trials.figures = {**kept, **out.trials.figures_steady}
        out.trials.figures_steady = {}
    return out


def steady_trials_note(result: Result) -> str | None:
    """What a steady reading of ``result`` lacks: the levels that ran trials but kept no steady-window
    trial figures (a file written before ``TrialsBlock.figures_steady``), whose steady figures are the
    last trial's, without a CI. None when nothing is missing."""
    missing = [lv.label for lv in result.levels
               if lv.trials is not None and lv.trials.n > 1 and not lv.trials.figures_steady]
    if not missing:
        return None
    return (f"run {result.run_id}: the trials of {', '.join(missing)} kept no steady-window figures (written "
            "before they were kept), so each steady figure is the last trial's, without a CI; the full "
            "window carries the trials' means and noise")


def select_window(result: Result, window: str) -> Result:
    """The result with each level read in ``window``: ``full`` (as written) or ``steady`` (each
    level's :func:`steady_view`). A copy; the input is not changed."""
    if window == "full":
        return result
    if window != "steady":
        raise UserError(f"window must be 'full' or 'steady', got {window!r}")
    views = []
    for lv in result.levels:
        view = steady_view(lv)  # a copy of the level
        if view is None:
            raise UserError(f"run {result.run_id} level {lv.label} has no steady-state energy figures; "
                            "use the full window")
        views.append(view)
    out = result.model_copy(update={"levels": []}, deep=True)  # the rest copied once, the levels not twice
    out.levels = views
    return out
