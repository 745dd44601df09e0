"""GuideLLM's ``benchmarks.json`` (``guidellm run --output kind=json,…``) → a ``ToolRun``.

Read (GuideLLM 0.8): one level per entry of ``benchmarks`` (one per rate / stream count of the
profile); per request in ``requests.successful`` / ``errored`` / ``incomplete``:
``info.timings.request_start``, ``first_token_iteration``, ``last_token_iteration`` and
``request_end`` (wall-clock seconds, ``time.time()``), ``output_tokens`` and ``prompt_tokens``
(GuideLLM prefers the server's usage, ``prefer_response_metrics``, else its tokenizer's count);
the level's load from ``config.strategy`` (``concurrent``: ``streams``; ``constant``/``poisson``:
``rate`` and ``max_concurrency``; ``synchronous``: one stream; ``throughput``: every request at once;
``trace``: a replay); GuideLLM's own
figures (``metrics.*.successful`` mean/median/p99) carried over; its version from ``metadata``.

Not read: the texts, GuideLLM's per-iteration token counts, its scheduler's internal timings and
its warnings (its own, about its own client). Refused or warned:

* a file holding fewer requests than ``metrics.request_totals`` (GuideLLM samples requests with
  ``--metrics …sample_requests``): the tokens in the window would be undercounted, so it is refused;
* ``warmup`` / ``cooldown`` (its requests are left out of the file, yet their tokens are inside
  the window): a level note and a ``warn``, as the window's tokens are then too few.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from wattbench.core.errors import UserError
from wattbench.results.tools.base import (
    NonNegative,
    PositiveCount,
    StampS,
    Text,
    Tokens,
    ToolLevelData,
    ToolModel,
    ToolRequest,
    ToolRun,
    bad_file,
    checked,
    finite_figure,
    read_json,
    seconds_to_ns,
    validate,
)

TOOL = "guidellm"
WHAT = "guidellm"
FIGURES = ("time_to_first_token_ms", "inter_token_latency_ms", "time_per_output_token_ms", "request_latency",
           "output_tokens_per_second", "requests_per_second")
NOT_READ = ["texts and per-iteration token counts", "scheduler timings (queued, dispatch delays)",
            "GuideLLM's own warnings"]


class _Timings(ToolModel):
    request_start: StampS | None = None
    request_end: StampS | None = None
    first_token_iteration: StampS | None = None
    last_token_iteration: StampS | None = None


class _Info(ToolModel):
    timings: _Timings = _Timings()
    status: Text | None = None


class GuideRequest(ToolModel):
    """One request of ``requests.successful|errored|incomplete``, as far as wattbench reads it."""

    info: _Info = _Info()
    request_start_time: StampS | None = None
    request_end_time: StampS | None = None
    output_tokens: Tokens | None = None
    prompt_tokens: Tokens | None = None
    request_id: Text | None = None


class _Requests(ToolModel):
    successful: list[GuideRequest] | None = None
    errored: list[GuideRequest] | None = None
    incomplete: list[GuideRequest] | None = None


class _Totals(ToolModel):
    total: Tokens | None = None


class _Metrics(ToolModel):
    request_totals: _Totals = _Totals()


class GuideStrategy(ToolModel):
    type_: Text | None = None
    kind: Text | None = None
    streams: PositiveCount | None = None
    max_concurrency: PositiveCount | None = None
    rate: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None


class _Config(ToolModel):
    strategy: GuideStrategy = GuideStrategy()


class _State(ToolModel):
    processing_requests: Tokens | None = None


class GuideBenchmark(ToolModel):
    """One entry of ``benchmarks``, as far as wattbench reads it (its figures are read apart: each
    kept only when a finite number)."""

    requests: _Requests = _Requests()
    metrics: _Metrics = _Metrics()
    config: _Config = _Config()
    warmup_duration: NonNegative | None = None
    cooldown_duration: NonNegative | None = None
    scheduler_state: _State = _State()


class _Metadata(ToolModel):
    guidellm_version: Text | None = None


class GuideFile(ToolModel):
    benchmarks: list[dict[str, Any]]
    metadata: _Metadata = _Metadata()


def _request(r: GuideRequest) -> ToolRequest:
    t = r.info.timings
    start = t.request_start if t.request_start is not None else r.request_start_time
    if start is None:
        raise ValueError("a request has no info.timings.request_start")
    end = t.request_end if t.request_end is not None else r.request_end_time
    first, last = seconds_to_ns(t.first_token_iteration), seconds_to_ns(t.last_token_iteration)
    status = str(r.info.status or "completed")
    ok = status == "completed" and first is not None
    return ToolRequest(start_ns=seconds_to_ns(start), first_token_ns=first, last_token_ns=last,
                       end_ns=seconds_to_ns(end), output_tokens=r.output_tokens, input_tokens=r.prompt_tokens, ok=ok,
                       error=None if ok else f"tool_{status}"[:64], request_id=r.request_id)


def _load(strategy: GuideStrategy) -> tuple[str, float, str, str, int | None]:
    """(mode, value, arrival, label, max in flight) of a GuideLLM 0.8 strategy (``type_``:
    concurrent, synchronous, throughput, constant, poisson, trace)."""
    kind = str(strategy.type_ or strategy.kind or "")
    cap = strategy.max_concurrency
    if kind == "concurrent":
        n = strategy.streams or cap
        if n is None:
            raise ValueError("a concurrent strategy names no streams")
        return "concurrency", float(n), "poisson", f"concurrent@{n}", None
    if kind == "synchronous":
        return "concurrency", 1.0, "poisson", "synchronous", None
    if kind in ("constant", "poisson"):
        if strategy.rate is None:
            raise ValueError(f"a {kind} strategy names no rate")
        rate = float(strategy.rate)
        return "rate", rate, kind, f"{kind}@{rate:g}", cap
    if kind == "throughput":
        return "rate", math.inf, "poisson", f"throughput@{cap or 'unlimited'}", cap
    if kind == "trace":
        return "trace", 0.0, "trace", "trace", cap
    raise ValueError(f"strategy {kind[:40]!r} is not one wattbench reads (concurrent, synchronous, constant, poisson, "
                     "throughput, trace)")


def _level(raw: dict[str, Any], path: Path, n: int) -> ToolLevelData:
    where = f"benchmark {n + 1}: "
    b = validate(GuideBenchmark, raw, path, WHAT, where)
    reqs_block = b.requests
    listed = [r for k in ("successful", "errored", "incomplete") for r in (getattr(reqs_block, k) or [])]
    total = b.metrics.request_totals.total
    if total is not None and len(listed) < total:
        raise UserError(f"{WHAT}: {path} benchmark {n + 1} keeps {len(listed)} of its {total} requests "
                        "(sampled): the window's tokens cannot be counted; run GuideLLM without request sampling")
    try:
        reqs = [_request(r) for r in listed]
        mode, value, arrival, label, cap = _load(b.config.strategy)
    except ValueError as e:
        raise bad_file(WHAT, path, f"benchmark {n + 1} is not one GuideLLM wrote ({e})") from None
    checked(reqs, path, WHAT, where)
    figures: dict[str, float | None] = {}
    m = raw.get("metrics")
    metrics: dict[str, Any] = m if isinstance(m, dict) else {}
    for k in FIGURES:
        v = metrics.get(k)
        v = v.get("successful") if isinstance(v, dict) else None
        if not isinstance(v, dict):
            continue
        unit = "" if k.endswith("_ms") or k.endswith("_second") else "_s"
        raw_pct = v.get("percentiles")
        pct: dict[str, Any] = raw_pct if isinstance(raw_pct, dict) else {}
        for stat, x in (("mean", v.get("mean")), ("median", v.get("median")), ("p99", pct.get("p99"))):
            x = finite_figure(x)
            if x is not None:
                figures[f"{k}{unit}_{stat}"] = x
    notes = []
    warm, cool = b.warmup_duration or 0, b.cooldown_duration or 0
    if warm > 0 or cool > 0:
        notes.append(f"GuideLLM's warm-up ({warm:g} s) / cool-down ({cool:g} s) requests are not in the file, yet "
                     "their tokens fall in the window: the window's tokens are undercounted (run without "
                     "--warmup/--cooldown)")
    # GuideLLM can close a benchmark with a request still processing (scheduler_state.processing_requests;
    # seen with --constraint max_requests on a loaded host): that request is in no list of the file,
    # yet the server produced its tokens inside the window
    left_out = b.scheduler_state.processing_requests or 0
    if left_out:
        notes.append(f"GuideLLM ended with {left_out} request(s) still in flight, left out of its file: the "
                     "tokens the server produced for them inside the window are not credited")
    return ToolLevelData(label=label, mode=mode, value=value, requests=reqs, figures=figures, arrival=arrival,
                         max_in_flight=cap, notes=notes, left_out=left_out)


def read(paths: list[Path]) -> ToolRun:
    levels, version = [], None
    for p in paths:
        d = read_json(p, WHAT)
        if not isinstance(d, dict) or not isinstance(d.get("benchmarks"), list):
            raise bad_file(WHAT, p, "has no 'benchmarks' list")
        f = validate(GuideFile, d, p, WHAT)
        version = f.metadata.guidellm_version or version
        for n, b in enumerate(f.benchmarks):
            levels.append(_level(b, p, n))
    return ToolRun(tool=TOOL, levels=levels, version=version, files=[str(p) for p in paths], not_read=list(NOT_READ),
                   tokens_counted_by="GuideLLM's output_tokens (the server's usage where sent, "
                                     "prefer_response_metrics; else its tokenizer)",
                   token_source="usage")
