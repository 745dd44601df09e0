"""The versioned result schema (pydantic v2).

A run directory holds ``result.json`` (this model), ``requests.jsonl`` (one ``RequestRecord`` per
line), ``telemetry.jsonl`` (raw sensor samples) and reports. Units are in every name.
``SCHEMA_VERSION`` bumps on any incompatible change; readers refuse newer major versions.

Version history:

- 1: run analyses in untyped ``extra`` keys.
- 2: the trials block (``LevelResult.trials``), the memory / rest-of-board split
  (``LevelResult.power_split``), what a saturated client biases (``LevelResult.saturated_figures``
  / ``saturation_kinds``), the auto sweep and the optimiser (``Result.sweep`` /
  ``Result.optimize``), the Pareto frontiers (``Result.pareto``) and the idle windows
  (``Result.idle_window`` / ``Result.idle_after_window``) are typed fields. A version-1 file loads:
  ``_from_v1`` moves those ``extra`` keys to their fields. Typed since within version 2 (issue 17;
  moved from ``extra`` when a file still has them there, of either version): the prefill/decode
  split (``Result.prefill_decode``), the carbon intensity (``Result.carbon``, a ``CarbonIntensity``
  or ``None``) and, per level, ``trial``, ``timing``, ``thermal_before``, ``oversaturation``,
  ``stopped_early`` and ``target_down``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 2

Verdict = Literal["valid", "warn", "invalid"]


class _M(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


# ---------------------------------------------------------------- per request


class RequestRecord(_M):
    """One request as the client saw it. Times are the run's monotonic clock in ns."""

    id: int
    level: int
    worker: int = 0
    warmup: bool = False
    session_id: str | None = None
    turn: int | None = None
    target: str | None = None  # base URL when several targets are driven
    scheduled_ns: int | None = None  # when the schedule wanted it sent (open loop)
    sent_ns: int
    first_token_ns: int | None = None  # first content chunk's bytes arrived
    last_token_ns: int | None = None  # last content chunk's bytes arrived
    end_ns: int | None = None  # stream closed / response complete
    chunk_ns: list[int] = Field(default_factory=list)  # arrival time of every content chunk
    input_tokens: int | None = None  # from usage
    output_tokens: int | None = None  # from usage
    requested_input_tokens: int | None = None
    requested_output_tokens: int | None = None
    token_source: str = "usage"  # usage | tokenizer | approx
    ok: bool = True
    error: str | None = None  # class: http_<status> | timeout | disconnect | bad_stream | connect
    error_detail: str | None = None
    http_status: int | None = None
    output_text: str | None = None  # kept only when asked (agree, debugging)
    # who asked (issue 20): from the dataset/trace row's ``tenant`` (or --tenant-field) and ``tags``
    tenant: str | None = None
    tags: list[str] = Field(default_factory=list)
    model: str | None = None  # the model it was sent to
    # energy per request (an estimate, accounting/request_energy.py): boundary -> J, and how
    energy_j: dict[str, float] = Field(default_factory=dict)
    energy_method: dict[str, str] = Field(default_factory=dict)
    carbon_g: dict[str, float] = Field(default_factory=dict)  # boundary -> gCO2e, with --carbon-intensity


class _AllFieldsSet(set):
    """The fields-set every ``build_record`` record shares: all declared fields, never added to
    (pydantic adds a name on assignment; on a set shared by every record that would leak)."""

    def add(self, name) -> None:  # noqa: D102 - see the class doc
        pass


_RECORD_FIELDS = tuple(RequestRecord.model_fields.items())
_RECORD_FIELDS_SET = _AllFieldsSet(RequestRecord.model_fields)


