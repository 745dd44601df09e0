"""The headline: which boundary a run's figures quote, and which value — one rule, used by ``run``,
``compare``, ``regress``, ``tune``, ``plan``, the history store and every report.

The boundary (``headline_boundary(level)``; ``common_headline_boundary(levels)`` for several runs)
---------------------------------------------------------------------------------------------------
1. **Only a boundary that contains the devices doing the work** has per-token figures (tokens per
   kW, J/token: ``accounting.boundaries`` rule 10). On a GPU server that is ``accelerator``,
   ``node``, ``cluster``, ``wall``, ``facility`` — never the HBM rail (``accelerator_memory``) and
   never ``cpu``, ``dram`` or ``host``, which leave the GPUs out; on a CPU-only machine ``cpu``,
   ``host`` and the outer boundaries.
2. **Measured before declared before estimate** (the boundary's label; across several runs, the
   least trustworthy label any level has).
3. **A whole boundary before a part** (``WHOLE_BOUNDARIES``: accelerator, host, node, cluster, wall,
   facility — what someone buys power for). A part (``cpu``) is the headline only where no whole
   boundary that contains the work has a label as good (a CPU machine with a measured RAPL
   package and an estimated host).
4. **Outer before inner**: the wider boundary is the one that is paid for (a wall meter's figure
   before the GPU board's, where both are measured).
5. **A boundary equal to another is shown once** (``shown_boundaries``): two boundaries built from the
   same channels with the same energy (``host`` = the ``cpu`` estimate when dram is not metered; a
   ``cluster`` of GPU-only nodes = their ``accelerator``) are one figure. The whole one is kept, and
   of two whole ones the inner, which names what was metered.

The boundaries without per-token figures are **parts** (``parts(level)``): each is shown with its
power and its share of the smallest shown whole boundary that contains it ("memory 59.5 W, 22% of
the board"); a part no measured boundary contains (the host of a GPU server without a node meter)
has no share, and ``server_lower_bound`` sums the metered parts of the server (accelerator + host),
labelled as a lower bound of its draw.

The value (``point(level, name, boundary)``)
-------------------------------------------
A level measured with ``--trials N`` keeps its last trial's detailed figures; every headline,
compare point and regress value is **the trials' mean**, with the CI beside it (``trial_ci``).
Without trials, the level's own figure.

``level_key(level)``: (mode, target) used to pair levels of two runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from wattbench.accounting.boundaries import WHOLE_BOUNDARIES, contains_work
from wattbench.core.schema import BoundaryEnergy, FigureKey, LevelResult, TrialFigure
from wattbench.metrics.trials import rel_half_width as interval_rel_half_width
from wattbench.telemetry.base import BOUNDARIES, CONTAINS

LABEL_RANK = {"measured": 0, "declared": 1, "estimate": 2}
_ORDER = {b: i for i, b in enumerate(BOUNDARIES)}
# figures read from a boundary's energy, in table order (the trials block keys them name@boundary)
ENERGY_FIGURES = (
    "avg_power_w",
    "max_power_w",
    "idle_power_w",
    "energy_j",
    "dynamic_energy_j",
    "j_per_output_token",
    "j_per_token",
    "output_tokens_per_s_per_kw",
    "tokens_per_kwh",
    "output_tokens_per_kwh",
    "cost_per_million_output_tokens",
    "goodput_per_kw",  # output tok/s of requests meeting --slo, per kW at the boundary (goodput.per_kw)
    "carbon_g_per_million_output_tokens",  # with --carbon-intensity (metrics/carbon.py)
    "carbon_g_per_request",
    "carbon_g",
)
BOUNDARY_FIGURES = frozenset(ENERGY_FIGURES)


def boundary_order(names: Iterable[str]) -> list[str]:
    """Boundaries inner to outer (``BOUNDARIES`` order), unknown names after, alphabetically."""
    names = set(names)
    known = [b for b in BOUNDARIES if b in names]
    return known + sorted(names - set(known))


def is_whole(boundary: str) -> bool:
    return boundary in WHOLE_BOUNDARIES


def _same(a: BoundaryEnergy, b: BoundaryEnergy) -> bool:
    """Two boundaries that are one figure: the same channels and the same energy."""
    if not a.channels or sorted(a.channels) != sorted(b.channels):
        return False
    if a.energy_j is None or b.energy_j is None:
        return a.energy_j is None and b.energy_j is None
    return math.isclose(a.energy_j, b.energy_j, rel_tol=1e-9, abs_tol=1e-9)


def same_as(energy: Mapping[str, BoundaryEnergy]) -> dict[str, str]:
    """Boundary -> the boundary it is shown as (rule 5), for each boundary not shown."""
    keep_first = sorted(energy, key=lambda b: (not is_whole(b), _ORDER.get(b, len(_ORDER)), b))
    kept: list[str] = []
    out: dict[str, str] = {}
    for b in keep_first:
        twin = next((k for k in kept if _same(energy[k], energy[b])), None)
        if twin is None:
            kept.append(b)
        else:
            out[b] = twin
    return out


def shown_boundaries(energy: Mapping[str, BoundaryEnergy]) -> list[str]:
    """The boundaries a report shows, inner to outer, each figure once (rule 5)."""
    hidden = same_as(energy)
    return [b for b in boundary_order(energy) if b not in hidden]


def per_token(boundary: str, energy: Mapping[str, BoundaryEnergy]) -> bool:
    """Whether ``boundary`` has per-token figures (rule 1)."""
    return contains_work(boundary, energy)


def _rank(boundary: str, label: str | None) -> tuple[int, bool, int, str]:
    return (LABEL_RANK.get(label or "", 3), not is_whole(boundary), -_ORDER.get(boundary, -1), boundary)


def headline_boundary(level: LevelResult) -> str | None:
    """The boundary a level's headline quotes (rules 1–5); ``None`` when no shown boundary with energy
    contains the work."""
    shown = [b for b in shown_boundaries(level.energy) if per_token(b, level.energy)]
    if not shown:
        return None
    return min(shown, key=lambda b: _rank(b, level.energy[b].label))


def common_headline_boundary(levels: Iterable[LevelResult], among: Iterable[str] | None = None,
                             with_power: bool = True) -> str | None:
    """The headline rule over several levels (of one or more runs): of the boundaries every level
    has an average power for and that contain the work in every level, the best by the least
    trustworthy label any level gives it, then whole before part, then outer before inner. Used where
    runs are read side by side: compare, regress, tune, plan. ``among``: only these boundaries (the
    planners size a node at ``accelerator``, ``node`` or ``wall``); ``with_power=False``: a boundary
    counts without an average power (the planners read its percentiles)."""
    levels = list(levels)
    allowed = None if among is None else set(among)
    common: set[str] | None = None
    worst: dict[str, int] = {}
    for lv in levels:
        def ok(b: str, lv: LevelResult = lv) -> bool:
            return per_token(b, lv.energy) and (not with_power or lv.energy[b].avg_power_w is not None)

        have = {b for b in shown_boundaries(lv.energy) if ok(b)}
        # a boundary this level shows under its twin's name still counts for it
        have |= {b for b, twin in same_as(lv.energy).items() if twin in have and ok(b)}
        if allowed is not None:
            have &= allowed
        common = have if common is None else common & have
        for b in have:
            worst[b] = max(worst.get(b, 0), LABEL_RANK.get(lv.energy[b].label, 3))
    if not common:
        return None
    names = sorted(common, key=lambda b: (worst[b], not is_whole(b), -_ORDER.get(b, -1), b))
    # of twins (one figure under two names), the one the levels show
    first = levels[0] if levels else None
    if first is not None:
        hidden = same_as(first.energy)
        names = [b for b in names if b not in hidden or hidden[b] not in common] or names
    return names[0]


def measured_boundaries(level: LevelResult) -> list[str]:
    """Boundaries with an average power figure, inner to outer."""
    found = [b for b, e in level.energy.items() if e.avg_power_w is not None]
    return sorted(found, key=lambda b: (_ORDER.get(b, len(_ORDER)), b))


# ---------------------------------------------------------------- parts


@dataclass(frozen=True)
class Part:
    """A boundary without per-token figures, shown as a part: its power and its share of ``of``."""

    boundary: str
    avg_power_w: float | None
    of: str | None  # the smallest shown whole boundary with a power that contains it
    share: float | None  # avg_power_w / of's avg_power_w (0..1)


def parts(level: LevelResult) -> list[Part]:
    """The level's shown boundaries that have no per-token figures, inner to outer, each with its
    share of the smallest shown whole boundary that contains it (rule 5 and the module docstring)."""
    e = level.energy
    shown = shown_boundaries(e)
    out = []
    for b in shown:
        if per_token(b, e):
            continue
        p = e[b].avg_power_w
        holders = [w for w in shown if w != b and b in CONTAINS.get(w, frozenset()) and e[w].avg_power_w]
        of = min(holders, key=lambda w: _ORDER.get(w, len(_ORDER))) if holders else None
        of_w = e[of].avg_power_w if of else None
        share = p / of_w if (p is not None and of_w) else None
        out.append(Part(b, p, of, share))
    return out


def server_lower_bound(level: LevelResult) -> tuple[float, list[str]] | None:
    """(watts, boundaries summed) of the server's metered disjoint wholes (``accelerator`` + ``host``,
    both measured) when no node, wall or cluster boundary was measured: a lower bound of the server's draw (fans,
    PSU losses and the rest are not in it). None when it would not add to what is shown."""
    e = level.energy
    if any(b in e for b in ("node", "wall", "cluster", "facility")):
        return None
    used = {b: w for b in ("accelerator", "host")
            if b in e and (w := e[b].avg_power_w) is not None and e[b].label == "measured"}
    if len(used) < 2:
        return None
    return sum(used.values()), list(used)


# ---------------------------------------------------------------- the value: a trial mean


def _num(v: object) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return None


@dataclass(frozen=True)
class TrialCI:
    """Mean and confidence interval of one figure over trials."""

    mean: float
    low: float
    high: float
    n: int | None = None
    confidence: float | None = None

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    @property
    def rel_half_width(self) -> float:
        """The noise the interval stands for, read the one way every noise rule reads it
        (``metrics.trials.rel_half_width``): its log half-width ``ln(high / low) / 2`` (the
        interval of a positive figure is built on the log scale), ``half_width / |mean|`` where the
        low end is not positive; infinite where undefined."""
        h = interval_rel_half_width(self.mean, self.low, self.high)
        return float("inf") if h is None else h


def trial_entry(level: LevelResult, name: str, boundary: str | None) -> TrialFigure | None:
    """The trials block's entry for a figure (``name@boundary`` for a boundary figure), or None."""
    block = level.trials
    if block is None:
        return None
    return FigureKey.at(name, boundary, BOUNDARY_FIGURES).lookup(block.figures)


