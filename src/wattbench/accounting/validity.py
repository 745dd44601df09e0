"""Validity verdicts: ``valid`` | ``warn`` | ``invalid`` with reasons; the worst finding wins.

==========================================  ===========================  ====================
rule                                        warn                         invalid
==========================================  ===========================  ====================
coverage (per boundary)                     < 0.95                       < 0.80
largest gap                                 > 1 s                        —
counter resets in the window                any                          —
counter vs power integral, worst device     |diff| > 5 %                 |diff| > 15 %
window length in meter update periods       < 10                         < 3
no energy for a boundary that has channels  always                       —
sensor read failures in the window          any                          —
power/thermal capping bits (0x4 0x8 0x20    any sample                   —
0x40 0x80) in clock-event reasons
client saturated (LoadStats.saturated)      yes (client's own signals)   —
achieved vs target rate (open loop)         |diff| > 10 % and outside    —
                                            the arrival draw's 99 %
                                            range (load/saturation.py)
token source not ``usage``/``tokenizer``    approximate                  —
no steady state (target never reached)      always                       —
steady state shorter than min_steady_s      yes                          —
steady state < 50 % of the full window      yes                          —
steady vs full avg power or J/output token  |diff| > 15 %                —
==========================================  ===========================  ====================

Why these thresholds: below 80 % coverage a fifth of the window's energy is interpolated, more
than any meter's error; 5 % is NVML's stated accuracy, so a counter/integral disagreement beyond it
is more than the meters' own error, and beyond 15 % one of the two is not measuring the same thing.
A window shorter than 10 update periods carries up to 20 % edge error (one period each edge); under
3 periods the figure is mostly edge. A rate off its target by more than 10 % *and* more than the arrival
process itself scatters for that many requests means the load was not the one asked for (a
15-request Poisson level at 4/s drawing 2.8/s is the draw, not the client).
The steady-state rules (:func:`steady_findings`; minimum in ``accounting.steady.min_steady_s``):
a short steady state is mostly edge and ramp; past 15 % between the steady and the full window
(three times NVML's stated accuracy) the full-window figure describes the ramp and drain more
than the load level (docs/accounting.md §1, the H200 example).
"""

from __future__ import annotations

from dataclasses import dataclass

from wattbench.accounting.steady import STEADY_MIN_SHARE, min_steady_s
from wattbench.accounting.thermal import throttling
from wattbench.load.saturation import RATE_WARN_PCT, rate_finding  # noqa: F401  (one home: load/saturation.py)
from wattbench.results.schema import LoadStats, Validity
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
_ORDER = ("valid", "warn", "invalid")


@dataclass(frozen=True)
class Finding:
    verdict: str  # warn | invalid
    reason: str

    def text(self) -> str:
        return f"{self.verdict}: {self.reason}"


def energy_findings(totals: dict, duration_s: float) -> list[Finding]:
    """Findings from per-boundary totals (``boundaries.BoundaryTotal``). Composite boundaries
    (host sum, facility × PUE) repeat their parts' findings, so they are skipped."""
    out: list[Finding] = []
    for b, t in totals.items():
        if t.composite:
            continue
        if t.energy_j is None:
            out.append(Finding("warn", f"{b}: no energy could be computed ({'; '.join(t.notes[-1:])})"))
            continue
        if t.method == "declared":
            continue  # a declared constant is not sampled: coverage and gaps do not apply
        if t.coverage is not None and t.coverage < COVERAGE_INVALID:
            out.append(Finding("invalid", f"{b}: sample coverage {t.coverage:.2f} < {COVERAGE_INVALID}"))
        elif t.coverage is not None and t.coverage < COVERAGE_WARN:
            out.append(Finding("warn", f"{b}: sample coverage {t.coverage:.2f} < {COVERAGE_WARN}"))
        if t.largest_gap_s is not None and t.largest_gap_s > LARGEST_GAP_WARN_S:
            out.append(Finding("warn", f"{b}: largest sample gap {t.largest_gap_s:.2f} s > {LARGEST_GAP_WARN_S:g} s"))
        if t.resets:
            out.append(Finding("warn", f"{b}: energy counter reset {t.resets} time(s) in the window"))
        worst = t.cross_check.get("max_abs_device_diff_pct") if t.cross_check else None
        if worst is not None and worst > CROSS_INVALID_PCT:
            out.append(Finding("invalid", f"{b}: counter and power integral disagree by {worst:.1f}% "
                                          f"(> {CROSS_INVALID_PCT:g}%)"))
        elif worst is not None and worst > CROSS_WARN_PCT:
            out.append(Finding("warn", f"{b}: counter and power integral disagree by {worst:.1f}% "
                                       f"(> {CROSS_WARN_PCT:g}%)"))
        if t.update_period_s > 0 and duration_s > 0:
            n = duration_s / t.update_period_s
            if n < MIN_PERIODS_INVALID:
                out.append(Finding("invalid", f"{b}: window {duration_s:.3g} s is {n:.1f} meter update periods "
                                              f"(< {MIN_PERIODS_INVALID:g})"))
            elif n < MIN_PERIODS_WARN:
                out.append(Finding("warn", f"{b}: window {duration_s:.3g} s is {n:.1f} meter update periods "
                                           f"(< {MIN_PERIODS_WARN:g})"))
    return out


