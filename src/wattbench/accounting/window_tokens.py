"""Tokens the server produced inside a window, from every stream: the numerator of every
efficiency figure.

``window_tokens(records, start_ns, end_ns) -> WindowTokens``

A window's energy is what the meter read over ``[start_ns, end_ns]``; the tokens it is divided by
must be the tokens the server produced over that same span, whichever request they belong to.
Counting only the measured requests (the ones in the latency statistics) leaves out warm-up
streams still generating inside the window and streams cut at its edges, and so overstates
J/token (issue 15: 1.17× at 64 streams with a 2 s warm-up).

The crediting rule (closed interval: a token stamped exactly at an edge is inside)
-------------------------------------------------------------------------------
For every record in ``records`` — warm-up or measured, completed or failed — that received at
least one content chunk:

1. **Output tokens of the stream** ``n``: the server's ``usage.completion_tokens``
   (``output_tokens``); where the stream has none (it was cut, dropped, or the server sends no
   usage) the number of content chunks it received, and the stream is counted in
   ``estimated_streams`` (a chunk can carry several tokens, so this is a lower bound).
2. **When each token was produced**:
   * per-chunk stamps kept (``chunk_ns``): each chunk carries ``n / len(chunk_ns)`` tokens at
     its arrival time (the same spreading as ``attribution.intervals_from_records``);
   * otherwise first/last content chunk: the ``n`` tokens are evenly spaced from
     ``first_token_ns`` to ``last_token_ns`` (all at ``first_token_ns`` when ``n == 1`` or the
     two coincide).
   Output tokens credited = the tokens whose time lies in ``[start_ns, end_ns]``.
3. **Input (prompt) tokens** count where the prefill ended: the stream's ``input_tokens`` (else
   its ``requested_input_tokens``, and the stream is counted in ``estimated_streams``) are
   credited in full when ``first_token_ns`` lies in the window. A stream with no first token
   credits nothing (no prefill was seen to finish).

A stream credited in part (some of its tokens outside the window) adds its credited tokens to
``edge_output_tokens``; a warm-up stream adds them to ``warmup_output_tokens`` (a warm-up stream
cut at the edge adds to both). These are breakdowns of ``output_tokens``, not extra tokens.

``measured_output_tokens`` / ``measured_input_tokens`` are the other count, kept beside: the usage
tokens of the measured (non-warm-up), successful requests whose end (last content chunk, else
stream close) lies in the window — the population of the latency statistics. No efficiency figure
divides by them.

Times are the client's arrival stamps; the server wrote each token slightly earlier (network and
event-loop delay, sub-millisecond on one host), which shifts both window edges alike.

The function is pure: records may be ``RequestRecord`` objects or plain mappings (a
``requests.jsonl`` line), and nothing is modified. ``start_ns > end_ns`` gives zero tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

__all__ = ["WindowTokens", "window_tokens", "stream_tokens_in_window"]


@dataclass(frozen=True)
class WindowTokens:
    """Tokens credited to one window (see the module docstring for the rule)."""

    start_ns: int
    end_ns: int
    output_tokens: float  # produced inside the window, every stream: the basis of every efficiency figure
    input_tokens: float  # prompt tokens whose prefill ended inside the window, every stream
    warmup_output_tokens: float = 0.0  # part of output_tokens from warm-up streams
    edge_output_tokens: float = 0.0  # part of output_tokens from streams only partly inside
    streams: int = 0  # streams that credited at least one token
    estimated_streams: int = 0  # streams whose count came from chunks / requested length (no usage)
    measured_output_tokens: int = 0  # usage tokens of the measured requests that ended inside
    measured_input_tokens: int = 0

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9


def _get(rec: Any, name: str):
    return rec.get(name) if isinstance(rec, Mapping) else getattr(rec, name, None)


def stream_tokens_in_window(
    n_tokens: float,
    first_ns: int | None,
    last_ns: int | None,
    chunk_ns: list[int] | None,
    start_ns: int,
    end_ns: int,
) -> float:
    """Output tokens of one stream of ``n_tokens`` credited to ``[start_ns, end_ns]`` (rule 2)."""
    if n_tokens <= 0 or end_ns < start_ns:
        return 0.0
    if chunk_ns:
        inside = sum(1 for t in chunk_ns if start_ns <= t <= end_ns)
        return n_tokens * inside / len(chunk_ns)
    if first_ns is None:
        return 0.0
    last = last_ns if last_ns is not None else first_ns
    n = int(round(n_tokens))
    if n <= 1 or last <= first_ns:
        return float(n_tokens) if start_ns <= first_ns <= end_ns else 0.0
    # token i (0..n-1) at first + i * step; count the i with start <= t_i <= end
    step = (last - first_ns) / (n - 1)
    lo = max(0, math.ceil((start_ns - first_ns) / step - 1e-9))
    hi = min(n - 1, math.floor((end_ns - first_ns) / step + 1e-9))
    return float(max(0, hi - lo + 1)) * (n_tokens / n)


def window_tokens(records: Iterable[Any], start_ns: int, end_ns: int) -> WindowTokens:
    """Output and input tokens the server produced inside ``[start_ns, end_ns]`` from every stream,
    with the measured requests' own count beside (rule in the module docstring)."""
    out = inp = warm = edge = 0.0
    streams = estimated = 0
    m_out = m_in = 0
    for r in records:
        chunks = _get(r, "chunk_ns") or []
        first = _get(r, "first_token_ns")
        last = _get(r, "last_token_ns")
        n_out = _get(r, "output_tokens")
        est = False
        if first is not None or chunks:
            if n_out is None:
                n_out = len(chunks) if chunks else 1
                est = True
            if first is None:
                first = chunks[0]
            if last is None:
                last = chunks[-1] if chunks else first
            credited = stream_tokens_in_window(n_out, first, last, chunks, start_ns, end_ns)
            credited_in = 0.0
            if start_ns <= first <= end_ns:
                n_in = _get(r, "input_tokens")
                if n_in is None:
                    n_in = _get(r, "requested_input_tokens") or 0
                    est = est or n_in > 0
                credited_in = float(n_in)
            if credited > 0 or credited_in > 0:
                streams += 1
                estimated += int(est)
                out += credited
                inp += credited_in
                if _get(r, "warmup"):
                    warm += credited
                if credited < n_out - 1e-9:
                    edge += credited
        if not _get(r, "warmup") and _get(r, "ok") is not False:
            end = _get(r, "last_token_ns")
            if end is None:
                end = _get(r, "end_ns")
            if end is not None and start_ns <= end <= end_ns:
                m_out += _get(r, "output_tokens") or 0
                m_in += _get(r, "input_tokens") or 0
    return WindowTokens(
        start_ns=start_ns,
        end_ns=end_ns,
        output_tokens=out,
        input_tokens=inp,
        warmup_output_tokens=warm,
        edge_output_tokens=edge,
        streams=streams,
        estimated_streams=estimated,
        measured_output_tokens=m_out,
        measured_input_tokens=m_in,
    )
