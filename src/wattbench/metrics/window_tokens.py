"""Tokens the server produced inside a window, from every stream: the numerator of every
efficiency figure.

``window_tokens(records, start_ns, end_ns) -> WindowTokens``

A window's energy is what the meter read over ``[start_ns, end_ns]``; the tokens it is divided by
must be the tokens the server produced over that same span, whichever request they belong to.
Counting only the measured requests (the ones in the latency statistics) leaves out warm-up
streams still generating inside the window and streams cut at its edges, and so overstates
J/token (1.17× at 64 streams with a 2 s warm-up, docs/accounting.md §1).

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

The function is pure: records may be a ``core.recordset.RecordSet``, ``RequestRecord`` objects
or plain mappings (a ``requests.jsonl`` line; a list is copied into a set), and nothing is
modified. ``start_ns > end_ns`` gives zero tokens.

Computed block by block over the set's rows (``core.recordset.stamp_blocks``: at most
``STAMPS_PER_BLOCK`` chunk stamps at once), vectorised: the same arithmetic per stream as
``stream_tokens_in_window`` (the per-stream definition), and the sums taken in row order, one
stream after the other (``np.cumsum`` adds sequentially), so the floats are those of adding the
streams one by one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, TypedDict

import numpy as np
from numpy.typing import NDArray

from wattbench.core.recordset import NONE, RecordSet, as_record_set, stamp_blocks
from wattbench.core.schema import RequestRecord

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


def window_tokens(records: Iterable[RequestRecord | Mapping[str, Any]] | RecordSet, start_ns: int, end_ns: int, *,
                  select: NDArray[np.bool_] | None = None) -> WindowTokens:
    """Output and input tokens the server produced inside ``[start_ns, end_ns]`` from every stream,
    with the measured requests' own count beside (rule in the module docstring). ``select`` (a
    boolean per row) restricts the count to some records."""
    rs = as_record_set(records)
    acc = np.zeros(4)  # output, input, warm-up, edge: running sums in row order
    streams = estimated = m_out = m_in = 0
    for start, stop, o, stamps in stamp_blocks(rs):
        rows = rs.rows(start, stop)
        sel = np.ones(stop - start, dtype=bool) if select is None else np.asarray(select[start:stop], dtype=bool)
        b = _block(rows, o, stamps, sel, start_ns, end_ns)
        streams += b["streams"]
        estimated += b["estimated"]
        for k, vals in enumerate(b["sums"]):
            if vals.size:
                acc[k] = np.cumsum(np.concatenate(([acc[k]], vals)))[-1]
        measured = sel & ~rows["warmup"] & rows["ok"]
        end = np.where(rows["last_token_ns"] != NONE, rows["last_token_ns"], rows["end_ns"])
        m = measured & (end != NONE) & (end >= start_ns) & (end <= end_ns)
        m_out += int(np.where(rows["output_tokens"][m] == NONE, 0, rows["output_tokens"][m]).sum())
        m_in += int(np.where(rows["input_tokens"][m] == NONE, 0, rows["input_tokens"][m]).sum())
    out, inp, warm, edge = (float(x) for x in acc)
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


class _BlockTokens(TypedDict):
    """One block's share: streams credited, of them estimated, and the credited tokens of each
    stream in row order (output, input, warm-up output, edge output)."""

    streams: int
    estimated: int
    sums: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]


def _block(rows: NDArray[np.void], o: NDArray[np.int64], stamps: NDArray[np.int64], sel: NDArray[np.bool_],
           start_ns: int, end_ns: int) -> _BlockTokens:
    """Rules 1-3 for one block of rows: the credited tokens of each stream, vectorised."""
    nc = np.diff(o)
    has_ch = nc > 0
    first, last, n_out = rows["first_token_ns"], rows["last_token_ns"], rows["output_tokens"]
    stream = sel & ((first != NONE) | has_ch)
    est = n_out == NONE
    n_tok = np.where(est, np.where(has_ch, nc, 1), n_out)  # rule 1
    lo_i = np.minimum(o[:-1], max(stamps.size - 1, 0))
    hi_i = np.maximum(o[1:] - 1, 0)
    c_first = stamps[lo_i] if stamps.size else np.full(len(rows), NONE)
    c_last = stamps[hi_i] if stamps.size else np.full(len(rows), NONE)
    first = np.where(first != NONE, first, c_first)
    last = np.where(last != NONE, last, np.where(has_ch, c_last, first))
    credited = np.zeros(len(rows))
    if end_ns >= start_ns:
        pos = stream & (n_tok > 0)
        # rule 2, chunk stamps kept: n * inside / len(chunk_ns)
        win = np.concatenate(([0], np.cumsum((stamps >= start_ns) & (stamps <= end_ns))))
        inside = win[o[1:]] - win[o[:-1]]
        ch = pos & has_ch
        credited[ch] = (n_tok[ch] * inside[ch]) / nc[ch]
        # rule 2, first and last only: n tokens evenly spaced
        ev = pos & ~has_ch
        single = ev & ((n_tok <= 1) | (last <= first))
        credited[single & (first >= start_ns) & (first <= end_ns)] = n_tok[single & (first >= start_ns)
                                                                          & (first <= end_ns)]
        sp = ev & ~single
        if sp.any():
            n, f = n_tok[sp], first[sp]
            step = (last[sp] - f) / (n - 1)
            lo = np.maximum(0, np.ceil((start_ns - f) / step - 1e-9))
            hi = np.minimum(n - 1, np.floor((end_ns - f) / step + 1e-9))
            credited[sp] = np.maximum(0, hi - lo + 1) * (n / n)
    # rule 3
    in_first = stream & (first >= start_ns) & (first <= end_ns)
    n_in = np.where(rows["input_tokens"] != NONE, rows["input_tokens"],
                    np.maximum(rows["requested_input_tokens"], 0))
    est = est | (in_first & (rows["input_tokens"] == NONE) & (n_in > 0))
    credited_in = np.where(in_first, n_in, 0).astype(float)
    took = stream & ((credited > 0) | (credited_in > 0))
    edge = took & (credited < n_tok - 1e-9)
    return {"streams": int(took.sum()), "estimated": int((took & est).sum()),
            "sums": (credited[took], credited_in[took], credited[took & rows["warmup"]], credited[edge])}
