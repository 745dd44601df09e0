"""Run configuration: what the CLI validates its flags into and what the library runs.

Secrets (API keys, BMC passwords) are never fields here: they are read from the environment or
passed as ``SecretStr`` and excluded from every dump written to disk.

Every option of ``run``, ``measure`` and ``tune`` is declared once, on the configuration field it
sets: the field's type is annotated with a ``Flag`` (``Annotated[float, Flag("--idle", help=...)]``)
naming the option, its short alias, its help, the commands that take it and the numbers it takes
(``Flag.domain``). The field's default is the option's default. ``cli/options.py`` generates each
command's typer options from these fields, and the tables the command line is checked against
(``FLAG_DOMAINS``, ``COMMAND_FLAG_DOMAINS``, ``EMPTY_TEXT_OK``) are generated from them here; the
models check their own numbers against the same ``Flag.domain`` (a notebook gets the CLI's rule).
A field without a ``Flag`` is not an option.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from wattbench.core.errors import UserError
from wattbench.core.redact import redact_body, redact_headers, redact_url
from wattbench.core.domains import Api, EngineName, TrialOrder

from wattbench.core.target import REQUEST_TIMEOUT_S, STALL_TIMEOUT_S
from wattbench.accounting.thermal import PRECONDITION_MAX_S
from wattbench.metrics.precision import AUTO_MIN_TRIALS, DEFAULT_MAX_TRIALS, DEFAULT_PRECISION

# ------------------------------------------------------------------ what each numeric option takes
#
# A numeric option's range is a ``Domain``: declared on the field's ``Flag`` for the options of
# ``run``, ``measure`` and ``tune``, and for the other commands' one-command models alike
# configuration model. The CLI checks each value against it while the command line is parsed
# (``cli.common.number_gate``, before anything starts). A flag means one thing in every command, so
# ``FLAG_DOMAINS`` is keyed by flag; a flag that takes other numbers in one command has a
# ``(command, flag)`` entry in ``COMMAND_FLAG_DOMAINS``. A flag not listed takes positive numbers
# only: a new option is checked from the day it is declared.

MAX_SECONDS = 366 * 24 * 3600.0  # the longest duration, interval or timeout any option takes (a year)
MAX_SEED = 2**32 - 1
SEARCH_MAX_CONCURRENCY = 256  # --sweep auto / --optimize upper end when --max-concurrency is not given
PAIR_DEFAULT_CONCURRENCY = 8  # --prefill-decode-pair's streams when no --concurrency is given
AUTO = "auto"  # --trials auto
DEFAULT_PRECISION_PCT = DEFAULT_PRECISION * 100.0  # --trials auto's --precision, in percent


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
SEED = Domain(lo_open=False, hi=MAX_SEED)



# ------------------------------------------------------------------ an option, declared on its field

RUN, MEASURE, TUNE, AB = "run", "measure", "tune", "ab"
# ``Flag.commands`` of a field of a one-command options model (``plan tco``'s, ``history list``'s):
# the command is the one whose options the model is (``cli.options.command_options``); a field
# shared by such models (``--db``, ``--json``) is one ``Annotated`` type declared once.
EVERY: tuple[str, ...] = ("*",)


@dataclass(frozen=True)
class Flag:
    """How a configuration field is given on the command line (the metadata of its ``Annotated``
    type). ``name``: the option (``--idle``; an on/off pair ``--register/--no-register``);
    ``short``: its one-letter alias; ``help``: what it does, ``help_in``: other words in a command
    where it means something narrower (``--idle``: before the first level in ``run``, before the
    command in ``measure``); ``commands``: the commands that take it (none: the field is named by
    ``name`` in messages but set through another field's option, as ``warmup_requests`` through
    ``--warmup``); ``domain``: the numbers it takes (None: positive numbers); ``default_in``: a
    command's own default (the field's default otherwise); ``negated``: the option turns the field
    off (``--no-prime`` sets ``prime=False``); ``text``: the command line gives text the command
    parses itself (``--warmup 10s`` or ``20``); ``empty_means``: what an empty value typed means,
    where it means something (else an empty value is refused); ``show_default``: whether the help
    shows the default; ``beside``: for an option that sets no configuration field, the field it is
    listed after; ``positional``: an argument, not an option; ``aliases``: other long names it
    answers to (``--timeout`` for ``--request-timeout``); ``envvar``: the environment variables
    read when it is not given (not shown in the help); ``metavar``: the word its value is shown as.

    How a value is read follows the field's type: a list of numbers is a comma list (``-c 1,8,64``),
    a list of text a repeated option, ``dict[str, str]`` repeated ``K:V``, another dict a JSON object."""

    name: str
    short: str | None = None
    help: str | None = None
    commands: tuple[str, ...] = (RUN,)
    help_in: Mapping[str, str] = field(default_factory=dict)
    domain: Domain | None = None
    default_in: Mapping[str, Any] = field(default_factory=dict)
    negated: bool = False
    text: bool = False
    empty_means: str | None = None
    show_default: bool = True
    beside: str | None = None
    positional: bool = False
    envvar: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    metavar: str | None = None

    def takes(self, command: str) -> bool:
        """Whether ``command`` takes this option (``EVERY``: each command whose model declares it)."""
        return command in self.commands or self.commands == EVERY

    def help_for(self, command: str) -> str | None:
        return self.help_in.get(command, self.help)


def flag_of(model: type[BaseModel], name: str) -> Flag | None:
    """The ``Flag`` on ``model``'s field ``name``, or None when the field is not an option."""
    return next((m for m in model.model_fields[name].metadata if isinstance(m, Flag)), None)


