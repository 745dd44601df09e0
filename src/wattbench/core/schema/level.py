"""One level of a run (``LevelResult``) and the blocks only a level has: its trials, the memory /
rest-of-board split, how it was bounded, its backlog test."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from wattbench.core.schema.base import _M
from wattbench.core.schema.blocks import Goodput, ServerMetrics, Thermal
from wattbench.core.schema.measure import ToolLevel
from wattbench.core.schema.measures import (
    BoundaryEnergy,
    Latency,
    LoadStats,
    RequestAttribution,
    Requests,
    TargetStats,
    Throughput,
    Validity,
    Window,
)


class TrialFigure(_M):
    """One figure over a level's trials: mean and Student-t confidence interval (``metrics/trials.py``)."""

    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_half_width: float | None = None  # may replace ci_low / ci_high (hand-written blocks)
    n: int | None = None  # None: the block's n
    confidence: float | None = None  # None: the block's confidence
    values: list[float | None] = Field(default_factory=list)


class TrialsBlock(_M):
    """A level measured ``n`` times: every headline figure's mean and CI, keyed as compare names
    them (``output_tokens_per_s``, ``ttft_p99_ms``, ``<boundary>.j_per_output_token``, …)."""

    n: int
    confidence: float = 0.95
    figures: dict[str, TrialFigure] = Field(default_factory=dict)
    # the figures that depend on the window (energy figures, token rates, goodput tokens), each trial
    # read in its steady-state window (``analysis.figures.steady_view``); empty in files written
    # before they were kept, or when a trial had no steady window
    figures_steady: dict[str, TrialFigure] = Field(default_factory=dict)
    thermal_before: list[Thermal | None] = Field(default_factory=list)


class PowerPart(_M):
    energy_j: float | None = None
    avg_power_w: float | None = None
    idle_power_w: float | None = None
    dynamic_power_w: float | None = None
    idle_energy_j: float | None = None
    dynamic_energy_j: float | None = None
    share: float | None = None
    uncertainty_pct: float | None = None


class PowerSplit(_M):
    """Where the board's watts went: memory vs the rest of the board (``accounting/split.py``)."""

    board_energy_j: float
    board_avg_power_w: float
    board_idle_power_w: float | None = None
    memory_share: float
    parts: dict[str, PowerPart] = Field(default_factory=dict)  # "memory", "rest"
    memory_channels: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)



class LevelTiming(_M):
    """How the level was bounded, as asked (``--warmup``, ``--warmup-requests``, ``--duration``)."""

    warmup_s: float | None = None
    warmup_requests: int | None = None
    duration_s: float | None = None
    duration_includes_warmup: bool = False


class Oversaturation(_M):
    """The backlog test of a level (``metrics.saturation.is_oversaturated``)."""

    oversaturated: bool = False
    slope_per_s: float | None = None
    t_stat: float | None = None
    growth: float | None = None
    reason: str = ""


class LevelResult(_M):
    index: int
    label: str  # e.g. "concurrency=8" or "rate=4.0"
    load: LoadStats = Field(default_factory=LoadStats)
    window: Window | None = None
    steady_window: Window | None = None
    requests: Requests = Field(default_factory=Requests)
    latency: Latency = Field(default_factory=Latency)
    throughput: Throughput = Field(default_factory=Throughput)
    energy: dict[str, BoundaryEnergy] = Field(default_factory=dict)
    energy_steady: dict[str, BoundaryEnergy] = Field(default_factory=dict)
    energy_unavailable_reason: str | None = None
    token_source: str = "usage"
    validity: Validity = Field(default_factory=Validity)
    thermal: Thermal = Field(default_factory=Thermal)
    server_metrics: ServerMetrics = Field(default_factory=ServerMetrics)  # summaries of scraped series
    goodput: Goodput | None = None  # --slo
    # several targets / several nodes: per-target statistics beside the total, and
    # each node's energy per boundary (its own channels only) beside the ``cluster`` boundary
    per_target: dict[str, TargetStats] = Field(default_factory=dict)
    per_node_energy: dict[str, dict[str, BoundaryEnergy]] = Field(default_factory=dict)
    # energy per request rolled up by tenant / tag / model / target, per boundary
    attribution: dict[str, RequestAttribution] = Field(default_factory=dict)
    trials: TrialsBlock | None = None  # --trials N > 1
    power_split: PowerSplit | None = None  # the board reports its memory power
    # a saturated load generator (metrics/saturation.py): which figures it biases, and why
    saturated_figures: list[str] = Field(default_factory=list)
    saturation_kinds: list[str] = Field(default_factory=list)
    trial: int | None = None  # which trial of the level this is (0-based)
    timing: LevelTiming | None = None
    thermal_before: Thermal | None = None  # thermal state over the 3 s before the trial
    oversaturation: Oversaturation | None = None
    stopped_early: str | None = None  # why the level ended before its bound
    target_down: dict[str, Any] | None = None  # the target stopped answering (load/liveness.py), with "text"
    tool: ToolLevel | None = None  # `wattbench measure`: the level as the load generator ran it
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("goodput", mode="before")
    @classmethod
    def _no_slo_no_goodput(cls, v: Any) -> Any:
        """An empty goodput block (no SLO) reads as none, as a missing one."""
        return None if v == {} else v

