"""Per-request latency figures derived from one ``RequestRecord``'s monotonic timestamps.

Definitions (all in milliseconds, ``None`` where the record lacks what the figure needs):

- ``ttft_ms``: first content chunk arrived − request sent.
- ``e2e_ms``: response complete (``end_ns``, else the last chunk) − request sent.
- ``tpot_ms``: (last chunk − first chunk) / (output_tokens − 1); needs >= 2 output tokens.
- ``itl_mean_ms`` / ``itl_max_ms``: mean / largest gap between consecutive content chunks.
  A chunk may carry several tokens (servers batch stream output), so this is per chunk.
- ``send_lag_ms``: sent − scheduled (open-loop schedules only).
- ``chunks``: number of content chunks received (``None`` for a record that has content but no
  chunk stamps: a run written without ``--keep-chunks``; its ITL figures are ``None`` too).
"""

from __future__ import annotations

import numpy as np

from wattbench.core.schema import RequestRecord

_NS_PER_MS = 1e6


def _ms(a: int | None, b: int | None) -> float | None:
    if a is None or b is None:
        return None
    return (b - a) / _NS_PER_MS


def inter_chunk_gaps_ms(record: RequestRecord) -> list[float]:
    """Gaps between consecutive content chunks of one request, in ms (chunk order as recorded)."""
    if len(record.chunk_ns) < 2:
        return []
    gaps: list[float] = (np.diff(np.asarray(record.chunk_ns, dtype=np.int64)) / _NS_PER_MS).tolist()
    return gaps


def per_request_latencies(record: RequestRecord) -> dict[str, float | int | None]:
    """The latency figures of one request (see module docstring for the definitions)."""
    end = record.end_ns if record.end_ns is not None else record.last_token_ns
    tpot = None
    out = record.output_tokens
    if (
        out is not None
        and out >= 2
        and record.first_token_ns is not None
        and record.last_token_ns is not None
    ):
        tpot = (record.last_token_ns - record.first_token_ns) / _NS_PER_MS / (out - 1)
    c = record.chunk_ns
    gaps = np.diff(np.asarray(c, dtype=np.int64)) / _NS_PER_MS if len(c) >= 2 else None
    return {
        "ttft_ms": _ms(record.sent_ns, record.first_token_ns),
        "e2e_ms": _ms(record.sent_ns, end),
        "tpot_ms": tpot,
        "itl_mean_ms": float(gaps.mean()) if gaps is not None else None,
        "itl_max_ms": float(gaps.max()) if gaps is not None else None,
        "send_lag_ms": _ms(record.scheduled_ns, record.sent_ns),
        "chunks": len(c) if c or record.first_token_ns is None else None,
    }
