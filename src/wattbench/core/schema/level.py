"""One level of a run (``LevelResult``) and the blocks only a level has: its trials, the memory /
rest-of-board split, how it was bounded, its backlog test."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from wattbench.core.schema.base import Num, _M, _Sparse
from wattbench.core.schema.blocks import Goodput, HostCpu, ServerMetrics, Thermal
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
    """One figure over a level's trials: mean and 95% confidence interval (``metrics/trials.py``
    ``trial_interval``: on the log scale for a positive figure, Student-t otherwise)."""

    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_half_width: float | None = None  # may replace ci_low / ci_high (hand-written blocks)
    n: int | None = None  # None: the block's n
    confidence: float | None = None  # None: the block's confidence
    values: list[float | None] = Field(default_factory=list)
    scale: str | None = None  # "log" | "linear" (None: an older file's, Student-t on the linear scale)


class TargetDownInfo(_Sparse):
    """The target stopped answering during a level (``load/liveness.py``: a streak of connection
    failures): which target, when (seconds into the level, and the monotonic stamps of its last
    answer and first failure), the streak's refusals and failures, and the line said."""

    target: str = ""
    stopped_answering_s: Num | None = None
    last_ok_ns: int | None = None  # None: no request of the target succeeded
    first_failure_ns: int | None = None
    refusals: int = 0
    failures: int = 0  # connection failures in the streak (disconnects + refusals)
    text: str = ""


class UnmeasuredTrial(_M):
    """A trial of a level that measured nothing (no measured request completed): it has no figure,
    and no mean or interval of the level's trials includes it."""

    trial: int  # which trial, counted from 1 (as the run prints it)
    requests: int = 0  # the requests it sent (failed, warm-up and completed)
    why: str = ""  # what happened instead (the level's ``no_completed`` finding text)


class TrialsBlock(_M):
    """A level measured ``n`` times: every headline figure's mean and CI, keyed by
    ``core.schema.figure_key.FigureKey`` (``output_tokens_per_s``, ``ttft_p99_ms``,
    ``j_per_output_token@accelerator``, …), over the trials that measured something; ``unmeasured`` names the others (a figure's ``n`` is how many
    trials it is the mean of)."""

    n: int  # trials run, those that measured nothing included
    confidence: float = 0.95
    figures: dict[str, TrialFigure] = Field(default_factory=dict)
    # the figures that depend on the window (energy figures, token rates, goodput tokens), each trial
    # read in its steady-state window (``analysis.figures.steady_view``); empty in files written
    # before they were kept, or when a trial had no steady window
    figures_steady: dict[str, TrialFigure] = Field(default_factory=dict)
    thermal_before: list[Thermal | None] = Field(default_factory=list)
    # each trial's thermal and clock state over its window (``LevelResult.thermal``), in trial order
    thermal: list[Thermal | None] = Field(default_factory=list)
    # each trial's host CPUs over its load (``LevelResult.host_cpu``), in trial order
    host_cpu: list[HostCpu | None] = Field(default_factory=list)
    unmeasured: list[UnmeasuredTrial] = Field(default_factory=list)


class SteadySeries(_M):
    """One trial's per-second series over its steady window (``accounting.drift.steady_series``):
    bucket midpoints on the run's monotonic clock (s), output tokens/s (``metrics/window_tokens``'
    crediting, per bucket), and each boundary's mean power in the bucket (W; None where the meter
    had no samples)."""

    bucket_s: float = 1.0
    t_s: list[float] = Field(default_factory=list)
    output_tokens_per_s: list[float] = Field(default_factory=list)
    power_w: dict[str, list[float | None]] = Field(default_factory=dict)


class FigureTrend(_M):
    """The trend of one figure over a level's steady windows, its trials together
    (``accounting.drift.stationarity``): the Theil–Sen change over the span with its 99% interval
    (percent of the fitted start; fitted on the log scale, ``metrics/drift.py`` — a result written
    by an earlier wattbench keeps the straight line's reading it recorded), and the trend of the
    trial figures."""

    figure: str  # output_tokens_per_s | avg_power_w | output_tokens_per_s_per_kw
    boundary: str | None = None
    change_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    span_s: float | None = None
    points: int | None = None
    trials_change_pct: float | None = None  # the trial figures' trend, first to last trial
    trial_values: list[float | None] = Field(default_factory=list)
    moves: bool = False  # the interval excludes 0
    drifting: bool = False  # moves by at least the materiality bound: no noise verdict rests on it


class Stationarity(_M):
    """Whether the level held still while it was measured (``accounting.drift``): its figures'
    trends, the likely cause and what to do when one drifts, and the warm-up estimate (MSER-5)
    beside the steady window's start."""

    trials: int = 1  # the trials whose series it reads (a trial that measured nothing has none)
    trends: list[FigureTrend] = Field(default_factory=list)
    cause: str | None = None
    todo: str | None = None
    warmup_estimate_s: float | None = None  # MSER-5's truncation, s after the full window's start
    steady_start_s: float | None = None  # the steady window's start, s after the full window's start
    other_state_trials: list[int] = Field(default_factory=list)  # 0-based trials in another thermal/clock state
    other_state: str | None = None  # in words


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


class Precision(_M):
    """``--trials auto``: the precision a level's headline figure was measured to — the relative
    95% half-width of its trials' mean (``reached_pct``) against the one asked, on how many trials
    that measured, and, where it stopped short, how many more trials the observed spread says would
    reach it (``metrics.precision.level_precision``)."""

    figure: str  # the figure judged: "output_tokens_per_s_per_kw@<boundary>" (or "output_tokens_per_s")
    asked_pct: float
    reached_pct: float | None = None  # None: fewer than two trials measured
    trials: int = 0
    met: bool = False
    more_trials: int | None = None  # 0 when met; None: the spread is unknown, or the figure drifts
    drifting: bool = False
    drift: str = ""  # a drifting figure: how it drifts, with its recorded cause (metrics.drift.figure_drift)


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
    precision: Precision | None = None  # --trials auto
    power_split: PowerSplit | None = None  # the board reports its memory power
    # a saturated load generator (metrics/saturation.py): which figures it biases, and why
    saturated_figures: list[str] = Field(default_factory=list)
    saturation_kinds: list[str] = Field(default_factory=list)
    trial: int | None = None  # which trial of the level this is (0-based)
    timing: LevelTiming | None = None
    thermal_before: Thermal | None = None  # thermal state over the 3 s before the trial
    host_cpu: HostCpu | None = None  # the host's CPUs over the trial's load (/proc/stat at its start and end)
    series: SteadySeries | None = None  # this trial's per-second steady series (drift, MSER-5)
    stationarity: Stationarity | None = None  # trends over the level's trials, warm-up estimate
    oversaturation: Oversaturation | None = None
    stopped_early: str | None = None  # why the level ended before its bound
    target_down: TargetDownInfo | None = None  # the target stopped answering (load/liveness.py)
    tool: ToolLevel | None = None  # `wattbench measure`: the level as the load generator ran it
    extra: dict[str, Any] = Field(default_factory=dict)  # free-form: an older file's keys no field names, kept

    @field_validator("goodput", mode="before")
    @classmethod
    def _no_slo_no_goodput(cls, v: Any) -> Any:
        """An empty goodput block (no SLO) reads as none, as a missing one."""
        return None if v == {} else v

