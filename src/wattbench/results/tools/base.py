"""What every load generator's result file is read into, and how its stamps reach the run's clock.

A reader (one module per tool format) turns the tool's files into a ``ToolRun``: one
``ToolLevelData`` per benchmark / rate the tool ran, each with its requests as the tool timed them
(``ToolRequest``: start, first token, last token, end, in ns of the *tool's* clock), the token
counts it recorded, and its own latency figures, carried over under names that say they are the
tool's. Nothing here reads a meter or computes an efficiency figure.

``place_on_run_clock`` decides which clock the tool stamped with and gives the offset onto the
run's monotonic clock (``ClockMapping``): a tool's stamps must all lie inside the command's
lifetime, which is known on the run's clock, so

* stamps that already lie there (``time.perf_counter``: CLOCK_MONOTONIC, shared by every process
  of a Linux host) are taken as they are — offset 0, exact;
* stamps that lie there once moved by the wall anchor (``time.time``) are moved by it; every
  mapped stamp is then uncertain by the anchor's bracketing plus the drift of the wall clock
  against the monotonic one over the run (measured between the anchor and a second reading at
  the command's end; NTP slews the wall clock by up to 500 ppm).
* stamps that lie there on neither clock are refused with one line (a file from another run).

What that uncertainty does to the figures: every stamp of a level moves by the same offset, so a
level's window keeps its duration and its tokens stay inside it; only the window's position
against the meter's samples moves, by at most ``uncertainty_ns``. The window's energy then
changes by at most (the difference of the power at its two edges) × ``uncertainty_ns`` — under
1e-4 of the window's energy for a window of 10 s and an uncertainty of 1 ms, and zero for a
constant power.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
from typing import Annotated, Any, Iterator, TypeVar, Union, overload
import math

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wattbench.core.secret_scope import clip
from wattbench.core.clock import ClockAnchor
from wattbench.core.errors import UserError
from wattbench.core.schema import ClockMapping, RequestRecord, build_record
from wattbench.results.jsonfile import loads_bounded, read_bounded
from wattbench.results.rundir import describe_validation_error

M = TypeVar("M", bound=BaseModel)
PathArg = Union[str, "os.PathLike[str]"]  # a tool's file, as the readers are given it

# a tool's stamp may lie this far outside the command's lifetime on the chosen clock (float
# seconds round; a process's first stamp can precede the parent's "started" reading by nothing,
# but a float in seconds of 1.7e9 has a resolution of ~0.24 us)
EDGE_SLACK_NS = 1_000_000


@dataclass
class ToolRequest:
    """One request as the tool timed it: ns on the tool's own clock (``None`` where not recorded)."""

    start_ns: int
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    end_ns: int | None = None
    chunk_ns: list[int] | None = None  # every content chunk's arrival, where the tool kept them
    input_tokens: int | None = None
    output_tokens: int | None = None
    ok: bool = True
    error: str | None = None
    warmup: bool = False
    request_id: str | None = None


@dataclass
class ToolLevelData:
    """One benchmark / rate of the tool: how it loaded the server and what it timed."""

    label: str
    mode: str  # concurrency | rate
    value: float  # streams, or requests/s (inf: every request at once)
    requests: list[ToolRequest]
    figures: dict[str, float | None] = field(default_factory=dict)  # the tool's own, units in names
    max_in_flight: int | None = None  # a rate level capped at this many requests in flight
    arrival: str = "poisson"  # a rate level's arrival process (poisson | constant | gamma:K)
    notes: list[str] = field(default_factory=list)
    left_out: int = 0  # requests the tool says it still had in flight at its end and left out of its file


@dataclass
class ToolRun:
    """Everything read from one tool's result files."""

    tool: str  # vllm-bench-serve | aiperf | guidellm
    levels: list[ToolLevelData]
    tokens_counted_by: str  # "server usage", "the tool's tokenizer", ...
    token_source: str = "usage"  # RequestRecord.token_source of its records: usage | tokenizer
    version: str | None = None
    files: list[str] = field(default_factory=list)
    not_read: list[str] = field(default_factory=list)  # what its files hold that is not used
    notes: list[str] = field(default_factory=list)


def stamps(run: ToolRun) -> tuple[int, int] | None:
    """The earliest and latest stamp of every request of the run, on the tool's clock."""
    lo: int | None = None
    hi: int | None = None
    for lv in run.levels:
        for r in lv.requests:
            for t in (r.start_ns, r.first_token_ns, r.last_token_ns, r.end_ns):
                if t is None:
                    continue
                lo = t if lo is None or t < lo else lo
                hi = t if hi is None or t > hi else hi
    return None if lo is None or hi is None else (lo, hi)


