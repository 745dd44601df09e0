"""Energy per request / tenant / model and carbon, arranged for the reports.

Only arranges figures stored in ``result.json`` (``LevelResult.attribution``, the carbon fields of
``BoundaryEnergy``); computes nothing. Used by the terminal summary and the HTML report.
"""

from __future__ import annotations

from typing import Any

from wattbench.report import format as F
from wattbench.core.numbers import fmt, fmt_fraction_pct
from wattbench.results.headline import boundary_order
from wattbench.core.schema import EnergyShare, LevelResult, RequestAttribution, Result
from wattbench.report.labels import short_label

GROUPS = (("tenant", "by_tenant"), ("tag", "by_tag"), ("model", "by_model"), ("target", "by_target"))


def primary_attribution(level: LevelResult) -> RequestAttribution | None:
    """The attribution at the level's headline boundary (else the first one available)."""
    hb = F.headline_energy(level)
    if hb is not None and hb[0] in level.attribution:
        return level.attribution[hb[0]]
    return next(iter(level.attribution.values()), None)


def _show_groups(att: RequestAttribution) -> list[tuple[str, dict[str, EnergyShare]]]:
    out: list[tuple[str, dict[str, EnergyShare]]] = []
    for name, attr in GROUPS:
        groups = getattr(att, attr)
        if groups and not (len(groups) == 1 and "(none)" in groups):
            out.append((name, groups))
    return out


def attribution_table(result: Result) -> tuple[list[str], list[list[object]]]:
    """Rows of (level, boundary, basis, group kind, group, requests, J, share, J/out tok, gCO2e); the basis
    says whether the energies are the level's dynamic or total energy."""
    headers = ["level", "boundary", "basis", "by", "group", "requests", "energy J (estimate)", "share", "J/out tok",
               "gCO2e"]
    rows: list[list[object]] = []
    for lv in result.levels:
        att = primary_attribution(lv)
        if att is None or att.unavailable_reason:
            continue
        for kind, groups in _show_groups(att):
            for g, s in groups.items():
                rows.append([_label(lv), att.boundary, basis_text(lv, att), kind, g, s.requests, fmt(s.energy_j),
                             fmt_fraction_pct(s.share), fmt(s.j_per_output_token), fmt(s.carbon_g)])
    return headers, rows


def attribution_bars(result: Result) -> list[dict[str, Any]]:
    """Plotly bar traces: energy per group (stacked per level), one trace per group."""
    traces: dict[tuple[str, str], dict[str, Any]] = {}
    for lv in result.levels:
        att = primary_attribution(lv)
        if att is None or att.unavailable_reason:
            continue
        shown = _show_groups(att)
        if not shown:
            continue
        kind, groups = shown[0]  # tenants first, else tags, models, targets
        for g, s in groups.items():
            t = traces.setdefault((kind, g), {"type": "bar", "name": f"{kind} {g}", "x": [], "y": []})
            t["x"].append(f"{lv.label} ({att.boundary})")
            t["y"].append(s.energy_j)
    return list(traces.values())


def method_lines(result: Result) -> list[str]:
    """One sentence per level: how its per-request energies were estimated."""
    out = []
    for lv in result.levels:
        att = primary_attribution(lv)
        if att is None:
            continue
        if att.unavailable_reason:
            out.append(f"{lv.label}: energy per request unavailable: {att.unavailable_reason}")
            continue
        s = (f"{_label(lv)}: {att.requests} requests, mean {fmt(att.mean_energy_j_per_request)} J each at "
             f"{att.boundary}, {basis_text(lv, att)} (estimate: {att.method})")
        if att.weighting_reason:
            s += f"; {att.weighting_reason}"
        out.append(s)
    return out


