"""Which boundary a level's headline quotes, and how levels are matched across runs — one rule each.

``headline_boundary(level)``: of the boundaries the level has energy for, measured before declared
before estimate, then inner before outer (``BOUNDARIES`` order: accelerator first). The runner's
per-level figures (sweep objective, Pareto, prefill/decode pair), the reports' headline line and the
history store's ``boundary`` column all use it, so a run's headline names the same boundary
everywhere. ``measured_boundaries(level)``: the boundaries with an average power figure, inner to
outer. ``level_key(level)``: (mode, target) used to pair levels of two runs.
"""

from __future__ import annotations

from wattbench.results.schema import LevelResult
from wattbench.telemetry.base import BOUNDARIES

LABEL_RANK = {"measured": 0, "declared": 1, "estimate": 2}


def boundary_order(names) -> list[str]:
    """Boundaries inner to outer (``BOUNDARIES`` order), unknown names after, alphabetically."""
    names = set(names)
    known = [b for b in BOUNDARIES if b in names]
    return known + sorted(names - set(known))


def headline_boundary(level: LevelResult) -> str | None:
    """The boundary a level's headline quotes: measured before declared before estimate, then inner
    before outer. ``None`` when the level has no energy."""
    if not level.energy:
        return None
    order = {b: i for i, b in enumerate(boundary_order(level.energy))}
    return min(level.energy, key=lambda b: (LABEL_RANK.get(level.energy[b].label, 3), order[b]))


def measured_boundaries(level: LevelResult) -> list[str]:
    """Boundaries with an average power figure, inner to outer."""
    found = [b for b, e in level.energy.items() if e.avg_power_w is not None]
    order = {b: i for i, b in enumerate(BOUNDARIES)}
    return sorted(found, key=lambda b: (order.get(b, len(order)), b))


def level_key(level: LevelResult) -> tuple[str, float | None]:
    """(mode, target value) used to match levels across runs."""
    ld = level.load
    if ld.mode == "concurrency":
        return ("concurrency", float(ld.target_concurrency) if ld.target_concurrency is not None else None)
    if ld.mode == "rate":  # rounded so 0.1 + 0.2 and 0.3 name the same level
        return ("rate", round(float(ld.target_rate_rps), 9) if ld.target_rate_rps is not None else None)
    return ("trace", None)


def describe_key(key: tuple[str, float | None]) -> str:
    mode, v = key
    if v is None:
        return mode
    return f"{mode}={v:g}"
