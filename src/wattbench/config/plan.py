"""The options of ``plan roofline``, ``plan rack``, ``plan power-first`` and ``plan tco``, one model
each (``TcoInputs``: what ``planning.tco.tco`` costs), and the planners' defaults, here so that each
has one home: the planning functions take them from here."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from wattbench.config.flags import (AT_LEAST_ONE, EVERY, INDEX, NON_NEGATIVE, PERCENT, POSITIVE, Domain, Flag,
                                    FlaggedConfig)
from wattbench.config.shared import DEFAULT_CURRENCY, DEFAULT_PUE, AsJson, Boundary, Currency, Pue

# the planners' defaults, here so that each has one home: the planning functions take them from here
DEFAULT_PERCENTILE = "p95"  # the power percentile a node is planned at
DEFAULT_AIR_MAX_RACK_KW, DEFAULT_AIR_MAX_ACCELERATOR_W = 20.0, 1000.0  # air cooling up to both, else liquid
DEFAULT_SITE_HEADROOM_PCT = 10.0  # plan power-first: site power kept unallocated
Percentile = Annotated[str, Field(default=DEFAULT_PERCENTILE), Flag("--percentile", commands=EVERY,
                                                       help="p95 or p99 (also max, avg).")]
HardwareFiles = Annotated[list[str] | None, Field(default=None), Flag(
    "--hardware", commands=EVERY, help="Extra hardware table file(s).",
    help_in={"plan roofline": "Extra hardware table file(s) merged over the shipped one."})]
HostOverheadW = Annotated[float | None, Field(default=None), Flag(
    "--host-overhead-w", commands=EVERY, domain=Domain(lo_open=False, unit="W"), help="Declared host power per node.",
    help_in={"plan rack": "Declared host power per node (CPU, memory, fans, NICs) added to accelerator power."})]


# what planning.roofline bounds when not told otherwise: one sequence, an empty KV cache, bf16 weights
DEFAULT_WEIGHT_DTYPE, DEFAULT_DECODE_BATCH, DEFAULT_DECODE_CONTEXT = "bf16", 1, 0


class PlanRooflineOptions(FlaggedConfig):
    """``plan roofline``: the model, the GPU and the batch whose decode bound is computed."""

    model: Annotated[str, Flag("--model", commands=EVERY, help=(
        "Preset (llama-1b, llama-8b, qwen-7b, llama-70b) or an HF config.json / model directory."))]
    gpu: Annotated[str | None, Flag("--gpu", commands=EVERY, help=(
        "GPU name from the hardware table (H200, h100-sxm, MI300X …). Default with --result: the run's GPU."))] = None
    dtype: Annotated[str, Flag("--dtype", commands=EVERY, help=(
        "Weight dtype: bf16, fp16, fp8, int8, int4 (int8/int4 weight-only)."))] = DEFAULT_WEIGHT_DTYPE
    kv_dtype: Annotated[str | None, Flag("--kv-dtype", commands=EVERY, help=(
        "KV-cache dtype (default: the weight dtype; bf16 for int8/int4)."))] = None
    batch: Annotated[int | None, Flag("--batch", commands=EVERY, domain=AT_LEAST_ONE, help=(
        f"Sequences decoded together (default {DEFAULT_DECODE_BATCH}; with --result the level's concurrency)."))] = None
    context: Annotated[int | None, Flag("--context", commands=EVERY, domain=NON_NEGATIVE, help=(
        f"Tokens in each sequence's KV cache (default {DEFAULT_DECODE_CONTEXT}; with --result mean input + half mean "
        "output)."))] = None
    gpus: Annotated[int, Flag("--gpus", commands=EVERY, domain=AT_LEAST_ONE, help=(
        "GPUs the model is split over (tensor parallel; bandwidth and FLOP/s add up)."))] = 1
    result: Annotated[str | None, Flag("--result", commands=EVERY, help=(
        "A run directory: report measured output tokens/s vs the bound."))] = None
    level: Annotated[int, Flag("--level", commands=EVERY, domain=INDEX, help="Level index in --result.")] = 0
    strict_embedding: Annotated[bool, Flag("--strict-embedding", commands=EVERY, help=(
        "Count only the input-embedding rows a step reads (default: all stored weights, the usual convention)."))] = False
    hardware: HardwareFiles
    as_json: AsJson


class PlanRackOptions(FlaggedConfig):
    """``plan rack``: the rack's power budget, its candidate nodes and the cooling thresholds."""

    rack_kw: Annotated[float, Flag("--rack-kw", commands=EVERY, domain=Domain(unit="kW"),
                                   help="Power budget of one rack in kW.")]
    node: Annotated[list[str] | None, Flag("--node", commands=EVERY, help=(
        "A run directory, run=DIR,level=I,gpus=N,name=X, or a spec name=X,power_w=W | accelerator_w=W,gpus=N | "
        "gpu=H200,gpus=N [,host_overhead_w=W,tokens_per_s=T,goodput_tokens_per_s=G]. Repeatable."))] = None
    more: Annotated[list[str] | None, Flag("--node", commands=EVERY, positional=True, metavar="NODE",
                                           help="More --node values.")] = None
    boundary: Boundary
    percentile: Percentile
    host_overhead_w: HostOverheadW
    headroom_pct: Annotated[float, Flag("--headroom-pct", commands=EVERY, domain=PERCENT,
                                        help="Percent of the rack budget kept free.")] = 0.0
    air_max_rack_kw: Annotated[float, Flag("--air-max-rack-kw", commands=EVERY, domain=Domain(unit="kW"),
                                           help="Above this populated rack power: liquid cooling.")] = (
        DEFAULT_AIR_MAX_RACK_KW)
    air_max_accelerator_w: Annotated[float, Flag(
        "--air-max-accelerator-w", commands=EVERY, domain=Domain(unit="W"),
        help="Above this power per accelerator: liquid cooling.")] = DEFAULT_AIR_MAX_ACCELERATOR_W
    hardware: HardwareFiles
    as_json: AsJson


