"""Validity findings of a window and a level's load: ``note`` | ``estimate`` | ``warn`` | ``invalid``, each a
typed ``core.schema.Finding`` naming the figures it biases (``accounting/findings.py`` turns them
into the level's efficiency and latency verdicts; the worst finding of a family wins).

==========================================  ===========================  ====================
rule                                        warn                         invalid
==========================================  ===========================  ====================
coverage (per boundary)                     < 0.95                       < 0.80
largest gap                                 > 1 s                        —
counter resets in the window                any                          —
counter vs power integral, worst device     |diff| > 5 %                 |diff| > 15 %
window length in meter update periods       < 10                         < 3
no energy for a boundary that has channels  always                       —
every boundary with the work is estimated   ``estimate`` (its basis and  —
                                            uncertainty): no meter
sensor read failures in the window          any                          —
power/thermal capping bits (0x4 0x8 0x20    any sample                   —
0x40 0x80) in clock-event reasons
ITL gaps of 0 (chunks read in bunches)      note: percentiles unmeasured —
client event-loop lag (``client_findings``) effect on the latencies it   —
                                            stamps >= 5 % (note below)
open-loop send lag, not held by a cap       p99 > max(5 ms, 10 % of the  —
                                            mean inter-arrival)
--max-concurrency cap holding the rate      note (a cap, never           —
                                            saturation)
client worker CPU > 90 % of a core          note (its effect is the      —
                                            loop lag's)
achieved vs target rate (open loop)         |diff| > 10 % and outside    —
                                            the arrival draw's 99 %
                                            range (metrics/saturation.py)
token source not ``usage``/``tokenizer``    approximate                  —
no steady state (target never reached)      always                       —
steady state shorter than min_steady_s      yes                          —
steady state < 50 % of the full window      yes                          —
steady vs full avg power or J/output token  |diff| > 15 %                —
==========================================  ===========================  ====================

A finding about a boundary that does not contain the devices doing the work
(``boundaries.contains_work``: the board's memory rail, the host of a GPU server) is a ``note``: it
has no per-token figures, and the figures of the boundaries that do are not affected.

Why these thresholds: below 80 % coverage a fifth of the window's energy is interpolated, more
than any meter's error; 5 % is NVML's stated accuracy, so a counter/integral disagreement beyond it
is more than the meters' own error, and beyond 15 % one of the two is not measuring the same thing.
A window shorter than 10 update periods carries up to 20 % edge error (one period each edge); under
3 periods the figure is mostly edge. A rate off its target by more than 10 % *and* more than the arrival
process itself scatters for that many requests means the load was not the one asked for (a
15-request Poisson level at 4/s drawing 2.8/s is the draw, not the client).
Client timing is judged by its effect (docs/accounting.md §9): the event loop's lag p99 is how
late a stamp can be, against the TTFT p50 and the ITL p99 it stamps (latency bound
``findings.LATENCY_MATERIAL_PCT``) and against the window it bounds (efficiency: the duration is off by at most one lag, always
far below ``findings.EFFICIENCY_MATERIAL_PCT`` for windows of seconds). TPOT telescopes (a
request's mean gap: the lag enters once over all its tokens) and is not judged.
The steady-state rules (:func:`steady_findings`; minimum in ``accounting.steady.min_steady_s``):
a short steady state is mostly edge and ramp; past 15 % between the steady and the full window
(three times NVML's stated accuracy) the full-window figure describes the ramp and drain more
than the load level (docs/accounting.md §1, the H200 example).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from wattbench.accounting.findings import (
    EFFICIENCY_MATERIAL_PCT,
    LATENCY_MATERIAL_PCT,
    Finding,
    judged,
    rule,
    verdicts,
)
from wattbench.accounting.boundaries import BoundaryTotal, contains_work
from wattbench.accounting.steady import SIZE_MARGIN, STEADY_MIN_SHARE, min_steady_s, steady_energy_periods
from wattbench.accounting.thermal import throttling
from wattbench.metrics.saturation import (
    RATE_WARN_PCT,
    SAT_CPU_PCT,
    SAT_LAG_FLOOR_MS,
    SAT_LAG_FRACTION,
    SAT_LOOP_LAG_MIN_PROBES,
    SAT_LOOP_LAG_MS,
    rate_finding,
)
from wattbench.core.schema import BoundaryEnergy, FindingKind, Latency, LoadStats, Validity, Window
from wattbench.telemetry.base import TelemetryLog

COVERAGE_WARN = 0.95
COVERAGE_INVALID = 0.80
LARGEST_GAP_WARN_S = 1.0
CROSS_WARN_PCT = 5.0
CROSS_INVALID_PCT = 15.0
MIN_PERIODS_WARN = 10.0
MIN_PERIODS_INVALID = 3.0
STEADY_FULL_TOL_PCT = 15.0
# the server's usage or tokenizer per request, or its own token counters over the window (measure)
GOOD_TOKEN_SOURCES = ("usage", "tokenizer", "server_counters")
ENERGY = ("energy", "efficiency")
CLIENT_LATENCY = ("ttft", "itl", "e2e")  # the figures a late stamp biases (TPOT telescopes)
EVERY_FIGURE = ("energy", "efficiency", "throughput", "ttft", "tpot", "itl", "e2e", "goodput", "load")


def _energy(kind: FindingKind, b: str, names: Iterable[str], severity: str, text: str, *, effect_pct: float | None = None,
            summary: str | None = None) -> Finding:
    """An energy finding at boundary ``b`` of the window's boundaries ``names``; one about a
    boundary outside the work (a part, or one without the accelerators) is a note."""
    if not contains_work(b, names) and severity != "note":
        text += " (this boundary does not contain the devices doing the work: no per-token figure of it is shown)"
        severity = "note"
    return rule(kind, severity, text, ENERGY, effect_pct=effect_pct, summary=summary)


def energy_findings(totals: dict[str, BoundaryTotal], duration_s: float) -> list[Finding]:
    """Findings from per-boundary totals (``boundaries.BoundaryTotal``). Composite boundaries
    (host sum, facility × PUE) repeat their parts' findings, so they are skipped."""
    out: list[Finding] = []
    names = list(totals)
    for b, t in totals.items():
        if t.composite:
            continue
        if t.energy_j is None:
            out.append(_energy(FindingKind.NO_ENERGY, b, names, "warn", f"{b}: no energy could be computed "
                                                      f"({'; '.join(t.notes[-1:])})", summary=f"{b}: no energy"))
            continue
        if t.method == "declared":
            continue  # a declared constant is not sampled: coverage and gaps do not apply
        if t.coverage is not None and t.coverage < COVERAGE_WARN:
            sev = "invalid" if t.coverage < COVERAGE_INVALID else "warn"
            bound = COVERAGE_INVALID if sev == "invalid" else COVERAGE_WARN
            out.append(_energy(FindingKind.COVERAGE, b, names, sev, f"{b}: sample coverage {t.coverage:.2f} < {bound}",
                               effect_pct=100.0 * (1 - t.coverage), summary=f"{b}: window not covered by samples"))
        if t.largest_gap_s is not None and t.largest_gap_s > LARGEST_GAP_WARN_S:
            out.append(_energy(FindingKind.GAP, b, names, "warn", f"{b}: largest sample gap {t.largest_gap_s:.2f} s > "
                                                 f"{LARGEST_GAP_WARN_S:g} s", summary=f"{b}: sample gap > 1 s"))
        if t.resets:
            out.append(_energy(FindingKind.COUNTER_RESET, b, names, "warn", f"{b}: energy counter reset {t.resets} time(s) in the "
                                                           "window", summary=f"{b}: energy counter reset"))
        worst_pct = t.cross_check.max_abs_device_diff_pct if t.cross_check is not None else None
        if worst_pct is not None and worst_pct > CROSS_WARN_PCT:
            sev = "invalid" if worst_pct > CROSS_INVALID_PCT else "warn"
            lim = CROSS_INVALID_PCT if sev == "invalid" else CROSS_WARN_PCT
            out.append(_energy(FindingKind.CROSS_CHECK, b, names, sev, f"{b}: counter and power integral disagree by "
                                                      f"{worst_pct:.1f}% (> {lim:g}%)", effect_pct=worst_pct,
                               summary=f"{b}: counter vs power integral"))
        if t.update_period_s > 0 and duration_s > 0:
            n = duration_s / t.update_period_s
            if n < MIN_PERIODS_WARN:
                sev = "invalid" if n < MIN_PERIODS_INVALID else "warn"
                lim = MIN_PERIODS_INVALID if sev == "invalid" else MIN_PERIODS_WARN
                out.append(_energy(FindingKind.SHORT_WINDOW, b, names, sev, f"{b}: window {duration_s:.3g} s is {n:.1f} meter update "
                                                            f"periods (< {lim:g})", effect_pct=200.0 / n,
                                   summary=f"{b}: window of few meter updates"))
    return out


