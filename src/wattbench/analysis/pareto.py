"""The efficiency-vs-latency Pareto frontier over measured load levels.

A point is ``(label, efficiency, latency)``: efficiency is higher-better (output tokens/s per kW
at one boundary, or goodput per kW), latency is lower-better (e.g. p99 TPOT in ms). A point is on
the frontier when no other point is at least as good on both axes and strictly better on one.
Points with a missing figure are kept out and listed as ``excluded``. The frontier is returned
sorted by latency (ascending), which is also efficiency ascending: the trade-off curve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence, TypeGuard

from wattbench.core.schema import LevelResult


@dataclass(frozen=True)
class ParetoPoint:
    label: str
    efficiency: float
    latency: float

    def to_dict(self) -> dict[str, str | float]:
        return {"label": self.label, "efficiency": self.efficiency, "latency": self.latency}


def _ok(v: object) -> TypeGuard[float]:
    """A finite number (not a bool): a figure that can be placed on the plane."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def pareto_frontier(points: Iterable[tuple[str, float | None, float | None]]) -> list[ParetoPoint]:
    """The non-dominated points (max efficiency, min latency), sorted by latency then efficiency."""
    pts = [ParetoPoint(str(lab), float(e), float(l)) for lab, e, l in points if _ok(e) and _ok(l)]
    # sort by latency asc, efficiency desc; sweep keeping points that raise the best efficiency
    pts.sort(key=lambda p: (p.latency, -p.efficiency))
    frontier: list[ParetoPoint] = []
    best = -math.inf
    for p in pts:
        if p.efficiency > best:
            frontier.append(p)
            best = p.efficiency
    return frontier


def is_dominated(p: tuple[str, float, float], others: Iterable[tuple[str, float, float]]) -> bool:
    _, e, l = p
    for _, e2, l2 in others:
        if e2 >= e and l2 <= l and (e2 > e or l2 < l):
            return True
    return False


def frontier_from_levels(levels: Sequence[LevelResult], *, boundary: str = "accelerator", latency: str = "tpot_ms",
                         stat: str = "p99", efficiency: str = "output_tokens_per_s_per_kw") -> dict[str, object]:
    """The frontier over a run's levels.

    ``efficiency``: a field of ``energy[boundary]`` (default output tok/s per kW), or
    ``goodput_per_kw`` for ``goodput.per_kw[boundary].output_tokens_per_s_per_kw``.
    ``latency``/``stat``: ``latency.<latency>.<stat>``, e.g. ``tpot_ms``/``p99`` or ``ttft_ms``/``p50``.
    """
    raw, excluded = [], []
    for lv in levels:
        label = lv.label
        if efficiency == "goodput_per_kw":
            eff = lv.goodput.per_kw_at(boundary) if lv.goodput is not None else None
        else:
            e = lv.energy.get(boundary)
            eff = getattr(e, efficiency) if e is not None else None
        lat = getattr(getattr(lv.latency, latency), stat)
        if _ok(eff) and _ok(lat):
            raw.append((label, eff, lat))
        else:
            excluded.append(label)
    front = pareto_frontier(raw)
    on = {p.label for p in front}
    return {
        "boundary": boundary,
        "efficiency": efficiency,
        "latency": f"{latency}.{stat}",
        "points": [{"label": lab, "efficiency": e, "latency": l, "on_frontier": lab in on} for lab, e, l in raw],
        "frontier": [p.to_dict() for p in front],
        "excluded": excluded,
    }