def place_on_run_clock(lo_ns: int, hi_ns: int, started_ns: int, ended_ns: int, anchor: ClockAnchor,
                       end_anchor: ClockAnchor, what: str) -> ClockMapping:
    """The clock the tool stamped with, from where its stamps ``[lo_ns, hi_ns]`` fall against the
    command's lifetime ``[started_ns, ended_ns]`` on the run's clock (module doc)."""
    slack = EDGE_SLACK_NS
    if started_ns - slack <= lo_ns and hi_ns <= ended_ns + slack:
        return ClockMapping(source_clock="monotonic", offset_ns=0, uncertainty_ns=0,
                            note="the tool stamps with CLOCK_MONOTONIC (time.perf_counter), the run's own clock: "
                                 "its stamps are used as they are")
    offset = anchor.mono_ns - anchor.wall_ns
    drift = (end_anchor.wall_ns - end_anchor.mono_ns) - (anchor.wall_ns - anchor.mono_ns)
    unc = anchor.uncertainty_ns + end_anchor.uncertainty_ns + abs(drift)
    lo, hi = lo_ns + offset, hi_ns + offset
    if started_ns - slack - unc <= lo and hi <= ended_ns + slack + unc:
        return ClockMapping(source_clock="wall", offset_ns=offset, uncertainty_ns=unc, wall_drift_ns=drift,
                            note=f"the tool stamps with the wall clock (time.time); its stamps were moved onto the "
                                 f"run's monotonic clock by the run's wall anchor, each within {unc / 1e6:.3f} ms "
                                 f"(anchor bracketing {(anchor.uncertainty_ns + end_anchor.uncertainty_ns) / 1e3:.1f} us "
                                 f"+ wall-clock drift over the run {abs(drift) / 1e3:.1f} us)")
    raise UserError(f"{what}: its request times lie outside the command's run on both the monotonic and the wall "
                    "clock (a result file from another run?); remove the old file or point --result at this run's")


def to_records(level: ToolLevelData, index: int, offset_ns: int, token_source: str) -> list[RequestRecord]:
    """The level's requests as ``RequestRecord``s on the run's clock (ids in the tool's order)."""
    out: list[RequestRecord] = []

    def mv(t: int | None) -> int | None:
        return None if t is None else t + offset_ns

    for i, r in enumerate(level.requests):
        out.append(build_record(
            id=i, level=index, warmup=r.warmup, sent_ns=r.start_ns + offset_ns, first_token_ns=mv(r.first_token_ns),
            last_token_ns=mv(r.last_token_ns), end_ns=mv(r.end_ns),
            chunk_ns=[t + offset_ns for t in r.chunk_ns] if r.chunk_ns else [],
            input_tokens=r.input_tokens, output_tokens=r.output_tokens, token_source=token_source, ok=r.ok,
            error=r.error, **({"request_id": r.request_id} if r.request_id else {})))
    return out


@overload
def seconds_to_ns(t: float) -> int: ...
@overload
def seconds_to_ns(t: None) -> None: ...
def seconds_to_ns(t: float | None) -> int | None:
    """A stamp in float seconds (as the tools write them) in integer ns."""
    return None if t is None else int(round(float(t) * 1e9))


# --------------------------------------------------------------------------- reading within bounds
#
# Every reader reads its files through one layer: ``read_bytes`` (a size cap before a byte is read),
# ``parse_json`` (a nesting cap before the text is parsed, ``results/jsonfile.py``), then a pydantic
# model of the fields it uses (``ToolModel`` with the bounded types below: stamps and durations
# finite and non-negative, token counts whole numbers in 0..MAX_TOKENS, strings of a bounded
# length). Anything else in a file is one ``UserError`` naming the file and what is wrong
# (``bad_file``), which ``measure`` turns into a finding while it keeps the level over the command's
# lifetime; no malformed file reaches the accounting.

MAX_FILE_BYTES = 256 << 20  # a tool's result file (vLLM's detailed JSON of 10,000 requests with texts: ~20 MB)
MAX_TOKENS = 100_000_000  # per request: ten times the largest context served (server/openai.MAX_USAGE_TOKENS)
MAX_STAMP_S = 9.2e9  # a stamp in seconds whose ns fit in int64 (wall clock until 2261)
MAX_DURATION_S = 1e7  # a request's latency: 115 days
MAX_TEXT = 256  # ids, versions, labels


class ToolModel(BaseModel):
    """A tool's file as far as wattbench reads it: unknown fields ignored, known ones bounded."""

    model_config = ConfigDict(extra="ignore")


