"""The run (``Result``, the model of ``result.json``) and what describes it: clock, environment,
server, nodes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from wattbench.core.schema.analyses import CarbonIntensity, Pareto, PrefillDecode, SearchOutcome
from wattbench.core.schema.base import SCHEMA_VERSION, Num, _M, _Sparse
from wattbench.core.schema.level import LevelResult
from wattbench.core.schema.measure import MeasureInfo
from wattbench.core.schema.measures import Validity, Window
from wattbench.core.schema.noise import NoiseInfo
from wattbench.core.schema.recorded_config import AxisValue, RecordedConfig
from wattbench.core.schema.upgrade import _typed_from_extra, upgrade_v1


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


class ServerIdentity(_M):
    """What tells one server configuration from another (``server/identity``; the history's
    configuration key, ``results/configuration.py``, is made from it). Never a credential: the
    target is ``scheme://host:port[/path]`` without user, password, query or fragment, and settings
    whose names can carry one are left out where they are read."""

    target: str | None = None  # a --target server: scheme://host:port[/path] (None: launched)
    launched: str | None = None  # an engine wattbench started: its engine name (its flags: effective_config)
    replicas: list[str] = Field(default_factory=list)  # --targets beyond the first, as ``target``
    model: str | None = None  # the served model id
    engine: str | None = None
    version: str | None = None
    # the server's effective configuration as it exposes it, by source ("/props",
    # "/metrics vllm:cache_config_info", "/v1/models", "/get_server_info", "/info"), volatile
    # fields (uptime, counters, timestamps, slot states, sizes found by memory profiling) left out;
    # free-form: each source's shape is the server's, not wattbench's
    exposed: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # what was asked for and not given, one line each ("/props: HTTP 404"): a restart with other
    # flags there cannot be seen — a --config-label can say it
    not_exposed: list[str] = Field(default_factory=list)
    # set when the server exposed more than an identity keeps (``server/identity/common.MAX_IDENTITY_BYTES``):
    # what was left out ("16 KiB kept: 40 of 300 settings of /props"); None when nothing was
    capped: str | None = None


class StreamBatching(_Sparse):
    """How the server groups tokens into stream chunks, which distorts inter-token latency
    (``server/detect.py``): ``stream_interval`` tokens per chunk (None: the server does not say;
    ``note`` why). Empty where nothing is known (what an older file's ``{}`` reads as)."""

    stream_interval: int | None = None
    note: str | None = None


class ServerInfo(_M):
    base_url: str | None = None
    engine: str | None = None  # vllm | sglang | tgi | llamacpp | transformers | openai
    version: str | None = None
    model: str | None = None
    models: list[str] = Field(default_factory=list)
    max_model_len: int | None = None
    launched: bool = False
    launch_command: list[str] | None = None
    effective_config: dict[str, Any] = Field(default_factory=dict)  # free-form: the engine's own settings, its names
    metrics_endpoint: str | None = None
    supports_ignore_eos: bool | None = None
    output_length_forced: bool | None = None
    stream_batching: StreamBatching = Field(default_factory=StreamBatching)
    # engine-specific request fields that force the output length (e.g. {"ignore_eos": true}), and
    # --extra-body's: free-form, the request fields are the server's
    extra_body: dict[str, Any] = Field(default_factory=dict)
    detected_by: list[str] = Field(default_factory=list)  # evidence for `engine`
    # redirects met while checking the target (core/origin.py): same-host ones followed
    # ("GET http://h/v1/models -> http://h/api/models (HTTP 308)"), other-host ones refused
    redirects: list[str] = Field(default_factory=list)
    # set when wattbench launched the server
    pid: int | None = None
    model_path: str | None = None
    start_duration_s: float | None = None
    warmup_duration_s: float | None = None  # the launcher's one warm-up request after start
    log_path: str | None = None
    # what tells this server's configuration from another's; None in a result written before it was
    # recorded (its levels' configuration key then says "identity unknown")
    identity: ServerIdentity | None = None


class NodeInfo(_M):
    """One node of a distributed (Ray) run: its clock offset to the driver and its sensing.

    A machine over the whole run (``Result.nodes``, written once the run's cluster is known): its
    load actors counted, its sensor actor's status, channels and problems, and its clock — the sensor
    actor's offsets (the readings' mapping), else its first load actor's first. Not
    ``measures.LoadActorInfo``, which is one load actor over one level (what it sent, its CPU, the
    offset and drift that mapped that level's records); ``node_id`` here is the first 8 characters of
    Ray's node id (``LoadActorInfo.node_id`` holds it whole)."""

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


class TokenCalibration(_Sparse):
    """Approximate lengths fitted to the server's count (``run/prime.calibrate_prompts``): tokens =
    ``tokens_per_word`` · words + ``overhead_tokens``, from ``probes`` probe requests at ``lengths``."""

    tokens_per_word: float | None = None
    overhead_tokens: float | None = None
    probes: int | None = None
    lengths: list[int] = Field(default_factory=list)


class TokenizerInfo(_Sparse):
    """How prompt lengths were counted (``workload.tokenizer``'s token sources, ``describe()``):
    ``source`` hf (``path``, ``vocab_size``) | server (its ``/tokenize`` ``endpoint``, ``model``) |
    approx (``words_per_token``) | calibrated (approx fitted to the server: ``calibration``)."""

    source: str | None = None
    path: str | None = None
    vocab_size: int | None = None
    endpoint: str | None = None
    model: str | None = None
    words_per_token: float | None = None
    calibration: TokenCalibration | None = None


class WorkloadInfo(_M):
    """What the run's requests were made from (``Workload.describe()``): every kind (synthetic,
    dataset, trace, sessions) gives these; what only one kind has (its distributions, source file
    and hash, filters, replay speed-up) is kept beside them as given."""

    name: str | None = None
    kind: str | None = None  # synthetic | dataset | trace | sessions
    seed: int | None = None
    token_source: str | None = None  # how prompt lengths were counted: tokenizer | server | approx
    tokenizer: TokenizerInfo = Field(default_factory=TokenizerInfo)


class PromptCalibration(_M):
    """How synthetic prompt lengths were fitted to the server's own token count when there was no
    tokenizer (``run/prime.calibrate_prompts``): one-token probe prompts built like the run's, at
    ``lengths`` (asked tokens), each counted by the server (``usage.prompt_tokens``); the fit
    ``tokens = tokens_per_word · words + overhead_tokens``. ``used`` False: the fit was not
    possible (``reason``) and lengths stay the 0.75 words-per-token guess."""

    method: str = "server usage.prompt_tokens"
    used: bool = False
    probes: int = 0  # probe requests sent
    counted: int = 0  # of them, with a usage.prompt_tokens
    lengths: list[int] = Field(default_factory=list)  # asked tokens probed
    words: list[int] = Field(default_factory=list)  # the probes' word counts, per length
    server_tokens: list[float] = Field(default_factory=list)  # the server's mean count, per length
    tokens_per_word: float | None = None
    overhead_tokens: float | None = None
    reason: str = ""
    # the server's answers to the probes were refused (counts no tokenizer makes, or probes that
    # stalled): ``reason`` names the lengths or the round, and the run carries it as a warning
    refused: bool = False


class TunedFrom(_M):
    """A result read from a ``wattbench tune`` directory (``planning.measured.load_run_or_tune``): the
    tune's recommended trial, reduced to the level the tune chose. Set in memory, never written."""

    tune_id: str
    trial: int
    label: str = ""
    config: dict[str, AxisValue] = Field(default_factory=dict)  # resolved axis -> value ({} = engine defaults)


class SensorChannel(_Sparse):
    """One channel of the run's sensor inventory, as ``telemetry.base.Channel.to_dict`` writes it:
    ``kind`` counter (J) | power (W) | aux, the boundary and device it measures, how (``method``
    measured | declared | estimate), and the meter's documented accuracy."""

    id: str = ""
    sensor: str = ""
    kind: str = ""
    quantity: str = ""
    unit: str = ""
    boundary: str | None = None
    device: str = ""
    resolution: Num | None = None
    update_period_s: Num | None = None
    source: str = ""
    method: str = "measured"
    primary: bool = False
    max_value: Num | None = None
    uncertainty_pct: Num | None = None
    notes: str = ""
    node: str = ""


class IdleBaseline(_Sparse):
    """The idle baseline of one boundary (``accounting.idle.IdlePower``, as written): the power the
    dynamic figures subtract, over how long, before and after the levels, their drift and the
    baseline's uncertainty."""

    boundary: str = ""
    power_w: Num | None = None
    duration_s: Num | None = None
    before_w: Num | None = None
    after_w: Num | None = None
    drift_pct: Num | None = None
    uncertainty_pct: Num | None = None
    method: str = ""
    label: str = "measured"


class Result(_M):
    schema_version: int = SCHEMA_VERSION
    wattbench_version: str
    run_id: str
    created_at: str  # ISO 8601 UTC, from the wall anchor
    status: Literal["running", "complete", "interrupted", "failed"] = "running"
    status_detail: str | None = None
    clock: ClockInfo
    config: RecordedConfig = Field(default_factory=RecordedConfig)  # the settings it ran with, as written
    environment: Environment = Field(default_factory=Environment)
    server: ServerInfo = Field(default_factory=ServerInfo)
    sensors: list[SensorChannel] = Field(default_factory=list)  # Channel.to_dict() per channel
    sensor_problems: list[str] = Field(default_factory=list)
    nodes: list[NodeInfo] = Field(default_factory=list)  # distributed runs only
    idle: dict[str, IdleBaseline] = Field(default_factory=dict)  # boundary -> its idle baseline
    levels: list[LevelResult] = Field(default_factory=list)
    validity: Validity = Field(default_factory=Validity)
    warnings: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    # --config-label: the user's name for what wattbench cannot see (a driver, a BIOS setting, flags a
    # server does not expose); part of the configuration key. None: none given (and in older files)
    config_label: str | None = None
    carbon: CarbonIntensity | None = None  # the intensity used: constant or series, PUE
    idle_window: Window | None = None  # the idle baseline before the first level (kind "idle")
    idle_after_window: Window | None = None  # and after the last (kind "idle_after")
    sweep: SearchOutcome | None = None  # --sweep auto
    optimize: SearchOutcome | None = None  # --optimize OBJECTIVE
    pareto: Pareto | None = None
    prefill_decode: PrefillDecode | None = None
    workload: WorkloadInfo | None = None
    # how prompt lengths were made to measure (tokenizer | server | approx): the workload's token
    # source, the run's (every level uses the same)
    prompt_length_source: str | None = None
    # no tokenizer: prompt lengths fitted to the server's count before the first level (``calibrated``)
    prompt_calibration: PromptCalibration | None = None
    tune: TunedFrom | None = None
    # priming, the history check, engine starts, the trial order (core/schema/noise.py)
    noise: NoiseInfo | None = None
    measure: MeasureInfo | None = None  # `wattbench measure -- COMMAND`: the command and its tool
    extra: dict[str, Any] = Field(default_factory=dict)  # free-form: an older file's keys no field names, kept

    @model_validator(mode="before")
    @classmethod
    def _from_v1(cls, data: Any) -> Any:
        """A version-1 result: its run analyses move from ``extra`` to their typed fields."""
        if not isinstance(data, dict):
            return data
        if int(data.get("schema_version") or 1) < 2:
            return upgrade_v1(data)
        return _typed_from_extra(data)

    @property
    def served_model(self) -> str | None:
        """The model the run measured: the id its server gave, else the one its settings named
        (``--model``). The one rule the comparison's model check, the configuration key and the
        history store read."""
        return self.server.model or self.config.model

