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

from wattbench.errors import UserError
from wattbench.results.tools.base import ToolLevelData, ToolRequest, ToolRun, bad_file, read_json, seconds_to_ns

TOOL = "guidellm"
WHAT = "guidellm"
FIGURES = ("time_to_first_token_ms", "inter_token_latency_ms", "time_per_output_token_ms", "request_latency",
           "output_tokens_per_second", "requests_per_second")
NOT_READ = ["texts and per-iteration token counts", "scheduler timings (queued, dispatch delays)",
            "GuideLLM's own warnings"]


def _request(r: dict) -> ToolRequest:
    t = ((r.get("info") or {}).get("timings") or {})
    start = t.get("request_start", r.get("request_start_time"))
    if start is None:
        raise ValueError("a request has no info.timings.request_start")
    s = seconds_to_ns(start)
    end = seconds_to_ns(t.get("request_end", r.get("request_end_time")))
    first, last = seconds_to_ns(t.get("first_token_iteration")), seconds_to_ns(t.get("last_token_iteration"))
    status = str((r.get("info") or {}).get("status") or "completed")
    n_out, n_in = r.get("output_tokens"), r.get("prompt_tokens")
    ok = status == "completed" and first is not None
    return ToolRequest(start_ns=s, first_token_ns=first, last_token_ns=last, end_ns=end,
                       output_tokens=int(n_out) if n_out is not None else None,
                       input_tokens=int(n_in) if n_in is not None else None, ok=ok,
                       error=None if ok else f"tool_{status}", request_id=r.get("request_id"))


def _load(strategy: dict) -> tuple[str, float, str, str, int | None]:
    """(mode, value, arrival, label, max in flight) of a GuideLLM 0.8 strategy (``type_``:
    concurrent, synchronous, throughput, constant, poisson, trace)."""
    kind = str(strategy.get("type_") or strategy.get("kind") or "")
    cap = strategy.get("max_concurrency")
    cap = int(cap) if cap else None
    if kind == "concurrent":
        n = strategy.get("streams") or cap
        return "concurrency", float(n), "poisson", f"concurrent@{n}", None
    if kind == "synchronous":
        return "concurrency", 1.0, "poisson", "synchronous", None
    if kind in ("constant", "poisson"):
        rate = float(strategy.get("rate"))
        return "rate", rate, kind, f"{kind}@{rate:g}", cap
    if kind == "throughput":
        return "rate", math.inf, "poisson", f"throughput@{cap or 'unlimited'}", cap
    if kind == "trace":
        return "trace", 0.0, "trace", "trace", cap
    raise ValueError(f"strategy {kind!r} is not one wattbench reads (concurrent, synchronous, constant, poisson, "
                     "throughput, trace)")


def _level(b: dict, path: Path, n: int) -> ToolLevelData:
    reqs_block = b.get("requests") or {}
    raw = [r for k in ("successful", "errored", "incomplete") for r in (reqs_block.get(k) or [])]
    totals = ((b.get("metrics") or {}).get("request_totals") or {})
    if totals.get("total") is not None and len(raw) < int(totals["total"]):
        raise UserError(f"{WHAT}: {path} benchmark {n + 1} keeps {len(raw)} of its {totals['total']} requests "
                        "(sampled): the window's tokens cannot be counted; run GuideLLM without request sampling")
    try:
        reqs = [_request(r) for r in raw]
        cfg = b.get("config") or {}
        mode, value, arrival, label, cap = _load(cfg.get("strategy") or {})
    except (ValueError, TypeError, AttributeError) as e:
        raise bad_file(WHAT, path, f"benchmark {n + 1} is not one GuideLLM wrote ({e})") from None
    figures: dict[str, float | None] = {}
    for k in FIGURES:
        v = ((b.get("metrics") or {}).get(k) or {}).get("successful") or {}
        unit = "" if k.endswith("_ms") or k.endswith("_second") else "_s"
        for stat, key in (("mean", "mean"), ("median", "median"), ("p99", "p99")):
            x = v.get(key) if key != "p99" else (v.get("percentiles") or {}).get("p99")
            if isinstance(x, (int, float)):
                figures[f"{k}{unit}_{stat}"] = float(x)
    notes = []
    if (b.get("warmup_duration") or 0) > 0 or (b.get("cooldown_duration") or 0) > 0:
        notes.append(f"GuideLLM's warm-up ({b.get('warmup_duration') or 0:g} s) / cool-down "
                     f"({b.get('cooldown_duration') or 0:g} s) requests are not in the file, yet their tokens fall in "
                     "the window: the window's tokens are undercounted (run without --warmup/--cooldown)")
    # GuideLLM can close a benchmark with a request still processing (scheduler_state.processing_requests;
    # seen with --constraint max_requests on a loaded host): that request is in no list of the file,
    # yet the server produced its tokens inside the window
    state = b.get("scheduler_state") or {}
    left = state.get("processing_requests")
    left_out = int(left) if isinstance(left, (int, float)) and not isinstance(left, bool) and left > 0 else 0
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
        version = ((d.get("metadata") or {}).get("guidellm_version")) or version
        for n, b in enumerate(d["benchmarks"]):
            levels.append(_level(b, p, n))
    return ToolRun(tool=TOOL, levels=levels, version=version, files=[str(p) for p in paths], not_read=list(NOT_READ),
                   tokens_counted_by="GuideLLM's output_tokens (the server's usage where sent, "
                                     "prefer_response_metrics; else its tokenizer)",
                   token_source="usage")
