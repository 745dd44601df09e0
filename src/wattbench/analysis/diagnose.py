"""Diagnosis rules from field practice, over a (baseline, candidate) pair.

Each rule looks at one matched pair of load levels (or, for version changes, at the two runs)
and returns a :class:`Diagnosis` when it fires: an id, a severity, one sentence saying what it
means and where to look, and the figures it fired on. ``compare`` and ``regress`` run every rule
and store the findings with their output. The thresholds below are the documented ones
(``docs/compare.md``); each is a module constant so a test or a caller can see what fired.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel, Field

from wattbench.analysis.figures import reported_figures, throttle_reasons
from wattbench.core.schema import LevelResult, Result
from wattbench.core.severity import Severity


# throughput counts as "up"/"down" beyond this relative change
THROUGHPUT_CHANGE = 0.02
# efficiency_not_improved: power rose by at least this much more (relative) than throughput
POWER_OUTPACES_MARGIN = 0.0
# throughput_and_power_down: both fell by more than this, and tokens per kW did not improve by
# more than BOTH_DOWN_MAX_GAIN (a platform that does 95% of the work at half the power is a win)
BOTH_DOWN = 0.05
BOTH_DOWN_MAX_GAIN = 0.10
# data_movement_bound: mean GPU utilization below this (%) while board power is at least
# HIGH_POWER_FRACTION of the power limit
LOW_UTILIZATION_PCT = 60.0
HIGH_POWER_FRACTION = 0.7
# latency_up_queue_growing: a p99 latency rose more than this and the mean waiting queue rose by
# more than QUEUE_GROWTH (relative) and by at least QUEUE_MIN_ABS requests
LATENCY_UP = 0.20
QUEUE_GROWTH = 0.5
QUEUE_MIN_ABS = 1.0
# client CPU (% of one core) at or above this marks the client as a suspect
CLIENT_CPU_HIGH_PCT = 85.0
# j_per_token_follows_power: J/output token moved by more than this (relative) while throughput
# stayed within THROUGHPUT_CHANGE, and power moved the same way by at least half as much
J_MOVE = 0.02
# failures_rising: failed share rose by at least this many percentage points
FAILED_PP = 1.0
# packages whose version change is reported
WATCHED_PACKAGES = ("torch", "vllm", "sglang", "transformers", "tensorrt_llm", "flash_attn", "flashinfer",
                    "nvidia-ml-py", "triton", "llama_cpp", "text-generation-inference")


class Diagnosis(BaseModel):
    """What one rule found comparing two runs: its ``id``, a severity on the one scale
    (``core.severity``: ``note``, ``warn``, ``invalid``), one sentence and the figures behind it."""

    id: str
    severity: Severity
    message: str
    level: str | None = None  # the matched level's label; None for run-wide findings
    evidence: dict[str, Any] = Field(default_factory=dict)


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return b / a - 1.0


def _fmt_pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _power_limit_w(result: Result) -> float | None:
    lims = [g.power_limit_w for g in result.environment.gpus if g.power_limit_w]
    return float(sum(lims)) if lims else None


def _thermal_evidence(level: LevelResult) -> dict[str, Any]:
    return {
        "sm_clock_mhz": level.thermal.mean_sm_clock_mhz,
        "sm_clock_min_mhz": level.thermal.min_sm_clock_mhz,
        "max_temp_c": level.thermal.max_temperature_c,
        "throttle_reasons": throttle_reasons(level),
    }


LevelRule = Callable[[Result, LevelResult, Result, LevelResult, str | None], "Diagnosis | None"]


def rule_efficiency_not_improved(ra: Result, a: LevelResult, rb: Result, b: LevelResult, boundary: str | None) -> Diagnosis | None:
    fa, fb = reported_figures(a, boundary), reported_figures(b, boundary)
    t = _rel(fa["output_tokens_per_s"], fb["output_tokens_per_s"])
    p = _rel(fa["avg_power_w"], fb["avg_power_w"])
    if t is None or p is None or t <= THROUGHPUT_CHANGE:
        return None
    if (1 + p) <= (1 + t) * (1 + POWER_OUTPACES_MARGIN):
        return None
    per_kw = (1 + t) / (1 + p)
    return Diagnosis(
        id="efficiency_not_improved", severity=Severity.WARN, level=b.label,
        message=(f"throughput {_fmt_pct(t)} but power {_fmt_pct(p)} at {boundary}: tokens per kW "
                 f"{_fmt_pct(per_kw - 1)} — the extra throughput was bought with more than proportional power"),
        evidence={"throughput_change": t, "power_change": p, "per_kw_ratio": per_kw, "boundary": boundary,
                  "output_tokens_per_s": [fa["output_tokens_per_s"], fb["output_tokens_per_s"]],
                  "avg_power_w": [fa["avg_power_w"], fb["avg_power_w"]]},
    )


def rule_throughput_and_power_down(ra: Result, a: LevelResult, rb: Result, b: LevelResult, boundary: str | None) -> Diagnosis | None:
    fa, fb = reported_figures(a, boundary), reported_figures(b, boundary)
    t = _rel(fa["output_tokens_per_s"], fb["output_tokens_per_s"])
    p = _rel(fa["avg_power_w"], fb["avg_power_w"])
    if t is None or p is None or not (t < -BOTH_DOWN and p < -BOTH_DOWN):
        return None
    per_kw = (1 + t) / (1 + p)
    if per_kw > 1 + BOTH_DOWN_MAX_GAIN:
        return None
    ta, tb = _thermal_evidence(a), _thermal_evidence(b)
    la, lb = _power_limit_w(ra), _power_limit_w(rb)
    hints = []
    if tb["throttle_reasons"]:
        hints.append("throttle reasons " + ", ".join(tb["throttle_reasons"]))
    if ta["sm_clock_mhz"] and tb["sm_clock_mhz"] and tb["sm_clock_mhz"] < ta["sm_clock_mhz"] * 0.95:
        hints.append(f"SM clock {ta['sm_clock_mhz']:.0f} -> {tb['sm_clock_mhz']:.0f} MHz")
    if la and lb and lb < la:
        hints.append(f"power limit {la:.0f} -> {lb:.0f} W")
    where = "; ".join(hints) if hints else "no throttle reason or clock drop recorded — check the power cap and pstate"
    return Diagnosis(
        id="throughput_and_power_down", severity=Severity.INVALID, level=b.label,
        message=(f"throughput {_fmt_pct(t)} and power {_fmt_pct(p)}: the GPU did less work, not the same work "
                 f"cheaper — look for a low-power state, clock throttling or a power cap ({where})"),
        evidence={"throughput_change": t, "power_change": p, "per_kw_ratio": per_kw, "boundary": boundary,
                  "baseline_thermal": ta, "candidate_thermal": tb,
                  "power_limit_w": [la, lb]},
    )


def rule_data_movement_bound(ra: Result, a: LevelResult, rb: Result, b: LevelResult, boundary: str | None) -> Diagnosis | None:
    util = b.thermal.mean_gpu_utilization_pct
    acc = b.energy.get("accelerator")
    limit = _power_limit_w(rb)
    if util is None or acc is None or acc.avg_power_w is None or not limit:
        return None
    frac = acc.avg_power_w / limit
    if util >= LOW_UTILIZATION_PCT or frac < HIGH_POWER_FRACTION:
        return None
    return Diagnosis(
        id="data_movement_bound", severity=Severity.WARN, level=b.label,
        message=(f"GPU utilization {util:.0f}% with board power at {frac * 100:.0f}% of its limit: power is going "
                 "into data movement (memory/interconnect), not compute — check batch size, KV-cache traffic "
                 "and tensor-parallel communication"),
        evidence={"gpu_utilization_pct": util, "accelerator_power_w": acc.avg_power_w, "power_limit_w": limit,
                  "power_fraction": frac},
    )


def rule_latency_up_queue_growing(ra: Result, a: LevelResult, rb: Result, b: LevelResult, boundary: str | None) -> Diagnosis | None:
    fa, fb = reported_figures(a, boundary), reported_figures(b, boundary)
    ups = {}
    for name in ("ttft_p99_ms", "e2e_p99_ms", "tpot_p99_ms"):
        r = _rel(fa[name], fb[name])
        if r is not None and r > LATENCY_UP:
            ups[name] = r
    wa, wb = fa["mean_waiting"], fb["mean_waiting"]
    if not ups or wb is None:
        return None
    wa0 = wa or 0.0
    grew = (wb - wa0) >= QUEUE_MIN_ABS and (wa0 == 0 or wb / wa0 - 1 > QUEUE_GROWTH)
    if not grew:
        return None
    cpu = b.load.client_cpu_pct
    client_bound = b.load.saturated or (cpu is not None and cpu >= CLIENT_CPU_HIGH_PCT)
    which = ", ".join(f"{k} {_fmt_pct(v)}" for k, v in ups.items())
    cause = (f"the client is saturated (CPU {cpu:.0f}% of a core) — CPU preprocessing bound"
             if client_bound and cpu is not None else
             "batch limits (max running sequences / batched tokens) may be set too high, or request "
             "preprocessing (tokenization, templating) is CPU bound")
    return Diagnosis(
        id="latency_up_queue_growing", severity=Severity.WARN, level=b.label,
        message=(f"latency up ({which}) while the server queue grew: waiting {wa0:.1f} -> {wb:.1f}, running "
                 f"{(fa['mean_running'] or 0):.1f} -> {(fb['mean_running'] or 0):.1f}; {cause}"),
        evidence={"latency_change": ups, "mean_waiting": [wa, wb], "mean_running": [fa["mean_running"],
                  fb["mean_running"]], "client_cpu_pct": [a.load.client_cpu_pct, cpu],
                  "client_saturated": b.load.saturated},
    )


def rule_j_per_token_follows_power(ra: Result, a: LevelResult, rb: Result, b: LevelResult, boundary: str | None) -> Diagnosis | None:
    """J/token moved with power while throughput held: the same work at another power draw — a
    clock, power-limit, thermal or co-tenant change, not the engine's work per token."""
    fa, fb = reported_figures(a, boundary), reported_figures(b, boundary)
    j = _rel(fa["j_per_output_token"], fb["j_per_output_token"])
    p = _rel(fa["avg_power_w"], fb["avg_power_w"])
    t = _rel(fa["output_tokens_per_s"], fb["output_tokens_per_s"])
    if j is None or p is None or t is None or abs(j) <= J_MOVE or abs(t) > THROUGHPUT_CHANGE:
        return None
    if p * j <= 0 or abs(p) < 0.5 * abs(j):
        return None
    ta, tb = _thermal_evidence(a), _thermal_evidence(b)
    la, lb = _power_limit_w(ra), _power_limit_w(rb)
    hints = []
    if ta["sm_clock_mhz"] and tb["sm_clock_mhz"] and abs(tb["sm_clock_mhz"] / ta["sm_clock_mhz"] - 1) > 0.02:
        hints.append(f"SM clock {ta['sm_clock_mhz']:.0f} -> {tb['sm_clock_mhz']:.0f} MHz")
    if ta["max_temp_c"] and tb["max_temp_c"] and abs(tb["max_temp_c"] - ta["max_temp_c"]) >= 5:
        hints.append(f"max temperature {ta['max_temp_c']:.0f} -> {tb['max_temp_c']:.0f} °C")
    if la and lb and la != lb:
        hints.append(f"power limit {la:.0f} -> {lb:.0f} W")
    if tb["throttle_reasons"]:
        hints.append("throttle reasons " + ", ".join(tb["throttle_reasons"]))
    where = "; ".join(hints) if hints else ("no clock, limit or temperature change recorded — check other processes "
                                            "on the board, its idle power and the power state")
    worse = j > 0
    return Diagnosis(
        id="j_per_token_follows_power", severity=Severity.WARN if worse else Severity.NOTE, level=b.label,
        message=(f"J/output token {_fmt_pct(j)} moved with power {_fmt_pct(p)} at {boundary} while throughput held "
                 f"({_fmt_pct(t)}): the same work at {'more' if worse else 'less'} power, not a change in the "
                 f"work per token ({where})"),
        evidence={"j_per_output_token_change": j, "power_change": p, "throughput_change": t, "boundary": boundary,
                  "baseline_thermal": ta, "candidate_thermal": tb, "power_limit_w": [la, lb]},
    )


