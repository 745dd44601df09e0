"""Time series of what the client saw, for plotting a run on one time axis.

These are display series, not headline figures (those come from ``result.json``):

- ``output_tokens_per_s_buckets``: output tokens per second in fixed buckets, from chunk arrival
  times. A request's ``output_tokens`` (from the server's usage) are spread evenly over its content
  chunks, because a chunk may carry several tokens. A request without chunk times but with a
  token count puts all its tokens at its last-token (or end) time.
- ``in_flight_steps``: requests in flight (sent, not yet ended) as a step function.

Power drawn from a counter's readings (for channels with no power reading) is
``accounting.counters.counter_power_w``: the counter rules live there only.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from wattbench.core.schema import RequestRecord


def output_tokens_per_s_buckets(
    records: Iterable[RequestRecord], start_ns: int, end_ns: int, bucket_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Output tokens/s per bucket over [start_ns, end_ns).

    Returns ``(bucket_start_ns, tokens_per_s)``; the last bucket may be shorter than ``bucket_s``
    and is divided by its own length. A request's tokens are spread over its chunk stamps; a
    record without them (a run written without ``--keep-chunks``) spreads them evenly from its
    first to its last token (``metrics/window_tokens.py`` rule 2), else puts them at its end.
    """
    if bucket_s <= 0:
        raise ValueError(f"bucket_s must be > 0, got {bucket_s}")
    if end_ns <= start_ns:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    bucket_ns = int(round(bucket_s * 1e9))
    edges = np.arange(start_ns, end_ns, bucket_ns, dtype=np.int64)
    edges = np.append(edges, np.int64(end_ns))
    times: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for r in records:
        tokens = r.output_tokens
        if not tokens:
            continue
        if r.chunk_ns:
            t = np.asarray(r.chunk_ns, dtype=np.int64)
            times.append(t)
            weights.append(np.full(t.size, tokens / t.size))
        elif (tokens > 1 and r.first_token_ns is not None and r.last_token_ns is not None
              and r.last_token_ns > r.first_token_ns):
            times.append(np.linspace(r.first_token_ns, r.last_token_ns, tokens).astype(np.int64))
            weights.append(np.ones(tokens))
        else:
            at = r.last_token_ns if r.last_token_ns is not None else r.end_ns
            if at is None:
                continue
            times.append(np.asarray([at], dtype=np.int64))
            weights.append(np.asarray([float(tokens)]))
    if times:
        counts, _ = np.histogram(np.concatenate(times), bins=edges, weights=np.concatenate(weights))
    else:
        counts = np.zeros(edges.size - 1)
    widths_s = np.diff(edges) / 1e9
    return edges[:-1], counts / widths_s


def in_flight_steps(records: Iterable[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Requests in flight after each send/end event: ``(t_ns, count)`` sorted by time.

    A request with no end time (the run stopped while it was in flight) stays counted.
    At equal timestamps ends are applied before sends.
    """
    t: list[int] = []
    d: list[int] = []
    for r in records:
        t.append(r.sent_ns)
        d.append(1)
        end = r.end_ns if r.end_ns is not None else r.last_token_ns
        if end is not None:
            t.append(end)
            d.append(-1)
    if not t:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ta = np.asarray(t, dtype=np.int64)
    da = np.asarray(d, dtype=np.int64)
    order = np.lexsort((da, ta))  # by time, then -1 before +1
    return ta[order], np.cumsum(da[order])
