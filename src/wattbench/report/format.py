"""Text shared by the terminal, Markdown and HTML reports: number formatting, boundary order and
the one-line headline of a level. Values are shown as stored in ``result.json``; the only
conversion is W -> kW for display.
"""

from __future__ import annotations

from wattbench.results.schema import BoundaryEnergy, LevelResult, Result
from wattbench.results.headline import LABEL_RANK, boundary_order  # noqa: F401  (one home)
from wattbench.results.headline import headline_boundary as _headline_boundary

MISSING = "–"


def fmt(x: float | int | None, unit: str = "") -> str:
    """A number for people: thousands separators, about three significant digits."""
    if x is None:
        return MISSING
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return MISSING
    if xf != xf:  # NaN
        return MISSING
    a = abs(xf)
    if a >= 1000:
        s = f"{xf:,.0f}"
    elif a >= 100:
        s = f"{xf:.0f}"
    elif a >= 10:
        s = f"{xf:.1f}"
    elif a >= 1:
        s = f"{xf:.2f}"
    elif a == 0:
        s = "0"
    else:
        s = f"{xf:.2g}"
    return f"{s} {unit}" if unit else s


def fmt_pct(x: float | None) -> str:
    return MISSING if x is None else f"{x:.1f}%"


def fmt_fraction_pct(x: float | None) -> str:
    """A 0..1 fraction shown as a percentage."""
    return MISSING if x is None else f"{x * 100:.1f}%"


def result_boundaries(result: Result, steady: bool = False) -> list[str]:
    """Every boundary that any level of the run has energy for."""
    names: set[str] = set()
    for lv in result.levels:
        names.update((lv.energy_steady if steady else lv.energy).keys())
    return boundary_order(names)


def headline_boundary(level: LevelResult) -> tuple[str, BoundaryEnergy] | None:
    """The boundary a level's headline quotes (``results.headline.headline_boundary``) and its
    energy; ``None`` when the level has no energy."""
    name = _headline_boundary(level)
    return None if name is None else (name, level.energy[name])

def energy_unavailable_reason(level: LevelResult) -> str:
    return level.energy_unavailable_reason or "no sensor covered this level"


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


def headline(level: LevelResult) -> str:
    """``1,234 out tok/s · 0.41 kW (accelerator) · 3,010 tok/s/kW · 0.33 J/tok · p99 TTFT 180 ms``.

    A level whose load generator was judged saturated starts with ``SATURATION_MARK`` and the
    figures it biases (``saturation_mark``; ``wattbench.load.saturation``)."""
    from wattbench.accounting.level_findings import P99_MIN_SAMPLES, in_flight_finding

    parts = [saturation_mark(level)] if level.load.saturated else []
    if in_flight_finding(level) is not None:  # the achieved load beside the asked one
        parts.append(f"⚠ achieved {level.load.mean_in_flight:.1f} in flight of {level.load.target_concurrency} asked")
    parts.append(f"{fmt(level.throughput.output_tokens_per_s)} out tok/s")
    hb = headline_boundary(level)
    if hb is None:
        parts.append(f"energy unavailable: {energy_unavailable_reason(level)}")
    else:
        name, be = hb
        where = name if be.label == "measured" else f"{name}, {be.label}"
        kw = None if be.avg_power_w is None else be.avg_power_w / 1000.0
        parts.append(f"{fmt(kw)} kW ({where})")
        parts.append(f"{fmt(be.output_tokens_per_s_per_kw)} tok/s/kW")
        parts.append(f"{fmt(be.j_per_output_token)} J/tok")
    n = level.requests.completed
    few = f" (n={n})" if 0 < n < P99_MIN_SAMPLES else ""  # a p99 from few requests is their maximum
    parts.append(f"p99 TTFT {fmt(level.latency.ttft_ms.p99)} ms{few}")
    return " · ".join(parts)


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