class PlanPowerFirstOptions(FlaggedConfig):
    """``plan power-first``: the site's power cap, the candidate runs and the SLO they must meet."""

    site_kw: Annotated[float, Flag("--site-kw", commands=EVERY, domain=Domain(unit="kW"),
                                   help="Site (or hall) IT power cap in kW.")]
    candidates: Annotated[list[str] | None, Flag("--candidates", commands=EVERY, help=(
        "A run directory or run=DIR,boundary=B,name=X,gpus=N. Repeatable."))] = None
    more: Annotated[list[str] | None, Flag("--candidates", commands=EVERY, positional=True, metavar="RUN",
                                           help="More candidate run directories.")] = None
    slo: Annotated[str | None, Flag("--slo", commands=EVERY, help=(
        "Latency limits, as for run: ttft_p95=500ms,tpot_p95=50ms."))] = None
    headroom_pct: Annotated[float, Flag("--headroom-pct", commands=EVERY, domain=PERCENT,
                                        help="Percent of site power kept unallocated.")] = DEFAULT_SITE_HEADROOM_PCT
    boundary: Boundary
    percentile: Percentile
    host_overhead_w: HostOverheadW
    resolution_w: Annotated[float | None, Flag("--resolution-w", commands=EVERY, domain=Domain(unit="W"), help=(
        "DP power step in W (default: 1 W, coarser above 200 kW)."))] = None
    as_json: AsJson


HOURS_PER_YEAR = 8760.0


class TcoInputs(FlaggedConfig):
    """What ``planning.tco.tco`` costs (its docstring gives the rule): the one home of each input's
    default and range, and of ``plan tco``'s option for it."""

    it_kw: Annotated[float, Flag("--it-kw", commands=EVERY, domain=Domain(unit="kW"),
                                 help="IT power in kW (nameplate or planned).")]
    price_per_kwh: Annotated[float, Flag("--price-per-kwh", commands=EVERY, domain=NON_NEGATIVE,
                                         help="Electricity price per kWh.")]
    load: Annotated[float, Flag("--load", commands=EVERY, domain=Domain(hi=1.0),
                                help="Average fraction of IT power drawn (0-1].")] = 1.0
    hours: Annotated[float, Flag("--hours", commands=EVERY, domain=Domain(hi=HOURS_PER_YEAR, unit="hours a year"),
                                 help="Operating hours per year.")] = HOURS_PER_YEAR
    pue: Pue = DEFAULT_PUE
    rack_rent_per_month: Annotated[float, Flag("--rack-rent-per-month", commands=EVERY, domain=NON_NEGATIVE,
                                               help="Rent per rack per month.")] = 0.0
    racks: Annotated[int, Flag("--racks", commands=EVERY, domain=NON_NEGATIVE, help="Number of racks rented.")] = 0
    cooling_cost_per_kwh: Annotated[float, Flag(
        "--cooling-cost-per-kwh", commands=EVERY, domain=NON_NEGATIVE,
        help="Cooling billed per IT kWh, only if NOT in the PUE.")] = 0.0
    maintenance_pct_per_year: Annotated[float, Flag(
        "--maintenance-pct-per-year", commands=EVERY, domain=NON_NEGATIVE,
        help="Maintenance per year, % of hardware cost.")] = 0.0
    hardware_cost: Annotated[float, Flag("--hardware-cost", commands=EVERY, domain=NON_NEGATIVE,
                                         help="Purchase cost of the hardware.")] = 0.0
    amortization_years: Annotated[float | None, Flag("--amortization-years", commands=EVERY, domain=POSITIVE,
                                                     help="Straight-line amortization period.")] = None
    currency: Currency = DEFAULT_CURRENCY
    period: Annotated[Literal["year", "month"], Flag("--period", commands=EVERY, help="year or month.")] = "year"
    tokens_per_s: Annotated[float | None, Flag("--tokens-per-s", commands=EVERY, domain=POSITIVE, help=(
        "Fleet output tokens/s at full load (for cost per million tokens)."))] = None
    tokens_per_kwh: Annotated[float | None, Flag("--tokens-per-kwh", commands=EVERY, domain=POSITIVE, help=(
        "Output tokens per IT kWh (measured efficiency)."))] = None

    @model_validator(mode="after")
    def _one_token_source(self) -> TcoInputs:
        if self.tokens_per_kwh is not None and self.tokens_per_s is not None:
            raise ValueError("give either tokens per kWh (measured efficiency) or tokens per s (throughput), not both")
        return self


class PlanTcoOptions(TcoInputs):
    """``plan tco``: ``TcoInputs``, or tokens per kWh read from a run, and the grid's carbon intensity."""

    result: Annotated[str | None, Flag("--result", commands=EVERY,
                                       help="Take tokens per kWh from a run directory.")] = None
    level: Annotated[int | None, Flag("--level", commands=EVERY, domain=INDEX,
                                      help="Level in --result (default: most efficient valid level).")] = None
    boundary: Boundary
    carbon_intensity: Annotated[str | None, Flag("--carbon-intensity", commands=EVERY, help=(
        "Grid gCO2e/kWh, or a CSV/JSON series (its time-weighted mean): annual tonnes beside the cost."))] = None
    as_json: AsJson

    def inputs(self, **replace: Any) -> TcoInputs:
        """The planning function's inputs of these options (``replace``: a field read elsewhere, e.g.
        the tokens per kWh of ``--result``)."""
        return TcoInputs(**{**{k: getattr(self, k) for k in TcoInputs.model_fields}, **replace})