def rule_failures_rising(ra: Result, a: LevelResult, rb: Result, b: LevelResult, boundary: str | None) -> Diagnosis | None:
    fa, fb = reported_figures(a, boundary), reported_figures(b, boundary)
    pa, pb = fa["failed_pct"] or 0.0, fb["failed_pct"]
    if pb is None or b.requests.failed == 0 or pb - pa < FAILED_PP:
        return None
    errs = ", ".join(f"{k}: {v}" for k, v in sorted(b.requests.errors.items())) or "no error classes recorded"
    return Diagnosis(
        id="failures_rising", severity=Severity.INVALID, level=b.label,
        message=(f"failed requests {pa:.1f}% -> {pb:.1f}% ({errs}); per-token figures count only completed "
                 "requests, so efficiency looks better than the service was"),
        evidence={"failed_pct": [pa, pb], "failed": [a.requests.failed, b.requests.failed],
                  "errors": dict(b.requests.errors)},
    )


LEVEL_RULES: tuple[LevelRule, ...] = (
    rule_efficiency_not_improved,
    rule_throughput_and_power_down,
    rule_data_movement_bound,
    rule_latency_up_queue_growing,
    rule_j_per_token_follows_power,
    rule_failures_rising,
)


def _drivers(r: Result) -> list[str]:
    return sorted({g.driver for g in r.environment.gpus if g.driver})


