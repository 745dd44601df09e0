"""Turning a measured run into planning inputs: node power at a percentile, throughput, goodput, latency.

This is the one place planners read ``Result`` objects. Conventions:

* Power comes from ``level.energy[boundary]`` (the level's full measurement window), at ``p95`` or
  ``p99`` of the sampled power. At the ``accelerator`` boundary the figure is the sum over the
  measured devices (``BoundaryEnergy.devices``); a node's power is then
  ``figure / devices × gpus_per_node + host overhead``, where the host overhead is the declared
  ``host_overhead_w`` or, when none is declared, the same percentile measured at the ``host``
  boundary of the same level, or 0 with a warning. At the ``node`` and ``wall`` boundaries the
  figure already covers the whole node and is used as is.
* Throughput and goodput (``level.goodput.output_tokens_per_s``) are scaled by
  ``gpus_per_node / devices`` when the node has more accelerators than were measured (independent
  replicas assumed; a warning says so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from wattbench.config.plan import DEFAULT_PERCENTILE
from wattbench.core.errors import UserError
from wattbench.metrics.slo import run_slo_text
from wattbench.results.headline import common_headline_boundary, point
from wattbench.results.rundir import load_result as _load_run
from wattbench.core.schema import BoundaryEnergy, LevelResult, Result, TunedFrom
from wattbench.results.tune import is_tune_dir, load_tune

NODE_BOUNDARIES = ("accelerator", "node", "wall")
PERCENTILES = ("p95", "p99", "max", "avg")


def load_run_or_tune(path: str | Path) -> Result:
    """Load a run directory (or its ``result.json``), or a ``wattbench tune`` directory.

    A tune directory gives its recommended configuration: that trial's run, reduced to the load
    level the tune chose (so plans use the tuned configuration at its tuned load). A run directory
    is read by the one results loader, ``wattbench.results.rundir.load_result``.
    """
    if is_tune_dir(path):
        return _tuned_result(path)
    return _load_run(path)


def _tuned_result(path: str | Path) -> Result:
    t = load_tune(path)
    rec = t.recommended
    if not rec:
        raise UserError(f"tune {path} has no recommended configuration (no trial met the SLO); nothing to plan with")
    tr = t.trials[rec.trial]
    if not tr.run_dir:
        raise UserError(f"tune {path}: the recommended trial has no run directory")
    run = Path(tr.run_dir)
    if not run.is_absolute() and not run.exists():
        run = Path(path).expanduser() / "trials" / run.name
    res = load_run_or_tune(run)
    idx = tr.figures.level_index
    chosen = [lv for lv in res.levels if lv.index == idx]
    if not chosen:
        raise UserError(f"tune {path}: level {idx} of the recommended trial is missing from {run}")
    res.levels = chosen
    res.tune = TunedFrom(tune_id=t.tune_id, trial=tr.index, label=tr.label, config=tr.config)
    return res


def result_name(result: Result) -> str:
    gpu = result.environment.gpus[0].name if result.environment.gpus else None
    parts = [p for p in (result.server.model, gpu) if p]
    return " / ".join(parts) + f" ({result.run_id})" if parts else result.run_id


def get_level(result: Result, index: int) -> LevelResult:
    for lv in result.levels:
        if lv.index == index:
            return lv
    if 0 <= index < len(result.levels):
        return result.levels[index]
    have = ", ".join(str(lv.index) for lv in result.levels) or "none"
    raise UserError(f"run {result.run_id} has no level {index}; levels: {have}")


def level_name(level: LevelResult) -> str:
    """``c=16`` / ``r=4/s``: a level named as the reports name it (the stored label for a trace)."""
    ld = level.load
    if ld.mode == "concurrency" and ld.target_concurrency is not None:
        return f"c={ld.target_concurrency}"
    if ld.mode == "rate" and ld.target_rate_rps is not None:
        return f"r={ld.target_rate_rps:g}/s"
    return level.label


def choose_level(result: Result, usable: list[LevelResult], key: Callable[[LevelResult], float], what: str) -> tuple[LevelResult, str]:
    """The level a planner reads when ``--level`` is not given, and one line naming it and why.

    Of the ``usable`` levels (those with the planner's figure, not ``invalid``): when the run has an
    SLO, the best by ``key`` among those that met it (``goodput.all_met``); when none met it, the
    best by ``key`` of all, and the line says it misses the SLO (with the share of requests that met
    it). Without an SLO, the best by ``key``. ``what`` names the figure: ``"highest throughput"``."""
    slo = run_slo_text(result)
    if slo is None:
        lv = max(usable, key=key)
        return lv, f"run {result.run_id}: level {level_name(lv)} ({what}; the run has no SLO)"
    met = [lv for lv in usable if lv.goodput is not None and lv.goodput.all_met]
    if met:
        lv = max(met, key=key)
        return lv, f"run {result.run_id}: level {level_name(lv)} ({what} among the levels meeting {slo})"
    lv = max(usable, key=key)
    frac = lv.goodput.fraction if lv.goodput is not None else None
    share = f", {100 * frac:.1f}% of its requests met it" if frac is not None else ""
    return lv, (f"run {result.run_id}: {MISSES_SLO} {slo}; using level {level_name(lv)} ({what}), which misses "
                f"it{share}: pass --level to choose another")


MISSES_SLO = "no level meets"


def choice_is_warning(why: str) -> bool:
    """Whether ``choose_level``'s line is a warning (the level it took misses the run's SLO) rather
    than information (which level a planner read and why)."""
    return f": {MISSES_SLO} " in why


def boundary_power_w(level: LevelResult, boundary: str, percentile: str) -> float | None:
    """A level's power at ``boundary``: ``avg`` as the answer quotes it (the trials' mean with
    ``--trials``: ``results.headline.point``); ``p95``, ``p99`` and ``max`` are kept per measurement
    only, so the level's own (its last measuring trial's)."""
    be = level.energy.get(boundary)
    if be is None:
        return None
    if percentile == "avg":
        return point(level, "avg_power_w", boundary, be.avg_power_w)
    return {
        "p95": be.p95_power_w,
        "p99": be.p99_power_w,
        "max": be.max_power_w,
    }[percentile]


def output_tokens_per_s(level: LevelResult) -> float:
    """A level's output tokens/s as the answer quotes it (the trials' mean with ``--trials``)."""
    v = point(level, "output_tokens_per_s", None, level.throughput.output_tokens_per_s)
    return float(level.throughput.output_tokens_per_s if v is None else v)


def goodput_tokens_per_s(level: LevelResult) -> float | None:
    """A level's goodput output tokens/s as the answer quotes it; None without an SLO."""
    if level.goodput is None or level.goodput.output_tokens_per_s is None:
        return None
    v = point(level, "goodput_output_tokens_per_s", None, level.goodput.output_tokens_per_s)
    return None if v is None else float(v)