def flags(model: type[BaseModel]) -> list[tuple[str, Flag]]:
    """(field name, Flag) for every field of ``model`` that is an option, in field order."""
    return [(name, f) for name in model.model_fields if (f := flag_of(model, name)) is not None]


# One wording for the flags every command shares (the same flag for the same thing): the fields'
# help, and the other commands' options models (history, doctor, monitor …) use them too.
DB_HELP = "History database (default: $WATTBENCH_DB or the user data directory's history.sqlite3)."
API_KEY_HELP = ("API key, sent to the target only and never written to a file or shown. Given here it is visible to "
                "other users of this machine (ps, /proc/PID/cmdline): prefer --api-key-file PATH or the environment "
                "(WATTBENCH_API_KEY / OPENAI_API_KEY).")
REGISTER_HELP = "Add the run to the history store (default) or not."
SENSOR_HELP = "Sensor spec, repeatable (nvml, rapl, ipmi, const:node=700, …). Default: auto-detect."
API_KEY_ENV = ["WATTBENCH_API_KEY", "OPENAI_API_KEY"]  # where a key not given on the command line is read

# Options several commands share, declared once: the commands of one-command models (``sensors``,
# ``history list`` …) take ``run``'s ``--sensor``, ``--api-key-file`` and ``--db`` (such a model
# takes each field it declares, ``cli.options.command_options``).
SensorSpecs = Annotated[list[str], Field(default_factory=list), Flag(
    "--sensor", "-s", commands=(RUN, MEASURE, TUNE), help=SENSOR_HELP,
    help_in={"doctor": "A sensor spec to check (repeatable); default: autodetect."})]
API_KEY_FILE_HELP = "Read the API key from the first line of PATH (recommended: unlike --api-key, not visible in ps)."
ApiKeyFile = Annotated[str | None, Field(default=None), Flag(
    "--api-key-file", commands=(RUN, MEASURE), help=API_KEY_FILE_HELP, show_default=False, beside="api_key")]
HistoryDb = Annotated[str | None, Field(default=None), Flag("--db", commands=(RUN, MEASURE, TUNE), help=DB_HELP)]
# a run's facility figure and cost, and plan tco's, read the same two options (the default is
# written at each field, from these: mypy's pydantic plugin reads no default inside ``Annotated``)
DEFAULT_PUE, DEFAULT_CURRENCY = 1.0, "USD"
Pue = Annotated[float, Flag("--pue", commands=(RUN, MEASURE), domain=Domain(lo=1.0, lo_open=False), help=(
    "Power usage effectiveness: facility power / IT power (>= 1; it includes the cooling energy)."))]
Currency = Annotated[str, Flag("--currency", commands=(RUN, MEASURE), help="Currency label of every cost.")]
PLAN_BOUNDARY_HELP = ("Power boundary: accelerator, node or wall (default: the run's headline boundary among those, "
                      "the one rule of run, compare, tune and plan).")
Boundary = Annotated[str | None, Field(default=None), Flag(  # None = the headline boundary (results.headline)
    "--boundary", commands=(TUNE,), help=PLAN_BOUNDARY_HELP,
    help_in={TUNE: "Power boundary of the score (default: the headline boundary, as run and plan use).",
             "compare": "Power boundary for the ratios (default: the headline boundary every run has, never a part "
                        "such as the HBM rail).",
             "regress": "Power boundary for energy checks."})]


def name_problem(name: str, what: str) -> str | None:
    """Why ``name`` cannot be a tag or baseline name (one line), or None: non-empty, no whitespace, no '/'."""
    if not name or not name.strip() or any(ch.isspace() for ch in name) or "/" in name:
        return f"{what} {name!r} must be non-empty without spaces or '/'"
    return None



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



