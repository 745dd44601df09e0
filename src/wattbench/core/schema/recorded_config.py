"""The run's configuration as recorded (``Result.config``): what ``RunConfig.public_dict()``
(``config/run.py``) writes into ``result.json`` — every ``wattbench run`` / ``measure`` setting but the
API key, with credentials redacted — read back by name and type.

A field is ``None`` (or empty) when the file does not record it: an older file written before the
setting existed, a result made by hand, or a value in another type than today's (kept as it was,
never refused: the run's figures are in its levels, not here). No field repeats ``RunConfig``'s
default (its one home); a reader that needs one when nothing was recorded says so where it reads.
The block is written back as it was read: the keys the file held (no declared field appears as
``null`` where the file had no such key), in the file's order, values as they were; a key
wattbench does not name is kept as an extra, in its place.

Where the run's precision came from (``model_precision``) has its one home here too: the server's
effective configuration, the recorded configuration, or the engine's ``--dtype`` /
``--quantization`` arguments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from wattbench.core.argv import flag_value
from wattbench.core.domains import Api, EngineName, TrialOrder

# One value of a tune axis (``tune/space.py``): a number, a switch, a word (an engine's choice)
AxisValue = str | int | float | bool


class RecordedConfig(BaseModel):
    """``Result.config``: the settings in ``RunConfig``'s order (``wattbench run --help``'s), each as
    ``RunConfig`` types it (the fields' comments say what only the file tells)."""

    model_config = ConfigDict(extra="allow")

    # target
    targets: list[str] = Field(default_factory=list)  # redacted base URLs (``core/redact.redact_url``)
    target: str | None = None  # redacted; None: the embedded engine (or not recorded)
    model: str | None = None
    api: Api | None = None
    # load
    concurrency: list[int] = Field(default_factory=list)
    # requests/s; inf (every request at once) is written as null, as result.json's writer has always
    # written it (JSON has no inf), and read back as inf
    rate: list[float] = Field(default_factory=list)
    arrival: str | None = None
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_s: float | None = None
    warmup_requests: int | None = None
    workers: int | None = None
    seed: int | None = None
    # workload
    workload: str | None = None
    input_tokens: str | None = None  # a length or a distribution, as given
    output_tokens: str | None = None
    tokenizer: str | None = None
    speedup: float | None = None
    # sensors
    sensors: list[str] = Field(default_factory=list)  # sensor specs (empty: auto-detected)
    no_sensors: bool | None = None
    sample_interval_s: float | None = None
    idle_s: float | None = None
    idle_after_s: float | None = None
    # efficiency
    price_per_kwh: float | None = None
    currency: str | None = None
    pue: float | None = None
    carbon_intensity: str | None = None
    attribute_idle: bool | None = None
    tenant_field: str | None = None
    # SLO / trials
    slo: str | None = None  # the --slo text (``metrics.slo.parse_slos`` reads it)
    trials: int | Literal["auto"] | None = None
    precision_pct: float | None = None
    max_trials: int | None = None
    max_time_s: float | None = None
    trial_order: TrialOrder | None = None
    restart_engine: bool | None = None
    # measuring from a known state
    prime: bool | None = None
    prime_requests: int | None = None
    prompt_salt: str | None = None
    calibrate_prompts: bool | None = None
    history_check: bool | None = None
    cooldown_s: float | None = None
    precondition: bool | None = None
    precondition_max_s: float | None = None
    # searching the load
    sweep: str | None = None
    optimize: str | None = None
    max_concurrency: int | None = None
    prefill_decode_pair: bool | None = None
    ray: str | None = None
    ray_actors: int | None = None
    # engine (when no target)
    engine: EngineName | None = None
    engine_model: str | None = None
    engine_args: list[str] = Field(default_factory=list)
    device: str | None = None
    # output
    out: str | None = None
    tags: list[str] = Field(default_factory=list)
    config_label: str | None = None
    db: str | None = None
    register_run: bool | None = None
    strict: bool | None = None
    html: bool | None = None
    keep_output_text: bool | None = None
    keep_chunks: bool | None = None
    # requests
    request_timeout_s: float | None = None
    secret_headers: list[str] = Field(default_factory=list)
    extra_body: dict[str, JsonValue] = Field(default_factory=dict)  # credential-like values "<redacted>"
    temperature: float | None = None
    top_p: float | None = None
    stall_timeout_s: float | None = None
    headers: dict[str, str] = Field(default_factory=dict)  # --header, values that can hold a credential redacted
    # the run's precision as a result made by hand or by another tool may state it (no run writes these:
    # a run's precision is its server's, ``model_precision``)
    dtype: str | None = None
    quantization: str | None = None

    # the keys in the order the block was read (or built) in: it is written back in that order
    _order: tuple[str, ...] = PrivateAttr(default=())
    # values of named settings the file gives in another type than today's (a hand-edited file, an
    # older writer): read as not recorded (the field keeps its default), written back as they were
    _unread: dict[str, JsonValue] = PrivateAttr(default_factory=dict)

    @field_validator("rate", mode="before")
    @classmethod
    def _null_rate_is_inf(cls, v: Any) -> Any:
        return [math.inf if x is None else x for x in v] if isinstance(v, list) else v

    @field_serializer("rate")
    def _inf_rate_as_null(self, v: list[float]) -> list[float | None]:
        return [None if math.isinf(x) else x for x in v]

    @model_validator(mode="wrap")
    @classmethod
    def _read_as_written(cls, data: Any, handler: ModelWrapValidatorHandler[RecordedConfig]) -> RecordedConfig:
        if not isinstance(data, dict):
            return handler(data)
        try:
            out = handler(data)
            unread: dict[str, JsonValue] = {}
        except ValidationError as e:
            bad = {str(err["loc"][0]) for err in e.errors() if err["loc"]}
            unread = {k: v for k, v in data.items() if k in bad}
            out = handler({k: v for k, v in data.items() if k not in bad})
        out._order = tuple(str(k) for k in data)
        out._unread = unread
        return out

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The keys that were read or set (a declared field never appears as its default), in the
        order read, those assigned since after them; a value read as not recorded, as it was."""
        out = handler(self)
        if not isinstance(out, dict):
            return out
        keep = set(self.model_fields_set) | set(self.model_extra or {})
        values = self._unread | {k: v for k, v in out.items() if k in keep}  # one assigned since: its value
        order = [k for k in self._order if k in values] + [k for k in values if k not in self._order]
        return {k: values[k] for k in order}

    def recorded(self) -> dict[str, JsonValue]:
        """The block as ``result.json`` holds it (JSON values, the file's keys in its order)."""
        dumped: dict[str, JsonValue] = self.model_dump(mode="json")
        return dumped


DtypeSource = Literal["effective_config.dtype", "effective_config.torch_dtype", "config.dtype", "engine_args --dtype"]
QuantizationSource = Literal["effective_config.quantization", "config.quantization", "engine_args --quantization"]


class ModelPrecision(BaseModel):
    """The numeric format the run's model ran in, and where each part was read (None: nowhere)."""

    model_config = ConfigDict(frozen=True)

    dtype: str | None = None
    dtype_from: DtypeSource | None = None
    quantization: str | None = None
    quantization_from: QuantizationSource | None = None

    def text(self) -> str | None:
        """``bfloat16``, ``bfloat16/awq`` or ``awq``; None when neither is known."""
        parts = [p for p in (self.dtype, self.quantization) if p]
        return "/".join(parts) if parts else None


def _given(value: object) -> str | None:
    """A setting's value as text; None for one not given (absent, null, empty or false)."""
    return str(value) if value else None


def model_precision(effective_config: Mapping[str, object], config: RecordedConfig) -> ModelPrecision:
    """The run's dtype and quantization, each from the first source that states it: the server's
    effective configuration (``ServerInfo.effective_config``: ``dtype``, or ``torch_dtype``, the
    name a transformers ``config.json`` gives it), the recorded configuration (``dtype`` /
    ``quantization``: a result made by hand or by another tool), then the engine arguments wattbench
    launched with (``--dtype`` / ``--quantization``, the last given, as the engine reads them)."""
    dtype_sources: tuple[tuple[DtypeSource, object], ...] = (
        ("effective_config.dtype", effective_config.get("dtype")),
        ("effective_config.torch_dtype", effective_config.get("torch_dtype")),
        ("config.dtype", config.dtype),
        ("engine_args --dtype", flag_value(config.engine_args, "--dtype")))
    quant_sources: tuple[tuple[QuantizationSource, object], ...] = (
        ("effective_config.quantization", effective_config.get("quantization")),
        ("config.quantization", config.quantization),
        ("engine_args --quantization", flag_value(config.engine_args, "--quantization")))
    dtype = next(((src, v) for src, v in dtype_sources if _given(v) is not None), None)
    quant = next(((src, v) for src, v in quant_sources if _given(v) is not None), None)
    return ModelPrecision(dtype=_given(dtype[1]) if dtype else None, dtype_from=dtype[0] if dtype else None,
                          quantization=_given(quant[1]) if quant else None,
                          quantization_from=quant[0] if quant else None)