@dataclass
class MeasuredNode:
    """One level of one run seen as a node: its power and what it delivers."""

    name: str
    run_id: str
    level_index: int
    level_label: str
    boundary: str
    percentile: str
    node_power_w: float
    gpus: int
    accelerator_w: float | None  # per accelerator, when measured at the accelerator boundary
    host_overhead_w: float | None
    output_tokens_per_s: float | None  # None: not known (nameplate node without a figure)
    goodput_output_tokens_per_s: float | None
    verdict: str
    power_source: str
    warnings: list[str] = field(default_factory=list)  # what may make the plan wrong
    notes: list[str] = field(default_factory=list)  # information: which level was read and why


def planning_boundary(result: Result) -> str:
    """The boundary every planner (``plan rack``, ``plan power-first``, ``plan tco``) reads when
    ``--boundary`` is not given: the headline rule (``results.headline``: measured first, then outer
    first, never a part) among the boundaries that size a node (wall, node, accelerator), over every
    level of the run; else over the levels that have one. A run with none of them fails naming the
    flag and what the run has."""
    levels = [lv for lv in result.levels if lv.energy]
    b = common_headline_boundary(levels, among=NODE_BOUNDARIES, with_power=False)
    if b is None:  # one that some level has
        some = [lv for lv in levels if set(lv.energy) & set(NODE_BOUNDARIES)]
        found = {common_headline_boundary([lv], among=NODE_BOUNDARIES, with_power=False) for lv in some} - {None}
        b = min(found, key=NODE_BOUNDARIES[::-1].index) if found else None
    if b is not None:
        return b
    have = set().union(*(set(lv.energy) for lv in levels)) if levels else set()
    raise UserError(
        f"run {result.run_id} has no energy at the wall, node or accelerator boundary "
        f"(boundaries with energy: {', '.join(sorted(have)) or 'none'}); measure one, or give --boundary"
    )


def power_source_text(be: BoundaryEnergy, percentile: str, boundary: str, power_w: float) -> str:
    """How a node power figure was obtained, in words that never call a declared power measured."""
    if be.label == "measured":
        return f"measured {percentile} at {boundary}"
    return f"{be.label} {power_w:.0f} W at {boundary} (not a measured {percentile})"


def check_boundary_percentile(boundary: str, percentile: str) -> None:
    if boundary not in NODE_BOUNDARIES:
        raise UserError(f"boundary {boundary!r} cannot size a node; use one of {', '.join(NODE_BOUNDARIES)}")
    if percentile not in PERCENTILES:
        raise UserError(f"percentile {percentile!r} is not supported; use one of {', '.join(PERCENTILES)}")