class FlaggedConfig(BaseModel):
    """A configuration whose fields are options (``Flag``): every number in a field, or in a list
    field, is checked against its flag's domain, as the command line is (one message, naming the flag)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*")
    @classmethod
    def _in_domain(cls, v: Any, info: Any) -> Any:
        flag = flag_of(cls, info.field_name)
        if flag is None:
            return v
        domain = flag.domain or POSITIVE
        for x in v if isinstance(v, list) else [v]:
            msg = None if x is None else domain.problem(flag.name, x)
            if msg:
                raise ValueError(msg)
        return v


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


class MeasureConfig(FlaggedConfig):
    """What ``wattbench measure`` runs (``run/measure.py``): the command, and the run's settings
    (``run``: sensors, idle, price, PUE, output, history; ``run.target``: a server whose
    ``/metrics`` to scrape)."""

    command: Annotated[list[str], Flag(
        "command", commands=(MEASURE,), positional=True, help="The command to run, after --.", show_default=False)]
    run: RunConfig
    tool: Annotated[str | None, Flag(  # None: recognised from the command (results/tools/registry.detect_tool)
        "--tool", commands=(MEASURE,), help="What COMMAND is: vllm-bench-serve, aiperf, guidellm, wattbench-run or "
        "command (default: recognised from it).")] = None
    result_files: Annotated[list[str], Flag(  # the tool's files, else found
        "--result", commands=(MEASURE,), help="The tool's result file (repeatable; default: found where its "
        "arguments put it).")] = Field(default_factory=list)
    window_from: Annotated[str | None, Flag(  # start/end markers
        "--window-from", commands=(MEASURE,), help="A file of 'start SECONDS [LABEL]' / 'end SECONDS' lines the "
        "command writes: one level per pair.")] = None
    cwd: str | None = None  # where the command runs (its relative result paths too)


class TuneConfig(FlaggedConfig):
    """What ``wattbench tune`` searches (``tune/run.py``): the run every trial makes (``base``:
    engine, model, workload, sensors, SLO, load candidates, as ``run``) and the search."""

    base: RunConfig
    axes: Annotated[list[str], Flag(
        "--axis", commands=(TUNE,), help="NAME=V1,V2,… an engine flag and its values (repeatable); default: the "
        "engine's built-in space.")] = Field(default_factory=list)
    space_file: Annotated[str | None, Flag(
        "--space", commands=(TUNE,), help="YAML/JSON space file (axes, ranges, conditions).")] = None
    power_limits_w: Annotated[list[float], Flag(
        "--power-limit", commands=(TUNE,), domain=Domain(unit="W"),
        help="GPU power limits to try, W (400,550,700). Needs --allow-gpu-settings and root.")] = (
        Field(default_factory=list))
    sm_clocks_mhz: Annotated[list[int], Flag(
        "--sm-clocks", commands=(TUNE,), domain=Domain(unit="MHz"),
        help="Locked SM clocks to try, MHz (1200,1590,1980). Needs --allow-gpu-settings and root.")] = (
        Field(default_factory=list))
    allow_gpu_settings: Annotated[bool, Flag(
        "--allow-gpu-settings", commands=(TUNE,), help="Allow changing the GPU power limit / clocks (restored after "
        "every trial).")] = False
    gpu_indices: Annotated[list[int] | None, Flag(  # GPU indices here; a number of GPUs in `plan roofline`
        "--gpus", commands=(TUNE,), domain=INDEX, help="GPU indices whose settings are changed (default: all).")] = None
    objective: Annotated[str, Flag(
        "--objective", commands=(TUNE,), help="goodput_per_kw, output_tokens_per_s_per_kw or j_per_output_token.")] = (
        "goodput_per_kw")
    boundary: Boundary
    strategy: Annotated[str, Flag(
        "--strategy", commands=(TUNE,), help="auto (exhaustive up to 16 configurations, else Optuna TPE), exhaustive "
        "or optuna.")] = "auto"
    max_trials: Annotated[int | None, Flag(
        "--max-trials", commands=(TUNE,), domain=AT_LEAST_ONE, help="Budget: configurations measured (the defaults "
        "included).")] = None
    max_minutes: Annotated[float | None, Flag(
        "--max-minutes", commands=(TUNE,), domain=Domain(hi=MAX_SECONDS / 60, unit="minutes"),
        help="Budget: no new trial starts after this many minutes.")] = None
    noise_pct: Annotated[float, Flag(  # single measurements closer than this are measured again
        "--noise-pct", commands=(TUNE,), domain=NON_NEGATIVE, help="Best two closer than this (single measurements) "
        "are measured again.")] = 5.0
    max_repeats: Annotated[int, Flag(
        "--max-repeats", commands=(TUNE,), domain=NON_NEGATIVE, help="Rounds of repeat measurements of the best "
        "two.")] = 2
    precision_pct: Annotated[float | None, Flag(  # None: repeat while the best two are within the noise
        "--precision", commands=(TUNE,), domain=Domain(hi=100.0, hi_open=True, unit="%"),
        help="Measure the best two configurations again until each one's score is known within PCT% (95% "
        "half-width of its measurements' mean; run --trials auto's rule), or --max-repeats / --max-minutes ends "
        "it.")] = None
    baseline: Annotated[bool, Flag(
        "--no-baseline", commands=(TUNE,), negated=True, help="Do not measure the engine defaults first (no gain is "
        "quoted).")] = True
    seed: Annotated[int, Flag("--seed", commands=(TUNE,), domain=SEED)] = 0  # the search's; the CLI seeds base too
    out: Annotated[str | None, Flag(
        "--out", "-o", commands=(TUNE,), help="Tune directory (default ./wattbench-results/tune-<time>).")] = None
    resume: Annotated[str | None, Flag(
        "--resume", commands=(TUNE,), help="Continue an interrupted tune in this directory.")] = None


# ------------------------------------------------------------------ wattbench ab

# The run options `ab` does not take: one server per side (the sides are its arguments), and what
# the paired design decides itself — how many times each level is measured and in which order
# (the pairs: ab's own --pairs, --precision, --max-pairs, --max-time, in place of --trials auto's), with no search (a search would choose different levels for A and
# B), no extra levels, no history check (the pairs are their own repeat) and no engine restarts.
AB_LEAVES_OUT = ("targets", "trials", "precision_pct", "max_trials", "max_time_s", "trial_order", "restart_engine",
                 "history_check", "sweep", "optimize", "prefill_decode_pair", "ray", "ray_actors")
AB_ENGINE, AB_ENGINE_DEFAULTS = "engine", "engine-defaults"
AB_SIDE_HELP = ("A server's base URL (http://host:8000), or `engine[:ARGS]` to start the embedded engine (--engine, "
                "--model, --device) with ARGS added to its flags, or `engine-defaults[:ARGS]` to start it with the "
                "engine's own defaults (none of wattbench's tuned flags).")


@dataclass(frozen=True)
class AbSide:
    """One side of ``wattbench ab`` as typed: a server's URL, or the embedded engine started with
    ``engine_args`` (``own_defaults``: without wattbench's tuned flags, the engine's own defaults)."""

    text: str
    url: str | None = None
    engine_args: tuple[str, ...] = ()
    own_defaults: bool = False

    @classmethod
    def parse(cls, text: str, which: str) -> "AbSide":
        import shlex

        t = text.strip()
        if not t:
            raise UserError(f"side {which} is empty: give a server's URL, `engine[:ARGS]` or `engine-defaults[:ARGS]`")
        head, sep, rest = t.partition(":")
        if head.lower() in (AB_ENGINE, AB_ENGINE_DEFAULTS) and (sep or t.lower() == head.lower()):
            try:
                args = tuple(shlex.split(rest))
            except ValueError as e:
                raise UserError(f"side {which} {text!r}: its engine flags do not parse ({e}); quote them as a shell "
                                "would") from None
            return cls(text=t, engine_args=args, own_defaults=head.lower() == AB_ENGINE_DEFAULTS)
        if "://" not in t:
            raise UserError(f"side {which} {text!r} is neither a URL (http://host:port) nor `engine[:ARGS]` / "
                            "`engine-defaults[:ARGS]`")
        return cls(text=t, url=t)

    @property
    def launched(self) -> bool:
        return self.url is None


class AbConfig(FlaggedConfig):
    """What ``wattbench ab`` measures (``run/ab.py``): two sides, each a server or a launch of the
    embedded engine, measured alternately in pairs over the levels of ``run`` (the options both sides
    share, as ``wattbench run`` takes them; ``--out DIR`` holds ``DIR/A`` and ``DIR/B``)."""

    side_a: Annotated[str, Flag("A", commands=(AB,), positional=True, help=AB_SIDE_HELP, show_default=False)]
    side_b: Annotated[str, Flag("B", commands=(AB,), positional=True, help="The other side, as A.",
                                show_default=False)]
    run: RunConfig = Field(default_factory=RunConfig)
    pairs: Annotated[int, Flag(
        "--pairs", commands=(AB,), domain=Domain(lo=3, lo_open=False),
        help="Pairs per level at least (each pair: one trial of A and one of B; whole A B B A blocks, so an odd N "
        "measures N+1).")] = 4
    precision_pct: Annotated[float | None, Flag(
        "--precision", commands=(AB,), domain=Domain(hi=100.0, unit="%"),
        help="Add A B B A blocks until every level's per-kW ratio B/A is known within ±PCT% (95%), or --max-pairs / "
        "--max-time ends it (default: --pairs only).")] = None
    max_pairs: Annotated[int, Flag(
        "--max-pairs", commands=(AB,), domain=Domain(lo=3, lo_open=False),
        help="With --precision: at most N pairs per level.")] = 16
    max_time_s: Annotated[float | None, Flag(
        "--max-time", commands=(AB,), domain=SECONDS,
        help="With --precision: no new block starts after this many seconds.")] = None

    @model_validator(mode="after")
    def _sides(self) -> "AbConfig":
        a, b = self.side("A"), self.side("B")
        if a.url and b.url and a.url.rstrip("/").removesuffix("/v1").rstrip("/") == \
                b.url.rstrip("/").removesuffix("/v1").rstrip("/"):
            raise ValueError(f"A and B are the same server ({a.url}): ab compares two servers (or two engine starts); "
                             "give B another URL")
        if self.max_pairs < self.pairs:
            raise ValueError(f"--max-pairs {self.max_pairs} is below --pairs {self.pairs}: give at least as many")
        return self

    def side(self, which: str) -> AbSide:
        return AbSide.parse(self.side_a if which == "A" else self.side_b, which)

    def side_config(self, which: str) -> RunConfig:
        """The ``RunConfig`` of side ``which``: the shared options with its target (or its engine flags
        added), its run directory (``--out DIR``: ``DIR/A``, ``DIR/B``), trials for the pairs and no
        history check."""
        s = self.side(which)
        fields = self.run.model_dump(exclude={"api_key", "headers"})
        fields.update(api_key=self.run.api_key, headers=dict(self.run.headers), history_check=False,
                      trials=self.max_pairs if self.precision_pct is not None else self.pairs, restart_engine=False)
        model = self.run.model or self.run.engine_model  # --model: the served name, or the preset to start
        if s.url:
            fields.update(target=s.url, targets=[], model=model, engine_model=None)
        else:
            fields.update(target=None, targets=[], model=None, engine_model=model,
                          engine_args=[*self.run.engine_args, *s.engine_args])
        if self.run.out:
            fields["out"] = str(Path(self.run.out).expanduser() / which)
        return RunConfig(**fields)


# ------------------------------------------------------------------ the other commands' options
#
# Each other command's options are one model (``PlanTcoOptions`` for ``plan tco``), its fields in
# the order the command's ``--help`` lists them, each field's ``Flag`` with ``commands=EVERY`` (the
# command whose model it is). A flag several commands take (``--db``, ``--json``, ``--boundary``) is
# one ``Annotated`` type below, with its default inside (``Field(default=…)``), declared once.

JSON_HELP = "Print JSON."
AsJson = Annotated[bool, Field(default=False), Flag(
    "--json", commands=EVERY, help=JSON_HELP,
    help_in={"monitor": "Print the final summary as JSON.", "doctor": "Print the report as JSON.",
             "sensors": "Print the inventory as JSON.",
             "agree": "Print JSON (metrics, without per-prompt rows).",
             "report": "Print the written files and level headlines as JSON."})]
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


# wattbench history
HISTORY_LIST, HISTORY_NOISE = "history list", "history noise"
ModelFilter = Annotated[str | None, Field(default=None), Flag("--model", commands=EVERY,
                                                               help="Substring of the model name.")]
EngineFilter = Annotated[str | None, Field(default=None), Flag("--engine", commands=EVERY,
                                                                help="Substring of the engine name.")]
GpuFilter = Annotated[str | None, Field(default=None), Flag(
    "--gpu", commands=EVERY, help="Substring of the GPU description.",
    help_in={HISTORY_NOISE: "Substring of the machine (GPU, CPU)."})]


class HistoryListOptions(FlaggedConfig):
    """``history list``: which registered runs to list."""

    model: ModelFilter
    engine: EngineFilter
    gpu: GpuFilter
    target: Annotated[str | None, Flag("--target", "-t", commands=EVERY, help=(
        "Substring of the target (host:port, or the launched engine)."))] = None
    label: Annotated[str | None, Flag("--label", commands=EVERY, help="Substring of the --config-label.")] = None
    tag: Annotated[str | None, Flag("--tag", commands=EVERY, help="Only the run with this tag.")] = None
    kind: Annotated[str | None, Flag("--kind", commands=EVERY, help="run or agree.")] = None
    since: Annotated[str | None, Flag("--since", commands=EVERY, help=(
        "ISO date, e.g. 2026-11-01 (or 2026-11-01T09:00)."))] = None
    limit: Annotated[int, Flag("--limit", commands=EVERY, domain=NON_NEGATIVE,
                               help="At most this many runs (0 = all).")] = 50
    full_ids: Annotated[bool, Flag("--full-ids", commands=EVERY, help=(
        "Show each run id whole (by default the shortest prefix that names it, as git shortens commits; "
        "--json always has the whole id)."))] = False
    db: HistoryDb
    as_json: AsJson


class HistoryShowOptions(FlaggedConfig):
    """``history show``: one run."""

    ref: Annotated[str, Flag("REF", commands=EVERY, positional=True,
                             help="Run directory, run id, id prefix, tag or baseline.")]
    db: HistoryDb
    as_json: AsJson


class HistoryTagOptions(FlaggedConfig):
    """``history tag``: a run and the tag it gets."""

    ref: Annotated[str, Flag("REF", commands=EVERY, positional=True, help="The run to tag.")]
    tag: Annotated[str, Flag("TAG", commands=EVERY, positional=True, help="The tag.")]
    force: Annotated[bool, Flag("--force", commands=EVERY, help="Move the tag if it names another run.")] = False
    db: HistoryDb
    as_json: AsJson


class HistoryUntagOptions(FlaggedConfig):
    """``history untag``: the tag to remove."""

    tag: Annotated[str, Flag("TAG", commands=EVERY, positional=True, help="The tag to remove.")]
    db: HistoryDb


class HistoryBaselineOptions(FlaggedConfig):
    """``history baseline``: a baseline's name and the run it points at (each optional)."""

    name: Annotated[str | None, Flag("NAME", commands=EVERY, positional=True,
                                     help="Baseline name, e.g. main.")] = None
    ref: Annotated[str | None, Flag("REF", commands=EVERY, positional=True, help="The run it points at.")] = None
    db: HistoryDb
    as_json: AsJson


