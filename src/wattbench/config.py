"""Run configuration: what the CLI validates its flags into and what the library runs.

Secrets (API keys, BMC passwords) are never fields here: they are read from the environment or
passed as ``SecretStr`` and excluded from every dump written to disk.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    # target
    target: str | None = None  # base URL; None = start the embedded engine
    targets: list[str] = Field(default_factory=list)  # several replicas (issue 11)
    model: str | None = None
    api: Literal["completions", "chat"] = "completions"
    api_key: SecretStr | None = Field(default=None, exclude=True)
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 120.0  # no bytes for this long -> timeout
    headers: dict[str, str] = Field(default_factory=dict, exclude=True)  # --header K:V (may hold secrets)
    extra_body: dict[str, Any] = Field(default_factory=dict)  # --extra-body JSON: merged into every request
    temperature: float | None = None  # sampling (default: the request's temperature=0)
    top_p: float | None = None

    # engine (when no target)
    engine: Literal["transformers", "vllm", "sglang", "llamacpp"] = "transformers"
    engine_model: str | None = None  # preset name or local path
    engine_args: list[str] = Field(default_factory=list)
    device: str | None = None  # cuda | cpu | None=auto

    # load
    concurrency: list[int] = Field(default_factory=list)
    rate: list[float] = Field(default_factory=list)
    arrival: str = "poisson"  # poisson | constant | gamma:K
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_s: float | None = None
    warmup_requests: int | None = None
    workers: int | None = None  # None = auto
    seed: int = 0

    # workload
    workload: str | None = None  # preset name or file
    input_tokens: str = "256"
    output_tokens: str = "128"
    tokenizer: str | None = None
    speedup: float = 1.0
    keep_output_text: bool = False
    tenant_field: str = "tenant"  # dataset/trace row field naming who asked (energy per tenant)

    # sensors
    sensors: list[str] = Field(default_factory=list)  # specs; empty = auto-detect
    no_sensors: bool = False
    sample_interval_s: float = 0.1
    idle_s: float = 3.0
    idle_after_s: float = 0.0

    # efficiency
    price_per_kwh: float = 0.15
    currency: str = "USD"
    pue: float = 1.0
    carbon_intensity: str | None = None  # gCO2e/kWh, or a CSV/JSON time series file (metrics/carbon_series.py)
    attribute_idle: bool = False  # per-request energy includes a share of idle power by time in flight

    # SLO / trials (issue 5)
    slo: str | None = None
    trials: int = 1
    cooldown_s: float = 0.0
    sweep: str | None = None  # "auto": double concurrency until throughput stops growing
    optimize: str | None = None  # objective: goodput_per_kw | output_tokens_per_s_per_kw | goodput_rps
    ray: str | None = None  # "auto", "local" or a Ray cluster address: distributed load and per-node sensing
    ray_actors: int | None = None
    # upper end of --sweep auto and of the default --optimize ladder (256 when not given); with
    # --rate, the open loop's cap on requests in flight (none when not given)
    max_concurrency: int | None = None
    prefill_decode_pair: bool = False  # two extra levels isolating prefill and decode energy

    # measuring from a known state (issue 24; run/prime.py, docs/accounting.md "Priming")
    prime: bool = True  # take the server through the run's largest load before the first level
    prime_requests: int | None = None  # None: two rounds of the largest concurrency (run/prime.py)
    history_check: bool = True  # measure the first level again at the end; a difference beyond noise warns
    trial_order: Literal["interleaved", "shuffled"] = "interleaved"  # --trials over a ladder
    restart_engine: bool = False  # restart a launched engine before every trial round (--trials)

    # output
    out: str | None = None
    tags: list[str] = Field(default_factory=list)
    db: str | None = None
    register_run: bool = True  # add the run to the history store
    html: bool = True
    # requests.jsonl keeps every content chunk's arrival stamp (chunk_ns); without it the stamps
    # are used while the level is accounted and dropped (~15 bytes a content chunk off each line)
    keep_chunks: bool = False

    @field_validator("concurrency")
    @classmethod
    def _pos_conc(cls, v: list[int]) -> list[int]:
        for c in v:
            if c < 1:
                raise ValueError(f"concurrency must be >= 1, got {c}")
        return v

    @field_validator("rate")
    @classmethod
    def _pos_rate(cls, v: list[float]) -> list[float]:
        for r in v:
            if not r > 0:
                raise ValueError(f"rate must be > 0 requests/s, got {r}")
        return v

    @field_validator("pue")
    @classmethod
    def _pue(cls, v: float) -> float:
        if v < 1.0:
            raise ValueError(f"PUE must be >= 1.0, got {v}")
        return v

    @field_validator("request_timeout_s", "stall_timeout_s")
    @classmethod
    def _pos_timeout(cls, v: float) -> float:
        if not v > 0:
            raise ValueError(f"timeouts must be > 0 seconds, got {v}")
        return v

    @field_validator("temperature", "top_p")
    @classmethod
    def _sampling(cls, v: float | None, info) -> float | None:
        if v is not None and not (v >= 0 and v == v):
            raise ValueError(f"--{info.field_name.replace('_', '-')} must be >= 0, got {v}")
        if info.field_name == "top_p" and v is not None and not 0 < v <= 1:  # 0 is refused by servers
            raise ValueError(f"--top-p must be in (0, 1], got {v}")
        return v

    @field_validator("trials")
    @classmethod
    def _trials(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"--trials must be >= 1, got {v}")
        return v

    @staticmethod
    def _flag(name: str) -> str:
        return "--" + name.removesuffix("_s").replace("_", "-")

    @field_validator("arrival")
    @classmethod
    def _arrival(cls, v: str) -> str:
        from wattbench.errors import UserError
        from wattbench.load.schedule import parse_arrival

        try:
            parse_arrival(v)
        except UserError as e:
            raise ValueError(str(e)) from None
        return v

    @field_validator("workers", "ray_actors", "max_concurrency", "warmup_requests", "prime_requests")
    @classmethod
    def _at_least_one(cls, v: int | None, info) -> int | None:
        floor = 0 if info.field_name == "warmup_requests" else 1
        if v is not None and v < floor:
            raise ValueError(f"{cls._flag(info.field_name)} must be >= {floor}, got {v}")
        return v

    @field_validator("sample_interval_s", "speedup")
    @classmethod
    def _positive(cls, v: float, info) -> float:
        if not v > 0:  # also refuses NaN
            raise ValueError(f"{cls._flag(info.field_name)} must be > 0, got {v}")
        return v

    @field_validator("idle_s", "idle_after_s", "cooldown_s", "price_per_kwh", "warmup_s")
    @classmethod
    def _not_negative(cls, v: float | None, info) -> float | None:
        if v is not None and not v >= 0:  # also refuses NaN
            raise ValueError(f"{cls._flag(info.field_name)} must be >= 0, got {v}")
        return v

    @model_validator(mode="after")
    def _levels(self) -> "RunConfig":
        if self.concurrency and self.rate:
            raise ValueError("give --concurrency or --rate, not both")
        if self.num_requests is not None and self.num_requests < 1:
            raise ValueError("--num-requests must be >= 1")
        if self.duration_s is not None and self.duration_s <= 0:
            raise ValueError("--duration must be > 0 seconds")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"--max-concurrency must be >= 1, got {self.max_concurrency}")
        if any(r == float("inf") for r in self.rate) and self.num_requests is None:
            raise ValueError("--rate inf sends every request at once: give the number with --num-requests")
        if self.restart_engine and (self.target or self.targets):
            raise ValueError("--restart-engine restarts an engine wattbench starts; with --target the server is "
                             "yours: restart it between runs yourself (or drop --restart-engine)")
        if self.restart_engine and self.trials < 2:
            raise ValueError("--restart-engine restarts the engine between trials: give --trials N (N >= 2)")
        return self

    def levels(self) -> list[tuple[str, float]]:
        """The load levels in run order: ("concurrency", N) or ("rate", R)."""
        if self.rate:
            return [("rate", r) for r in self.rate]
        default = [1, 8] if self.target is None and not self.targets else [1]  # embedded: two levels
        return [("concurrency", c) for c in (self.concurrency or default)]

    def request_fields(self) -> dict[str, Any]:
        """Fields merged into every request body: ``--extra-body``, then ``--temperature`` and
        ``--top-p`` (which win)."""
        out = dict(self.extra_body)
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.top_p is not None:
            out["top_p"] = self.top_p
        return out

    def public_dict(self) -> dict:
        """The config as written to result.json: no secrets (header values that can carry a
        credential are redacted, the names stay; URL credentials shown as ``***@``: ``server/redact.py``)."""
        from wattbench.server.redact import redact_headers, redact_url

        d = self.model_dump(mode="json", exclude={"api_key", "headers"})
        if self.headers:
            d["headers"] = redact_headers(self.headers)
        d["target"] = redact_url(d.get("target"))
        d["targets"] = [redact_url(u) for u in d.get("targets") or []]
        return d