StampS = Annotated[float, Field(ge=0, le=MAX_STAMP_S, allow_inf_nan=False)]
StampNs = Annotated[int, Field(ge=0, le=2**63 - 1)]
DurationS = Annotated[float, Field(ge=0, le=MAX_DURATION_S, allow_inf_nan=False)]
DurationMs = Annotated[float, Field(ge=0, le=MAX_DURATION_S * 1e3, allow_inf_nan=False)]
Tokens = Annotated[int, Field(ge=0, le=MAX_TOKENS)]
PositiveCount = Annotated[int, Field(ge=1, le=10_000_000)]
Rate = Annotated[float, Field(gt=0, allow_inf_nan=True)]  # requests/s; inf: every request at once (NaN refused below)
NonNegative = Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]


def finite_figure(v: object) -> float | None:
    """A tool's own summary figure: kept when it is a finite number, else left out (it is shown
    beside wattbench's figures, never used in them)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) < 1e15:
        return float(v)
    return None


def read_bytes(path: PathArg, what: str, max_bytes: int | None = None) -> bytes:
    """A tool's file, at most ``MAX_FILE_BYTES``; one line naming it otherwise."""
    try:
        return read_bounded(path, MAX_FILE_BYTES if max_bytes is None else max_bytes)
    except OSError as e:
        raise UserError(f"{what}: cannot read {path} ({e.strerror or e})") from None
    except ValueError as e:
        raise bad_file(what, path, str(e)) from None


def parse_json(data: bytes | str, path: PathArg, what: str, where: str = "") -> Any:
    """One JSON text of a tool's file (``where``: "line 3 " of a JSONL file), nesting capped."""
    try:
        return loads_bounded(data)
    except ValueError as e:  # not JSON, not UTF-8, or nested too deep
        raise bad_file(what, path, f"{where}is not JSON it reads ({_short(e)})") from None


def read_json(path: PathArg, what: str) -> Any:
    """A tool's JSON file, or one line naming the file and what is wrong with it."""
    return parse_json(read_bytes(path, what), path, what)


def json_lines(data: bytes, path: PathArg, what: str) -> Iterator[tuple[str, Any]]:
    """Each JSON text of a JSON-lines file (``data``, read by ``read_bytes``), blank lines skipped,
    with where it is (``"line 3 "``, for the line naming what is wrong with it)."""
    for n, line in enumerate(data.splitlines(), 1):
        if line.strip():
            where = f"line {n} "
            yield where, parse_json(line, path, what, where)


def validate(model: type[M], data: object, path: PathArg, what: str, where: str = "") -> M:
    """``data`` as ``model``, or one line naming the file, where in it, and the field that is wrong."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise bad_file(what, path, f"{where}{_short(describe_validation_error(e, limit=2))}") from None


def _short(e: object, n: int = 200) -> str:
    return clip(" ".join(str(e).split()), n + 1, "…")


def check_order(r: ToolRequest) -> str | None:
    """What is wrong with a request's stamps: one before its start (a negative duration)."""
    for name in ("first_token_ns", "last_token_ns", "end_ns"):
        t = getattr(r, name)
        if t is not None and t < r.start_ns:
            return f"its {name.removesuffix('_ns').replace('_', ' ')} is before its start"
    if r.first_token_ns is not None and r.last_token_ns is not None and r.last_token_ns < r.first_token_ns:
        return "its last token is before its first"
    return None


def check_bounds(r: ToolRequest) -> str | None:
    """What is out of range in a request built from a file whose fields no tool model checked
    (a wrapped wattbench run's ``requests.jsonl``): stamps in 0..2**63, token counts in 0..MAX_TOKENS."""
    for name in ("start_ns", "first_token_ns", "last_token_ns", "end_ns"):
        t = getattr(r, name)
        if t is not None and not 0 <= t < 2 ** 63:
            return f"its {name} {t} is not a time"
    for t in r.chunk_ns or ():
        if not 0 <= t < 2 ** 63:
            return f"a chunk time {t} is not a time"
    for name in ("input_tokens", "output_tokens"):
        n = getattr(r, name)
        if n is not None and not 0 <= n <= MAX_TOKENS:
            return f"its {name} {n} is not a token count (0 to {MAX_TOKENS:,})"
    return None


def checked(requests: list[ToolRequest], path: PathArg, what: str, where: str = "") -> list[ToolRequest]:
    for i, r in enumerate(requests):
        problem = check_bounds(r) or check_order(r)
        if problem:
            raise bad_file(what, path, f"{where}request {i + 1}: {problem}")
    return requests


def bad_file(what: str, path: PathArg, problem: str) -> UserError:
    return UserError(f"{what}: {path} {problem}; is it the tool's own output, unedited?")
