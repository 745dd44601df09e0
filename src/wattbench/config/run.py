"""``RunConfig``: what ``run_benchmark`` runs, its fields in the order ``wattbench run --help`` lists
them, each option's ``Flag`` on its field (``measure``, ``tune`` and ``ab`` take many of them too,
``config/run_commands.py``); the checks of what it is given (levels, trials, headers, the API key,
``--extra-body``, tags), the load levels, the request fields, and ``public_dict``: the configuration
as a result records it, without secrets. The headers a ``--header`` may not set (``OWNED_HEADERS``)
and the search's defaults (``SEARCH_MAX_CONCURRENCY``, ``PAIR_DEFAULT_CONCURRENCY``) live here."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from wattbench.core.errors import UserError
from wattbench.core.redact import redact_body, redact_headers, redact_url
from wattbench.core.domains import Api, EngineName, TrialOrder
from wattbench.core.target import REQUEST_TIMEOUT_S, STALL_TIMEOUT_S
from wattbench.accounting.thermal import PRECONDITION_MAX_S
from wattbench.metrics.precision import AUTO_MIN_TRIALS, DEFAULT_MAX_TRIALS, DEFAULT_PRECISION
from wattbench.config.flags import (AT_LEAST_ONE, MEASURE, NON_NEGATIVE, RUN, SECONDS, SECONDS_OR_ZERO, SEED, TUNE,
                                    Domain, Flag, FlaggedConfig)
from wattbench.config.shared import (API_KEY_HELP, DEFAULT_CURRENCY, DEFAULT_PUE, REGISTER_HELP, Currency, HistoryDb,
                                     Pue, SensorSpecs, config_label_problem, name_problem)

SEARCH_MAX_CONCURRENCY = 256  # --sweep auto / --optimize upper end when --max-concurrency is not given
PAIR_DEFAULT_CONCURRENCY = 8  # --prefill-decode-pair's streams when no --concurrency is given
AUTO = "auto"  # --trials auto
DEFAULT_PRECISION_PCT = DEFAULT_PRECISION * 100.0  # --trials auto's --precision, in percent


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


RM = (RUN, MEASURE)
RMT = (RUN, MEASURE, TUNE)
RT = (RUN, TUNE)
LADDER_HELP = "a comma list runs levels in turn"
TOKENS_HELP = "N, uniform:A:B, normal:MU:SIGMA or lognormal:MU:SIGMA."


class RunConfig(FlaggedConfig):
    """What ``run_benchmark`` runs; the fields in the order ``wattbench run --help`` lists them."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    # target
    # --target once: ``target``; repeated: several replicas (``targets``; the CLI puts one in ``target``)
    targets: Annotated[list[str], Flag(
        "--target", "-t", help="Base URL of an OpenAI-compatible server (with or without /v1); repeat for replicas "
        "(per-target statistics beside the total). Omit to start the embedded engine.")] = Field(default_factory=list)
    target: Annotated[str | None, Flag(  # base URL; None = start the embedded engine
        "--target", "-t", commands=(MEASURE,), help="The server whose /metrics token counters to scrape (default: "
        "the URL the tool's own arguments name).")] = None
    model: Annotated[str | None, Flag(
        "--model", "-m", help="Model name on the server (default: first of /v1/models); with no --target, a preset "
        "name (tiny, llama-1b, llama-8b, qwen-7b) or a local HF model directory.")] = None
    api: Annotated[Api, Flag("--api", help="completions or chat.")] = "completions"
    api_key: Annotated[SecretStr | None, Flag("--api-key", commands=RM, help=API_KEY_HELP, show_default=False)] = (
        Field(default=None, exclude=True))

    # load
    concurrency: Annotated[list[int], Flag(
        "--concurrency", "-c", commands=RT, domain=AT_LEAST_ONE,
        help=f"Closed loop: concurrent streams; {LADDER_HELP} (1,8,64).",
        help_in={TUNE: "Load ladder searched in each configuration (default 1,2,4,…,--max-concurrency)."})] = (
        Field(default_factory=list))
    rate: Annotated[list[float], Flag(
        "--rate", "-r", commands=RT, domain=Domain(inf_ok=True, unit="requests/s"),
        help=f"Open loop: requests/s; {LADDER_HELP} (2,4,8); inf sends every request at once.",
        help_in={TUNE: "Open-loop rate ladder instead (requests/s)."})] = Field(default_factory=list)
    arrival: Annotated[str, Flag("--arrival", help="Open-loop arrivals: poisson, constant or gamma:K.")] = "poisson"
    num_requests: Annotated[int | None, Flag(
        "--num-requests", "-n", commands=RT, domain=AT_LEAST_ONE,
        help="Measured requests per level (warm-up excluded; default: 4 rounds of the concurrency, 5+ once an E2E is "
        "measured, so the steady state can be long enough; docs/accounting.md).",
        help_in={TUNE: "Measured requests per level."})] = None
    duration_s: Annotated[float | None, Flag(
        "--duration", "-d", commands=RT, domain=SECONDS,
        help="Seconds of measured load per level, after the warm-up (--warmup 5s --duration 20 sends for 25 s); "
        "requests in flight at the end finish (each within --request-timeout) and are measured.",
        help_in={TUNE: "Seconds of load per level."})] = None
    # --warmup 10s: seconds (a duration's bound); --warmup 20: a number of requests (the CLI reads which)
    warmup_s: Annotated[float | None, Flag(
        "--warmup", domain=SECONDS_OR_ZERO, text=True,
        help="Excluded from statistics: 10s (seconds) or 20 (requests).")] = None
    warmup_requests: Annotated[int | None, Flag("--warmup", commands=(), domain=NON_NEGATIVE)] = None
    workers: Annotated[int | None, Flag(  # None = auto
        "--workers", domain=AT_LEAST_ONE, help="Load-generator processes (default: auto).")] = None
    seed: Annotated[int, Flag("--seed", domain=SEED, help="Seed for arrivals and lengths.")] = 0

    # workload
    workload: Annotated[str | None, Flag(  # preset name or file
        "--workload", "-w", commands=RT, help="Preset (chat, summarize, generate, rag, code) or a dataset/trace file.",
        help_in={TUNE: "Preset or dataset/trace file (as in run)."})] = None
    input_tokens: Annotated[str, Flag("--input-tokens", commands=RT, help=TOKENS_HELP)] = "256"
    output_tokens: Annotated[str, Flag("--output-tokens", commands=RT, help=TOKENS_HELP)] = "128"
    tokenizer: Annotated[str | None, Flag(
        "--tokenizer", help="Local HF tokenizer (tokenizer.json or its directory) for token-exact prompts.")] = None
    speedup: Annotated[float, Flag("--speedup", help="Trace replay: divide inter-arrival gaps by this.")] = 1.0

    # sensors
    sensors: SensorSpecs = Field(default_factory=list)  # empty = auto-detect; default here too for mypy
    no_sensors: Annotated[bool, Flag("--no-sensors", commands=RM, help="Sample no power meter.")] = False
    sample_interval_s: Annotated[float, Flag(
        "--sample-interval", commands=RM, domain=SECONDS, help="Seconds between sensor polls.")] = 0.1
    idle_s: Annotated[float, Flag(
        "--idle", commands=RMT, domain=SECONDS_OR_ZERO,
        help="Seconds of idle baseline before the first level (0 to skip).",
        help_in={MEASURE: "Seconds of idle baseline before the command (0 to skip).",
                 TUNE: "Seconds of idle baseline per trial."})] = 3.0
    idle_after_s: Annotated[float, Flag(
        "--idle-after", commands=RM, domain=SECONDS_OR_ZERO, help="Seconds of idle baseline after the last level.",
        help_in={MEASURE: "Seconds of idle baseline after it."})] = 0.0

    # efficiency
    price_per_kwh: Annotated[float, Flag(
        "--price-per-kwh", commands=RM, domain=NON_NEGATIVE, help="Electricity price per kWh.")] = 0.15
    currency: Currency = DEFAULT_CURRENCY
    pue: Pue = DEFAULT_PUE
    carbon_intensity: Annotated[str | None, Flag(  # metrics/carbon_series.py
        "--carbon-intensity", help="Grid carbon intensity: gCO2e/kWh, or a CSV/JSON time series (an Electricity Maps "
        "export) aligned on the run's wall clock.")] = None
    attribute_idle: Annotated[bool, Flag(
        "--attribute-idle", help="Energy per request includes a share of idle power by time in flight (the shares "
        "then add up to the gross energy).")] = False
    tenant_field: Annotated[str, Flag(  # dataset/trace row field naming who asked (energy per tenant)
        "--tenant-field", help="Dataset/trace row field naming the tenant, for energy per tenant.")] = "tenant"

    # SLO / trials
    slo: Annotated[str | None, Flag(
        "--slo", commands=RT, help="e.g. ttft_p99=500ms,tpot_p99=50ms.",
        help_in={TUNE: "e.g. ttft_p99=500ms,tpot_p99=50ms (the run grammar)."})] = None
    trials: Annotated[int | Literal["auto"], Flag(  # read by _trials: a whole number >= 1, or auto
        "--trials", domain=AT_LEAST_ONE, text=True, help="Measure every level N times (mean and 95% CI); a ladder's "
        "trials interleave: c=16, 64, 16, 64, … auto: add rounds until every level's tokens/s per kW is known within "
        "--precision (or --max-trials / --max-time ends it).")] = 1
    precision_pct: Annotated[float | None, Flag(  # None: DEFAULT_PRECISION_PCT under --trials auto
        "--precision", domain=Domain(hi=100.0, hi_open=True, unit="%"), help="--trials auto: the 95% half-width "
        "every level's tokens/s per kW is measured to, in percent (default 2).")] = None
    max_trials: Annotated[int | None, Flag(  # None: DEFAULT_MAX_TRIALS under --trials auto
        "--max-trials", domain=AT_LEAST_ONE, help="--trials auto: at most N trials of each level (default 10).")] = None
    max_time_s: Annotated[float | None, Flag(  # measuring time (first round's start to the last's end)
        "--max-time", domain=SECONDS, help="--trials auto: no round starts that would end past this many seconds of "
        "measuring.")] = None
    trial_order: Annotated[TrialOrder, Flag(
        "--trial-order", help="--trials over a ladder: interleaved (level by level, round after round) or shuffled "
        "(a seeded shuffle per round).")] = "interleaved"
    restart_engine: Annotated[bool, Flag(  # restart a launched engine before every trial round
        "--restart-engine", help="With --trials: restart the launched engine (and prime it) before every round, so "
        "start-to-start noise is inside the CI.")] = False

    # measuring from a known state (run/prime.py, docs/accounting.md "Priming")
    prime: Annotated[bool, Flag(  # take the server through the run's largest load before the first level
        "--no-prime", negated=True, help="Skip the priming load (the run's largest level, not measured) before the "
        "first level; prompt lengths are still calibrated (--no-calibrate-prompts skips that).")] = True
    prime_requests: Annotated[int | None, Flag(  # None: two rounds of the largest concurrency (run/prime.py)
        "--prime-requests", domain=AT_LEAST_ONE, help="Requests the priming sends (default: two rounds of the largest "
        "concurrency; about 10 s of the largest rate).")] = None
    prompt_salt: Annotated[str | None, Flag(  # None: the run id's random part (no prompt repeats across runs); "": none
        "--prompt-salt", empty_means="an empty salt: prompts carry no run-specific tag",
        help="Text every synthetic prompt starts with after any shared prefix (default: the run id's random part, so "
        "no run repeats another's prompts to a server's prefix cache; '' for prompts identical across runs with the "
        "same seed).")] = None
    # without a tokenizer or /tokenize: fit synthetic prompt lengths to the server's usage.prompt_tokens
    # before the first level (run/prime.calibrate_prompts); False keeps the 0.75 words-per-token guess
    calibrate_prompts: Annotated[bool, Flag(
        "--no-calibrate-prompts", negated=True, help="Without --tokenizer or a server /tokenize: keep the 0.75 "
        "words-per-token guess instead of fitting prompt lengths to the server's usage.prompt_tokens (a few "
        "one-token probe requests before the first level, also with --no-prime).")] = True
    history_check: Annotated[bool, Flag(  # measure the first level again at the end; a difference beyond noise warns
        "--no-history-check", negated=True, help="Skip measuring the first level again at the end (a difference "
        "beyond noise warns).")] = True
    cooldown_s: Annotated[float, Flag(
        "--cooldown", domain=SECONDS_OR_ZERO, help="Seconds between trials.")] = 0.0
    # load the device until its temperature and the server's throughput settle before the first measured level
    # (run/prime.precondition; the rules and their bounds: accounting/thermal.py PRECONDITION_*, metrics/drift.py
    # SETTLE_*); power limits and clocks are never changed
    precondition: Annotated[bool, Flag(
        "--precondition", commands=(RUN,), help="Before the first measured level, load the device (at the priming's "
        "level) until it settles: its GPU temperature within ±1 °C/min and its output tok/s within ±2% over the "
        "last minute (the tok/s alone without a GPU temperature); at most --precondition-max; not measured.")] = False
    precondition_max_s: Annotated[float, Flag(
        "--precondition-max", commands=(RUN,), domain=SECONDS,
        help="With --precondition: its time limit in seconds; past it the run measures on and warns.")] = \
        PRECONDITION_MAX_S

    # searching the load
    sweep: Annotated[str | None, Flag(
        "--sweep", help="auto: double concurrency from 1 until throughput stops growing.")] = None
    optimize: Annotated[str | None, Flag(  # goodput_per_kw | output_tokens_per_s_per_kw | goodput_rps
        "--optimize", help="Search the level with the best goodput_per_kw (or output_tokens_per_s_per_kw, "
        "goodput_rps) meeting --slo, in few levels.")] = None
    # upper end of --sweep auto and of the default --optimize ladder (SEARCH_MAX_CONCURRENCY when not
    # given); with --rate, the open loop's cap on requests in flight (none when not given)
    max_concurrency: Annotated[int | None, Flag(
        "--max-concurrency", commands=RT, domain=AT_LEAST_ONE, default_in={TUNE: SEARCH_MAX_CONCURRENCY},
        help="With --rate: at most N requests in flight (arrivals wait for a slot). With --sweep auto / --optimize: "
        f"the upper end of the search (default {SEARCH_MAX_CONCURRENCY}).",
        help_in={TUNE: "Top of the default concurrency ladder."})] = None
    prefill_decode_pair: Annotated[bool, Flag(  # two extra levels isolating prefill and decode energy
        "--prefill-decode-pair", help="Two extra levels (max_tokens=1; short prompts, long outputs) that cross-check "
        f"the prefill/decode energy split, at the largest --concurrency (default {PAIR_DEFAULT_CONCURRENCY}); energies only: needs a power meter (refused before any load without one).")] = False
    ray: Annotated[str | None, Flag(  # distributed load and per-node sensing
        "--ray", help="Run load actors and per-node sensors on a Ray cluster: auto (the one this machine belongs to), "
        "local (a one-machine cluster on 127.0.0.1) or an address (needs wattbench[ray]).")] = None
    ray_actors: Annotated[int | None, Flag(
        "--ray-actors", domain=AT_LEAST_ONE, help="Load-generator actors (default: one per node, more for large "
        "loads).")] = None

    # engine (when no target)
    engine: Annotated[EngineName, Flag(
        "--engine", commands=RT, help="Engine to start when no --target: transformers, vllm, sglang, llamacpp.",
        help_in={TUNE: "transformers, vllm, sglang or llamacpp (started and restarted by wattbench)."})] = "transformers"
    engine_model: Annotated[str | None, Flag(  # preset name or local path (run: --model with no --target)
        "--model", "-m", commands=(TUNE,), help="Preset (tiny, llama-1b, …) or a local HF model directory.")] = None
    engine_args: Annotated[list[str], Flag(
        "--engine-arg", commands=RT, help="Extra argument passed to the engine (repeatable).",
        help_in={TUNE: "Argument given to the engine in every configuration (repeatable)."})] = (
        Field(default_factory=list))
    device: Annotated[str | None, Flag(  # cuda | cpu | None=auto
        "--device", commands=RT, help="Engine device: cuda or cpu (default: cuda when present).",
        help_in={TUNE: "cuda or cpu (default: cuda when present)."})] = None

    # output
    out: Annotated[str | None, Flag(
        "--out", "-o", commands=RM, help="Run directory (default ./wattbench-results/<run_id>).")] = None
    tags: Annotated[list[str], Flag(
        "--tag", commands=RMT, help="Tag the run in the history store (repeatable).",
        help_in={TUNE: "Tag every trial run in the history store."})] = Field(default_factory=list)
    # what wattbench cannot see (a driver, a BIOS setting, flags the server does not expose), part of
    # the configuration key (results/configuration.py); checked by config_label_problem
    config_label: Annotated[str | None, Flag(
        "--config-label", commands=RMT, help="Name what wattbench cannot see about this configuration (a driver, a "
        "BIOS setting, flags the server does not expose): runs with different labels are never pooled as one "
        "configuration's noise; shown in `history list`.")] = None
    db: HistoryDb = None  # default here too: mypy's pydantic plugin reads no other
    register_run: Annotated[bool, Flag(  # add the run to the history store
        "--register/--no-register", commands=RM, help=REGISTER_HELP)] = True
    strict: Annotated[bool, Flag(  # CI: a figure that is not `valid` fails the command (run.benchmark.strict_failures)
        "--strict", commands=RM, help="Exit 5 when any figure of the run is not `valid` (an efficiency or latency "
        "verdict of warn, estimate or invalid, energy unavailable): the run is still kept and registered.")] = False
    html: Annotated[bool, Flag("--no-html", commands=RM, negated=True, help="Do not write report.html.")] = True
    keep_output_text: Annotated[bool, Flag(
        "--keep-output-text", help="Keep response texts in requests.jsonl.")] = False
    # requests.jsonl keeps every content chunk's arrival stamp (chunk_ns); without it the stamps
    # are used while the level is accounted and dropped (~15 bytes a content chunk off each line)
    keep_chunks: Annotated[bool, Flag(
        "--keep-chunks", commands=RM, help="Keep every content chunk's arrival stamp (chunk_ns) in requests.jsonl "
        "(per-request ITL and token timelines later; ~15 bytes more per content chunk).",
        help_in={MEASURE: "Keep the tool's per-chunk stamps in requests.jsonl."})] = False

    # requests
    request_timeout_s: Annotated[float, Flag(
        "--request-timeout", domain=SECONDS, help="Seconds a request may take in all.")] = REQUEST_TIMEOUT_S
    headers: Annotated[dict[str, str], Flag(  # may hold secrets: never written
        "--header", "-H", help="Request header K:V, repeatable (sent with every request; values that can hold a "
        "credential are never written).")] = Field(default_factory=dict, exclude=True)
    secret_headers: Annotated[list[str], Flag(  # that header's value is a secret
        "--secret-header", help="Header NAME whose --header value is a secret although its name does not say so "
        "(repeatable): never written or printed, scrubbed wherever a server echoes it.")] = Field(default_factory=list)
    extra_body: Annotated[dict[str, Any], Flag(  # merged into every request
        "--extra-body", help='JSON object merged into every request body, e.g. \'{"top_k": 20}\'.')] = (
        Field(default_factory=dict))
    temperature: Annotated[float | None, Flag(  # sampling (default: the request's temperature=0)
        "--temperature", domain=NON_NEGATIVE, help="Sampling temperature (default 0: greedy).")] = None
    top_p: Annotated[float | None, Flag("--top-p", domain=Domain(hi=1.0), help="Nucleus sampling top-p.")] = None
    stall_timeout_s: Annotated[float, Flag(  # no bytes for this long -> timeout
        "--stall-timeout", domain=SECONDS, help="Seconds without a byte before a stream counts as stalled.")] = (
        STALL_TIMEOUT_S)

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
        from wattbench.server.openai import OWNED_BODY_FIELDS  # lazy: aiohttp; the CLI parses flags against this module

        owned = [k for k in v if k in OWNED_BODY_FIELDS]
        if owned:
            k = owned[0]
            raise ValueError(f"--extra-body {k!r}: wattbench sets this field itself ({OWNED_BODY_FIELDS[k]}); "
                             "leave it out of --extra-body")
        return v

    @field_validator("arrival")
    @classmethod
    def _arrival(cls, v: str) -> str:
        from wattbench.load.schedule import parse_arrival  # lazy: the CLI parses flags against this module

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
        if self.no_sensors and self.sensors:  # one says no meter, the other names one: neither is taken unread
            kind = self.sensors[0].partition(":")[0].strip()[:20]
            raise ValueError(f"--no-sensors samples no power meter, and --sensor {kind}:… names one: give one of "
                             "them (drop --no-sensors to measure energy with it)")
        if self.restart_engine and self.trial_count() < 2:
            raise ValueError("--restart-engine restarts the engine between trials: give --trials N (N >= 2) or "
                             "--trials auto")
        if self.trials != AUTO:
            given = [f for f, v in (("--precision", self.precision_pct), ("--max-trials", self.max_trials),
                                    ("--max-time", self.max_time_s)) if v is not None]
            if given:
                raise ValueError(f"{given[0]} bounds --trials auto: give --trials auto, or drop {given[0]}")
        elif self.max_trials is not None and self.max_trials < AUTO_MIN_TRIALS:
            raise ValueError(f"--max-trials {self.max_trials} with --trials auto: a precision rests on at least "
                             f"{AUTO_MIN_TRIALS} trials (2 degrees of freedom); give --max-trials {AUTO_MIN_TRIALS} "
                             "or more")
        return self

    @field_validator("trials", mode="before")
    @classmethod
    def _trials(cls, v: Any) -> Any:
        """``--trials``: a whole number >= 1, or ``auto`` (typed text is read here, the one parser;
        None, an option not given, is its default: one trial)."""
        if v is None:
            return 1
        if isinstance(v, str):
            t = v.strip().lower()
            if t == AUTO:
                return AUTO
            if t.isdigit():
                return int(t)
            raise ValueError(f"--trials {v!r}: give a whole number of trials (--trials 3) or auto (--trials auto)")
        return v

    @property
    def auto_trials(self) -> bool:
        """``--trials auto``: rounds are added until the precision is reached (``run/plan.py``)."""
        return self.trials == AUTO

    def trial_count(self) -> int:
        """Trials per level as planned: ``--trials N``'s N; under ``--trials auto`` the most it may
        take (``--max-trials``, default ``DEFAULT_MAX_TRIALS``)."""
        if self.trials == AUTO:
            return self.max_trials or DEFAULT_MAX_TRIALS
        return int(self.trials)

    def precision(self) -> float:
        """The precision ``--trials auto`` measures to, as a fraction (``--precision`` 2 -> 0.02)."""
        return (self.precision_pct if self.precision_pct is not None else DEFAULT_PRECISION_PCT) / 100.0

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

    def public_dict(self) -> dict[str, Any]:
        """The config as written to result.json: no secrets (header values that can carry a
        credential are redacted, the names stay; URL credentials shown as ``***@``: ``core/redact.py``)."""
        d = self.model_dump(mode="json", exclude={"api_key", "headers"})
        d["extra_body"] = redact_body(d.get("extra_body") or {})  # {"api_key": …} shown <redacted>
        if self.headers:
            d["headers"] = redact_headers(self.headers, self.secret_headers)
        d["target"] = redact_url(d.get("target"))
        d["targets"] = [redact_url(u) for u in d.get("targets") or []]
        return d
