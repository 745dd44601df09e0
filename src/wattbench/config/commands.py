"""The options of every other command, one model each, its fields in the order its ``--help`` lists
them: ``compare`` and ``regress`` (and the flags they share), ``agree``, ``report``, ``sensors``,
``monitor`` and ``doctor`` (with the monitor's and doctor's defaults, here so that each has one home)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr

from wattbench.core.domains import Api
from wattbench.config.flags import (AT_LEAST_ONE, EVERY, NON_NEGATIVE, POSITIVE, SECONDS, SECONDS_OR_ZERO, Flag,
                                    FlaggedConfig)
from wattbench.config.shared import REGISTER_HELP, ApiKeyFile, AsJson, Boundary, HistoryDb, SensorSpecs, ServerApiKey

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