def failure_findings(log: TelemetryLog, t0: int, t1: int) -> list[Finding]:
    by_sensor: dict[str, list[str]] = {}
    for f in log.failures:
        if t0 <= f.t_ns <= t1:
            by_sensor.setdefault(f.sensor, []).append(f.error)
    return [Finding("warn", f"sensor {s} failed {len(errs)} time(s) in the window (first: {errs[0]})")
            for s, errs in sorted(by_sensor.items())]


def throttle_findings(log: TelemetryLog, t0: int, t1: int) -> list[Finding]:
    out = []
    for dev, r in sorted(throttling(log, t0, t1).items()):
        if r["capping_reasons"]:
            out.append(Finding("warn", f"{dev}: clocks capped ({', '.join(r['capping_reasons'])}) in "
                                       f"{100 * r['capping_fraction']:.0f}% of samples"))
    return out


def load_findings(load: LoadStats | None, token_source: str | None = None, n_requests: int | None = None) -> list[Finding]:
    """Client saturation, achieved vs target rate (judged against the arrival process's spread for
    ``n_requests`` measured arrivals: ``load/saturation.py``) and the token source."""
    out: list[Finding] = []
    if load is not None:
        if load.saturated:
            why = "; ".join(load.saturation_reasons) or "no reason given"
            out.append(Finding("warn", f"load generator saturated: {why}"))
        why_rate = rate_finding(load, n_requests or 0)
        if why_rate:
            out.append(Finding("warn", why_rate))
    if token_source is not None and token_source not in GOOD_TOKEN_SOURCES:
        out.append(Finding("warn", f"token counts are {token_source}, not from the server's usage or tokenizer"))
    return out


def steady_findings(full, steady, *, mode: str, e2e_s: float | None, energy: dict | None = None,
                    energy_steady: dict | None = None) -> list[Finding]:
    """Whether the level's steady state earns a ``valid`` verdict.

    ``full``/``steady``: the level's windows (``Window`` or None); ``e2e_s``: the measured
    requests' median E2E; ``energy``/``energy_steady``: per-boundary ``BoundaryEnergy`` of the two
    windows (their ``update_period_s`` gives the meter's update period, the largest one counts).
    Warns when there is no steady state, when it is shorter than ``steady.min_steady_s`` or than
    ``STEADY_MIN_SHARE`` of the full window, and when steady and full average power or J per
    output token differ by more than ``STEADY_FULL_TOL_PCT`` at any boundary.
    """
    if full is None or not full.duration_s > 0:
        return []
    if steady is None:
        what = "the target concurrency was never reached" if mode == "concurrency" else "the window is empty"
        return [Finding("warn", f"no steady state ({what}); the figures include ramp and drain")]
    out: list[Finding] = []
    energy, energy_steady = energy or {}, energy_steady or {}
    periods = [e.update_period_s for e in list(energy.values()) + list(energy_steady.values())
               if e.update_period_s]
    period = max(periods) if periods else None
    need = min_steady_s(period, e2e_s)
    if steady.duration_s < need:
        why = []
        if e2e_s:
            why.append(f"2 × median E2E {e2e_s:.3g} s")
        if period:
            why.append(f"20 meter updates of {period:.3g} s")
        out.append(Finding("warn", f"steady state {steady.duration_s:.3g} s is shorter than the minimum "
                                   f"{need:.3g} s ({', '.join(why)}); give more requests or a longer --duration"))
    share = steady.duration_s / full.duration_s
    if share < STEADY_MIN_SHARE:
        out.append(Finding("warn", f"steady state {steady.duration_s:.3g} s is {share:.0%} of the "
                                   f"{full.duration_s:.3g} s window (< {STEADY_MIN_SHARE:.0%}); ramp and drain "
                                   "dominate the full-window figures"))
    for b in sorted(set(energy) & set(energy_steady)):
        f, st = energy[b], energy_steady[b]
        for name, unit, a, c in (("average power", "W", f.avg_power_w, st.avg_power_w),
                                 ("J/output token", "J", f.j_per_output_token, st.j_per_output_token)):
            if a and c and a > 0:
                diff = 100.0 * (c - a) / a
                if abs(diff) > STEADY_FULL_TOL_PCT:
                    out.append(Finding("warn", f"{b}: steady-state {name} {c:.3g} {unit} is {diff:+.0f}% from the "
                                               f"full window's {a:.3g} {unit} (> {STEADY_FULL_TOL_PCT:g}%)"))
    return out


def combine(findings: list[Finding]) -> Validity:
    """Worst verdict; reasons in order, duplicates removed."""
    verdict = "valid"
    reasons: list[str] = []
    for f in findings:
        if _ORDER.index(f.verdict) > _ORDER.index(verdict):
            verdict = f.verdict
        if f.text() not in reasons:
            reasons.append(f.text())
    return Validity(verdict=verdict, reasons=reasons)


def worst(*validities: Validity) -> Validity:
    verdict = max((v.verdict for v in validities), key=_ORDER.index, default="valid")
    reasons: list[str] = []
    for v in validities:
        reasons += [r for r in v.reasons if r not in reasons]
    return Validity(verdict=verdict, reasons=reasons)
