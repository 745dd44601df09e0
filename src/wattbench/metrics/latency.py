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
  **Chunks read in bunches**: chunks that arrive in one socket read share one stamp, so their gap is
  exactly 0 — not a time the server took but one the client could not resolve (a busy event loop
  reads what piled up: at c=108–128 on a loaded client ITL p50 read 0 ms). A percentile that falls
  among those zeros is left out (``itl_stats``: p50 once half the gaps are 0, p99 once 99% are) and
  ``itl_ms.unmeasured`` says why with their share; the mean, which telescopes, and the percentiles
  above the zeros are kept (how far a late read stretches those is the client-lag finding's
  business: ``accounting/validity.client_findings``).

Failed and warm-up requests never enter latency statistics. Throughput divides by the window
``[start_ns, end_ns]`` the tokens the server produced inside it from every stream (warm-up
leftovers and streams cut at the edges pro rata: ``metrics/window_tokens.py``); the usage tokens
of the measured requests that completed inside are kept beside (``measured_request_tokens``) and
``requests_per_s`` counts those requests.

Memory: the records come as a ``core.recordset.RecordSet`` (a list of records or mappings is
copied into one). Per-request figures are numpy columns (8 bytes a request, for the duration of
one statistic); the ITL gaps, as many as the tokens, are read block by block (``recordset.stamp_blocks``)
and their statistics computed by ``metrics/quantiles.py``, which gives numpy's figures bit for bit.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np
from numpy.typing import NDArray

from wattbench.metrics.quantiles import Blocks, moments, percentiles
from wattbench.metrics.window_tokens import window_tokens
from wattbench.core.recordset import NONE, RecordSet, as_record_set, row_ids, stamp_blocks
from wattbench.core.schema import Latency, RequestRecord, Requests, Stats, Throughput, TokenCount

__all__ = ["stats", "itl_stats", "summarize_level", "request_end_ns", "gap_blocks"]

_QS = [50, 90, 95, 99]


def stats(values_ms: Sequence[float] | NDArray[np.float64] | Blocks) -> Stats:
    """Mean, percentiles (linear interpolation), min, max and population std of ``values_ms``:
    an array, or a stream of blocks (``quantiles.Blocks``: the same figures, bit for bit, in
    bounded memory)."""
    if isinstance(values_ms, Blocks):
        n, mean, lo, hi, std = moments(values_ms)
        if n == 0:
            return Stats(count=0)
        ps = percentiles(values_ms, _QS, n)
        assert ps is not None  # None only for an empty stream
        p50, p90, p95, p99 = ps
        return Stats(count=n, mean=mean, p50=p50, p90=p90, p95=p95, p99=p99, max=hi, min=lo, std=std)
    a = np.asarray(values_ms, dtype=float)
    if a.size == 0:
        return Stats(count=0)
    p50, p90, p95, p99 = np.percentile(a, _QS).tolist()
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


def itl_stats(gaps: Blocks) -> Stats:
    """The ITL statistics of the pooled gaps; a percentile that falls among gaps of exactly 0 ms
    (chunks read in bunches: module docstring) is left out, and ``unmeasured`` says why."""
    st = stats(gaps)
    if not st.count:
        return st
    withheld = [q for q in _QS if getattr(st, f"p{q}") == 0.0]
    if not withheld:
        return st
    zeros = sum(int((b == 0).sum()) for b in gaps())
    for q in withheld:
        setattr(st, f"p{q}", None)
    st.unmeasured = (f"{zeros / st.count:.0%} of the {st.count} gaps between content chunks were 0 ms: chunks "
                     "arrived together in one read of the client, which cannot time them apart (a busy client or a "
                     f"server that batches its stream), so ITL {', '.join(f'p{q}' for q in withheld)} would read "
                     "0 ms; TTFT, TPOT and E2E are not affected")
    return st


def request_end_ns(r: RequestRecord) -> int | None:
    """When a request ended: its last content chunk, else (failed, no content) when it closed."""
    return r.last_token_ns if r.last_token_ns is not None else r.end_ns