def carbon_table(result: Result) -> tuple[list[str], list[list[object]]]:
    headers = ["level", "boundary", "intensity gCO2e/kWh", "gCO2e", "gCO2e/M out tok", "gCO2e/request"]
    rows: list[list[object]] = []
    for lv in result.levels:
        for b in boundary_order(lv.energy):
            be = lv.energy[b]
            if be.carbon_g is None:
                continue
            rows.append([lv.label, b, fmt(be.carbon_intensity_g_per_kwh), fmt(be.carbon_g),
                         fmt(be.carbon_g_per_million_output_tokens), fmt(be.carbon_g_per_request)])
    return headers, rows


def summary_lines(result: Result) -> list[str]:
    """Terminal lines: carbon at the headline boundary and the largest groups, per level. A
    grouping with one group (one model, one tenant: 100% of the energy) says nothing and is left out
    (the HTML report and ``result.json`` keep it)."""
    out = []
    for lv in result.levels:
        hb = F.headline_energy(lv)
        if hb is not None and hb[1].carbon_g_per_million_output_tokens is not None:
            be = hb[1]
            out.append(f"{lv.label}: {fmt(be.carbon_g_per_million_output_tokens)} gCO2e per million output "
                       f"tokens at {hb[0]} ({fmt(be.carbon_intensity_g_per_kwh)} g/kWh)")
        att = primary_attribution(lv)
        if att is None or att.unavailable_reason:
            continue
        for kind, groups in [(k, g) for k, g in _show_groups(att) if len(g) > 1][:1]:
            parts = [f"{g} {fmt(s.energy_j)} J ({fmt_fraction_pct(s.share)})" for g, s in list(groups.items())[:5]]
            out.append(f"{_label(lv)}: {basis_text(lv, att)} by {kind} (estimate, {att.boundary}): " + ", ".join(parts))
    return out


def _label(level: LevelResult) -> str:
    return short_label(level)


def basis_text(level: LevelResult, att: RequestAttribution) -> str:
    """What the per-request energies add up to, in words: ``dynamic energy (2,834 J of 5,521 J; idle
    2,687 J not split)`` or ``total energy (5,521 J, idle included)``."""
    be = level.energy.get(att.boundary)
    total = be.energy_j if be is not None else None
    if att.basis == "dynamic":
        idle = be.idle_energy_j if be is not None else None
        return (f"dynamic energy ({fmt(att.energy_j)} J of {fmt(total)} J; idle {fmt(idle)} J not split)"
                if total is not None else "dynamic energy (idle not split)")
    if att.basis == "gross":
        why = "idle included" if att.idle_attributed else "no idle baseline"
        return f"total energy ({fmt(att.energy_j)} J, {why})"
    return "energy"


def prefill_decode_lines(result: Result) -> list[str]:
    """The run's prefill/decode split as stored: its figures when the fit is ``ok``, else
    ``unreliable`` with the reasons (never the clamped or noisy coefficients as bare numbers)."""
    pd = result.prefill_decode.model_dump() if result.prefill_decode is not None else {}
    out = []
    reg = pd.get("regression")
    if isinstance(reg, dict):
        b = reg.get("boundary") or "?"
        if reg.get("error"):
            out.append(f"prefill/decode split ({b}): not fitted: {reg['error']}")
        elif reg.get("status") == "unreliable":
            out.append(f"prefill/decode split ({b}): unreliable: " + "; ".join(reg.get("reasons") or []))
        elif reg.get("j_per_decode_token") is not None:
            out.append(f"prefill/decode split ({b}, {reg.get('token_source', 'regression')}): "
                       f"{fmt(reg.get('j_per_prefill_token'))} J per prefill token, "
                       f"{fmt(reg.get('j_per_decode_token'))} J per decode token (R² {fmt(reg.get('r2'))}, "
                       f"{reg.get('n_intervals')} intervals)")
    pair = pd.get("isolating_pair")
    if isinstance(pair, dict):
        if pair.get("error"):
            out.append(f"isolating pair: not solved: {pair['error']}")
        elif pair.get("j_per_decode_token") is not None:
            out.append(f"isolating pair ({pair.get('boundary')}): {fmt(pair['j_per_prefill_token'])} J per prefill "
                       f"token, {fmt(pair['j_per_decode_token'])} J per decode token")
    return out