class HistoryNoiseOptions(FlaggedConfig):
    """``history noise``: which configurations' run-to-run spread to show."""

    model: ModelFilter
    engine: EngineFilter
    gpu: GpuFilter
    min_runs: Annotated[int, Flag("--min-runs", commands=EVERY,
                                  help="Only configurations with at least this many runs.")] = 2
    db: HistoryDb
    as_json: AsJson


class HistoryImportOptions(FlaggedConfig):
    """``history import``: the run directories to register."""

    paths: Annotated[list[str], Flag("PATHS", commands=EVERY, positional=True,
                                     help="Run directories or folders holding them.")]
    db: HistoryDb
    as_json: AsJson


# wattbench compare, regress
COMPARE, REGRESS = "compare", "regress"
Force = Annotated[bool, Field(default=False), Flag(
    "--force", commands=EVERY, help="Compare incomparable runs; each reason is flagged.",
    help_in={REGRESS: "Check even when workloads/measurement differ."})]
EnergyWindow = Annotated[Literal["full", "steady"], Field(default="full"), Flag("--window", commands=EVERY,
                                                          help="Energy window: full or steady (steady state).")]
MatchLevels = Annotated[Literal["key", "index"], Field(default="key"), Flag(
    "--match", commands=EVERY, help="Pair levels by 'key' (concurrency/rate) or 'index'.",
    help_in={REGRESS: "Pair levels by 'key' or 'index'."})]