def build_record(**values: Any) -> RequestRecord:
    """A ``RequestRecord`` from trusted, typed values, without validation (as ``model_construct``)
    and at less than half its memory: the load generator builds one per request and a level holds
    them all (``benches/level_memory.py``: 5.2 KB → 2.2 KB per record with 16 chunk stamps).
    ``model_construct`` keeps, per record, its own fields-set (~0.8–2 KB) and the emptied keyword
    dict as the extras (~0.4 KB); here every record shares one all-fields set (nothing reads it
    but ``exclude_unset``) and the extras are a fresh dict. Unknown keys become extras, as there."""
    d = {name: (values.pop(name) if name in values else f.get_default(call_default_factory=True))
         for name, f in _RECORD_FIELDS}
    m = RequestRecord.__new__(RequestRecord)
    object.__setattr__(m, "__dict__", d)
    object.__setattr__(m, "__pydantic_fields_set__", _RECORD_FIELDS_SET)
    object.__setattr__(m, "__pydantic_extra__", dict(values))
    object.__setattr__(m, "__pydantic_private__", None)
    return m


# ---------------------------------------------------------------- statistics


class Stats(_M):
    """Summary of a latency figure (ms). ``count`` is how many values went in."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    min: float | None = None
    std: float | None = None


class Latency(_M):
    ttft_ms: Stats = Field(default_factory=Stats)
    tpot_ms: Stats = Field(default_factory=Stats)
    itl_ms: Stats = Field(default_factory=Stats)
    e2e_ms: Stats = Field(default_factory=Stats)


class TokenCount(_M):
    """Tokens credited to a window (``accounting/window_tokens.py`` states the rule)."""

    output: float = 0.0
    input: float = 0.0
    warmup_output: float | None = None  # part of ``output`` from warm-up streams (tokens_in_window only)
    edge_output: float | None = None  # part of ``output`` from streams only partly inside (tokens_in_window only)
    estimated_streams: int | None = None  # streams counted without usage (tokens_in_window only)


class Throughput(_M):
    """Throughput over the level window.

    ``output_tokens``/``input_tokens`` and every rate here (and every efficiency figure of the
    level: tok/s per kW, J/token, tokens per kWh, cost per Mtok, goodput per kW, the prefill/decode
    split) use ``tokens_in_window``: the tokens the server produced inside the window, from every
    stream (warm-up leftovers and streams cut at the edges pro rata). ``measured_request_tokens``
    are the usage tokens of the measured requests that ended in the window (the latency
    population), kept for reference; ``requests_per_s`` counts those requests. ``token_basis``
    says which count the figures use (results written before it existed used the measured requests').
    """

    output_tokens_per_s: float = 0.0
    input_tokens_per_s: float = 0.0
    total_tokens_per_s: float = 0.0
    requests_per_s: float = 0.0
    duration_s: float = 0.0
    output_tokens: int = 0
    input_tokens: int = 0
    token_basis: Literal["tokens_in_window", "measured_request_tokens"] = "measured_request_tokens"
    tokens_in_window: TokenCount | None = None
    measured_request_tokens: TokenCount | None = None


class Requests(_M):
    completed: int = 0
    failed: int = 0
    warmup: int = 0
    errors: dict[str, int] = Field(default_factory=dict)


class LoadStats(_M):
    """What the load generator asked for and what it achieved."""

    mode: Literal["concurrency", "rate", "trace"] = "concurrency"
    target_concurrency: int | None = None
    target_rate_rps: float | None = None
    achieved_rate_rps: float | None = None
    mean_in_flight: float | None = None
    arrival: str | None = None
    send_lag_ms: Stats = Field(default_factory=Stats)
    client_cpu_pct: float | None = None  # of one core, max over workers
    client_cpu_pct_per_worker: list[float] = Field(default_factory=list)
    drain_s: float | None = None  # from when sending stopped to when the last request ended
    # How late a 10 ms timer in each worker's event loop fired (all workers pooled): when the
    # client process waits for a CPU, its arrival stamps are late by about this much.
    client_loop_lag_ms: Stats = Field(default_factory=Stats)
    workers: int = 1
    saturated: bool = False
    saturation_reasons: list[str] = Field(default_factory=list)
    max_in_flight: int | None = None  # open loop capped at this many requests in flight (--max-concurrency)
    actors: list[dict[str, Any]] = Field(default_factory=list)  # distributed: per load actor (node, clock, cpu)


# ---------------------------------------------------------------- energy


class BoundaryEnergy(_M):
    """Energy and efficiency at one power boundary over one window."""

    boundary: str
    method: str  # counter | power_integral | declared | estimate | sum
    label: Literal["measured", "declared", "estimate"] = "measured"
    energy_j: float | None = None
    avg_power_w: float | None = None
    p95_power_w: float | None = None
    p99_power_w: float | None = None
    max_power_w: float | None = None
    idle_power_w: float | None = None
    idle_energy_j: float | None = None
    dynamic_energy_j: float | None = None
    j_per_output_token: float | None = None
    j_per_token: float | None = None
    output_tokens_per_s_per_kw: float | None = None
    tokens_per_kwh: float | None = None  # total (input + output) tokens per kWh
    output_tokens_per_kwh: float | None = None
    cost_per_million_output_tokens: float | None = None
    uncertainty_pct: float | None = None
    coverage: float | None = None  # fraction of the window covered by samples (0..1)
    largest_gap_s: float | None = None
    devices: list[str] = Field(default_factory=list)
    channels: list[str] = Field(default_factory=list)
    cross_check: dict[str, Any] = Field(default_factory=dict)  # e.g. counter vs power integral
    notes: list[str] = Field(default_factory=list)
    # added by accounting: what went into coverage and uncertainty (docs/accounting.md)
    gaps: int | None = None  # sample gaps overlapping the window
    resets: int | None = None  # energy-counter resets in the window
    wraps: int | None = None  # energy-counter wraparounds in the window
    update_period_s: float | None = None  # effective meter update period (largest of the devices)
    uncertainty_parts: dict[str, dict[str, float]] = Field(default_factory=dict)  # device -> term -> %
    dynamic_uncertainty_pct: float | None = None  # of dynamic_energy_j (gross and idle errors added)
    # carbon (issue 20, metrics/carbon.py): with --carbon-intensity; PUE applied as for cost
    carbon_intensity_g_per_kwh: float | None = None  # energy-weighted over the window
    carbon_g: float | None = None
    carbon_g_per_million_output_tokens: float | None = None
    carbon_g_per_request: float | None = None


class EnergyShare(_M):
    """One group's (tenant, tag, model, target) part of a window's energy split over requests."""

    requests: int = 0
    energy_j: float = 0.0
    output_tokens: int = 0
    j_per_output_token: float | None = None
    share: float | None = None  # of the energy split
    carbon_g: float | None = None


class RequestAttribution(_M):
    """A window's energy at one boundary split over its requests (an estimate; accounting/request_energy.py)."""

    boundary: str
    label: Literal["estimate"] = "estimate"
    method: str | None = None  # a sentence: basis, interval, weighting, idle
    basis: str | None = None  # dynamic | gross: what the per-request energies add up to
    weighting: str | None = None  # prefill_decode | tokens
    weighting_reason: str | None = None  # why tokens, when the split was not used
    idle_attributed: bool = False
    interval_s: float | None = None
    requests: int = 0
    energy_j: float | None = None  # the sum of the per-request energies
    j_per_prefill_token: float | None = None  # the weights used (prefill_decode only)
    j_per_decode_token: float | None = None
    mean_energy_j_per_request: float | None = None
    by_tenant: dict[str, EnergyShare] = Field(default_factory=dict)
    by_tag: dict[str, EnergyShare] = Field(default_factory=dict)
    by_model: dict[str, EnergyShare] = Field(default_factory=dict)
    by_target: dict[str, EnergyShare] = Field(default_factory=dict)
    unavailable_reason: str | None = None


class Window(_M):
    """A measurement window on the run's monotonic clock."""

    start_ns: int
    end_ns: int
    duration_s: float
    kind: str = "full"  # full | steady | idle | idle_after


class Validity(_M):
    verdict: Verdict = "valid"
    reasons: list[str] = Field(default_factory=list)
    # runs only: whether any energy was measured ("unavailable": no meter was read; the verdict is
    # then at best ``warn`` and latency/throughput are still measured)
    energy: Literal["measured", "unavailable"] | None = None


class TargetStats(_M):
    """One target's share of a level driven against several targets (issue 11)."""

    requests: Requests = Field(default_factory=Requests)
    latency: Latency = Field(default_factory=Latency)
    throughput: Throughput = Field(default_factory=Throughput)


# ---------------------------------------------------------------- run analyses (schema 2)

Num = int | float  # an int stays an int in result.json (concurrency 4, not 4.0)


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
    thermal_before: list[dict[str, Any] | None] = Field(default_factory=list)


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


class SearchOutcome(_M):
    """An auto sweep's or an optimiser's search (``load/search.py``): what it measured and chose."""

    best_value: Num | None = None
    knee_value: Num | None = None
    reason: str = ""
    measured_values: list[Num] = Field(default_factory=list)
    n_measured: int = 0
    failed: list[Any] = Field(default_factory=list)
    objective: str | None = None
    scores: list[float | None] = Field(default_factory=list)
    candidates: list[Num] | None = None  # optimize: the ladder searched
    ladder_size: int | None = None


class ParetoPoint(_M):
    label: str
    efficiency: float | None = None
    latency: float | None = None
    on_frontier: bool | None = None


class ParetoFront(_M):
    """Efficiency vs a latency figure over the run's levels (``analysis/pareto.py``)."""

    boundary: str | None = None
    efficiency: str = "output_tokens_per_s_per_kw"
    latency: str = ""
    points: list[ParetoPoint] = Field(default_factory=list)
    frontier: list[ParetoPoint] = Field(default_factory=list)
    excluded: list[Any] = Field(default_factory=list)


class Pareto(_M):
    boundary: str | None = None
    tpot_p99: ParetoFront | None = None
    ttft_p99: ParetoFront | None = None
    goodput_tpot_p99: ParetoFront | None = None  # with SLOs only


class LevelTiming(_M):
    """How the level was bounded, as asked (``--warmup``, ``--warmup-requests``, ``--duration``)."""

    warmup_s: float | None = None
    warmup_requests: int | None = None
    duration_s: float | None = None
    duration_includes_warmup: bool = False


class Oversaturation(_M):
    """The backlog test of a level (``load.saturation.is_oversaturated``)."""

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
    thermal: dict[str, Any] = Field(default_factory=dict)
    server_metrics: dict[str, Any] = Field(default_factory=dict)  # summaries of scraped series
    goodput: dict[str, Any] | None = None
    # several targets / several nodes (issue 11): per-target statistics beside the total, and
    # each node's energy per boundary (its own channels only) beside the ``cluster`` boundary
    per_target: dict[str, TargetStats] = Field(default_factory=dict)
    per_node_energy: dict[str, dict[str, BoundaryEnergy]] = Field(default_factory=dict)
    # energy per request rolled up by tenant / tag / model / target, per boundary (issue 20)
    attribution: dict[str, RequestAttribution] = Field(default_factory=dict)
    trials: TrialsBlock | None = None  # --trials N > 1
    power_split: PowerSplit | None = None  # the board reports its memory power
    # a saturated load generator (load/saturation.py): which figures it biases, and why
    saturated_figures: list[str] = Field(default_factory=list)
    saturation_kinds: list[str] = Field(default_factory=list)
    trial: int | None = None  # which trial of the level this is (0-based)
    timing: LevelTiming | None = None
    thermal_before: dict[str, Any] | None = None  # thermal state over the 3 s before the trial
    oversaturation: Oversaturation | None = None
    stopped_early: str | None = None  # why the level ended before its bound
    target_down: dict[str, Any] | None = None  # the target stopped answering (load/liveness.py), with "text"
    extra: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------- run


class ClockInfo(_M):
    source: str = "time.perf_counter_ns"
    anchor_wall_ns: int
    anchor_mono_ns: int
    anchor_uncertainty_ns: int = 0


class GPUInfo(_M):
    index: int
    name: str | None = None
    uuid: str | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    memory_total_bytes: int | None = None
    pstate: str | None = None


class Environment(_M):
    hostname: str | None = None
    os: str | None = None
    kernel: str | None = None
    python: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_total_bytes: int | None = None
    gpus: list[GPUInfo] = Field(default_factory=list)
    packages: dict[str, str] = Field(default_factory=dict)


class ServerInfo(_M):
    base_url: str | None = None
    engine: str | None = None  # vllm | sglang | tgi | llamacpp | transformers | openai
    version: str | None = None
    model: str | None = None
    models: list[str] = Field(default_factory=list)
    max_model_len: int | None = None
    launched: bool = False
    launch_command: list[str] | None = None
    effective_config: dict[str, Any] = Field(default_factory=dict)
    metrics_endpoint: str | None = None
    supports_ignore_eos: bool | None = None
    output_length_forced: bool | None = None
    stream_batching: dict[str, Any] = Field(default_factory=dict)
    # engine-specific request fields that force the output length (e.g. {"ignore_eos": true})
    extra_body: dict[str, Any] = Field(default_factory=dict)
    detected_by: list[str] = Field(default_factory=list)  # evidence for `engine`
    # set when wattbench launched the server
    pid: int | None = None
    model_path: str | None = None
    start_duration_s: float | None = None
    warmup_duration_s: float | None = None  # the launcher's one warm-up request after start
    log_path: str | None = None


class NodeInfo(_M):
    """One node of a distributed (Ray) run: its clock offset to the driver and its sensing."""

    node_id: str
    hostname: str | None = None
    ip: str | None = None
    load_actors: int = 0
    # offset = node clock − driver clock (ns), from the minimum-RTT ping; the true offset lies
    # within ± clock_uncertainty_ns (= that ping's RTT / 2)
    clock_offset_ns: int | None = None
    clock_uncertainty_ns: int | None = None
    clock_rtt_ns: int | None = None
    sensor_status: str = "none"  # none | ok | no_meters | failed | died
    channels: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)


