"""Text shared by the terminal, Markdown and HTML reports: the boundaries a result shows and the
one-line headline of a level (numbers are written by ``core/numbers.py``, boundary order is
``results/headline.py``'s: import them from there). Values are shown as stored in ``result.json``;
the only conversion is W -> kW for display.
"""

from __future__ import annotations

from wattbench.core.schema import BoundaryEnergy, LevelResult, Result
from wattbench.results.headline import boundary_order
from wattbench.results.headline import headline_boundary as _headline_boundary
from wattbench.results.headline import per_token, shown_boundaries, trial_ci
from wattbench.analysis.figures import reported_figures
from wattbench.core.numbers import MISSING, fmt, fmt_estimate, fmt_pct, fmt_range, fmt_uncertain
from wattbench.accounting.findings import NO_SENSOR_REASON
from wattbench.accounting.level_findings import in_flight_finding, P99_MIN_SAMPLES


def result_boundaries(result: Result, steady: bool = False) -> list[str]:
    """Every boundary that some level of the run shows (``results.headline.shown_boundaries``: a
    boundary equal to another, such as ``host`` = the ``cpu`` estimate, once)."""
    names: set[str] = set()
    for lv in result.levels:
        names.update(shown_boundaries(lv.energy_steady if steady else lv.energy))
    return boundary_order(names)


def has_per_token(result: Result, boundary: str) -> bool:
    """Whether some level has tokens per kW and J/token at ``boundary`` (``results.headline.per_token``)."""
    return any(boundary in lv.energy and per_token(boundary, lv.energy) for lv in result.levels)


def headline_energy(level: LevelResult) -> tuple[str, BoundaryEnergy] | None:
    """The boundary a level's headline quotes (``results.headline.headline_boundary``) and its
    energy; ``None`` when the level has no energy."""
    name = _headline_boundary(level)
    return None if name is None else (name, level.energy[name])

def energy_unavailable_reason(level: LevelResult) -> str:
    return level.energy_unavailable_reason or NO_SENSOR_REASON


SATURATION_MARK = "⚠ client-saturated"


def saturation_mark(level: LevelResult) -> str:
    """``⚠ client-saturated (latency biased)``: what a client judged saturated biases
    (``level.saturated_figures``, from the findings that judged it)."""
    figs = level.saturated_figures
    what = []
    if any(f.startswith("throughput") for f in figs):
        what.append("throughput")
    if any(f.startswith("latency") for f in figs):
        what.append("latency")
    if any(f.startswith("energy") for f in figs):
        what.append("efficiency")
    return f"{SATURATION_MARK} ({', '.join(what) or 'figures'} biased)"


def interval_text(level: LevelResult, low: float, high: float, mean: float | None) -> str:
    """The interval a level's headline reached, as its answer says it: ``95% CI 2,050–2,122, ±1.7%``
    and what ``--trials auto`` asked (``precision_text``)."""
    text = f"95% CI {fmt_estimate(mean, low, high)[1] if mean is not None else fmt_range(low, high)}"
    if mean:
        text += f", ±{fmt_pct((high - low) / 2.0 / abs(mean) * 100)}"
    return text + precision_text(level)


def precision_text(level: LevelResult) -> str:
    """Under ``--trials auto`` (``level.precision``), the trials' interval against what was asked:
    ``; ±2% asked: reached`` or ``; ±2% asked: not reached; about 6 more trials would reach it``
    (a meter's stated uncertainty is no part of it: more trials do not narrow a bias common to
    them all). Empty without it."""
    p = level.precision
    if p is None:
        return ""
    asked = f"±{p.asked_pct:g}% asked"
    if p.met:
        return f"; {asked}: reached"
    if p.drifting:
        return f"; {asked}: not reached, it {p.drift or 'drifts'}"
    more = ("the spread is unknown" if p.more_trials is None
            else f"about {p.more_trials} more trial{'s' if p.more_trials != 1 else ''} would reach it")
    return f"; {asked}: not reached; {more}"