JsonOut = Annotated[str | None, Field(default=None), Flag(
    "--out", commands=EVERY, help="Also write the comparison JSON to this file.",
    help_in={REGRESS: "Also write the report JSON to this file."})]


class CompareOptions(FlaggedConfig):
    """``compare``: the runs, the boundary and the SLO they are compared at."""

    runs: Annotated[list[str], Flag("RUNS", commands=EVERY, positional=True,
                                    help="Two or more run directories, run ids, tags or baselines.")]
    boundary: Boundary
    at_slo: Annotated[str | None, Flag("--at-slo", commands=EVERY, help=(
        "Compare each run at its level with the most goodput per kW meeting this SLO "
        "(ttft_p99=500ms,tpot_p99=50ms); default: the SLO both runs carry."))] = None
    force: Force
    window: EnergyWindow
    match: MatchLevels
    agreement: Annotated[str | None, Flag("--agreement", commands=EVERY,
                                          help="An `agree` run to show next to the energy figures.")] = None
    out: JsonOut
    db: HistoryDb
    as_json: AsJson


class RegressOptions(FlaggedConfig):
    """``regress``: the run, its baseline and the checks it must pass."""

    result: Annotated[str, Flag("RESULT", commands=EVERY, positional=True,
                                help="The run to check: directory, run id, tag.")]
    baseline: Annotated[str, Flag("--baseline", commands=EVERY, help="Baseline: name, tag, run id or directory.")]
    fail_on: Annotated[str, Flag("--fail-on", commands=EVERY, help="Comma list of checks.")] = (
        "j_per_output_token:+5%,output_tokens_per_s:-3%")
    boundary: Boundary
    force: Force
    window: EnergyWindow
    match: MatchLevels
    strict: Annotated[bool, Flag("--strict", commands=EVERY, help=(
        "Judge the change itself, not its noise interval (trials' CIs, the history's run-to-run spread): "
        "fail beyond the limit, else pass; never inconclusive."))] = False
    out: JsonOut
    db: HistoryDb
    as_json: AsJson


