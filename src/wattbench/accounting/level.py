"""One level's accounting: a load outcome and the telemetry around it → a ``LevelResult``.

``account_level(index, spec, outcome, ctx)`` is pure: it reads the outcome's records and windows,
the telemetry log (``ctx.log``, ``None`` without a meter), the idle baseline and the server's
``/metrics`` timeline, and returns the level with its latency, throughput, energy (full and
steady windows), power split, server metrics, goodput, backlog test and verdict. It never waits:
the caller (``run/level.py``) lets the sampler and the scraper take their closing reads first
(``RunSession.await_closing_reads``), so the window's end is bracketed by samples and scrapes.

Verdict rules live where they are written once: energy, sampling and steady-state findings in
``validity.py``; what the level measured (failures, the over-saturation guard, small samples,
prompt lengths, the target gone) in ``level_findings.py``; thresholds of the backlog test and
the saturation marks in ``metrics/saturation.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from wattbench.accounting.idle import IdlePower
from wattbench.accounting.window import AccountedWindow, account_window, level_validity
from wattbench.accounting.boundaries import contains_work
from wattbench.accounting.level_findings import (
    failed_requests_finding,
    level_findings,
    measured_nothing,
    oversaturation_findings,
)
from wattbench.accounting.split import power_split
from wattbench.accounting.findings import worst
from wattbench.accounting.findings import Finding
from wattbench.accounting.validity import client_findings, combine, steady_findings
from wattbench.metrics.saturation import SaturationVerdict, is_oversaturated, mark_saturated
from wattbench.metrics.latency import summarize_level, tokens_in_window
from wattbench.metrics.slo import SLO, goodput
from wattbench.core.load_types import LevelOutcome, LevelSpec
from wattbench.core.recordset import NONE, RecordSet, as_record_set
from wattbench.core.schema import (
    LevelResult,
    LevelTiming,
    LoadStats,
    Oversaturation,
    PowerSplit,
    RequestRecord,
    ServerMetrics,
    Throughput,
    TokenCount,
    Window,
)
from wattbench.telemetry.base import TelemetryLog

__all__ = ["LevelContext", "ServerTimelineView", "account_level", "counter_level", "oversaturation", "count_source",
           "add_level_findings", "BACKLOG_GRID_NS", "NO_METER"]

BACKLOG_GRID_NS = 100_000_000  # open-loop backlog sampled every 100 ms over the window
MIN_WAITING_SCRAPES = 8  # the server's waiting-queue gauge is used from this many scrapes in the window


class ServerTimelineView(Protocol):
    """What a level's accounting reads of the server's scraped ``/metrics``
    (``server.metrics.ServerTimeline``, a layer above): the series by name, ``(t_ns, values)`` on
    the run's monotonic clock, and a window's summary for ``LevelResult.server_metrics``."""

    @property
    def series(self) -> Mapping[str, tuple[Sequence[int], Sequence[float]]]: ...

    def summary(self, t0_ns: int, t1_ns: int) -> ServerMetrics: ...


@dataclass
class LevelContext:
    """What a level is accounted against, besides its own outcome."""

    log: TelemetryLog | None = None  # None without a meter
    idle: dict[str, IdlePower] | None = None  # by boundary
    price_per_kwh: float = 0.0  # the session passes --price-per-kwh; 0 here prices nothing
    pue: float = 1.0
    timeline: ServerTimelineView | None = None  # when /metrics is scraped
    engine: str | None = None  # the server's engine, for the "no /metrics" sentence
    slos: list[SLO] = field(default_factory=list)


def _windows(outcome: LevelOutcome) -> tuple[Window, Window | None]:
    full = Window(start_ns=outcome.start_ns, end_ns=outcome.end_ns,
                  duration_s=max(0.0, (outcome.end_ns - outcome.start_ns) / 1e9), kind="full")
    s0, s1 = outcome.steady_start_ns, outcome.steady_end_ns
    steady = None
    if s0 is not None and s1 is not None and s1 > s0:
        steady = Window(start_ns=s0, end_ns=s1, duration_s=(s1 - s0) / 1e9, kind="steady")
    return full, steady


NO_METER = "no power meter (see the run's verdict)"  # a level's energy_unavailable_reason without a meter


def _full_window_energy(level: LevelResult, log: TelemetryLog, ctx: LevelContext, t0_ns: int, t1_ns: int, *,
                        output_tokens: int, total_tokens: int) -> AccountedWindow:
    """Account ``[t0_ns, t1_ns]`` with these token counts; fill the level's energy and thermal."""
    accounted = account_window(log, t0_ns, t1_ns, output_tokens=output_tokens, total_tokens=total_tokens,
                               idle=ctx.idle, price_per_kwh=ctx.price_per_kwh, pue=ctx.pue, kind="full")
    level.energy = accounted.energy
    level.thermal = accounted.thermal
    return accounted


