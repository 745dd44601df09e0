"""Run configuration: what the CLI validates its flags into and what the library runs.

Secrets (API keys, BMC passwords) are never fields here: they are read from the environment or
passed as ``SecretStr`` and excluded from every dump written to disk.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

# ------------------------------------------------------------------ what each numeric option takes
#
# One table for every numeric option of every command: the CLI checks each value
# against it while the command line is parsed (``cli.common.number_gate``, before anything starts),
# and ``RunConfig`` checks its fields against the same entries (a notebook gets the same rule). A
# flag means one thing in every command, so the table is keyed by flag; the few flags
# that differ between commands have a ``(command, flag)`` entry. A flag not listed takes positive
# numbers only: a new option is checked from the day it is declared.

MAX_SECONDS = 366 * 24 * 3600.0  # the longest duration, interval or timeout any option takes (a year)
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class Domain:
    """The numbers an option takes: from ``lo`` to ``hi`` (``None``: no bound; ``*_open``: the end
    itself excluded); ``inf_ok``: ``inf`` too (``--rate inf``); ``unit`` names what the number is."""

    lo: float | None = 0.0
    lo_open: bool = True
    hi: float | None = None
    hi_open: bool = False
    inf_ok: bool = False
    unit: str = ""

    def describe(self) -> str:
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {_num(self.lo)}")
        if self.hi is not None:
            parts.append(f"{'<' if self.hi_open else '<='} {_num(self.hi)}")
        return " and ".join(parts) + (f" {self.unit}" if self.unit else "")

    def problem(self, flag: str, v: float | int) -> str | None:
        """One line naming ``flag`` when ``v`` is outside the domain, else None."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        if math.isnan(v) or (math.isinf(v) and not (self.inf_ok and v > 0)):
            return f"{flag} must be a finite number {self.describe()}, got {v} (1e400 and larger read as inf)"
        below = self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo)
        above = self.hi is not None and not math.isinf(v) and (v >= self.hi if self.hi_open else v > self.hi)
        if below or above:
            return f"{flag} must be {self.describe()}, got {_num(v)}"
        return None

    def check(self, flag: str, v: float | int) -> None:
        msg = self.problem(flag, v)
        if msg:
            from wattbench.core.errors import UserError

            raise UserError(msg)


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


# Headers a --header may not set: the HTTP client frames every request with them (a wrong
# Content-Length made every request of a run disconnect) or wattbench sets them for the body it sends.
_FRAMING = "the HTTP client frames each request with it"
OWNED_HEADERS = {
    "content-length": _FRAMING, "transfer-encoding": _FRAMING, "connection": _FRAMING, "keep-alive": _FRAMING,
    "te": _FRAMING, "trailer": _FRAMING, "upgrade": _FRAMING, "expect": _FRAMING, "proxy-connection": _FRAMING,
    "host": "the HTTP client sends the --target's host",
    "content-type": "the body is JSON, sent as application/json",
    "content-encoding": "the body is sent unencoded",
}


def control_character(text: str) -> bool:
    """Whether ``text`` holds a control character other than a tab (what no HTTP header value may)."""
    return any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in text)


def _num(x: float | int) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


POSITIVE = Domain()
NON_NEGATIVE = Domain(lo_open=False)
AT_LEAST_ONE = Domain(lo=1, lo_open=False)
SECONDS = Domain(hi=MAX_SECONDS, unit="seconds")
SECONDS_OR_ZERO = Domain(lo_open=False, hi=MAX_SECONDS, unit="seconds")
PERCENT = Domain(lo_open=False, hi=100.0, hi_open=True, unit="%")
INDEX = Domain(lo_open=False)

