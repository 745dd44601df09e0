"""Latency and throughput statistics of one load level.

Definitions (all from the client's monotonic timestamps, see ``load/client.py``):

- TTFT = ``first_token_ns - sent_ns`` (first chunk with non-empty content);
- E2E = ``last_token_ns - sent_ns`` — a request ends at its last content chunk, not at the
  ``[DONE]``/usage tail that follows it;
- TPOT = ``(last_token_ns - first_token_ns) / (output_tokens - 1)`` for requests with more than one
  output token (``output_tokens`` from the server's usage);
- ITL = differences of consecutive content-chunk arrival times, pooled over requests. A chunk may
  carry several tokens (servers batch stream output, and chunks that arrive in one socket read
  share a timestamp), so ITL is a time between *chunks*, and its mean can exceed TPOT. By
  telescoping, the pooled ITL mean is the sum of (last - first) over the sum of (chunks - 1).

Failed and warm-up requests never enter latency statistics. Throughput divides by the window
``[start_ns, end_ns]`` the tokens the server produced inside it from every stream (warm-up
leftovers and streams cut at the edges pro rata: ``accounting/window_tokens.py``); the usage tokens
of the measured requests that completed inside are kept beside (``measured_request_tokens``) and
``requests_per_s`` counts those requests.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from wattbench.results.schema import Latency, RequestRecord, Requests, Stats, Throughput, TokenCount

__all__ = ["stats", "summarize_level", "request_end_ns"]


def stats(values_ms: Sequence[float] | np.ndarray) -> Stats:
    """Mean, percentiles (linear interpolation), min, max and population std of ``values_ms``."""
    a = np.asarray(values_ms, dtype=float)
    if a.size == 0:
        return Stats(count=0)
    p50, p90, p95, p99 = np.percentile(a, [50, 90, 95, 99]).tolist()
    return Stats(
        count=int(a.size),
        mean=float(a.mean()),
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        max=float(a.max()),
        min=float(a.min()),
        std=float(a.std()),
    )


def request_end_ns(r: RequestRecord) -> int | None:
    """When a request ended: its last content chunk, else (failed, no content) when it closed."""
    return r.last_token_ns if r.last_token_ns is not None else r.end_ns


def summarize_level(
    records: Iterable[RequestRecord], start_ns: int, end_ns: int
) -> tuple[Requests, Latency, Throughput]:
    recs = list(records)
    req = Requests()
    errors: dict[str, int] = {}
    ttft: list[float] = []
    e2e: list[float] = []
    tpot: list[float] = []
    itl_parts: list[np.ndarray] = []
    for r in recs:
        if r.warmup:
            req.warmup += 1
            continue
        if not r.ok:
            req.failed += 1
            key = r.error or "unknown"
            errors[key] = errors.get(key, 0) + 1
            continue
        req.completed += 1
        if r.first_token_ns is not None:
            ttft.append((r.first_token_ns - r.sent_ns) / 1e6)
        if r.last_token_ns is not None:
            e2e.append((r.last_token_ns - r.sent_ns) / 1e6)
        if (
            r.output_tokens is not None
            and r.output_tokens > 1
            and r.first_token_ns is not None
            and r.last_token_ns is not None
        ):
            tpot.append((r.last_token_ns - r.first_token_ns) / 1e6 / (r.output_tokens - 1))
        if len(r.chunk_ns) > 1:
            itl_parts.append(np.diff(np.asarray(r.chunk_ns, dtype=np.int64)) / 1e6)
    req.errors = dict(sorted(errors.items()))
    lat = Latency(
        ttft_ms=stats(ttft),
        tpot_ms=stats(tpot),
        itl_ms=stats(np.concatenate(itl_parts) if itl_parts else []),
        e2e_ms=stats(e2e),
    )
    from wattbench.accounting.window_tokens import window_tokens

    wt = window_tokens(recs, start_ns, end_ns)
    out_tok, in_tok = wt.output_tokens, wt.input_tokens
    duration_s = max(0, end_ns - start_ns) / 1e9
    n_in_window = sum(
        1
        for r in recs
        if r.ok and not r.warmup and (e := request_end_ns(r)) is not None and start_ns <= e <= end_ns
    )
    basis = dict(
        output_tokens=int(round(out_tok)),
        input_tokens=int(round(in_tok)),
        token_basis="tokens_in_window",
        tokens_in_window=TokenCount(output=out_tok, input=in_tok, warmup_output=wt.warmup_output_tokens,
                                    edge_output=wt.edge_output_tokens, estimated_streams=wt.estimated_streams),
        measured_request_tokens=TokenCount(output=wt.measured_output_tokens, input=wt.measured_input_tokens),
    )
    if duration_s > 0:
        thr = Throughput(
            output_tokens_per_s=out_tok / duration_s,
            input_tokens_per_s=in_tok / duration_s,
            total_tokens_per_s=(out_tok + in_tok) / duration_s,
            requests_per_s=n_in_window / duration_s,
            duration_s=duration_s,
            **basis,
        )
    else:
        thr = Throughput(duration_s=0.0, **basis)
    return req, lat, thr


def tokens_in_window(records: Iterable[RequestRecord], start_ns: int, end_ns: int) -> tuple[int, int]:
    """Output and input tokens produced inside ``[start_ns, end_ns]`` by every stream (rounded),
    by the rule of :func:`wattbench.accounting.window_tokens.window_tokens`."""
    from wattbench.accounting.window_tokens import window_tokens

    wt = window_tokens(records, start_ns, end_ns)
    return int(round(wt.output_tokens)), int(round(wt.input_tokens))