# wattbench agree
class AgreeOptions(FlaggedConfig):
    """``agree``: the two servers, the prompts and how they are sent."""

    target_a: Annotated[str, Flag("TARGET_A", commands=EVERY, positional=True,
                                  help="Base URL of the reference server, e.g. http://127.0.0.1:8000")]
    target_b: Annotated[str, Flag("TARGET_B", commands=EVERY, positional=True,
                                  help="Base URL of the server under test.")]
    prompts: Annotated[str, Flag("--prompts", commands=EVERY, help=(
        "JSONL: {prompt|messages, max_tokens?, schema?, required?} per line; both kinds in one file."))]
    model_a: Annotated[str | None, Flag("--model-a", commands=EVERY,
                                        help="Model at A (default: first listed).")] = None
    model_b: Annotated[str | None, Flag("--model-b", commands=EVERY,
                                        help="Model at B (default: first listed).")] = None
    api: Annotated[Api, Flag("--api", commands=EVERY, help=(
        "API for 'prompt' rows: completions or chat ('messages' rows always use chat)."))] = "completions"
    api_key: Annotated[SecretStr | None, Flag("--api-key", commands=EVERY, show_default=False, help=(
        "API key for both servers (or env WATTBENCH_API_KEY / OPENAI_API_KEY; per server WATTBENCH_API_KEY_A / _B). "
        "Never written anywhere."))] = None
    max_tokens: Annotated[int, Flag("--max-tokens", commands=EVERY, domain=AT_LEAST_ONE,
                                    help="Tokens per answer (a prompt may override).")] = 128
    concurrency: Annotated[int, Flag("--concurrency", commands=EVERY, help="Prompts in flight at once.")] = 4
    tokens: Annotated[Literal["auto", "server_tokens", "whitespace"], Flag("--tokens", commands=EVERY, help=(
        "Token basis: auto (server tokens if both return them), server_tokens, whitespace."))] = "auto"
    timeout_s: Annotated[float, Flag("--request-timeout", commands=EVERY, aliases=("--timeout",),
                                     help="Seconds a request may take.")] = 300.0
    out: Annotated[str | None, Flag("--out", commands=EVERY, help=(
        "Directory to write (default wattbench-results/<agree id>)."))] = None
    register_run: Annotated[bool, Flag("--register/--no-register", commands=EVERY, help=REGISTER_HELP)] = True
    db: HistoryDb
    as_json: AsJson