FLAG_DOMAINS: dict[str, Domain] = {
    # load
    "--concurrency": AT_LEAST_ONE, "--max-concurrency": AT_LEAST_ONE, "--workers": AT_LEAST_ONE,
    "--ray-actors": AT_LEAST_ONE, "--num-requests": AT_LEAST_ONE, "--trials": AT_LEAST_ONE,
    "--prime-requests": AT_LEAST_ONE,
    "--rate": Domain(inf_ok=True, unit="requests/s"), "--speedup": POSITIVE,
    "--seed": Domain(lo_open=False, hi=MAX_SEED), "--warmup": NON_NEGATIVE,
    # time
    "--duration": SECONDS, "--request-timeout": SECONDS, "--stall-timeout": SECONDS, "--sample-interval": SECONDS,
    "--interval": SECONDS, "--idle": SECONDS_OR_ZERO, "--idle-after": SECONDS_OR_ZERO, "--cooldown": SECONDS_OR_ZERO,
    "--measure": SECONDS_OR_ZERO, "--max-minutes": Domain(hi=MAX_SECONDS / 60, unit="minutes"),
    # sampling
    "--temperature": NON_NEGATIVE, "--top-p": Domain(hi=1.0), "--max-tokens": AT_LEAST_ONE,
    # money, power, efficiency
    "--price-per-kwh": NON_NEGATIVE, "--pue": Domain(lo=1.0, lo_open=False), "--noise-pct": NON_NEGATIVE,
    "--max-repeats": NON_NEGATIVE, "--max-trials": AT_LEAST_ONE, "--power-limit": Domain(unit="W"),
    "--sm-clocks": Domain(unit="MHz"), "--idle-threshold": NON_NEGATIVE, "--history-max-mb": POSITIVE,
    "--burst": AT_LEAST_ONE, "--limit": NON_NEGATIVE,
    # plan
    "--batch": AT_LEAST_ONE, "--context": NON_NEGATIVE, "--gpus": AT_LEAST_ONE, "--level": INDEX,
    "--rack-kw": Domain(unit="kW"), "--site-kw": Domain(unit="kW"), "--it-kw": Domain(unit="kW"),
    "--host-overhead-w": Domain(lo_open=False, unit="W"), "--headroom-pct": PERCENT,
    "--air-max-rack-kw": Domain(unit="kW"), "--air-max-accelerator-w": Domain(unit="W"),
    "--resolution-w": Domain(unit="W"), "--load": Domain(hi=1.0), "--hours": Domain(hi=8760.0, unit="hours a year"),
    "--rack-rent-per-month": NON_NEGATIVE, "--racks": NON_NEGATIVE, "--cooling-cost-per-kwh": NON_NEGATIVE,
    "--maintenance-pct-per-year": NON_NEGATIVE, "--hardware-cost": NON_NEGATIVE, "--amortization-years": POSITIVE,
    "--tokens-per-s": POSITIVE, "--tokens-per-kwh": POSITIVE,
}
COMMAND_FLAG_DOMAINS: dict[tuple[str, str], Domain] = {
    ("tune", "--gpus"): INDEX,  # GPU indices there; a number of GPUs in `plan roofline`
}


# Text options: an empty value given on the command line (``-c ''``, ``--out ''``, ``--slo ''`` were
# read as not given, ``--tag ''`` was registered) is refused in one line, except where empty means
# something (listed with what it means). Checked by ``cli.common.text_gate`` as the command line is
# parsed, so a new option is covered when it is declared.
EMPTY_TEXT_OK: dict[str, str] = {
    "--prompt-salt": "an empty salt: prompts carry no run-specific tag",
}


def name_problem(name: str, what: str) -> str | None:
    """Why ``name`` cannot be a tag or baseline name (one line), or None: non-empty, no whitespace, no '/'."""
    if not name or not name.strip() or any(ch.isspace() for ch in name) or "/" in name:
        return f"{what} {name!r} must be non-empty without spaces or '/'"
    return None


def domain_for(flag: str, command: str | None = None) -> Domain:
    """What ``flag`` takes (in ``command``): its table entry, else positive numbers."""
    if command is not None and (command, flag) in COMMAND_FLAG_DOMAINS:
        return COMMAND_FLAG_DOMAINS[(command, flag)]
    return FLAG_DOMAINS.get(flag, POSITIVE)


MAX_CONFIG_LABEL = 64  # characters


