"""Contracts between the run orchestrator and the load generator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from wattbench.results.schema import LoadStats, RequestRecord


@dataclass
class TargetSpec:
    """Where and how to send requests. The API key is held here in memory only."""

    base_url: str  # normalized, ends with /v1
    model: str
    api: Literal["completions", "chat"] = "completions"
    api_key: str | None = None
    extra_body: dict = field(default_factory=dict)  # engine-specific fields the engine accepts (ignore_eos …)
    request_timeout_s: float = 600.0
    stall_timeout_s: float = 120.0
    keep_output_text: bool = False
    send_min_tokens: bool = False  # the server accepts min_tokens (vLLM, SGLang); strict servers reject it
    keepalive: bool = True  # reuse connections; False: one per request (server.detect.reuses_connections)
    headers: dict = field(default_factory=dict)  # --header K:V, sent with every request (memory only)

    def __repr__(self) -> str:  # never show the key
        return f"TargetSpec(base_url={self.base_url!r}, model={self.model!r}, api={self.api!r})"


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

    records: list[RequestRecord]
    start_ns: int
    end_ns: int
    steady_start_ns: int | None
    steady_end_ns: int | None
    load: LoadStats
    stopped_early: str | None = None
    # the target stopped answering mid-level (load/liveness.py): which, when, and a one-line text
    target_down: dict | None = None