def estimate_findings(totals: dict[str, BoundaryTotal], log: TelemetryLog) -> list[Finding]:
    """One ``estimate`` finding when every boundary that contains the work and has energy is an
    estimate (no meter and no declared constant covers it, so the headline is a model of power):
    its basis — the estimating channels' assumption (``Channel.notes``, else its source) — and its
    uncertainty (the widest of those boundaries'). Its severity makes the verdict ``estimate``
    (``findings.py``): the word ``valid`` is kept for figures a meter gave."""
    names = list(totals)
    work = [t for b, t in totals.items() if t.energy_j is not None and contains_work(b, names)]
    if not work or any(t.label != "estimate" for t in work):
        return []
    bases: list[str] = []
    for t in work:
        for cid in t.channels:
            ch = log.channels.get(cid)
            if ch is not None and ch.method == "estimate":
                basis = ch.notes or ch.source or ch.sensor
                if basis not in bases:
                    bases.append(basis)
    pcts = [t.uncertainty_pct for t in work if t.uncertainty_pct is not None]
    u = max(pcts) if pcts else None
    within = f", ±{u:.0f}%" if u is not None else ""
    basis = "; ".join(bases) or "a model of power"
    return [rule(FindingKind.ESTIMATE, "estimate",
                 f"energy is an estimate, not a measurement ({basis}{within}): every per-kW and per-token figure "
                 "carries that uncertainty; measure it with a meter (--sensor rapl, nvml, ipmi …) or declare a "
                 "wall reading (--sensor const:node=WATTS)",
                 ENERGY, effect_pct=u, basis=basis,
                 # the note renders the uncertainty from effect_pct where {effect} stands (report/notes.py)
                 summary=f"{basis}{', ±{effect}' if u is not None else ''}, not a measurement")]