def _energy(level: LevelResult, outcome: LevelOutcome, ctx: LevelContext, records: RecordSet
            ) -> AccountedWindow | None:
    """Fill the level's energy (full and steady windows) and power split; the accounted window."""
    if ctx.log is None:
        level.energy_unavailable_reason = NO_METER
        return None
    window = level.window  # always set by account_level
    if window is None or window.duration_s <= 0:
        level.energy_unavailable_reason = ("the level has no measurement window: no measured request completed, "
                                           "so no energy can be attributed to it")
        return None
    if measured_nothing(level):  # no figure: not a window's draw credited to no measured request
        level.energy_unavailable_reason = ("no measured request completed, so the level measured nothing and no "
                                           "energy is credited to it")
        return None
    tp = level.throughput
    accounted = _full_window_energy(level, ctx.log, ctx, outcome.start_ns, outcome.end_ns,
                                    output_tokens=tp.output_tokens, total_tokens=tp.output_tokens + tp.input_tokens)
    split = power_split(level.energy, window.duration_s)  # memory vs the rest of the board
    if split is not None:
        level.power_split = PowerSplit.model_validate(split)
    sw = level.steady_window
    if sw is not None:
        out_tok, in_tok = tokens_in_window(records, sw.start_ns, sw.end_ns)
        level.energy_steady = account_window(ctx.log, sw.start_ns, sw.end_ns, output_tokens=out_tok,
                                             total_tokens=out_tok + in_tok, idle=ctx.idle,
                                             price_per_kwh=ctx.price_per_kwh, pue=ctx.pue, kind="steady").energy
    if not level.energy:
        level.energy_unavailable_reason = "no power or energy channel produced readings in this window"
    return accounted


def _server_metrics(outcome: LevelOutcome, ctx: LevelContext) -> ServerMetrics:
    if ctx.timeline is not None:
        return ctx.timeline.summary(outcome.start_ns, outcome.end_ns)
    return ServerMetrics(available=False,
                         reason=f"the server ({ctx.engine or 'unknown engine'}) exposes no Prometheus /metrics; "
                                "the report's timeline shows the client's view (requests in flight, tokens/s)")


def account_level(index: int, spec: LevelSpec, outcome: LevelOutcome, ctx: LevelContext,
                  token_source: str) -> LevelResult:
    """The level's figures and verdict from its load outcome (``core.load_types.LevelOutcome``)."""
    records = as_record_set(outcome.records)  # a list is copied into a set once, here
    requests, latency, throughput = summarize_level(records, outcome.start_ns, outcome.end_ns)
    window, steady = _windows(outcome)
    level = LevelResult(index=index, label=spec.label, load=outcome.load, window=window, steady_window=steady,
                        requests=requests, latency=latency, throughput=throughput, token_source=token_source)
    level.stopped_early = outcome.stopped_early
    found: list[Finding] = [f for f in [failed_requests_finding(level)] if f is not None]
    accounted = _energy(level, outcome, ctx, records)
    level.server_metrics = _server_metrics(outcome, ctx)
    if ctx.slos and window.duration_s > 0:
        in_window = throughput.tokens_in_window  # summarize_level always sets it
        level.goodput = goodput(records, ctx.slos, window.duration_s,
                                avg_power_w={b: e.avg_power_w for b, e in level.energy.items()
                                             if contains_work(b, level.energy)},
                                window_output_tokens=in_window.output if in_window is not None else None)
    sat = oversaturation(spec, outcome, ctx.timeline, records=records)
    if sat is not None:
        level.oversaturation = Oversaturation.model_validate(sat.to_dict())
    found += oversaturation_findings(outcome.stopped_early, sat.reason if sat is not None and sat.oversaturated
                                     else None)
    found += client_findings(outcome.load, latency, window.duration_s)
    e2e_p50 = latency.e2e_ms.p50
    found += steady_findings(level.window, level.steady_window, mode=spec.mode, energy=level.energy,
                             energy_steady=level.energy_steady, e2e_s=e2e_p50 / 1e3 if e2e_p50 else None)
    level.validity = level_validity(accounted, load=outcome.load, token_source=token_source, extra=found,
                                    n_requests=level.requests.completed + level.requests.failed)
    return mark_saturated(level)


