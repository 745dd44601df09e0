"""Total cost of ownership: electricity, rack rent, cooling, maintenance, amortization; cost per million tokens.

Yearly figures (``hours`` = operating hours per year, 8,760 by default):

    it_energy_kwh        = it_kw × load × hours
    facility_energy_kwh  = it_energy_kwh × pue
    electricity          = facility_energy_kwh × price_per_kwh
    cooling              = it_energy_kwh × cooling_cost_per_kwh      (only cooling NOT already in the PUE)
    rack_rent            = rack_rent_per_month × 12 × racks
    maintenance          = hardware_cost × maintenance_pct_per_year / 100
    amortization         = hardware_cost / amortization_years         (straight line)

``load`` is the average fraction of ``it_kw`` drawn over the year. PUE already charges the
facility's cooling energy; ``cooling_cost_per_kwh`` is for cooling billed separately (e.g. a chilled
water tariff with PUE given as 1). Giving both a PUE above 1 and a cooling tariff counts cooling twice;
the result carries a warning when that happens.

Tokens per year come from a measured efficiency (``tokens_per_kwh`` of IT energy, e.g. a result's
``output_tokens_per_kwh`` at the node or wall boundary × the IT energy), or from a fleet throughput
(``tokens_per_s`` at full load × load × hours × 3600). Cost per million tokens = total cost / tokens ×
1e6; the electricity-only figure is reported too.

Carbon (``carbon_intensity`` in gCO2e/kWh, from ``--carbon-intensity``): annual tonnes =
facility kWh × intensity / 1e6, beside the annual cost, and gCO2e per million tokens where tokens
are known (``metrics/carbon.py``). A time series is reduced to its time-weighted mean.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from wattbench.config.plan import TcoInputs
from wattbench.core.errors import UserError
from wattbench.core.numbers import fmt
from wattbench.metrics.carbon import carbon_g, carbon_g_per_million_tokens, G_PER_TONNE, J_PER_KWH
from wattbench.planning.measured import choose_level, planning_boundary, get_level, level_name
from wattbench.core.schema import LevelResult, Result
from wattbench.results.headline import point



@dataclass
class TCOResult:
    currency: str
    period: str
    it_kw: float
    load: float
    hours_per_year: float
    pue: float
    price_per_kwh: float
    it_energy_kwh_per_year: float
    facility_energy_kwh_per_year: float
    electricity_cost_per_year: float
    cooling_cost_per_year: float
    rack_rent_per_year: float
    maintenance_cost_per_year: float
    amortization_per_year: float
    total_cost_per_year: float
    costs_per_period: dict[str, float]
    total_cost_per_period: float
    tokens_per_year: float | None = None
    tokens_source: str | None = None
    cost_per_million_tokens: float | None = None
    electricity_cost_per_million_tokens: float | None = None
    carbon_intensity_g_per_kwh: float | None = None
    carbon_tonnes_per_year: float | None = None
    carbon_g_per_million_tokens: float | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _nonneg(name: str, v: float | None) -> None:
    if v is not None and v < 0:
        raise UserError(f"{name} = {v} is negative; give 0 or more")


def tco(inputs: TcoInputs, carbon_intensity: float | None = None) -> TCOResult:
    """The yearly costs of ``inputs`` (the module docstring gives the rule; ``TcoInputs`` holds each
    input's default and range, checked when it is made), with ``carbon_intensity`` in gCO2e/kWh."""
    _nonneg("carbon intensity", carbon_intensity)
    it_kw, price_per_kwh, load, hours, pue = inputs.it_kw, inputs.price_per_kwh, inputs.load, inputs.hours, inputs.pue
    rack_rent_per_month, racks, hardware_cost = inputs.rack_rent_per_month, inputs.racks, inputs.hardware_cost
    cooling_cost_per_kwh, maintenance_pct_per_year = inputs.cooling_cost_per_kwh, inputs.maintenance_pct_per_year
    amortization_years, currency, period = inputs.amortization_years, inputs.currency, inputs.period
    tokens_per_kwh, tokens_per_s = inputs.tokens_per_kwh, inputs.tokens_per_s
    warnings: list[str] = []
    if rack_rent_per_month > 0 and racks == 0:
        warnings.append("rack rent given but --racks is 0: no rent counted")
    if hardware_cost > 0 and amortization_years is None:
        warnings.append("hardware cost given without --amortization-years: no amortization counted")
    if pue > 1 and cooling_cost_per_kwh > 0:
        warnings.append(
            "PUE > 1 already charges cooling energy; a separate cooling cost per kWh may count cooling twice"
        )

    it_kwh = it_kw * load * hours
    facility_kwh = it_kwh * pue
    electricity = facility_kwh * price_per_kwh
    cooling = it_kwh * cooling_cost_per_kwh
    rent = rack_rent_per_month * 12.0 * racks
    maintenance = hardware_cost * maintenance_pct_per_year / 100.0
    amortization = hardware_cost / amortization_years if amortization_years else 0.0
    total = electricity + cooling + rent + maintenance + amortization
    div = 12.0 if period == "month" else 1.0
    per_period = {
        "electricity": electricity / div,
        "cooling": cooling / div,
        "rack_rent": rent / div,
        "maintenance": maintenance / div,
        "amortization": amortization / div,
    }
    res = TCOResult(
        currency=currency, period=period, it_kw=it_kw, load=load, hours_per_year=hours, pue=pue,
        price_per_kwh=price_per_kwh, it_energy_kwh_per_year=it_kwh, facility_energy_kwh_per_year=facility_kwh,
        electricity_cost_per_year=electricity, cooling_cost_per_year=cooling, rack_rent_per_year=rent,
        maintenance_cost_per_year=maintenance, amortization_per_year=amortization, total_cost_per_year=total,
        costs_per_period=per_period, total_cost_per_period=total / div, warnings=warnings,
    )
    tokens = None
    if tokens_per_kwh is not None:
        tokens = tokens_per_kwh * it_kwh
        res.tokens_source = f"{fmt(tokens_per_kwh)} tokens per IT kWh × {fmt(it_kwh)} kWh"
    elif tokens_per_s is not None:
        tokens = tokens_per_s * load * hours * 3600.0
        res.tokens_source = f"{fmt(tokens_per_s)} tokens/s × load {load:g} × {fmt(hours)} h"
    if tokens is not None:
        res.tokens_per_year = tokens
        if tokens > 0:
            res.cost_per_million_tokens = total / tokens * 1e6
            res.electricity_cost_per_million_tokens = electricity / tokens * 1e6
        else:
            warnings.append("zero tokens per year: no cost per million tokens")
    if carbon_intensity is not None:
        res.carbon_intensity_g_per_kwh = carbon_intensity
        grams = carbon_g(facility_kwh * J_PER_KWH, carbon_intensity)
        res.carbon_tonnes_per_year = None if grams is None else grams / G_PER_TONNE
        res.carbon_g_per_million_tokens = carbon_g_per_million_tokens(facility_kwh * J_PER_KWH, tokens,
                                                                      carbon_intensity)
    return res


def tokens_per_kwh_from_result(result: Result, level: int | None, boundary: str | None = None) -> tuple[float, list[str]]:
    """Output tokens per kWh at ``boundary`` (default: the planners' one default,
    ``planning.measured.planning_boundary``) for a level (default: ``planning.measured.choose_level`` —
    the most efficient valid level meeting the run's SLO). The first warning names the level."""
    boundary = boundary or planning_boundary(result)
    have = sorted({b for lv in result.levels for b in lv.energy})
    fix = f"; choose --boundary from those the run has ({', '.join(have) or 'none'})"
    warnings: list[str] = []
    if boundary in ("accelerator", "accelerator_memory", "cpu", "dram", "host"):
        warnings.append(
            f"tokens per kWh at the {boundary} boundary leave out the rest of the node: cost per token is "
            "understated; prefer --boundary node or wall"
        )

    def eff(lv: LevelResult) -> float | None:  # as the answer quotes it: the trials' mean with --trials (results.headline.point)
        be = lv.energy.get(boundary)
        return None if be is None else point(lv, "output_tokens_per_kwh", boundary, be.output_tokens_per_kwh)

    if level is None:
        usable = [lv for lv in result.levels if eff(lv) and lv.validity.verdict != "invalid"]
        if not usable:
            raise UserError(f"run {result.run_id} has no output tokens per kWh at the {boundary} boundary{fix}")
        lv, why = choose_level(result, usable, lambda lv: eff(lv) or 0.0, "most tokens per kWh")
    else:
        lv = get_level(result, level)
        why = f"run {result.run_id}: level {level_name(lv)} (--level {level})"
    if lv.trials is not None and lv.trials.n > 1:
        why += f"; its tokens per kWh are the mean of its {lv.trials.n} trials"
    warnings.insert(0, why)
    value = eff(lv)
    if not value:
        raise UserError(f"run {result.run_id} level {lv.index} has no output tokens per kWh at the {boundary} "
                        f"boundary{fix}")
    return float(value), warnings