def failure_findings(log: TelemetryLog, t0: int, t1: int) -> list[Finding]:
    by_sensor: dict[str, list[str]] = {}
    for f in log.failures:
        if t0 <= f.t_ns <= t1:
            by_sensor.setdefault(f.sensor, []).append(f.error)
    return [rule(FindingKind.SENSOR_FAILED, "warn", f"sensor {s} failed {len(errs)} time(s) in the window (first: {errs[0]})",
                 ENERGY, summary=f"sensor {s} failed in the window")
            for s, errs in sorted(by_sensor.items())]


def throttle_findings(log: TelemetryLog, t0: int, t1: int) -> list[Finding]:
    out = []
    for dev, r in sorted(throttling(log, t0, t1).items()):
        if r["capping_reasons"]:
            out.append(rule(FindingKind.CLOCKS_CAPPED, "warn", f"{dev}: clocks capped ({', '.join(r['capping_reasons'])}) in "
                                                     f"{100 * r['capping_fraction']:.0f}% of samples",
                            ("efficiency", "throughput", "ttft", "tpot", "itl", "e2e"),
                            # thermal capping is the ML.ENERGY gate "temperature in range", named as it
                            summary=f"{dev}: clocks capped" + (
                                " (ML.ENERGY gate: temperature in range not met)"
                                if any("thermal" in x for x in r["capping_reasons"]) else "")))
    return out


def load_findings(load: LoadStats | None, token_source: str | None = None, n_requests: int | None = None) -> list[Finding]:
    """Achieved vs target rate (judged against the arrival process's spread for ``n_requests``
    measured arrivals: ``metrics/saturation.py``) and the token source. The client's own timing is
    judged by :func:`client_findings`, which needs the level's latencies."""
    out: list[Finding] = []
    if load is not None:
        why_rate = rate_finding(load, n_requests or 0)
        achieved, target = load.achieved_rate_rps, load.target_rate_rps
        if why_rate and achieved is not None and target is not None:  # rate_finding: both known
            diff = 100.0 * (achieved - target) / target
            out.append(rule(FindingKind.RATE, "warn", why_rate, ("load",), effect_pct=diff,
                            summary="achieved rate off the target {effect:+}"))
    if token_source is not None and token_source not in GOOD_TOKEN_SOURCES:
        out.append(rule(FindingKind.TOKEN_SOURCE, "warn", f"token counts are {token_source}, not from the server's usage or "
                                                "tokenizer", ("throughput", "efficiency"),
                        summary=f"token counts {token_source}"))
    return out


def _pct(part: float, whole: float | None) -> float | None:
    return 100.0 * part / whole if whole and whole > 0 else None