class PrefillDecode(_M):
    """The run's prefill/decode energy split: the regression over its levels, the isolating pair
    (``--prefill-decode-pair``) and their cross-check; each as ``accounting/attribution.py`` returns it."""

    regression: dict[str, Any] | None = None
    isolating_pair: dict[str, Any] | None = None
    cross_check: dict[str, Any] | None = None


class CarbonIntensity(_M):
    """The grid carbon intensity a run used (``--carbon-intensity``): a constant or a series."""

    source: str
    g_per_kwh: float | None = None  # constant
    points: int | None = None  # series
    start_wall_s: float | None = None
    end_wall_s: float | None = None
    min_g_per_kwh: float | None = None
    max_g_per_kwh: float | None = None
    unit: str = "gCO2e/kWh"
    pue: float = 1.0


class Result(_M):
    schema_version: int = SCHEMA_VERSION
    wattbench_version: str
    run_id: str
    created_at: str  # ISO 8601 UTC, from the wall anchor
    status: Literal["running", "complete", "interrupted", "failed"] = "running"
    status_detail: str | None = None
    clock: ClockInfo
    config: dict[str, Any] = Field(default_factory=dict)
    environment: Environment = Field(default_factory=Environment)
    server: ServerInfo = Field(default_factory=ServerInfo)
    sensors: list[dict[str, Any]] = Field(default_factory=list)  # Channel.to_dict() per channel
    sensor_problems: list[str] = Field(default_factory=list)
    nodes: list[NodeInfo] = Field(default_factory=list)  # distributed runs only
    idle: dict[str, Any] = Field(default_factory=dict)  # boundary -> {power_w, duration_s, ...}
    levels: list[LevelResult] = Field(default_factory=list)
    validity: Validity = Field(default_factory=Validity)
    warnings: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    carbon: CarbonIntensity | None = None  # the intensity used: constant or series, PUE
    idle_window: Window | None = None  # the idle baseline before the first level (kind "idle")
    idle_after_window: Window | None = None  # and after the last (kind "idle_after")
    sweep: SearchOutcome | None = None  # --sweep auto
    optimize: SearchOutcome | None = None  # --optimize OBJECTIVE
    pareto: Pareto | None = None
    prefill_decode: PrefillDecode | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_v1(cls, data: Any) -> Any:
        """A version-1 result: its run analyses move from ``extra`` to their typed fields."""
        if not isinstance(data, dict):
            return data
        if int(data.get("schema_version") or 1) < 2:
            return upgrade_v1(data)
        return _typed_from_extra(data)


