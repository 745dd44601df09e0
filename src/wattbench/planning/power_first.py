"""Power-first design: the mix of measured platforms and load levels that maximizes goodput under a power cap.

Every level of every candidate run is an *option*: a node operating at that level, with its power
(p95/p99 at the chosen boundary, see ``wattbench.planning.measured``) and what it delivers (measured
goodput in output tokens/s where the run computed goodput under SLOs, else output throughput).
With an SLO, levels whose latency percentiles break it, and levels whose validity verdict is
``invalid``, are left out.

Choosing how many nodes of each option to deploy so that total power ≤ budget and total goodput is
maximal is an unbounded integer knapsack. It is solved exactly by dynamic programming over power in
units of ``resolution_w``: each option's power is rounded **up** to whole units (so every plan is
feasible at its true power), the budget down. Per option the DP update
``best[c] = max_k best[c − k·w] + k·v`` is vectorized as a running maximum per residue class
(O(budget units) numpy work per option, no Python loop over capacity). A final greedy top-up adds
nodes, best goodput-per-watt first, while their *true* power still fits, recovering what rounding
left unused. With ``resolution_w`` no larger than the options' power granularity (1 W for integer
watts) the result is exactly optimal; by default the resolution is 1 W up to a 200 kW budget and grows
so the DP stays at ≤ 200,000 cells (10 MW → 50 W, at most one node's worth of rounding per option).

The budget is ``site_kw × 1000 × (1 − headroom_pct / 100)``: the headroom is kept unallocated.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence
from pathlib import Path

import numpy as np

from wattbench.config.plan import DEFAULT_PERCENTILE, DEFAULT_SITE_HEADROOM_PCT
from wattbench.core.errors import UserError
from wattbench.core.numbers import fmt
from wattbench.planning.measured import (
    boundary_power_w,
    check_boundary_percentile,
    planning_boundary,
    measured_node,
    result_name,
)
from wattbench.core.schema import LevelResult, Result
from wattbench.metrics.slo import parse_slos
from wattbench.planning.measured import load_run_or_tune

MAX_DP_CELLS = 200_000

_SLO_RE = re.compile(r"^(ttft|tpot|itl|e2e)_(p50|p90|p95|p99|mean|max)_ms$")


@dataclass(frozen=True)
class LatencyLimits:
    """Latency limits in ms, keyed ``<metric>_<stat>_ms``: e.g. ``{"ttft_p95_ms": 500, "tpot_p95_ms": 50}``."""

    limits: dict[str, float]

    def __post_init__(self) -> None:
        if not self.limits:
            raise UserError("an SLO needs at least one limit, e.g. ttft_p95_ms=500")
        for k, v in self.limits.items():
            if not _SLO_RE.match(k):
                raise UserError(
                    f"SLO key {k!r} is not <metric>_<stat>_ms with metric ttft|tpot|itl|e2e and "
                    "stat p50|p90|p95|p99|mean|max (e.g. ttft_p95_ms=500)"
                )
            if not v > 0:
                raise UserError(f"SLO {k}={v} must be a positive number of ms")

    def check(self, level: LevelResult) -> list[str]:
        """Reasons the level breaks the SLO (empty = meets it)."""
        broken: list[str] = []
        for k, limit in self.limits.items():
            metric, stat, _ = k.split("_")
            value = getattr(getattr(level.latency, f"{metric}_ms"), stat)
            if value is None:
                broken.append(f"{metric} {stat} not measured")
            elif value > limit:
                broken.append(f"{metric} {stat} {value:.1f} ms > {limit:g} ms")
        return broken


def parse_slo(text: str | None) -> LatencyLimits | None:
    """``ttft_p95=500ms,tpot_p95=50ms`` (the ``--slo`` grammar of every command,
    :func:`wattbench.metrics.slo.parse_slos`) -> SLO; empty -> None."""
    slos = parse_slos(text)
    if not slos:
        return None
    return LatencyLimits({f"{s.metric}_{s.stat}_ms": s.threshold_ms for s in slos})


@dataclass
class Candidate:
    result: Result
    boundary: str | None = None  # None: planning.measured.planning_boundary of the run
    name: str | None = None
    gpus_per_node: int | None = None
    host_overhead_w: float | None = None


@dataclass
class Option:
    name: str
    run_id: str
    level_index: int
    level_label: str
    node_power_w: float
    value_output_tokens_per_s: float  # goodput where measured, else throughput
    value_kind: str  # goodput | throughput
    output_tokens_per_s: float
    power_source: str


@dataclass
class Allocation:
    option: Option
    nodes: int
    power_w: float
    value_output_tokens_per_s: float
    output_tokens_per_s: float


@dataclass
class PowerFirstPlan:
    site_kw: float
    headroom_pct: float
    budget_w: float
    percentile: str
    slo: dict[str, float] | None
    resolution_w: float
    allocations: list[Allocation]
    total_power_w: float
    total_value_output_tokens_per_s: float
    total_output_tokens_per_s: float
    unallocated_w: float  # site power left unused (headroom + remainder)
    options: list[Option]
    excluded: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _as_candidate(c: Candidate | Result | tuple[Result, str]) -> Candidate:
    if isinstance(c, Candidate):
        return c
    if isinstance(c, Result):
        return Candidate(result=c)
    if isinstance(c, tuple) and len(c) == 2 and isinstance(c[0], Result):
        return Candidate(result=c[0], boundary=c[1])
    raise TypeError(f"not a candidate: {c!r}")


def collect_options(
    candidates: Sequence[Candidate | Result | tuple[Result, str]],
    percentile: str = DEFAULT_PERCENTILE,
    slo: LatencyLimits | None = None,
    host_overhead_w: float | None = None,
) -> tuple[list[Option], list[str], list[str]]:
    """Every usable (candidate, level) as an option; plus why others were left out, and warnings."""
    options: list[Option] = []
    excluded: list[str] = []
    warnings: list[str] = []
    for raw in candidates:
        c = _as_candidate(raw)
        if c.boundary is None:
            c.boundary = planning_boundary(c.result)
        check_boundary_percentile(c.boundary, percentile)
        base = c.name or result_name(c.result)
        for lv in c.result.levels:
            where = f"{base} level {lv.index} ({lv.label})"
            if lv.validity.verdict == "invalid":
                excluded.append(f"{where}: invalid measurement ({'; '.join(lv.validity.reasons) or 'no reason given'})")
                continue
            if boundary_power_w(lv, c.boundary, percentile) is None:
                excluded.append(f"{where}: no {percentile} power at the {c.boundary} boundary")
                continue
            if slo is not None:
                broken = slo.check(lv)
                if broken:
                    excluded.append(f"{where}: breaks the SLO ({'; '.join(broken)})")
                    continue
            m = measured_node(
                c.result, level=lv.index, boundary=c.boundary, percentile=percentile,
                gpus_per_node=c.gpus_per_node,
                host_overhead_w=c.host_overhead_w if c.host_overhead_w is not None else host_overhead_w,
                name=base,
            )
            for w in m.warnings:
                if w not in warnings:
                    warnings.append(w)
            if m.goodput_output_tokens_per_s is not None:
                value, kind = m.goodput_output_tokens_per_s, "goodput"
            else:
                value, kind = float(m.output_tokens_per_s or 0.0), "throughput"
            if value <= 0:
                excluded.append(f"{where}: delivers no {kind}")
                continue
            options.append(Option(
                name=base, run_id=c.result.run_id, level_index=lv.index, level_label=lv.label,
                node_power_w=m.node_power_w, value_output_tokens_per_s=value, value_kind=kind,
                output_tokens_per_s=float(m.output_tokens_per_s or 0.0), power_source=m.power_source,
            ))
    return options, excluded, warnings


def knapsack_max_value(
    weights_w: Sequence[float], values: Sequence[float], budget_w: float, resolution_w: float
) -> list[int]:
    """Unbounded knapsack: counts per item maximizing Σ value with Σ ceil(w/res)·res ≤ budget.

    Exact for the rounded weights. See the module docstring for the vectorized update.
    """
    cap = int(math.floor(budget_w / resolution_w + 1e-9))
    best = np.zeros(cap + 1)
    take = np.full(cap + 1, -1, dtype=np.int32)
    units = [max(1, int(math.ceil(w / resolution_w - 1e-9))) for w in weights_w]
    for i, (u, v) in enumerate(zip(units, values)):
        if u > cap or v <= 0:
            continue
        rows = -(-(cap + 1) // u)
        padded = np.full(rows * u, -np.inf)
        padded[: cap + 1] = best
        grid = padded.reshape(rows, u)  # grid[j, r] = best[r + j·u]
        j = np.arange(rows, dtype=float)[:, None] * v
        # candidate[j] = max_{k<j} grid[k] + (j−k)·v  (at least one item i taken)
        shifted = np.vstack([np.full((1, u), -np.inf), grid[:-1] - j[:-1]])
        cand = (np.maximum.accumulate(shifted, axis=0) + j).reshape(-1)[: cap + 1]
        improved = cand > best + 1e-12 * np.maximum(1.0, np.abs(best))
        best = np.where(improved, cand, best)
        take[improved] = i
    counts = [0] * len(units)
    c = cap
    while c >= 0 and take[c] >= 0:
        i = int(take[c])
        counts[i] += 1
        c -= units[i]
    return counts


def power_first(
    site_kw: float,
    candidates: Sequence[Candidate | Result | tuple[Result, str]],
    slo: LatencyLimits | dict[str, float] | None = None,
    headroom_pct: float = DEFAULT_SITE_HEADROOM_PCT,
    percentile: str = DEFAULT_PERCENTILE,
    host_overhead_w: float | None = None,
    resolution_w: float | None = None,
) -> PowerFirstPlan:
    """Maximize goodput (output tokens/s) under ``site_kw`` minus the headroom."""
    if site_kw <= 0:
        raise UserError(f"site power {site_kw} kW must be positive")
    if not 0 <= headroom_pct < 100:
        raise UserError(f"headroom {headroom_pct}% must be at least 0 and below 100")
    if not candidates:
        raise UserError("no candidates: give at least one --candidates RESULT")
    if isinstance(slo, dict):
        slo = LatencyLimits(slo)
    budget = site_kw * 1000.0 * (1 - headroom_pct / 100.0)
    options, excluded, warnings = collect_options(candidates, percentile, slo, host_overhead_w)
    fitting = []
    for o in options:
        if o.node_power_w > budget:
            excluded.append(f"{o.name} level {o.level_index}: one node ({o.node_power_w:.0f} W) exceeds the budget")
        else:
            fitting.append(o)
    if not fitting:
        raise UserError(
            "no candidate level fits: " + ("; ".join(excluded) if excluded else "the candidates have no levels")
        )
    if resolution_w is None:
        resolution_w = max(1.0, math.ceil(budget / MAX_DP_CELLS))
    elif resolution_w <= 0:
        raise UserError(f"resolution {resolution_w} W must be positive")
    counts = knapsack_max_value(
        [o.node_power_w for o in fitting], [o.value_output_tokens_per_s for o in fitting], budget, resolution_w
    )
    power = sum(n * o.node_power_w for n, o in zip(counts, fitting))
    # greedy top-up with true powers, best value per watt first
    order = sorted(range(len(fitting)), key=lambda i: -fitting[i].value_output_tokens_per_s / fitting[i].node_power_w)
    for i in order:
        extra = int(math.floor((budget - power) / fitting[i].node_power_w + 1e-9))
        if extra > 0:
            counts[i] += extra
            power += extra * fitting[i].node_power_w
    allocations = [
        Allocation(option=o, nodes=n, power_w=n * o.node_power_w,
                   value_output_tokens_per_s=n * o.value_output_tokens_per_s,
                   output_tokens_per_s=n * o.output_tokens_per_s)
        for o, n in zip(fitting, counts) if n > 0
    ]
    allocations.sort(key=lambda a: -a.value_output_tokens_per_s)
    for o, n in zip(fitting, counts):  # every option the plan gives no node is named, with why
        if n == 0:
            per_kw = o.value_output_tokens_per_s / (o.node_power_w / 1000.0)
            excluded.append(f"{o.name} level {o.level_index} ({o.level_label}): fits, but not chosen: the budget "
                            f"buys more {o.value_kind} with the levels above ({fmt(per_kw)} {o.value_kind} "
                            "tok/s per node kW here)")
    kinds = {o.value_kind for o in fitting}
    if len(kinds) > 1:
        warnings.append("some candidates report goodput and others only throughput: the totals mix the two")
    return PowerFirstPlan(
        site_kw=site_kw, headroom_pct=headroom_pct, budget_w=budget, percentile=percentile,
        slo=dict(slo.limits) if slo else None, resolution_w=resolution_w, allocations=allocations,
        total_power_w=power,
        total_value_output_tokens_per_s=sum(a.value_output_tokens_per_s for a in allocations),
        total_output_tokens_per_s=sum(a.output_tokens_per_s for a in allocations),
        unallocated_w=site_kw * 1000.0 - power, options=fitting, excluded=excluded, warnings=warnings,
    )


CANDIDATE_KEYS = {"run": str, "boundary": str, "name": str, "gpus": int, "host_overhead_w": float}


def parse_candidate_arg(text: str, boundary: str | None = None) -> Candidate:
    """A ``--candidates`` value: a run directory, or ``run=DIR,boundary=node,name=X,gpus=8``."""
    t = text.strip()
    if "=" not in t or Path(t).expanduser().exists():
        return Candidate(result=load_run_or_tune(t), boundary=boundary)
    kw: dict[str, Any] = {}
    for item in t.split(","):
        if not item.strip():
            continue
        if "=" not in item:
            raise UserError(f"--candidates {text!r}: {item!r} is not key=value")
        k, v = (s.strip() for s in item.split("=", 1))
        if k not in CANDIDATE_KEYS:
            raise UserError(f"--candidates {text!r}: unknown key {k!r}; use {', '.join(CANDIDATE_KEYS)}")
        try:
            kw[k] = CANDIDATE_KEYS[k](v)
        except ValueError:
            raise UserError(f"--candidates {text!r}: {k}={v!r} is not a valid {CANDIDATE_KEYS[k].__name__}") from None
    if "run" not in kw:
        raise UserError(f"--candidates {text!r}: give a run directory or run=DIR,…")
    return Candidate(result=load_run_or_tune(kw["run"]), boundary=kw.get("boundary", boundary), name=kw.get("name"),
                     gpus_per_node=kw.get("gpus"), host_overhead_w=kw.get("host_overhead_w"))