def client_findings(load: LoadStats, latency: Latency | None = None, window_s: float | None = None) -> list[Finding]:
    """The load generator's own timing, judged by what it does to the figures (module docstring):
    the event loop's lag against the latencies it stamps, the open loop's send lag against the
    inter-arrival time (not judged under a ``--max-concurrency`` cap, which holds sends back by
    design and is reported as a cap with the achieved rate), the client's CPU as a note."""
    out: list[Finding] = []
    lag = load.client_loop_lag_ms
    if lag.count >= SAT_LOOP_LAG_MIN_PROBES and lag.p99 is not None and lag.p99 > 0:
        p99 = lag.p99
        against = []
        if latency is not None:
            for name, x in (("TTFT p50", latency.ttft_ms.p50), ("ITL p99", latency.itl_ms.p99)):
                pct = _pct(p99, x)
                if pct is not None:
                    against.append((pct, name, x))
        effect = max(against)[0] if against else None
        if p99 > SAT_LOOP_LAG_MS or (effect is not None and effect >= LATENCY_MATERIAL_PCT):
            parts = [f"{pct:.2g}% of {name} {x:.3g} ms" for pct, name, x in against]
            edges = _pct(p99 / 1e3, window_s)  # the later of the two edges bounds the duration error
            basis = (f"a stamp is late by up to the event loop's lag (p99 {p99:.3g} ms): "
                     + (", ".join(parts) if parts else "no latency to judge it against"))
            if edges is not None:
                basis += (f"; the window's edges {edges:.2g}% of its {window_s:.3g} s (efficiency, "
                          f"throughput: {'material' if edges >= EFFICIENCY_MATERIAL_PCT else 'immaterial'})")
            edges_material = edges is not None and edges >= EFFICIENCY_MATERIAL_PCT
            figures = CLIENT_LATENCY + (("efficiency", "throughput") if edges_material else ())
            text = (f"client event-loop lag p99 {p99:.3g} ms"
                    + (f": up to {effect:.2g}% of the latencies it stamps ({max(against)[1]})" if effect is not None
                       else ""))
            if edges_material and edges is not None:  # a window of a fraction of a second: the efficiency figures too
                out.append(rule(FindingKind.LOOP_LAG, "warn", text + f"; the window's edges {edges:.2g}% of the window",
                                figures, effect_pct=max(effect or 0.0, edges), basis=basis,
                                summary="client loop lag up to {effect} of a latency"))
            else:
                if effect is not None and effect >= LATENCY_MATERIAL_PCT:
                    text += ("; the client waits for a CPU or is busy: give it a quieter host or more --workers"
                             if p99 > SAT_LOOP_LAG_MS else
                             "; an event loop's ordinary jitter, material against gaps this short")
                out.append(judged(FindingKind.LOOP_LAG, text, figures, effect, LATENCY_MATERIAL_PCT, basis=basis,
                                  summary="client loop lag up to {effect} of a latency"))
    if latency is not None and latency.itl_ms.unmeasured:  # chunks read in bunches: percentiles withheld
        out.append(rule(FindingKind.ITL_UNMEASURED, "note", f"ITL percentiles unmeasured: {latency.itl_ms.unmeasured}",
                        ("itl",), summary="ITL percentiles unmeasured (chunks read in bunches)"))
    target = load.target_rate_rps
    capped = load.mode == "rate" and load.max_in_flight is not None
    if capped and target and math.isfinite(target) and load.achieved_rate_rps is not None \
            and load.achieved_rate_rps < target * (1 - RATE_WARN_PCT / 100.0):
        out.append(rule(FindingKind.CAP, "note", f"capped at {load.max_in_flight} in flight (--max-concurrency): achieved "
                                       f"{load.achieved_rate_rps:.3g} req/s of {target:.3g} asked; the level "
                                       f"measures the cap's load", ("load",),
                        effect_pct=100.0 * (load.achieved_rate_rps - target) / target,
                        summary=f"--max-concurrency {load.max_in_flight} held the rate {{effect:+}}"))
    elif load.send_lag_ms.count and target and math.isfinite(target) and load.send_lag_ms.p99 is not None \
            and not capped:
        limit = max(SAT_LAG_FLOOR_MS, SAT_LAG_FRACTION * 1e3 / target)
        if load.send_lag_ms.p99 > limit:
            gap_ms = 1e3 / target
            out.append(rule(FindingKind.SEND_LAG, "warn", f"send lag p99 {load.send_lag_ms.p99:.3g} ms > {limit:.3g} ms "
                                                f"({SAT_LAG_FRACTION:.0%} of the mean inter-arrival {gap_ms:.3g} ms, at "
                                                f"least {SAT_LAG_FLOOR_MS:g} ms): arrivals went out late, the load "
                                                "offered was lighter than asked", ("load",),
                            effect_pct=100.0 * load.send_lag_ms.p99 / gap_ms,
                            basis="send lag p99 against the mean inter-arrival time",
                            summary="open-loop send lag {effect} of the inter-arrival"))
    if load.client_cpu_pct is not None and load.client_cpu_pct > SAT_CPU_PCT:
        out.append(rule(FindingKind.CLIENT_CPU, "note", f"client worker CPU {load.client_cpu_pct:.0f}% of a core > "
                                              f"{SAT_CPU_PCT:.0f}%: what it does to the figures is the event-loop "
                                              "lag's (judged beside it); more --workers spread it", CLIENT_LATENCY,
                        summary="client worker CPU > 90% of a core"))
    return out


