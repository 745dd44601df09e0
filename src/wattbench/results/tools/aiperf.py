"""NVIDIA AIPerf's ``profile_export.jsonl`` (with ``profile_export_aiperf.json`` beside it) → a ``ToolRun``.

Read (AIPerf 0.13): one JSON line per request — ``metadata.request_start_ns`` and
``request_end_ns`` (wall-clock ns: AIPerf anchors ``time.time_ns()`` once per process and adds
``perf_counter_ns`` deltas), ``metadata.benchmark_phase`` (``warmup`` requests are kept and marked
warm-up, so their tokens inside the window are credited but they are not in the statistics),
``metadata.x_request_id``; ``metrics.time_to_first_token`` (ms), ``inter_chunk_latency`` (ms, the
gaps between content chunks: the chunk stamps), ``output_token_count`` / ``usage_completion_tokens``
and ``input_sequence_length`` / ``usage_prompt_tokens`` (tokens; the server's usage with
``--use-server-token-count``, else AIPerf's tokenizer), ``error`` (a failed request). From
``profile_export_aiperf.json``: the profiling phase's load (``input_config.phases``: ``type``,
``concurrency``, ``rate``, ``smoothness``), ``aiperf_version``, and AIPerf's own figures (``time_to_first_token`` …).

Not read: the ``http_req_*`` timings, AIPerf's GPU telemetry (DCGM) and server-metrics exports
(wattbench reads its own meters and ``/metrics``), ``credit_*`` and effective-throughput series.
One level per file (AIPerf runs one profiling phase).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Protocol, TypeVar

from pydantic import Field, field_validator

from wattbench.results.tools.base import (
    DurationMs,
    PositiveCount,
    Rate,
    StampNs,
    Text,
    Tokens,
    ToolLevelData,
    ToolModel,
    ToolRequest,
    ToolRun,
    bad_file,
    checked,
    finite_figure,
    json_lines,
    read_bytes,
    read_json,
    validate,
)

TOOL = "aiperf"
WHAT = "aiperf"
SUMMARY = "profile_export_aiperf.json"
FIGURES = ("time_to_first_token", "inter_token_latency", "request_latency", "output_token_throughput",
           "request_throughput", "benchmark_duration")
NOT_READ = ["http_req_* timings", "GPU telemetry (DCGM) and server-metrics exports",
            "credit_* and effective/active throughput series"]


class _Metric(ToolModel):
    value: DurationMs | None = None


class _Count(ToolModel):
    value: Tokens | None = None


class _Gaps(ToolModel):
    value: list[DurationMs] | None = None


class AiperfMetadata(ToolModel):
    request_start_ns: StampNs
    request_end_ns: StampNs | None = None
    benchmark_phase: Text | None = None
    phase_kind: Text | None = None
    x_request_id: Text | None = None


class AiperfMetrics(ToolModel):
    time_to_first_token: _Metric | None = None
    inter_chunk_latency: _Gaps | None = None
    output_token_count: _Count | None = None
    usage_completion_tokens: _Count | None = None
    output_sequence_length: _Count | None = None
    usage_prompt_tokens: _Count | None = None
    input_sequence_length: _Count | None = None


class AiperfRecord(ToolModel):
    """One line of ``profile_export.jsonl``, as far as wattbench reads it."""

    metadata: AiperfMetadata
    metrics: AiperfMetrics = AiperfMetrics()
    error: object = None


class AiperfPhase(ToolModel):
    kind: Text | None = None
    type: Text | None = None
    rate: Rate | None = None
    request_rate: Rate | None = None
    concurrency: PositiveCount | None = None
    smoothness: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] | None = None
    rate_series: object = None
    rate_ramp: object = None

    @field_validator("rate", "request_rate", mode="before")
    @classmethod
    def _no_nan(cls, v: object) -> object:
        if isinstance(v, float) and v != v:
            raise ValueError("the rate is NaN")
        return v


class AiperfEndpoint(ToolModel):
    use_server_token_count: bool = False


class AiperfInput(ToolModel):
    phases: list[AiperfPhase] = []
    endpoint: AiperfEndpoint = AiperfEndpoint()


class AiperfSummary(ToolModel):
    """``profile_export_aiperf.json``, as far as wattbench reads it (its figures are read apart:
    each kept only when a finite number)."""

    aiperf_version: Text | None = None
    input_config: AiperfInput = AiperfInput()
    was_cancelled: bool = False


V_co = TypeVar("V_co", covariant=True)


class _Valued(Protocol[V_co]):
    @property
    def value(self) -> V_co | None: ...


def _first(*metrics: _Valued[V_co] | None) -> V_co | None:
    """The value of the first metric the record holds (aiperf names a figure differently by version)."""
    for m in metrics:
        if m is not None and m.value is not None:
            return m.value
    return None


def _request(rec: AiperfRecord) -> ToolRequest:
    md, m = rec.metadata, rec.metrics
    start, end = md.request_start_ns, md.request_end_ns
    warm = str(md.benchmark_phase or md.phase_kind or "profiling") == "warmup"
    n_out = _first(m.output_token_count, m.usage_completion_tokens, m.output_sequence_length)
    n_in = _first(m.usage_prompt_tokens, m.input_sequence_length)
    ttft = _first(m.time_to_first_token)
    if rec.error or ttft is None:
        return ToolRequest(start_ns=start, end_ns=end, ok=False, error="tool_error", warmup=warm,
                           request_id=md.x_request_id)
    first = start + int(round(ttft * 1e6))
    chunks = [first]
    for gap in _first(m.inter_chunk_latency) or []:
        chunks.append(chunks[-1] + int(round(gap * 1e6)))
    return ToolRequest(start_ns=start, first_token_ns=first, last_token_ns=chunks[-1],
                       end_ns=end if end is not None else chunks[-1], chunk_ns=chunks, output_tokens=n_out,
                       input_tokens=n_in, warmup=warm, request_id=md.x_request_id)


def _load(summary: AiperfSummary | None) -> tuple[str, float, str, str, int | None, list[str]]:
    """(mode, value, arrival, label, max in flight, notes) of the profiling phase
    (``input_config.phases``: ``type`` concurrency | poisson | constant | gamma, ``rate``,
    ``concurrency``, ``smoothness``)."""
    phases = summary.input_config.phases if summary is not None else []
    prof = next((p for p in phases if p.kind == "profiling"), phases[-1] if phases else AiperfPhase())
    kind = str(prof.type or "")
    rate = prof.rate or prof.request_rate
    conc = prof.concurrency
    notes = []
    if prof.rate_series or prof.rate_ramp:
        notes.append("AIPerf's request rate followed a schedule or a ramp; the level's rate is not one rate")
    if rate:
        arrival = {"constant": "constant", "gamma": f"gamma:{prof.smoothness or 1:g}"}.get(kind, "poisson")
        return "rate", float(rate), arrival, f"request_rate={float(rate):g}" + (f" concurrency={conc}" if conc else ""), \
            conc, notes
    if conc:
        return "concurrency", float(conc), "poisson", f"concurrency={conc}", None, notes
    return "concurrency", 1.0, "poisson", "profiling", None, notes + ["AIPerf's file names no concurrency or rate"]


def _records(p: Path) -> list[ToolRequest]:
    records = []
    for where, raw in json_lines(read_bytes(p, WHAT), p, WHAT):
        if not isinstance(raw, dict):
            raise bad_file(WHAT, p, f"{where}is not an AIPerf record (not a JSON object)")
        records.append(_request(validate(AiperfRecord, raw, p, WHAT, f"{where}is not an AIPerf record: ")))
    return checked(records, p, WHAT)


def read(paths: list[Path]) -> ToolRun:
    levels, version, files, server_counts = [], None, [], True
    for p in paths:
        records = _records(p)
        files.append(str(p))
        summary, raw = None, {}
        sp = p.with_name(SUMMARY)
        if sp.is_file():
            raw = read_json(sp, WHAT)
            if not isinstance(raw, dict):
                raise bad_file(WHAT, sp, "is not a JSON object")
            summary = validate(AiperfSummary, raw, sp, WHAT)
            files.append(str(sp))
            version = summary.aiperf_version or version
            server_counts = server_counts and summary.input_config.endpoint.use_server_token_count
        mode, value, arrival, label, cap, notes = _load(summary)
        figures: dict[str, float | None] = {}
        for k in FIGURES:
            v = raw.get(k)
            if isinstance(v, dict) and finite_figure(v.get("avg")) is not None:
                unit = str(v.get("unit") or "")[:16].replace("/", "_per_").replace(" ", "_")
                for stat in ("avg", "p50", "p99"):
                    x = finite_figure(v.get(stat))
                    if x is not None:
                        figures[f"{k}_{stat}_{unit}"] = x
        if summary is not None and summary.was_cancelled:
            notes.append("AIPerf reports the benchmark as cancelled")
        levels.append(ToolLevelData(label=label, mode=mode, value=value, requests=records, figures=figures,
                                    arrival=arrival, max_in_flight=cap, notes=notes))
    return ToolRun(tool=TOOL, levels=levels, version=version, files=files, not_read=list(NOT_READ),
                   tokens_counted_by="the server's usage (AIPerf's --use-server-token-count)" if server_counts else
                   "AIPerf's tokenizer over the response text (add --use-server-token-count for the server's usage)",
                   token_source="usage" if server_counts else "tokenizer")
