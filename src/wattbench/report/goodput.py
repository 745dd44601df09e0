"""The SLO and goodput cells of every report: the SLO as given, a level's goodput cells at its
headline boundary, and the goodput figures the headline quotes (the trials' means with ``--trials``).
Nothing here computes a figure: every number is a field of ``LevelResult.goodput``, read through
``analysis.figures.reported_figures`` where the headline quotes it."""

from __future__ import annotations

from dataclasses import dataclass

from wattbench.metrics.slo import run_slo_text
from wattbench.report import format as F
from wattbench.core.numbers import MISSING, fmt, fmt_fraction_pct
from wattbench.core.schema import LevelResult, Result
from wattbench.analysis.figures import reported_figures


def slo_text(result: Result) -> str | None:
    """The run's SLO as given (``ttft_p99=500ms,tpot_p99=50ms``), or None without one
    (``metrics.slo.run_slo_text``, the one home)."""
    return run_slo_text(result)


def has_goodput(result: Result) -> bool:
    return any(lv.goodput is not None for lv in result.levels)


@dataclass(frozen=True)
class GoodputCells:
    met_pct: str  # share of the level's requests that met every SLO
    slo: str  # "met" / "missed": the SLO as written, judged over the level
    goodput_tok_s: str
    goodput_per_kw: str  # at the level's headline boundary
    boundary: str | None


def goodput_cells(level: LevelResult) -> GoodputCells:
    gp = level.goodput
    hb = F.headline_energy(level)
    b = hb[0] if hb else None
    if gp is None:
        return GoodputCells(fmt_fraction_pct(None), MISSING, fmt(None), fmt(None), b)
    return GoodputCells(fmt_fraction_pct(gp.fraction), "met" if gp.all_met else "missed",
                        fmt(gp.output_tokens_per_s), fmt(gp.per_kw_at(b)), b)


def goodput_point(level: LevelResult) -> tuple[float | None, float | None]:
    """(goodput tok/s per kW at the level's headline boundary, goodput tok/s) as the headline quotes
    them (``analysis.figures.reported_figures``: the trials' means with ``--trials``, else as stored)."""
    hb = F.headline_energy(level)
    h = reported_figures(level, hb[0] if hb else None)
    return h["goodput_per_kw"], h["goodput_output_tokens_per_s"]