# wattbench report
class ReportOptions(FlaggedConfig):
    """``report``: the run directories and the files to write of them."""

    runs: Annotated[list[Path], Flag("RUNS", commands=EVERY, positional=True, show_default=False,
                                     help="Run directories (each holds result.json).")] = Field(default_factory=list)
    html: Annotated[Path | None, Flag("--html", commands=EVERY,
                                      help="Write a self-contained HTML report to FILE.")] = None
    csv_dir: Annotated[Path | None, Flag("--csv", commands=EVERY,
                                         help="Write levels.csv and requests.csv into DIR.")] = None
    md: Annotated[Path | None, Flag("--md", commands=EVERY,
                                    help="Write a Markdown summary (for a PR or issue) to FILE.")] = None
    json_out: AsJson
    quiet: Annotated[bool, Flag("--quiet", "-q", commands=EVERY, help="Do not print the summary table.")] = False
    notes: Annotated[bool, Flag("--notes", commands=EVERY, help=(
        "Print every finding in full (the summary shows at most eight note lines): levels, figures it biases, "
        "estimated effect and its basis."))] = False
    glossary: Annotated[bool, Flag("--glossary", commands=EVERY, help=(
        "Print what each term of the reports means (TTFT, TPOT, ITL, E2E, per kW, verdicts, noise) and exit; "
        "no run needed."))] = False


# wattbench sensors, monitor, doctor
ServerApiKey = Annotated[SecretStr | None, Field(default=None), Flag(
    "--api-key", commands=EVERY, help=API_KEY_HELP, envvar=tuple(API_KEY_ENV))]


class SensorsOptions(FlaggedConfig):
    """``sensors``: which meters to list and how long to watch each update."""

    sensors: SensorSpecs
    measure_s: Annotated[float, Flag("--measure", commands=EVERY, domain=SECONDS_OR_ZERO, help=(
        "Seconds to poll fast to measure each channel's update period."))] = 1.5
    estimate_cpu: Annotated[bool, Flag("--estimate-cpu", commands=EVERY, help=(
        "In auto-detection, add a CPU power estimate when no CPU meter exists."))] = False
    as_json: AsJson


# the monitor's and doctor's defaults, here so that each has one home (monitor/ and doctor/ take them)
DEFAULT_MONITOR_INTERVAL_S = 1.0  # seconds between scrapes / accounting intervals
DEFAULT_LISTEN = "127.0.0.1:9464"  # the Prometheus exporter: this machine only unless told otherwise
DEFAULT_IDLE_THRESHOLD_TOK_S = 1.0  # output tokens/s at or below which an interval with no request running is idle
DEFAULT_BURST = 8  # doctor: tiny concurrent requests sent to see a rate limiter