_V1_RUN_KEYS = ("sweep", "optimize", "pareto")
_V1_WINDOWS = {"idle_window": "idle", "idle_after_window": "idle_after"}
_V1_LEVEL_KEYS = ("trials", "power_split", "saturated_figures", "saturation_kinds")
# typed in version 2 after the first version-2 files were written (issue 17): moved from ``extra``
# in files of either version
_EXTRA_RUN_KEYS = ("prefill_decode",)
_EXTRA_LEVEL_KEYS = ("trial", "timing", "thermal_before", "oversaturation", "stopped_early", "target_down")


def _typed_from_extra(data: dict[str, Any]) -> dict[str, Any]:
    """Keys of ``extra`` typed since (``_EXTRA_*_KEYS``) moved to their fields; an empty carbon
    dict (what version 2 wrote without ``--carbon-intensity``) becomes ``None``. Not modified in place."""
    extra = data.get("extra") or {}
    levels = data.get("levels") or []
    moves = any(k in extra for k in _EXTRA_RUN_KEYS) or data.get("carbon") == {} or any(
        isinstance(lv, dict) and any(k in (lv.get("extra") or {}) for k in _EXTRA_LEVEL_KEYS) for lv in levels)
    if not moves:
        return data
    out = dict(data)
    if out.get("carbon") == {}:
        out["carbon"] = None
    extra = dict(extra)
    for key in _EXTRA_RUN_KEYS:
        if key in extra and out.get(key) is None:
            out[key] = extra.pop(key)
    out["extra"] = extra
    out["levels"] = [_level_from_extra(lv) for lv in levels]
    return out


