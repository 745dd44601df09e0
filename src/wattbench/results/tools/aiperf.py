"""NVIDIA AIPerf's ``profile_export.jsonl`` (with ``profile_export_aiperf.json`` beside it) → a ``ToolRun``.

Read (AIPerf 0.13): one JSON line per request — ``metadata.request_start_ns`` and
``request_end_ns`` (wall-clock ns: AIPerf anchors ``time.time_ns()`` once per process and adds
``perf_counter_ns`` deltas), ``metadata.benchmark_phase`` (``warmup`` requests are kept and marked
warm-up, so their tokens inside the window are credited but they are not in the statistics),
``metadata.x_request_id``; ``metrics.time_to_first_token`` (ms), ``inter_chunk_latency`` (ms, the
gaps between content chunks: the chunk stamps), ``output_token_count`` / ``usage_completion_tokens``
and ``input_sequence_length`` / ``usage_prompt_tokens`` (tokens; the server's usage with
``--use-server-token-count``, else AIPerf's tokenizer), ``error`` (a failed request). From
``profile_export_aiperf.json``: the profiling phase's load (``input_config.phases``: ``concurrency``
or ``request_rate``), ``aiperf_version``, and AIPerf's own figures (``time_to_first_token`` …).

Not read: the ``http_req_*`` timings, AIPerf's GPU telemetry (DCGM) and server-metrics exports
(wattbench reads its own meters and ``/metrics``), ``credit_*`` and effective-throughput series.
One level per file (AIPerf runs one profiling phase).
"""

from __future__ import annotations

import json
from pathlib import Path

from wattbench.errors import UserError
from wattbench.results.tools.base import ToolLevelData, ToolRequest, ToolRun, bad_file, read_json

TOOL = "aiperf"
WHAT = "aiperf"
SUMMARY = "profile_export_aiperf.json"
FIGURES = ("time_to_first_token", "inter_token_latency", "request_latency", "output_token_throughput",
           "request_throughput", "benchmark_duration")
NOT_READ = ["http_req_* timings", "GPU telemetry (DCGM) and server-metrics exports",
            "credit_* and effective/active throughput series"]


def _value(m: dict, *names):
    for n in names:
        v = m.get(n)
        if isinstance(v, dict) and v.get("value") is not None:
            return v["value"]
    return None


def _request(rec: dict) -> ToolRequest:
    md, m = rec.get("metadata") or {}, rec.get("metrics") or {}
    start, end = md.get("request_start_ns"), md.get("request_end_ns")
    if start is None:
        raise ValueError("a record has no metadata.request_start_ns")
    warm = str(md.get("benchmark_phase") or md.get("phase_kind") or "profiling") == "warmup"
    n_out = _value(m, "output_token_count", "usage_completion_tokens", "output_sequence_length")
    n_in = _value(m, "usage_prompt_tokens", "input_sequence_length")
    ttft = _value(m, "time_to_first_token")
    if rec.get("error") or ttft is None:
        return ToolRequest(start_ns=int(start), end_ns=int(end) if end is not None else None, ok=False,
                           error="tool_error", warmup=warm, request_id=md.get("x_request_id"))
    first = int(start) + int(round(float(ttft) * 1e6))
    chunks = [first]
    for gap in _value(m, "inter_chunk_latency") or []:
        chunks.append(chunks[-1] + int(round(float(gap) * 1e6)))
    return ToolRequest(start_ns=int(start), first_token_ns=first, last_token_ns=chunks[-1],
                       end_ns=int(end) if end is not None else chunks[-1], chunk_ns=chunks,
                       output_tokens=int(n_out) if n_out is not None else None,
                       input_tokens=int(n_in) if n_in is not None else None, warmup=warm,
                       request_id=md.get("x_request_id"))


def _load(summary: dict | None) -> tuple[str, float, str, str]:
    """(mode, value, arrival, label) of the profiling phase."""
    phases = ((summary or {}).get("input_config") or {}).get("phases") or []
    prof = next((p for p in phases if p.get("kind") == "profiling"), phases[-1] if phases else {})
    rate = prof.get("request_rate") or prof.get("rate")
    conc = prof.get("concurrency")
    if rate:
        return "rate", float(rate), "poisson" if prof.get("arrival_pattern") in (None, "poisson") else "constant", \
            f"request_rate={float(rate):g}" + (f" concurrency={conc}" if conc else "")
    if conc:
        return "concurrency", float(conc), "poisson", f"concurrency={int(conc)}"
    return "concurrency", 1.0, "poisson", "profiling"


def read(paths: list[Path]) -> ToolRun:
    levels, version, files, server_counts = [], None, [], True
    for p in paths:
        records = []
        try:
            lines = p.read_text().splitlines()
        except OSError as e:
            raise UserError(f"{WHAT}: cannot read {p} ({e.strerror or e})") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(_request(json.loads(line)))
            except (ValueError, TypeError, AttributeError) as e:
                raise bad_file(WHAT, p, f"line {n} is not an AIPerf record ({e})") from None
        files.append(str(p))
        summary = None
        sp = p.with_name(SUMMARY)
        if sp.is_file():
            summary = read_json(sp, WHAT)
            files.append(str(sp))
            version = summary.get("aiperf_version") or version
            endpoint = (summary.get("input_config") or {}).get("endpoint") or {}
            server_counts = server_counts and bool(endpoint.get("use_server_token_count"))
        mode, value, arrival, label = _load(summary)
        figures: dict[str, float | None] = {}
        for k in FIGURES:
            v = (summary or {}).get(k)
            if isinstance(v, dict) and v.get("avg") is not None:
                unit = str(v.get("unit") or "").replace("/", "_per_").replace(" ", "_")
                for stat in ("avg", "p50", "p99"):
                    if v.get(stat) is not None:
                        figures[f"{k}_{stat}_{unit}"] = float(v[stat])
        notes = []
        if summary is not None and summary.get("was_cancelled"):
            notes.append("AIPerf reports the benchmark as cancelled")
        levels.append(ToolLevelData(label=label, mode=mode, value=value, requests=records, figures=figures,
                                    arrival=arrival, notes=notes))
    return ToolRun(tool=TOOL, levels=levels, version=version, files=files, not_read=list(NOT_READ),
                   tokens_counted_by="the server's usage (AIPerf's --use-server-token-count)" if server_counts else
                   "AIPerf's tokenizer over the response text (add --use-server-token-count for the server's usage)",
                   token_source="usage" if server_counts else "tokenizer")