def gap_blocks(rs: RecordSet, keep: NDArray[np.bool_]) -> Blocks:
    """The inter-chunk gaps (ms) of the rows flagged in ``keep``, pooled in row order: the
    concatenation of ``np.diff(chunk_ns) / 1e6`` over those rows, as a stream of blocks."""
    off = rs.chunk_offsets()
    need = keep & (np.diff(off) > 1)

    def make() -> Iterator[NDArray[np.float64]]:
        for start, stop, o, s in stamp_blocks(rs, need, offsets=off):
            if s.size < 2:
                continue
            rid = row_ids(o)
            inside = (rid[1:] == rid[:-1]) & need[start:stop][rid[:-1]]
            yield (np.diff(s) / 1e6)[inside]

    return Blocks(make)


def summarize_level(
    records: Iterable[RequestRecord] | RecordSet, start_ns: int, end_ns: int, *, select: NDArray[np.bool_] | None = None
) -> tuple[Requests, Latency, Throughput]:
    """Requests, latency and throughput of the level (module docstring); ``select`` (a boolean
    per row) restricts it to some records (``load.targets.per_target_summary``)."""
    rs = as_record_set(records)
    sel = np.ones(len(rs), dtype=bool) if select is None else np.asarray(select, dtype=bool)
    c = rs.columns("warmup", "ok", "error")
    measured = sel & ~c["warmup"]
    done = measured & c["ok"]
    failed = measured & ~c["ok"]
    req = Requests()
    req.warmup = int((sel & c["warmup"]).sum())
    req.failed = int(failed.sum())
    req.completed = int(done.sum())
    errors: dict[str, int] = {}
    labels = rs.labels("error")
    for code, k in zip(*np.unique(c["error"][failed], return_counts=True)):
        key = (labels[code] if code != NONE else None) or "unknown"
        errors[key] = errors.get(key, 0) + int(k)
    req.errors = dict(sorted(errors.items()))
    del c
    lat = Latency(**_per_request_stats(rs, done), itl_ms=itl_stats(gap_blocks(rs, done)))
    wt = window_tokens(rs, start_ns, end_ns, select=sel)
    out_tok, in_tok = wt.output_tokens, wt.input_tokens
    duration_s = max(0, end_ns - start_ns) / 1e9
    t = rs.columns("last_token_ns", "end_ns")
    end = np.where(t["last_token_ns"] != NONE, t["last_token_ns"], t["end_ns"])
    n_in_window = int((done & (end != NONE) & (end >= start_ns) & (end <= end_ns)).sum())
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


def _per_request_stats(rs: RecordSet, done: NDArray[np.bool_]) -> dict[str, Stats]:
    """TTFT, E2E and TPOT statistics of the rows flagged ``done``, in row order."""
    t = rs.columns("sent_ns", "first_token_ns", "last_token_ns", "output_tokens")
    sent, first, last, out = (t[k][done] for k in ("sent_ns", "first_token_ns", "last_token_ns", "output_tokens"))
    del t
    has_first, has_last = first != NONE, last != NONE
    ttft = (first[has_first] - sent[has_first]) / 1e6
    e2e = (last[has_last] - sent[has_last]) / 1e6
    m = has_first & has_last & (out != NONE) & (out > 1)
    tpot = (last[m] - first[m]) / 1e6 / (out[m] - 1)
    return {"ttft_ms": stats(ttft), "tpot_ms": stats(tpot), "e2e_ms": stats(e2e)}


def tokens_in_window(records: Iterable[RequestRecord] | RecordSet, start_ns: int, end_ns: int) -> tuple[int, int]:
    """Output and input tokens produced inside ``[start_ns, end_ns]`` by every stream (rounded),
    by the rule of :func:`wattbench.metrics.window_tokens.window_tokens`."""
    wt = window_tokens(records, start_ns, end_ns)
    return int(round(wt.output_tokens)), int(round(wt.input_tokens))