def rule_versions_changed(ra: Result, rb: Result) -> list[Diagnosis]:
    out = []
    da, db = _drivers(ra), _drivers(rb)
    if da and db and da != db:
        out.append(Diagnosis(id="driver_changed", severity=Severity.NOTE,
                           message=f"GPU driver changed: {', '.join(da)} -> {', '.join(db)}",
                           evidence={"driver": [da, db]}))
    ea, eb = (ra.server.engine, ra.server.version), (rb.server.engine, rb.server.version)
    if (ea[0] or ea[1]) and (eb[0] or eb[1]) and ea != eb:
        out.append(Diagnosis(id="engine_changed", severity=Severity.NOTE,
                           message=f"engine changed: {ea[0]} {ea[1]} -> {eb[0]} {eb[1]}",
                           evidence={"engine": [ea[0], eb[0]], "version": [ea[1], eb[1]]}))
    pa, pb = ra.environment.packages, rb.environment.packages
    changed = {k: [pa.get(k), pb.get(k)] for k in sorted(set(pa) | set(pb))
               if k in WATCHED_PACKAGES and pa.get(k) != pb.get(k) and (pa.get(k) or pb.get(k))}
    if changed:
        desc = ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in changed.items())
        out.append(Diagnosis(id="packages_changed", severity=Severity.NOTE, message=f"packages changed: {desc}",
                           evidence={"packages": changed}))
    return out


def diagnose_levels(ra: Result, a: LevelResult, rb: Result, b: LevelResult, boundary: str | None) -> list[Diagnosis]:
    """Run every level rule over one matched pair of levels (a = baseline, b = candidate)."""
    out = []
    for rule in LEVEL_RULES:
        f = rule(ra, a, rb, b, boundary)
        if f is not None:
            out.append(f)
    return out


def diagnose(baseline: Result, candidate: Result, pairs: list[tuple[LevelResult, LevelResult]],
             boundary: str | None) -> list[Diagnosis]:
    """Run-wide findings first, then each matched level's."""
    out = rule_versions_changed(baseline, candidate)
    for a, b in pairs:
        out.extend(diagnose_levels(baseline, a, candidate, b, boundary))
    return out


RULE_IDS = ("efficiency_not_improved", "throughput_and_power_down", "data_movement_bound",
            "latency_up_queue_growing", "j_per_token_follows_power", "failures_rising", "driver_changed", "engine_changed", "packages_changed")