def _level_from_extra(lv: Any) -> Any:
    if not isinstance(lv, dict):
        return lv
    lv = dict(lv)
    lx = dict(lv.get("extra") or {})
    for key in _EXTRA_LEVEL_KEYS:
        if key in lx and lv.get(key) is None:
            lv[key] = lx.pop(key)
    lv["extra"] = lx
    return lv


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 ``result.json`` (a dict) in version-2 form; the input is not modified."""
    out = dict(data)
    extra = dict(out.get("extra") or {})
    for key in _V1_RUN_KEYS:
        if key in extra and out.get(key) is None:
            out[key] = extra.pop(key)
    for key, kind in _V1_WINDOWS.items():
        if isinstance(extra.get(key), dict) and out.get(key) is None:
            out[key] = {"kind": kind, **extra.pop(key)}
    levels = []
    for lv in out.get("levels") or []:
        if isinstance(lv, dict):
            lv = dict(lv)
            lx = dict(lv.get("extra") or {})
            for key in _V1_LEVEL_KEYS:
                if key in lx and not lv.get(key):
                    lv[key] = lx.pop(key)
            lv["extra"] = lx
        levels.append(lv)
    out["levels"] = levels
    out["extra"] = extra
    out["schema_version"] = SCHEMA_VERSION
    return _typed_from_extra(out)