def estimate_pct(be: BoundaryEnergy | None) -> float | None:
    """The stated ±% of a boundary whose power is modelled, not measured (label ``estimate``: its
    ``uncertainty_pct``, ±60% for the CPU-utilization model); None for a measured or declared one."""
    if be is None or be.label != "estimate":
        return None
    return be.uncertainty_pct


def energy_fmt(be: BoundaryEnergy | None, value: float | None, unit: str = "") -> str:
    """A figure derived from a boundary's power (W, J, J/token, tokens per kW or kWh, cost, carbon)
    written as what it is: from a modelled power, with the significant digits its ±% allows
    (``core.numbers.fmt_uncertain``: 43,825,484 out tok/kWh at ±60% reads 44,000,000 — the label
    ``estimate`` and its ±% stand beside it, in the header or the line); otherwise ``fmt``."""
    return fmt_uncertain(value, estimate_pct(be), unit)


def energy_where(name: str, be: BoundaryEnergy) -> str:
    """``node``, ``node, declared``, ``host, estimate ±60%``: a boundary with how its power was had."""
    if be.label == "measured":
        return name
    u = estimate_pct(be)
    return f"{name}, {be.label}" + (f" ±{fmt(u, kind='effect')}%" if u is not None else "")


def headline_line(level: LevelResult) -> str:
    """``1,234 out tok/s · 0.41 kW (accelerator) · 3,010 tok/s/kW · 0.33 J/tok · p99 TTFT 180 ms``.

    The boundary and the values follow the headline rule (``results.headline``): with ``--trials``
    each figure is the trials' mean, and tokens per kW carries its 95% CI. A level whose load
    generator was judged saturated starts with ``SATURATION_MARK`` and the figures it biases
    (``saturation_mark``; ``wattbench.metrics.saturation``)."""
    figs = [saturation_mark(level)] if level.load.saturated else []
    if in_flight_finding(level) is not None:  # the achieved load beside the asked one
        figs.append(f"⚠ achieved {fmt(level.load.mean_in_flight, kind='load')} in flight of {level.load.target_concurrency} asked")
    hb = headline_energy(level)
    h = reported_figures(level, hb[0] if hb else None)  # every figure as the headline rule reads it
    figs.append(f"{fmt(h['output_tokens_per_s'])} out tok/s")
    if hb is None:
        figs.append(f"energy unavailable: {energy_unavailable_reason(level)}")
    else:
        name, be = hb
        w = h["avg_power_w"]
        figs.append(f"{energy_fmt(be, None if w is None else w / 1000.0)} kW ({energy_where(name, be)})")
        per_kw = f"{energy_fmt(be, h['output_tokens_per_s_per_kw'])} tok/s/kW"
        ci = trial_ci(level, "output_tokens_per_s_per_kw", name)
        if ci is not None:
            per_kw += f" (mean of {ci.n} trials, {interval_text(level, ci.low, ci.high, ci.mean)})"
        figs.append(per_kw)
        figs.append(f"{energy_fmt(be, h['j_per_output_token'])} J/tok")
    n = level.requests.completed
    few = f" (n={n})" if 0 < n < P99_MIN_SAMPLES else ""  # a p99 from few requests is their maximum
    figs.append(f"p99 TTFT {fmt(h['ttft_p99_ms'])} ms{few}")
    return " · ".join(figs)


def level_target(level: LevelResult) -> str:
    ld = level.load
    if ld.mode == "concurrency" and ld.target_concurrency is not None:
        return str(ld.target_concurrency)
    if ld.mode == "rate" and ld.target_rate_rps is not None:
        return f"{ld.target_rate_rps:g}/s"
    return MISSING


def level_target_value(level: LevelResult) -> float | None:
    """The load a level asked for (concurrency or requests/s), as a number for axes and CSV."""
    ld = level.load
    if ld.mode == "concurrency":
        return None if ld.target_concurrency is None else float(ld.target_concurrency)
    if ld.mode == "rate":
        return ld.target_rate_rps
    return None
