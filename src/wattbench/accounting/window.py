"""One window's accounting: energy and efficiency per boundary, and a level's verdict.

``account_window`` turns the telemetry log over ``[start_ns, end_ns]`` into per-boundary energy,
power statistics, idle/dynamic split, efficiency figures and the window's findings;
``level_validity`` combines a window's findings with the level's load and token findings. The
rules and formulas are in docs/accounting.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wattbench.accounting.boundaries import BoundaryTotal, boundary_totals, contains_work, outside_work_note
from wattbench.accounting.idle import IdlePower, dynamic_uncertainty_pct, idle_split
from wattbench.accounting.thermal import thermal_summary
from wattbench.accounting.findings import Finding
from wattbench.accounting.validity import (
    combine,
    energy_findings,
    estimate_findings,
    failure_findings,
    load_findings,
    throttle_findings,
)
from wattbench.core.errors import UserError
from wattbench.metrics import efficiency as eff
from wattbench.core.schema import BoundaryEnergy, LoadStats, Thermal, Validity, Window
from wattbench.telemetry.base import TelemetryLog

__all__ = ["AccountedWindow", "account_window", "level_validity"]


@dataclass
class AccountedWindow:
    window: Window
    energy: dict[str, BoundaryEnergy]
    findings: list[Finding] = field(default_factory=list)
    thermal: Thermal = field(default_factory=Thermal)
    totals: dict[str, BoundaryTotal] = field(default_factory=dict)

    @property
    def reasons(self) -> list[str]:
        return [f.line for f in self.findings]

    @property
    def validity(self) -> Validity:
        return combine(self.findings)


def _round_or_none(x: float | None) -> float | None:
    return None if x is None else float(x)


def account_window(
    log: TelemetryLog,
    start_ns: int,
    end_ns: int,
    *,
    output_tokens: int,
    total_tokens: int,
    idle: dict[str, IdlePower] | None,
    price_per_kwh: float,
    pue: float,
    kind: str = "full",
) -> AccountedWindow:
    """Energy and efficiency per boundary over ``[start_ns, end_ns]`` of the run's monotonic clock.

    Cost: every boundary's cost uses **that boundary's own energy** × PUE × price (PUE not applied
    again to ``facility``, which already includes it), so a per-boundary cost reads "what the
    electricity for this part of the machine cost at the meter of the building". Stated in each
    boundary's notes.
    """
    if end_ns <= start_ns:
        raise UserError(f"measurement window is empty ({start_ns}..{end_ns} ns); a level needs a positive duration")
    if pue < 1.0:
        raise UserError(f"PUE must be >= 1.0 (got {pue:g}); use 1.0 when the facility overhead is unknown")
    if price_per_kwh < 0:
        raise UserError(f"price per kWh must be >= 0 (got {price_per_kwh:g})")
    window = Window(start_ns=start_ns, end_ns=end_ns, duration_s=(end_ns - start_ns) / 1e9, kind=kind)
    dur = window.duration_s
    totals = boundary_totals(log, start_ns, end_ns, pue=pue)
    energy: dict[str, BoundaryEnergy] = {}
    for b, t in totals.items():
        e = t.energy_j
        avg = t.avg_power_w
        stats = t.power_stats()
        ip = idle.get(b) if idle else None
        idle_j, dyn_j = idle_split(e, ip.power_w if ip else None, dur)
        cost_pue = 1.0 if b == "facility" else pue
        notes = list(t.notes)
        per_token = contains_work(b, totals)  # rule 10 of accounting.boundaries
        if not per_token:
            notes.append(outside_work_note(b, totals))
        if e is not None and output_tokens > 0 and per_token:
            notes.append(
                f"cost = {b} energy × price {price_per_kwh:g}/kWh" + (f" × PUE {pue:g}" if cost_pue != 1.0 else "")
            )
        energy[b] = BoundaryEnergy(
            boundary=b,
            method=t.method,
            label=t.label,
            energy_j=e,
            avg_power_w=avg,
            p95_power_w=stats["p95_power_w"],
            p99_power_w=stats["p99_power_w"],
            max_power_w=stats["max_power_w"],
            idle_power_w=ip.power_w if ip else None,
            idle_energy_j=idle_j,
            dynamic_energy_j=dyn_j,
            **({} if not per_token else dict(
                j_per_output_token=eff.j_per_token(e, output_tokens),
                j_per_token=eff.j_per_token(e, total_tokens),
                output_tokens_per_s_per_kw=eff.tokens_per_s_per_kw(output_tokens, dur, avg),
                tokens_per_kwh=eff.tokens_per_kwh(total_tokens, e),
                output_tokens_per_kwh=eff.tokens_per_kwh(output_tokens, e),
                cost_per_million_output_tokens=eff.cost_per_million_tokens(e, output_tokens, price_per_kwh,
                                                                           cost_pue),
            )),
            uncertainty_pct=_round_or_none(t.uncertainty_pct),
            coverage=t.coverage,
            largest_gap_s=t.largest_gap_s,
            devices=t.devices,
            channels=t.channels,
            cross_check=t.cross_check,
            notes=notes,
            resets=t.resets,
            wraps=t.wraps,
            gaps=t.gaps,
            update_period_s=t.update_period_s,
            uncertainty_parts={p.device or p.channel: p.uncertainty_parts for p in t.parts},
            dynamic_uncertainty_pct=dynamic_uncertainty_pct(e, t.uncertainty_pct, idle_j,
                                                            ip.uncertainty_pct if ip else None),
        )
    findings = energy_findings(totals, dur) + estimate_findings(totals, log) + failure_findings(log, start_ns, end_ns)
    findings += throttle_findings(log, start_ns, end_ns)
    return AccountedWindow(window=window, energy=energy, findings=findings,
                           thermal=thermal_summary(log, start_ns, end_ns), totals=totals)


def level_validity(
    accounted: AccountedWindow | None = None,
    *,
    load: LoadStats | None = None,
    token_source: str | None = None,
    extra: list[Finding] | None = None,
    n_requests: int | None = None,
) -> Validity:
    """The level's verdicts: energy findings of the window(s) plus load and token findings (the
    client's own timing, which needs the level's latencies, comes in ``extra``:
    ``validity.client_findings``).

    Pass the steady-window ``AccountedWindow`` (or the full one); several windows can be combined
    with ``findings.worst``.
    """
    findings = list(accounted.findings) if accounted is not None else []
    findings += load_findings(load, token_source, n_requests) + list(extra or [])
    return combine(findings)

