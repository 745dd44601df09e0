"""What ``wattbench measure -- COMMAND`` adds to a result: the command and the load generator it
ran (``MeasureInfo``, on ``Result.measure``), how the tool's timestamps were placed on the run's
clock (``ClockMapping``), and, per level, what came from the tool (``ToolLevel``, on
``LevelResult.tool``): its own latency figures, labelled as the tool's, and the two token counts
(the tool's records and the server's counters) side by side."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from wattbench.core.schema.base import _M


class ClockMapping(_M):
    """How a tool's timestamps became times on the run's monotonic clock.

    ``source_clock``: ``monotonic`` when the tool stamps with ``time.perf_counter`` /
    CLOCK_MONOTONIC (the same clock as the run's on one Linux host: the offset is 0, exactly);
    ``wall`` when it stamps with ``time.time`` (the offset comes from the run's wall anchor).
    ``uncertainty_ns`` bounds how far every mapped stamp may be from where the run's clock would
    have put it: the anchor's own bracketing plus how far the wall clock moved against the
    monotonic one between the anchor and the command's end (NTP slewing), measured, not assumed.
    """

    source_clock: Literal["monotonic", "wall"]
    offset_ns: int  # added to the tool's stamp (ns) to give the run's monotonic clock
    uncertainty_ns: int
    wall_drift_ns: int | None = None  # (wall - monotonic) at the command's end minus at the anchor
    note: str = ""


class ToolLevel(_M):
    """One level as the load generator ran it."""

    tool: str  # vllm-bench-serve | aiperf | guidellm | command
    label: str  # the tool's own name for it (benchmark, rate, file)
    # the tool's own figures, carried over as it computed them (units in the names); never the
    # basis of an efficiency figure, which divides window energy by the window's tokens
    figures: dict[str, float | None] = Field(default_factory=dict)
    tokens_counted_by: str = ""  # how the tool counted output tokens (server usage, its tokenizer)
    # output tokens inside the level's window: from the tool's per-request records (credited as
    # every level is, metrics/window_tokens.py) and from the server's counter over the window
    tool_output_tokens: float | None = None
    server_output_tokens: float | None = None
    # how far the counter's increase can be off: the tokens of the scrape intervals around the edges
    server_output_tokens_error: float | None = None
    token_disagreement: float | None = None  # tool / server - 1 (None where either is missing)
    notes: list[str] = Field(default_factory=list)


class MeasureInfo(_M):
    """The command ``measure`` ran and where its levels came from."""

    command: list[str] = Field(default_factory=list)  # argv, credential-bearing values redacted
    tool: str = "command"  # vllm-bench-serve | aiperf | guidellm | command (any other)
    tool_version: str | None = None
    exit_code: int | None = None  # None: it did not end by itself (interrupted)
    started_ns: int | None = None  # the run's monotonic clock, just before the command started
    ended_ns: int | None = None  # and just after it was seen to end
    # where the levels' windows come from: the tool's per-request records, --window-from markers,
    # or the command's lifetime
    window_source: Literal["tool records", "markers", "command lifetime"] = "command lifetime"
    # where the tokens come from: the tool's records, the server's counters, or nowhere (energy only)
    token_source: Literal["tool records", "server counters", "none"] = "none"
    result_files: list[str] = Field(default_factory=list)  # the tool's files read (paths as given)
    clock: ClockMapping | None = None
    not_read: list[str] = Field(default_factory=list)  # what the tool's files hold that is not used
    notes: list[str] = Field(default_factory=list)
