"""Sweeps over load levels: fixed ladders, ``--sweep auto``, ``--optimize`` and over-saturation.

The orchestrator runs the levels; these functions only decide which level to run next. A
``measure(value) -> LevelFigures`` callback runs one real level (concurrency N or rate R) and
returns its figures (``metrics/level_figures.py``: each figure a named field, an objective read by
its name). A level whose figures say ``oversaturated`` counts as past the knee. A level whose
figures carry ``failed`` (why no measured request completed) is a *failed* level, not a missing one: the sweep stops there (the knee is the level before) and the
search scores it −∞ like an SLO-breaking level (past the peak); both list it in ``failed``.

``auto_sweep`` — doubling: measure ``start, 2·start, 4·start, …`` until a doubling raises
throughput by less than ``min_gain`` (default 10%), the level over-saturates, or ``max_value`` is
reached. The *knee* is the last level whose doubling still paid; the sweep spans from ``start`` to
the first level past the knee (all of them already measured: no level is run twice).

``optimize`` — the level with the best objective (default ``goodput_per_kw``) among sorted
``candidates`` that meets every SLO, measuring as few levels as it can. Efficiency typically rises
with load until latency breaks an SLO (or the server saturates and efficiency flattens or falls),
so the objective over the candidate index is treated as unimodal, with SLO-breaking levels scored
−∞ (they lie past the peak):

1. exponential bracket over candidate *indices* 0, 1, 3, 7, 15, … until the score falls (or the
   level breaks an SLO);
2. if the score was still rising at the last level that met the SLOs and the next probe missed
   them, the optimum sits at the SLO boundary: bisect *in value space* between the two (geometric
   midpoints while the gap is more than 2×, arithmetic after) until they are within ``tolerance``
   (5%) of each other, or one stream apart for concurrency — the SLO-bounded optimum, not the best
   power of two (as GuideLLM's goodput profile does);
3. otherwise golden-section search over the integer indices of the bracket, reusing measured
   levels, then the same boundary bisection if the best level's upper neighbour missed the SLOs;
4. the best measured level that meets the SLOs wins.

If the lowest candidate already misses the SLOs the search stops there (latency only grows
with load): one level, no result — how ``wattbench tune`` prunes a configuration.

A 1..256 power-of-two ladder against a server whose SLO breaks just above 48 streams measures
1, 2, 8, 128, 32, 64, 45, 54, 49, 47: ten levels, and returns 47 (2% under the boundary).
For a ladder of m candidates this measures about 2·log2(m) levels instead of m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypedDict


from wattbench.core.errors import UserError
from wattbench.metrics.level_figures import LevelFigures
from wattbench.metrics.slo import SLO, figures_meet

Figures = LevelFigures
Measure = Callable[[float], Figures]
Objective = Callable[[Figures], "float | None"]

REFINE_TOLERANCE = 0.05  # --optimize refines to within 5% of the SLO boundary
MAX_REFINE_STEPS = 8  # levels the refinement may add to the ladder's own


def ladder(kind: str, values: Sequence[float] | str) -> list[tuple[str, float]]:
    """A fixed ladder ``[(kind, value), ...]`` in the order given. ``values`` may be ``"1,8,64"``."""
    if kind not in ("concurrency", "rate"):
        raise UserError(f"unknown sweep kind {kind!r}; use concurrency or rate")
    if isinstance(values, str):
        items = [v.strip() for v in values.split(",") if v.strip()]
        try:
            values = [float(v) for v in items]
        except ValueError:
            raise UserError(f"invalid {kind} list {values!r}: expected numbers like 1,8,64") from None
    if not values:
        raise UserError(f"empty {kind} ladder")
    out: list[tuple[str, float]] = []
    for v in values:
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise UserError(f"{kind} must be > 0, got {v!r}")
        if kind == "concurrency":
            if v != int(v):
                raise UserError(f"concurrency must be a whole number, got {v!r}")
            v = int(v)
        out.append((kind, v))
    return out


class FailedLevel(TypedDict):
    """A measured level that failed (no measured request completed), and why."""

    value: float
    reason: str


@dataclass
class SearchResult:
    """What a sweep or search measured and chose."""

    best_value: float | None
    best_figures: Figures | None
    measured: list[tuple[float, Figures]] = field(default_factory=list)  # in measurement order
    reason: str = ""
    knee_value: float | None = None

    @property
    def failed(self) -> list[FailedLevel]:
        """The measured levels that failed (no measured request completed), with the reason."""
        return [{"value": v, "reason": f.failed} for v, f in self.measured if f.failed]

    @property
    def n_measured(self) -> int:
        return len(self.measured)

    def to_dict(self, objective: str | None = None) -> dict[str, object]:
        d: dict[str, object] = {"best_value": self.best_value, "knee_value": self.knee_value, "reason": self.reason,
             "measured_values": [v for v, _ in self.measured], "n_measured": self.n_measured,
             "failed": self.failed}
        if objective:
            d["objective"] = objective
            d["scores"] = [f.get(objective) for _, f in self.measured]
        return d


def auto_sweep(measure: Measure, start: int = 1, max_value: int = 1024, *, min_gain: float = 0.10,
               metric: str = "output_tokens_per_s", factor: int = 2) -> SearchResult:
    """Double the level until throughput stops growing (see the module docstring)."""
    if start < 1 or max_value < start:
        raise UserError(f"auto sweep needs 1 <= start <= max, got start={start} max={max_value}")
    if factor < 2:
        raise UserError(f"auto sweep factor must be >= 2, got {factor}")
    measured: list[tuple[float, Figures]] = []
    prev_tp: float | None = None
    knee: float | None = None
    v = start
    reason = f"reached the maximum level {max_value}"
    while True:
        fig = measure(v)
        measured.append((v, fig))
        tp = fig.get(metric)
        if fig.failed:
            reason = f"level {v:g} failed: {fig.failed}"
            knee = measured[-2][0] if len(measured) > 1 else None
            break
        if fig.oversaturated:
            reason = f"level {v} over-saturated (queue growing without bound)"
            knee = measured[-2][0] if len(measured) > 1 else v
            break
        if tp is None:
            raise UserError(f"the level at {v} returned no {metric!r}; cannot judge throughput growth")
        if prev_tp is not None and tp < prev_tp * (1.0 + min_gain):
            gain = (tp / prev_tp - 1.0) if prev_tp > 0 else 0.0
            reason = f"throughput grew {gain:+.1%} from {measured[-2][0]:g} to {v:g} (< {min_gain:.0%})"
            knee = measured[-2][0]
            break
        prev_tp = tp
        if v >= max_value:
            knee = v
            break
        v = min(v * factor, max_value)
    ok = [m for m in measured if not m[1].failed]
    if not ok:
        return SearchResult(None, None, measured, reason=reason, knee_value=None)
    best_v, best_f = max(ok, key=lambda m: m[1].get(metric) or -math.inf)
    return SearchResult(best_value=best_v, best_figures=best_f, measured=measured, reason=reason, knee_value=knee)


def _objective_fn(objective: str | Objective) -> Objective:
    """A level's score: ``objective`` called, or the figure it names (``LevelFigures``; None for a
    name that is not a figure). ``goodput_per_kw`` is read at the boundary the figures were read at
    (``run/plan.search_figures``: the level's headline boundary), never another."""
    if callable(objective):
        return objective
    return lambda f: f.get(objective)


def feasible_score(fig: Figures, objective: str | Objective, slos: list[SLO] | None) -> float | None:
    """A level's objective, or None when it misses an SLO, over-saturates, fails or has none."""
    s = _objective_fn(objective)(fig)
    if s is None or not math.isfinite(s) or fig.oversaturated or fig.failed:
        return None
    if slos and not figures_meet(fig, slos):
        return None
    return float(s)


class _Scores:
    """The optimiser's memory: each value measured once, in order, scored (−∞ for a level that
    misses an SLO, over-saturates, fails or gives no objective), within a budget of measurements
    (past it, an unmeasured value scores −∞ without being measured)."""

    def __init__(self, measure: Measure, objective: Objective, slos: list[SLO] | None, cands: list[float],
                 budget: int):
        self.measure, self.objective, self.slos, self.cands, self.budget = measure, objective, slos, cands, budget
        self.by_value: dict[float, float] = {}
        self.measured: list[tuple[float, Figures]] = []

    def budget_left(self) -> bool:
        return len(self.measured) < self.budget

    def value(self, v: float) -> float:
        if v in self.by_value:
            return self.by_value[v]
        if not self.budget_left():
            return -math.inf
        fig = self.measure(v)
        self.measured.append((v, fig))
        s = feasible_score(fig, self.objective, self.slos)
        self.by_value[v] = s if s is not None else -math.inf
        return self.by_value[v]

    def index(self, i: int) -> float:
        return self.value(self.cands[i])


def optimize(measure: Measure, candidates: Sequence[float], objective: str | Objective = "goodput_per_kw",
             slos: list[SLO] | None = None, *, max_measurements: int | None = None, refine: bool = True,
             tolerance: float = REFINE_TOLERANCE, integer: bool | None = None) -> SearchResult:
    """The level with the best objective that meets every SLO (see the module docstring).

    ``refine`` bisects between the best level that meets the SLOs and the first level above it
    that misses them, off the candidate ladder, until the two are within ``tolerance`` (relative)
    of each other — or one step apart when ``integer`` (concurrency; default: every candidate is
    a whole number)."""
    cands = sorted(set(candidates))
    if not cands:
        raise UserError("optimize needs at least one candidate level")
    if not 0 < tolerance < 1:
        raise UserError(f"optimize tolerance must be between 0 and 1, got {tolerance}")
    if integer is None:
        integer = all(float(c) == int(c) for c in cands)
    budget = max_measurements if max_measurements is not None else len(cands) + (MAX_REFINE_STEPS if refine else 0)
    sc = _Scores(measure, _objective_fn(objective), slos, cands, budget)
    probes = _bracket(sc, stop_at_first_miss=bool(slos))
    _search_bracket(sc, probes, refine, tolerance, integer)
    return _best(sc, slos)


def _bracket(sc: _Scores, stop_at_first_miss: bool) -> list[int]:
    """Step 1: probe candidate indices 0, 1, 3, 7, … until the score falls or the ladder ends;
    only the lowest level when it already misses the SLOs (no higher load meets them)."""
    m = len(sc.cands)
    probes: list[int] = []
    k = 0
    while True:
        i = min((1 << k) - 1, m - 1)
        probes.append(i)
        s = sc.index(i)
        if len(probes) == 1 and s == -math.inf and stop_at_first_miss:
            break
        if len(probes) >= 2 and s < sc.index(probes[-2]):
            break
        if i == m - 1:
            break
        k += 1
    return probes


def _search_bracket(sc: _Scores, probes: list[int], refine: bool, tolerance: float, integer: bool) -> None:
    """Steps 2 and 3: bisect straight to the SLO boundary when the score still rose up to the
    first probe that missed the SLOs; otherwise golden-section search inside the bracket, then
    the boundary bisection above the best level if its upper neighbour missed them."""
    last_missed = sc.index(probes[-1]) == -math.inf
    rising = len(probes) >= 2 and all(sc.index(a) <= sc.index(b) for a, b in zip(probes[:-2], probes[1:-1]))
    if refine and last_missed and rising and sc.index(probes[-2]) > -math.inf:
        _bisect_boundary(sc.value, sc.cands[probes[-2]], sc.cands[probes[-1]], tolerance, integer, sc.budget_left)
        return
    _golden_indices(sc.index, probes, len(sc.cands), sc.budget_left)
    if not refine:
        return
    feasible = sorted(v for v, s in sc.by_value.items() if s > -math.inf)
    if feasible:
        best = max(feasible, key=lambda v: (sc.by_value[v], -v))
        above = [v for v in sorted(sc.by_value) if v > best]
        if above and sc.by_value[above[0]] == -math.inf:
            _bisect_boundary(sc.value, best, above[0], tolerance, integer, sc.budget_left)


def _best(sc: _Scores, slos: list[SLO] | None) -> SearchResult:
    """Step 4: the best measured level that meets the SLOs (the lower of equal scores)."""
    measured = sc.measured
    feasible = [(s, v) for v, s in sc.by_value.items() if s > -math.inf]
    if not feasible:
        failed = [f"{v:g}" for v, f in measured if f.failed]
        why = "no measured level meets the SLOs" if slos else "no measured level produced the objective"
        if failed:
            why += f" (failed levels: {', '.join(failed)})"
        return SearchResult(None, None, measured, reason=why)
    best_s, best_v = max(feasible, key=lambda t: (t[0], -t[1]))
    best_fig = next(f for v, f in measured if v == best_v)
    return SearchResult(best_v, best_fig, measured, reason=measured_text(len(measured), sc.cands, measured))


def measured_text(n: int, cands: Sequence[float], measured: Sequence[tuple[float, object]]) -> str:
    """``best of 7 measured levels: 5 of the 6 candidates and 2 refined between them`` — the parts add
    up to the whole (a past defect: "best of 7 measured levels (6 candidates, 2 refined)" did not)."""
    on = sum(1 for v, _ in measured if v in set(cands))
    off = n - on
    return (f"best of {n} measured level{'s' if n != 1 else ''}: {on} of the {len(cands)} candidates"
            + (f" and {off} refined between them" if off else ""))


def _golden_indices(score: Callable[[int], float], probes: list[int], m: int,
                    budget_left: Callable[[], bool]) -> None:
    """Golden-section search over the candidate indices bracketed by the exponential probes."""
    last = probes[-1]
    if len(probes) == 1:
        lo, hi = 0, 0
    elif last == m - 1 and score(last) >= score(probes[-2]):
        lo, hi = probes[-2], m - 1  # still rising at the last candidate
    else:
        lo = probes[-3] if len(probes) >= 3 else 0
        hi = last
    invphi = (math.sqrt(5) - 1) / 2
    while hi - lo > 2 and budget_left():
        a = hi - int(round(invphi * (hi - lo)))
        b = lo + int(round(invphi * (hi - lo)))
        if a >= b:
            a, b = (lo + hi) // 2, (lo + hi) // 2 + 1
        fa, fb = score(a), score(b)
        if fa == -math.inf and fb == -math.inf:  # -inf regions lie past the peak: move left
            hi = a - 1 if a - 1 >= lo else lo
            continue
        if fa >= fb:
            hi = b - 1 if fa > fb else b
        else:
            lo = a + 1
    for i in range(lo, hi + 1):
        score(i)


def _bisect_boundary(score_v: Callable[[float], float], lo: float, hi: float, tolerance: float, integer: bool,
                     budget_left: Callable[[], bool]) -> None:
    """Bisect between ``lo`` (meets the SLOs) and ``hi`` (misses them, or scores lower) until they
    are within ``tolerance`` of each other (one step apart for whole numbers). Geometric midpoints:
    the gap often spans orders of magnitude, and the tolerance is relative."""
    while budget_left():
        if integer and hi - lo <= 1:
            return
        if hi - lo <= tolerance * hi:  # the boundary lies in [lo, hi): lo is within tolerance of it
            return
        mid = math.sqrt(lo * hi)
        if integer:
            mid = float(int(round(mid)))
            mid = min(max(mid, lo + 1), hi - 1)
            mid = int(mid)
            if not lo < mid < hi:  # no whole number strictly between (bounds off the integers)
                return
        s = score_v(mid)
        if s > -math.inf and s >= score_v(lo):
            lo = mid
        else:
            hi = mid