class MonitorOptions(FlaggedConfig):
    """``monitor``: the server watched, its meters, and where the figures go."""

    target: Annotated[str | None, Flag("--target", "-t", commands=EVERY, help=(
        "Base URL of the server whose /metrics counts tokens."))] = None
    sensors: SensorSpecs
    interval_s: Annotated[float, Flag("--interval", commands=EVERY, domain=SECONDS, help=(
        "Seconds between server scrapes / accounting intervals."))] = DEFAULT_MONITOR_INTERVAL_S
    listen: Annotated[str, Flag("--listen", commands=EVERY, help=(
        "HOST:PORT for the Prometheus exporter; 'off' for none."))] = DEFAULT_LISTEN
    history: Annotated[Path | None, Flag("--history", commands=EVERY,
                                         help="Append a JSONL line per interval to FILE.")] = None
    history_max_mb: Annotated[float | None, Flag("--history-max-mb", commands=EVERY, domain=POSITIVE,
                                                 help="Rotate the history file at this size.")] = None
    duration_s: Annotated[float | None, Flag("--duration", commands=EVERY, help=(
        "Stop after this many seconds (default: until Ctrl-C)."))] = None
    idle_threshold: Annotated[float, Flag("--idle-threshold", commands=EVERY, domain=NON_NEGATIVE, help=(
        "Output tokens/s at or below which an interval with no running request is idle."))] = (
        DEFAULT_IDLE_THRESHOLD_TOK_S)
    api_key: ServerApiKey
    api_key_file: ApiKeyFile
    live: Annotated[bool, Flag("--live/--no-live", commands=EVERY, help="Show the live table (on a terminal).")] = True
    quiet: Annotated[bool, Flag("--quiet", "-q", commands=EVERY, help="No live display (as --no-live).")] = False
    as_json: AsJson


class DoctorOptions(FlaggedConfig):
    """``doctor``: what to check (the machine, a server, a run, a release checklist)."""

    target: Annotated[str | None, Flag("--target", "-t", commands=EVERY, help=(
        "Base URL of an OpenAI-compatible server to check."))] = None
    sensors: SensorSpecs
    run: Annotated[Path | None, Flag("--run", commands=EVERY, help=(
        "A failed or partial run directory: apply the troubleshooting order."))] = None
    checklist: Annotated[Path | None, Flag("--checklist", commands=EVERY, help=(
        "YAML/JSON file of declared release-checklist answers."))] = None
    exporter: Annotated[list[str], Flag("--exporter", commands=EVERY, help=(
        "URL of a DCGM / node exporter to verify telemetry collection (repeatable)."))] = Field(default_factory=list)
    api_key: ServerApiKey
    api_key_file: ApiKeyFile
    burst: Annotated[int, Flag("--burst", commands=EVERY, domain=NON_NEGATIVE, help=(
        "Tiny concurrent requests sent to detect rate limiting (0: none)."))] = DEFAULT_BURST
    env: Annotated[bool, Flag("--env/--no-env", commands=EVERY, help=(
        "Run the environment checks (GPU, versions, sensors)."))] = True
    as_json: AsJson
    restore: Annotated[bool, Flag("--restore", commands=EVERY, help=(
        "Put back GPU power limits / clocks left changed by a killed `wattbench tune` (root), then exit."))] = False


# ------------------------------------------------------------------ the tables, generated from the fields

CONFIG_MODELS: tuple[type[FlaggedConfig], ...] = (RunConfig, MeasureConfig, TuneConfig, AbConfig, PlanRooflineOptions,
                                                  PlanRackOptions, PlanPowerFirstOptions, PlanTcoOptions,
                                                  HistoryListOptions, HistoryShowOptions, HistoryTagOptions,
                                                  HistoryUntagOptions, HistoryBaselineOptions, HistoryNoiseOptions,
                                                  HistoryImportOptions, CompareOptions, RegressOptions, AgreeOptions,
                                                  ReportOptions, SensorsOptions, MonitorOptions, DoctorOptions)


def flag_domains(*models: type[BaseModel]) -> dict[tuple[str, str], Domain]:
    """(command, flag) -> the numbers it takes, for every option of ``models`` that declares a domain."""
    return {(c, f.name): f.domain for m in models for _, f in flags(m) if f.domain is not None for c in f.commands}


COMMAND_FLAG_DOMAINS: dict[tuple[str, str], Domain] = flag_domains(*CONFIG_MODELS)
FLAG_DOMAINS: dict[str, Domain] = {
    **{flag: d for (c, flag), d in COMMAND_FLAG_DOMAINS.items() if c not in EVERY},
    # a flag of a one-command model that takes other numbers than run's (``plan roofline --gpus``) keeps its own
    **{flag: d for (c, flag), d in COMMAND_FLAG_DOMAINS.items() if c in EVERY},  # a flag of another command that takes other numbers (--gpus) keeps its own
}

# Text options: an empty value given on the command line (``-c ''``, ``--out ''``, ``--slo ''`` were
# read as not given, ``--tag ''`` was registered) is refused in one line, except where empty means
# something (``Flag.empty_means``). Checked by ``cli.common.text_gate`` as the command line is
# parsed, so a new option is covered when it is declared.
EMPTY_TEXT_OK: dict[str, str] = {f.name: f.empty_means for m in CONFIG_MODELS for _, f in flags(m)
                                 if f.empty_means is not None}


def domain_for(flag: str, command: str | None = None) -> Domain:
    """What ``flag`` takes (in ``command``): its field's domain, else its table entry, else positive numbers."""
    if command is not None and (command, flag) in COMMAND_FLAG_DOMAINS:
        return COMMAND_FLAG_DOMAINS[(command, flag)]
    return FLAG_DOMAINS.get(flag, POSITIVE)