def oversaturation(spec: LevelSpec, outcome: LevelOutcome, timeline: ServerTimelineView | None = None, *,
                   records: RecordSet | None = None) -> SaturationVerdict | None:
    """Whether the level's queue grew without bound (``metrics.saturation.is_oversaturated``): the
    server's waiting queue where scraped, else (open loop) requests sent but not finished, sampled
    every 100 ms over the window. ``None`` when there is nothing to judge. ``records``: the
    outcome's records as a set, when the caller has it."""
    t0, t1 = outcome.start_ns, outcome.end_ns
    if t1 <= t0:
        return None
    if timeline is not None and "waiting" in timeline.series:
        ts, vs = timeline.series["waiting"]
        pts = [(t, v) for t, v in zip(ts, vs) if t0 <= t <= t1]
        if len(pts) >= MIN_WAITING_SCRAPES:
            return is_oversaturated([(t - t0) / 1e9 for t, _ in pts], [v for _, v in pts], min_points=4)
    if spec.mode == "concurrency":
        return None  # a closed loop's backlog is capped by its concurrency
    rs = as_record_set(outcome.records) if records is None else records
    c = rs.columns("warmup", "sent_ns", "last_token_ns", "end_ns")
    measured = ~c["warmup"]
    if not measured.any():
        return None
    sent = np.sort(c["sent_ns"][measured])
    # when it ended (request_end_ns: last content chunk, else close), else close, else the window's end
    last, end = c["last_token_ns"][measured], c["end_ns"][measured]
    del c
    e = np.where(last != NONE, last, end)
    ends = np.sort(np.where((e != NONE) & (e != 0), e, np.where((end != NONE) & (end != 0), end, t1)))
    grid = np.arange(t0, t1, BACKLOG_GRID_NS, dtype=np.int64)
    backlog = np.searchsorted(sent, grid, side="right") - np.searchsorted(ends, grid, side="right")
    return is_oversaturated(((grid - t0) / 1e9).tolist(), backlog.tolist())


def count_source(records: Iterable[RequestRecord] | RecordSet) -> str:
    """Where the level's token counts come from: the server's ``usage`` for every completed
    request, or ``missing`` when some completed request had none (then throughput undercounts)."""
    c = as_record_set(records).columns("ok", "warmup", "output_tokens")
    done = c["ok"] & ~c["warmup"]
    if (c["output_tokens"][done] == NONE).any():
        return "missing"
    return "usage"


def add_level_findings(level: LevelResult, spec: LevelSpec, outcome: LevelOutcome, length_source: str | None
                       ) -> None:
    """What the level measured, judged (``level_findings.py``): nothing completed, small samples,
    a closed loop far below its label, prompt lengths off, the target gone."""
    if outcome.target_down:
        level.target_down = outcome.target_down.model_copy()
    level.timing = LevelTiming(warmup_s=spec.warmup_s, warmup_requests=spec.warmup_requests,
                               duration_s=spec.duration_s, duration_includes_warmup=False)
    found = level_findings(level, outcome.records, stopped_early=outcome.stopped_early, length_source=length_source,
                           target_down=outcome.target_down)
    if found:
        level.validity = worst(level.validity, combine(found))


def counter_level(index: int, label: str, t0_ns: int, t1_ns: int, ctx: LevelContext, *,
                  tokens: tuple[float, float] | None, findings: list[Finding], no_metrics_reason: str
                  ) -> LevelResult:
    """A level over ``[t0_ns, t1_ns]`` with no per-request records (``wattbench measure`` around a
    command wattbench does not read, or its marker windows): its tokens are ``tokens`` (output,
    input: the server's counters' increase over the window; None when not counted), its energy the
    window's (``ctx.log``; none without a meter or for an empty window), its server metrics the
    window's (``no_metrics_reason`` when nothing was scraped), its verdict the window's energy
    findings with ``findings`` (the caller's token findings)."""
    dur = max(0.0, (t1_ns - t0_ns) / 1e9)
    out_tok, in_tok = tokens if tokens is not None else (0.0, 0.0)

    def per_s(n: float) -> float:
        return n / dur if dur > 0 else 0.0

    tp = Throughput(output_tokens_per_s=per_s(out_tok), input_tokens_per_s=per_s(in_tok),
                    total_tokens_per_s=per_s(out_tok + in_tok), duration_s=dur, output_tokens=int(round(out_tok)),
                    input_tokens=int(round(in_tok)), token_basis="server_counters",
                    tokens_in_window=TokenCount(output=out_tok, input=in_tok) if tokens is not None else None)
    level = LevelResult(index=index, label=label, load=LoadStats(mode="concurrency"),
                        window=Window(start_ns=t0_ns, end_ns=t1_ns, duration_s=dur, kind="full"), throughput=tp,
                        token_source="server_counters" if tokens is not None else "none")
    accounted = None
    if ctx.log is None:
        level.energy_unavailable_reason = NO_METER
    elif dur <= 0:
        level.energy_unavailable_reason = "the window is empty"
    else:
        accounted = _full_window_energy(level, ctx.log, ctx, t0_ns, t1_ns, output_tokens=int(round(out_tok)),
                                        total_tokens=int(round(out_tok + in_tok)))
    level.server_metrics = (ctx.timeline.summary(t0_ns, t1_ns) if ctx.timeline is not None else
                            ServerMetrics(available=False, reason=no_metrics_reason))
    level.validity = level_validity(accounted, token_source=None, extra=findings)
    return level