def steady_findings(full: Window | None, steady: Window | None, *, mode: str, e2e_s: float | None,
                    energy: dict[str, BoundaryEnergy] | None = None,
                    energy_steady: dict[str, BoundaryEnergy] | None = None) -> list[Finding]:
    """Whether the level's steady state earns a ``valid`` efficiency verdict.

    ``full``/``steady``: the level's windows (``Window`` or None); ``e2e_s``: the measured
    requests' median E2E; ``energy``/``energy_steady``: per-boundary ``BoundaryEnergy`` of the two
    windows (measured whole boundaries give the energy term of the minimum:
    ``steady.steady_energy_periods``). Warns when there is no steady state, when it is shorter than
    ``steady.min_steady_s`` or than ``STEADY_MIN_SHARE`` of the full window, and when steady and
    full average power or J per output token differ by more than ``STEADY_FULL_TOL_PCT`` at a
    whole boundary (a rail's disagreement is a note).
    """
    if full is None or not full.duration_s > 0:
        return []
    figs = ("energy", "efficiency", "throughput")
    if steady is None:
        what = "the target concurrency was never reached" if mode == "concurrency" else "the window is empty"
        return [rule(FindingKind.STEADY_MISSING, "warn", f"no steady state ({what}); the figures include ramp and drain", figs,
                     summary="no steady state")]
    out: list[Finding] = []
    energy, energy_steady = energy or {}, energy_steady or {}
    period = steady_energy_periods(list(energy.values()) + list(energy_steady.values()))
    need = min_steady_s(period, e2e_s)
    if steady.duration_s < need:
        why = []
        if e2e_s:
            why.append(f"2 × median E2E {e2e_s:.3g} s")
        if period is not None:
            why.append("the shortest window whose energy stays within "
                       f"{EFFICIENCY_MATERIAL_PCT:g}% of an independent counter read")
        # what to change, in one flag: a level of 1.5 × the minimum plus the drain (accounting/steady.py)
        suggest = math.ceil(SIZE_MARGIN * need + 2 * (e2e_s or 0.0))
        out.append(rule(FindingKind.STEADY_SHORT, "warn", f"steady state {steady.duration_s:.3g} s is shorter than the minimum "
                                                f"{need:.3g} s ({', '.join(why)}); give --duration {suggest} (or more "
                                                "--num-requests)", figs,
                        summary=f"steady state shorter than its minimum: give --duration {suggest}"))
    share = steady.duration_s / full.duration_s
    if share < STEADY_MIN_SHARE:
        out.append(rule(FindingKind.STEADY_SHARE, "warn", f"steady state {steady.duration_s:.3g} s is {share:.0%} of the "
                                                f"{full.duration_s:.3g} s window (< {STEADY_MIN_SHARE:.0%}); ramp and "
                                                "drain dominate the full-window figures", figs,
                        summary="steady state under half the window"))
    for b in sorted(set(energy) & set(energy_steady)):
        f, st = energy[b], energy_steady[b]
        for name, unit, a, c in (("average power", "W", f.avg_power_w, st.avg_power_w),
                                 ("J/output token", "J", f.j_per_output_token, st.j_per_output_token)):
            if a and c and a > 0:
                diff = 100.0 * (c - a) / a
                if abs(diff) > STEADY_FULL_TOL_PCT:
                    out.append(_energy(FindingKind.STEADY_VS_FULL, b, list(energy), "warn",
                                       f"{b}: steady-state {name} {c:.3g} {unit} is {diff:+.0f}% from the "
                                       f"full window's {a:.3g} {unit} (> {STEADY_FULL_TOL_PCT:g}%)", effect_pct=diff,
                                       summary=f"{b}: steady vs full {name} {{effect:+}}"))
    return out


def combine(findings: list[Finding]) -> Validity:
    """The level's verdicts from its findings (``findings.verdicts``); duplicates removed."""
    return verdicts(findings)