def measured_node(
    result: Result,
    level: int | None = None,
    boundary: str | None = None,
    percentile: str = DEFAULT_PERCENTILE,
    gpus_per_node: int | None = None,
    host_overhead_w: float | None = None,
    name: str | None = None,
) -> MeasuredNode:
    """Node power and delivery for one level (default: :func:`choose_level` — the highest output
    throughput among the valid levels meeting the run's SLO) at ``boundary`` (default:
    :func:`planning_boundary`). The first of ``notes`` names the level and why it was taken (of
    ``warnings`` when the level misses the run's SLO: ``choice_is_warning``)."""
    boundary = boundary or planning_boundary(result)
    check_boundary_percentile(boundary, percentile)
    if host_overhead_w is not None and host_overhead_w < 0:
        raise UserError(f"host overhead {host_overhead_w} W is negative; give 0 or more")
    if gpus_per_node is not None and gpus_per_node < 1:
        raise UserError(f"gpus per node must be at least 1, got {gpus_per_node}")
    warnings: list[str] = []
    notes: list[str] = []
    if level is None:
        usable = [lv for lv in result.levels if boundary_power_w(lv, boundary, percentile) is not None]
        if not usable:
            raise UserError(_no_power_msg(result, boundary, percentile))
        valid = [lv for lv in usable if lv.validity.verdict != "invalid"] or usable
        lv, why = choose_level(result, valid, output_tokens_per_s, "highest throughput")
        (warnings if choice_is_warning(why) else notes).append(why)
    else:
        lv = get_level(result, level)
        notes.append(f"run {result.run_id}: level {level_name(lv)} (--level {level})")
    power = boundary_power_w(lv, boundary, percentile)
    if power is None:
        raise UserError(_no_power_msg(result, boundary, percentile, lv))
    if power <= 0:
        raise UserError(f"run {result.run_id} level {lv.index}: {percentile} power at {boundary} is {power} W (not positive)")
    be = lv.energy[boundary]
    if be.label != "measured":
        warnings.append(f"{boundary} power of run {result.run_id} is {be.label}, not measured")
    if boundary == "accelerator":
        measured = len(be.devices) or len(result.environment.gpus) or 1
        gpus = gpus_per_node or measured
        per_acc = power / measured
        if host_overhead_w is not None:
            host = host_overhead_w
            host_src = f"declared host {host:g} W"
        else:
            hp = boundary_power_w(lv, "host", percentile)
            if hp is not None:
                host = hp
                hb = lv.energy["host"]
                host_src = (f"measured host {percentile} {host:.0f} W" if hb.label == "measured"
                            else f"{hb.label} host {host:.0f} W")
            else:
                host = 0.0
                host_src = "no host overhead"
                warnings.append(
                    f"run {result.run_id}: node power counts accelerators only (no host measurement and no "
                    "--host-overhead-w); rack density is overstated"
                )
        node_w = per_acc * gpus + host
        acc = (f"measured {percentile} accelerator" if be.label == "measured"
               else f"{be.label} accelerator (not a measured {percentile})")
        src = f"{acc} {per_acc:.0f} W × {gpus} + {host_src}"
    else:
        # a run on a machine without GPUs sized a node without GPUs: 0, not 1 (the rack shows none)
        measured = len(result.environment.gpus)
        gpus = gpus_per_node or measured
        per_acc = None
        host = None
        node_w = power
        src = power_source_text(be, percentile, boundary, power)
        if gpus_per_node is not None and gpus_per_node != measured:
            raise UserError(
                f"run {result.run_id} was measured at the {boundary} boundary with {measured} GPUs; "
                "a different --gpus-per-node needs the accelerator boundary"
            )
    scale = gpus / measured if measured else 1.0  # a node without GPUs is the node as measured
    if scale != 1:
        warnings.append(
            f"run {result.run_id}: measured on {measured} accelerators, scaled to {gpus} per node "
            "(assumes independent replicas)"
        )
    goodput = goodput_tokens_per_s(lv)
    if lv.trials is not None and lv.trials.n > 1:
        notes.append(f"run {result.run_id}: level {level_name(lv)}'s throughput is the mean of its "
                     f"{lv.trials.n} trials, as its answer quotes it")
    return MeasuredNode(
        name=name or result_name(result),
        run_id=result.run_id,
        level_index=lv.index,
        level_label=lv.label,
        boundary=boundary,
        percentile=percentile,
        node_power_w=node_w,
        gpus=gpus,
        accelerator_w=per_acc,
        host_overhead_w=host,
        output_tokens_per_s=output_tokens_per_s(lv) * scale,
        goodput_output_tokens_per_s=None if goodput is None else float(goodput) * scale,
        verdict=lv.validity.verdict,
        power_source=src,
        warnings=warnings,
        notes=notes,
    )


def _no_power_msg(result: Result, boundary: str, percentile: str, lv: LevelResult | None = None) -> str:
    levels = [lv] if lv is not None else result.levels
    have = sorted({b for x in levels for b, e in x.energy.items()})
    where = f"level {lv.index}" if lv is not None else "any level"
    return (
        f"run {result.run_id} has no {percentile} power at the {boundary} boundary in {where}"
        f" (boundaries with energy: {', '.join(have) or 'none'}); choose --boundary from those"
    )