def trial_ci(level: LevelResult, name: str, boundary: str | None) -> TrialCI | None:
    """The trials CI of a figure, or None when the level has no trials block (or no CI) for it."""
    entry = trial_entry(level, name, boundary)
    if entry is None:
        return None
    mean, lo, hi = _num(entry.mean), _num(entry.ci_low), _num(entry.ci_high)
    hw = _num(entry.ci_half_width)
    if (lo is None or hi is None) and mean is not None and hw is not None:
        lo, hi = mean - hw, mean + hw
    if mean is None or lo is None or hi is None or hi < lo:
        return None
    block = level.trials
    if block is None:  # never: trial_entry found an entry in it
        return None
    n = entry.n if entry.n is not None else block.n
    conf = entry.confidence if entry.confidence is not None else block.confidence
    return TrialCI(mean=mean, low=lo, high=hi, n=n, confidence=conf)


def trial_mean(level: LevelResult, name: str, boundary: str | None) -> float | None:
    """The trials' mean of a figure (None without trials, or when no trial had it)."""
    entry = trial_entry(level, name, boundary)
    return None if entry is None else _num(entry.mean)


def point(level: LevelResult, name: str, boundary: str | None, own: float | None) -> float | None:
    """The value a headline, compare or regress quotes for a figure: the trials' mean when the level
    has trials (``own``, the level's last-trial figure, otherwise)."""
    if level.trials is not None and level.trials.n > 1:
        m = trial_mean(level, name, boundary)
        if m is not None:
            return m
    return own


# ---------------------------------------------------------------- matching levels


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
