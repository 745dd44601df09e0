"""Contracts between the run orchestrator and the load generator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from wattbench.core.recordset import RecordSet
from wattbench.core.schema import LoadStats, RequestRecord, TargetDownInfo


@dataclass
class LevelSpec:
    index: int
    mode: Literal["concurrency", "rate", "trace"]
    value: float  # concurrency N, or rate in requests/s (ignored for trace)
    arrival: str = "poisson"  # poisson | constant | gamma:K
    num_requests: int | None = None  # measured requests (warm-up excluded)
    duration_s: float | None = None
    warmup_s: float | None = None
    warmup_requests: int | None = None
    seed: int = 0
    workers: int | None = None  # None = auto
    speedup: float = 1.0  # trace replay time compression
    stop_when_oversaturated: bool = True  # open loop: stop sending once the backlog grows without bound
    max_in_flight: int | None = None  # open loop: at most this many requests in flight (--max-concurrency)

    @property
    def label(self) -> str:
        if self.mode == "concurrency":
            return f"concurrency={int(self.value)}"
        if self.mode == "rate":
            return "rate=inf" if self.value == float("inf") else f"rate={self.value:g}"
        return "trace"


@dataclass
class LevelOutcome:
    """What a level produced on the run's monotonic clock.

    ``start_ns``: first measured (non-warm-up) request sent; ``end_ns``: last measured request
    ended. ``steady_start_ns``: the target concurrency first reached (closed loop) or the first
    measured send (open loop); ``steady_end_ns``: the first completion of the drain (after the
    last request was sent). ``stopped_early``: why the level ended before its bound, if it did.
    """

    records: list[RequestRecord] | RecordSet  # the level's records: columns (a RecordSet) as the load layer streams them
    start_ns: int
    end_ns: int
    steady_start_ns: int | None
    steady_end_ns: int | None
    load: LoadStats
    stopped_early: str | None = None
    # the target stopped answering mid-level (load/liveness.py): which, when, and a one-line text
    target_down: TargetDownInfo | None = None  # what LevelResult.target_down keeps