def config_label_problem(label: str | None) -> str | None:
    """One line naming what is wrong with a ``--config-label`` (None: fine, or none given): it is
    1..``MAX_CONFIG_LABEL`` printable characters, not only spaces, with no space at either end (it
    is shown in ``history list`` and compared as given)."""
    if label is None:
        return None
    if not label.strip():
        return "--config-label must not be empty: name what differs, e.g. --config-label bios-perf"
    if label != label.strip():
        return f"--config-label {label.strip()!r}: leave out the spaces around it"
    if not label.isprintable():
        return "--config-label holds a control character; give printable text, e.g. --config-label driver-580"
    if len(label) > MAX_CONFIG_LABEL:
        return f"--config-label is {len(label)} characters; give at most {MAX_CONFIG_LABEL}"
    return None


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    # target
    target: str | None = None  # base URL; None = start the embedded engine
    targets: list[str] = Field(default_factory=list)  # several replicas
    model: str | None = None
    api: Literal["completions", "chat"] = "completions"
    api_key: SecretStr | None = Field(default=None, exclude=True)
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 120.0  # no bytes for this long -> timeout
    headers: dict[str, str] = Field(default_factory=dict, exclude=True)  # --header K:V (may hold secrets)
    secret_headers: list[str] = Field(default_factory=list)  # --secret-header NAME: that header's value is a secret
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

    # SLO / trials
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

    # measuring from a known state (run/prime.py, docs/accounting.md "Priming")
    prime: bool = True  # take the server through the run's largest load before the first level
    prime_requests: int | None = None  # None: two rounds of the largest concurrency (run/prime.py)
    history_check: bool = True  # measure the first level again at the end; a difference beyond noise warns
    trial_order: Literal["interleaved", "shuffled"] = "interleaved"  # --trials over a ladder
    restart_engine: bool = False  # restart a launched engine before every trial round (--trials)
    prompt_salt: str | None = None  # None: the run id's random part (no prompt repeats across runs); "": none
    # without a tokenizer or /tokenize: fit synthetic prompt lengths to the server's usage.prompt_tokens
    # before the first level (run/prime.calibrate_prompts); False keeps the 0.75 words-per-token guess
    calibrate_prompts: bool = True

    # output
    out: str | None = None
    tags: list[str] = Field(default_factory=list)
    # --config-label: what wattbench cannot see (a driver, a BIOS setting, flags the server does not
    # expose), part of the configuration key (results/configuration.py); checked by config_label_problem
    config_label: str | None = None
    db: str | None = None
    register_run: bool = True  # add the run to the history store
    html: bool = True
    # requests.jsonl keeps every content chunk's arrival stamp (chunk_ns); without it the stamps
    # are used while the level is accounted and dropped (~15 bytes a content chunk off each line)
    keep_chunks: bool = False

    # numeric fields follow their flag's table entry (FLAG_DOMAINS); these two are not named after theirs
    _FLAGS: ClassVar[dict[str, str]] = {"warmup_s": "--warmup", "warmup_requests": "--warmup"}

    @staticmethod
    def _flag(name: str) -> str:
        return RunConfig._FLAGS.get(name) or "--" + name.removesuffix("_s").replace("_", "-")

    @field_validator("concurrency", "rate", "num_requests", "duration_s", "warmup_s", "warmup_requests", "workers",
                     "seed", "speedup", "sample_interval_s", "idle_s", "idle_after_s", "price_per_kwh", "pue",
                     "trials", "cooldown_s", "max_concurrency", "ray_actors", "request_timeout_s", "stall_timeout_s",
                     "temperature", "top_p", "prime_requests")
    @classmethod
    def _in_domain(cls, v, info):
        flag = cls._flag(info.field_name)
        # --warmup 10s is seconds (a duration's bound); --warmup 20 a count
        domain = SECONDS_OR_ZERO if info.field_name == "warmup_s" else domain_for(flag)
        for x in v if isinstance(v, list) else [v]:
            msg = None if x is None else domain.problem(flag, x)
            if msg:
                raise ValueError(msg)
        return v

    @field_validator("config_label")
    @classmethod
    def _config_label(cls, v: str | None) -> str | None:
        msg = config_label_problem(v)
        if msg:
            raise ValueError(msg)
        return v

    @field_validator("headers")
    @classmethod
    def _one_line_headers(cls, v: dict[str, str]) -> dict[str, str]:
        """A header is one line of visible text: a token for the name (RFC 9110), no control
        character but a tab in the value (CR or LF would end the header and start another). The
        value is not quoted back: it may be a credential."""
        for name, value in v.items():
            if not name or not _TOKEN.fullmatch(name):
                raise ValueError(f"--header {name!r}: a header name is letters, digits and !#$%&'*+-.^_`|~ only")
            if name.lower() in OWNED_HEADERS:
                raise ValueError(f"--header {name}: wattbench and its HTTP client set this header themselves "
                                 f"({OWNED_HEADERS[name.lower()]}); leave it out")
            if control_character(str(value)):
                raise ValueError(f"--header {name}: the value holds a control character (CR, LF or another below "
                                 "0x20); a header value is one line of text")
        return v

    @field_validator("tags")
    @classmethod
    def _tag_names(cls, v: list[str]) -> list[str]:
        """A run's ``--tag`` follows the history's rule for a tag (``name_problem``), so ``history tag``
        would take each one too."""
        for t in v:
            msg = name_problem(t, "--tag")
            if msg:
                raise ValueError(msg)
        return v

    @field_validator("api_key")
    @classmethod
    def _one_line_key(cls, v: SecretStr | None) -> SecretStr | None:
        """An API key travels in the ``Authorization`` header: one line of visible text (CR or LF
        would end the header; the HTTP client refuses it mid-run). The key is never quoted back."""
        if v is not None and control_character(v.get_secret_value()):
            raise ValueError("--api-key holds a control character (CR, LF or another below 0x20); an API key is "
                             "one line of text: check the file or variable it came from")
        return v

    @field_validator("extra_body")
    @classmethod
    def _not_owned(cls, v: dict[str, Any]) -> dict[str, Any]:
        """``--extra-body`` may not set a field wattbench sets itself (``server.openai.OWNED_BODY_FIELDS``)."""
        from wattbench.server.openai import OWNED_BODY_FIELDS

        owned = [k for k in v if k in OWNED_BODY_FIELDS]
        if owned:
            k = owned[0]
            raise ValueError(f"--extra-body {k!r}: wattbench sets this field itself ({OWNED_BODY_FIELDS[k]}); "
                             "leave it out of --extra-body")
        return v

    @field_validator("arrival")
    @classmethod
    def _arrival(cls, v: str) -> str:
        from wattbench.core.errors import UserError
        from wattbench.load.schedule import parse_arrival

        try:
            parse_arrival(v)
        except UserError as e:
            raise ValueError(str(e)) from None
        return v

    @model_validator(mode="after")
    def _levels(self) -> "RunConfig":
        if self.concurrency and self.rate:
            raise ValueError("give --concurrency or --rate, not both")
        if any(r == float("inf") for r in self.rate) and self.num_requests is None:
            raise ValueError("--rate inf sends every request at once: give the number with --num-requests")
        if self.restart_engine and (self.target or self.targets):
            raise ValueError("--restart-engine restarts an engine wattbench starts; with --target the server is "
                             "yours: restart it between runs yourself (or drop --restart-engine)")
        if self.restart_engine and self.trials < 2:
            raise ValueError("--restart-engine restarts the engine between trials: give --trials N (N >= 2)")
        return self

    @model_validator(mode="after")
    def _secret_headers_are_sent(self) -> "RunConfig":
        names = {k.strip().lower() for k in self.headers}
        for n in self.secret_headers:
            if n.strip().lower() not in names:
                raise ValueError(f"--secret-header {n}: the run sends no such header; give it with --header {n}:VALUE "
                                 "(the name marks a --header whose value is a secret)")
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
        credential are redacted, the names stay; URL credentials shown as ``***@``: ``core/redact.py``)."""
        from wattbench.core.redact import redact_body, redact_headers, redact_url

        d = self.model_dump(mode="json", exclude={"api_key", "headers"})
        d["extra_body"] = redact_body(d.get("extra_body") or {})  # {"api_key": …} shown <redacted>
        if self.headers:
            d["headers"] = redact_headers(self.headers, self.secret_headers)
        d["target"] = redact_url(d.get("target"))
        d["targets"] = [redact_url(u) for u in d.get("targets") or []]
        return d
