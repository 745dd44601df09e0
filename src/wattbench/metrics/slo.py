"""Latency SLOs (``--slo ttft_p99=500ms,tpot_p99=50ms``) and goodput under them.

Syntax: a comma list of ``METRIC_STAT=VALUE UNIT`` with METRIC one of ``ttft``, ``tpot``, ``itl``,
``e2e``; STAT one of ``mean``, ``p50``, ``p90``, ``p95``, ``p99``, ``max``; UNIT ``ms`` or ``s``
(a unit is required: ``500`` alone is refused as ambiguous).

Two checks per SLO:

- **per request** (what goodput counts): a request *meets* ``ttft_p99=500ms`` when its own TTFT is
  <= 500 ms — the percentile says how many requests must meet the bound, the bound itself applies
  to each request. For TTFT, TPOT and E2E (one value per request) the stat does not change the
  per-request test. For ITL (many gaps per request) the request's own gaps are summarised with the
  same stat (``itl_p99`` → the request's own 99th-percentile gap, ``itl_max`` → its largest gap).
  A failed request never meets an SLO.
- **per level**: the stat over all successful requests of the level (ITL: over all gaps pooled),
  compared with the bound — whether the SLO as written holds for the level.

Per-request figures follow the definitions used for latency statistics: TTFT = first content chunk
− sent; TPOT = (last chunk − first chunk) / (output tokens − 1) (needs >= 2 output tokens; a
request with fewer has no TPOT and is not held to a TPOT SLO); E2E = end (else last chunk) − sent;
ITL = gaps between consecutive content chunks.

Goodput = (requests that succeeded and meet every SLO) / duration, and their output tokens /
duration; goodput per kW at a boundary = goodput output tokens/s / (average power W / 1000).

``goodput`` and ``level_check`` read a ``core.recordset.RecordSet`` (a list of records or
mappings is copied into one; a record without ``ok`` counts as successful, as ``RequestRecord``
defaults): per-request figures as numpy columns, ITL gaps block by block — each request's own gap
statistic computed per block (``np.mean``/``np.percentile``/``max`` over the rows of a block with
the same number of gaps: numpy's figures of each request's gaps), the level's pooled ITL by
``metrics/quantiles.py``. ``request_figures``/``request_meets`` remain the per-request definition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, TypedDict

import numpy as np
from numpy.typing import NDArray

from wattbench.core.errors import UserError
from wattbench.metrics.latency import gap_blocks
from wattbench.metrics.level_figures import LevelFigures
from wattbench.metrics.quantiles import Blocks, moments, percentiles
from wattbench.core.recordset import NONE, RecordSet, as_record_set, row_ids, stamp_blocks
from wattbench.core.schema import BoundaryEnergy, Goodput, GoodputPerKw, RequestRecord, Result, Throughput

METRICS = ("ttft", "tpot", "itl", "e2e")
STATS = ("mean", "p50", "p90", "p95", "p99", "max")
_UNITS_MS = {"ms": 1.0, "s": 1000.0}
_SPEC = re.compile(r"^(ttft|tpot|itl|e2e)_(mean|p50|p90|p95|p99|max)\s*=\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*(ms|s)$")
SYNTAX = "METRIC_STAT=VALUE(ms|s), METRIC in ttft|tpot|itl|e2e, STAT in mean|p50|p90|p95|p99|max"


@dataclass(frozen=True)
class SLO:
    metric: str  # ttft | tpot | itl | e2e
    stat: str  # mean | p50 | p90 | p95 | p99 | max
    threshold_ms: float

    @property
    def name(self) -> str:
        return f"{self.metric}_{self.stat}"

    def __str__(self) -> str:
        return f"{self.name}={self.threshold_ms:g}ms"

    def to_dict(self) -> dict[str, str | float]:
        return {"metric": self.metric, "stat": self.stat, "threshold_ms": self.threshold_ms}


def parse_slos(spec: str | None) -> list[SLO]:
    """Parse ``--slo``; an empty or None spec gives no SLOs. Bad items raise UserError naming them.

    The one SLO grammar of every command (``run``, ``plan power-first``, ``tune``): parse here,
    nowhere else."""
    if spec is None or not spec.strip():
        return []
    out: dict[str, SLO] = {}
    for item in spec.split(","):
        it = item.strip()
        m = _SPEC.match(it.lower())
        if not m:
            hint = ""
            old = re.match(r"^(\w+)_ms\s*=\s*([0-9.]+)$", it.lower())
            if old:
                hint = f" (write {old.group(1)}={old.group(2)}ms)"
            elif re.match(r"^\w+=\s*[0-9.]+$", it):
                hint = " (add a unit: ms or s)"
            raise UserError(f"invalid SLO {it!r}{hint}; expected {SYNTAX}, e.g. ttft_p99=500ms,tpot_p99=50ms")
        metric, stat, value, unit = m.groups()
        v = float(value) * _UNITS_MS[unit]
        if not v > 0:
            raise UserError(f"invalid SLO {it!r}: the bound must be > 0")
        if v == float("inf"):  # 1e400ms reads as infinity: a bound nothing can miss is no SLO
            raise UserError(f"invalid SLO {it!r}: the bound must be a finite number")
        if f"{metric}_{stat}" in out:
            raise UserError(f"SLO {metric}_{stat} given twice in {spec!r}")
        out[f"{metric}_{stat}"] = SLO(metric, stat, v)
    return list(out.values())


def stat_of(values: Iterable[float], stat: str) -> float | None:
    """``mean``/``pNN``/``max`` of values (numpy's linear-interpolation percentile); None when empty."""
    a = np.asarray(list(values), dtype=float)
    if a.size == 0:
        return None
    if stat == "mean":
        return float(a.mean())
    if stat == "max":
        return float(a.max())
    return float(np.percentile(a, float(stat[1:])))


class RequestFigures(TypedDict):
    """One request's figures (ms; None where the request has none): ``request_figures``."""

    ttft: float | None
    tpot: float | None
    e2e: float | None
    itl: list[float]


class LevelCheck(TypedDict):
    """One SLO checked on a level: ``level_check``."""

    threshold_ms: float
    observed_ms: float | None
    met: bool
    n: int


def _get(rec: RequestRecord | Mapping[str, Any], name: str) -> Any:
    return rec.get(name) if isinstance(rec, Mapping) else getattr(rec, name, None)


def request_figures(rec: RequestRecord | Mapping[str, Any]) -> RequestFigures:
    """TTFT, TPOT, E2E (ms) and the ITL gaps (ms) of one record (a RequestRecord or its dict)."""
    sent, first, last = _get(rec, "sent_ns"), _get(rec, "first_token_ns"), _get(rec, "last_token_ns")
    end = _get(rec, "end_ns")
    end = end if end is not None else last
    out_tok = _get(rec, "output_tokens")
    chunks = _get(rec, "chunk_ns") or []
    tpot = None
    if out_tok is not None and out_tok >= 2 and first is not None and last is not None:
        tpot = (last - first) / 1e6 / (out_tok - 1)
    return {
        "ttft": None if first is None or sent is None else (first - sent) / 1e6,
        "tpot": tpot,
        "e2e": None if end is None or sent is None else (end - sent) / 1e6,
        "itl": [(chunks[i] - chunks[i - 1]) / 1e6 for i in range(1, len(chunks))],
    }


def request_meets(fig: RequestFigures, slo: SLO) -> bool:
    """Whether one successful request's figures meet one SLO (see the module docstring)."""
    if slo.metric == "itl":
        gaps = fig["itl"]
        if not gaps:
            return True  # a single-chunk answer has no inter-token gap to violate
        v = stat_of(gaps, slo.stat)  # not None: there are gaps
    else:
        one: dict[str, float | None] = {"ttft": fig["ttft"], "tpot": fig["tpot"], "e2e": fig["e2e"]}
        v = one[slo.metric]
    if v is None:
        if slo.metric == "tpot":
            return True  # fewer than 2 output tokens: no time per output token
        return False
    return v <= slo.threshold_ms


def level_check(records: Iterable[RequestRecord | Mapping[str, Any]] | RecordSet,
                slos: list[SLO]) -> dict[str, LevelCheck]:
    """Per SLO: the level's observed stat over successful requests and whether it holds."""
    rs = as_record_set(records)
    c = rs.columns("ok", "warmup")
    return _level_check(rs, c["ok"] & ~c["warmup"], slos)


def _figures(rs: RecordSet, rows: NDArray[np.bool_]) -> dict[str, NDArray[np.float64]]:
    """Per-request TTFT, TPOT and E2E (ms, NaN where a request has none) of every row, as
    ``request_figures``; only ``rows`` are meant."""
    t = rs.columns("sent_ns", "first_token_ns", "last_token_ns", "end_ns", "output_tokens")
    sent, first, last, out = t["sent_ns"], t["first_token_ns"], t["last_token_ns"], t["output_tokens"]
    end = np.where(t["end_ns"] != NONE, t["end_ns"], last)
    nan = np.full(len(rs), np.nan)
    ttft, tpot, e2e = nan.copy(), nan.copy(), nan
    m = rows & (first != NONE) & (sent != NONE)
    ttft[m] = (first[m] - sent[m]) / 1e6
    m = rows & (out != NONE) & (out >= 2) & (first != NONE) & (last != NONE)
    tpot[m] = (last[m] - first[m]) / 1e6 / (out[m] - 1)
    m = rows & (end != NONE) & (sent != NONE)
    e2e[m] = (end[m] - sent[m]) / 1e6
    return {"ttft": ttft, "tpot": tpot, "e2e": e2e}


def _stream_stat(src: Blocks, stat: str) -> tuple[float | None, int]:
    """``stat_of`` of a stream of values, and their count."""
    n, mean, _, hi, _ = moments(src) if stat in ("mean", "max") else (sum(b.size for b in src()), 0, 0, 0, 0)
    if n == 0:
        return None, 0
    if stat == "mean":
        return mean, n
    if stat == "max":
        return hi, n
    ps = percentiles(src, [float(stat[1:])], n)
    assert ps is not None  # None only for an empty stream
    return ps[0], n


def _level_check(rs: RecordSet, done: NDArray[np.bool_], slos: list[SLO],
                 figs: dict[str, NDArray[np.float64]] | None = None) -> dict[str, LevelCheck]:
    figs = _figures(rs, done) if figs is None and any(s.metric != "itl" for s in slos) else figs
    out: dict[str, LevelCheck] = {}
    for slo in slos:
        if slo.metric == "itl":
            observed, n = _stream_stat(gap_blocks(rs, done), slo.stat)
        else:
            assert figs is not None  # computed above when an SLO is not on ITL
            vals = figs[slo.metric][done]
            vals = vals[~np.isnan(vals)]
            observed, n = stat_of(vals, slo.stat), int(vals.size)
        out[slo.name] = {"threshold_ms": slo.threshold_ms, "observed_ms": observed,
                         "met": observed is not None and observed <= slo.threshold_ms, "n": n}
    return out


def _own_itl(rs: RecordSet, done: NDArray[np.bool_], stat: str) -> NDArray[np.float64]:
    """Each row's own ITL statistic (``stat_of`` of its gaps; NaN for a row with no gap): rows of a
    block with the same number of gaps as one matrix, so numpy computes each row's figure."""
    off = rs.chunk_offsets()
    gaps_n = np.maximum(np.diff(off) - 1, 0)
    need = done & (gaps_n > 0)
    own: NDArray[np.float64] = np.full(len(rs), np.nan)
    for start, stop, o, s in stamp_blocks(rs, need, offsets=off):
        rid = row_ids(o)
        gaps = (np.diff(s) / 1e6)[rid[1:] == rid[:-1]]  # each row's gaps, rows one after another
        g_off = np.concatenate(([0], np.cumsum(gaps_n[start:stop])))
        blk_need = need[start:stop]
        for m in np.unique(gaps_n[start:stop][blk_need]):
            rows = np.flatnonzero(blk_need & (gaps_n[start:stop] == m))
            mat = gaps[g_off[rows][:, None] + np.arange(m)]
            if stat == "mean":
                v = np.mean(mat, axis=1)
            elif stat == "max":
                v = np.max(mat, axis=1)
            else:
                v = np.percentile(mat, float(stat[1:]), axis=1)
            own[start + rows] = v
    return own


def _meets(rs: RecordSet, done: NDArray[np.bool_], figs: dict[str, NDArray[np.float64]],
           slo: SLO) -> NDArray[np.bool_]:
    """Whether each successful row meets ``slo`` (``request_meets``, row by row)."""
    if slo.metric == "itl":
        v = _own_itl(rs, done, slo.stat)
        return done & (np.isnan(v) | (v <= slo.threshold_ms))  # no gap: nothing to violate
    v = figs[slo.metric]
    missing_ok = slo.metric == "tpot"  # fewer than 2 output tokens: no time per output token
    return done & np.where(np.isnan(v), missing_ok, v <= slo.threshold_ms)


def goodput(records: Iterable[RequestRecord | Mapping[str, Any]] | RecordSet, slos: list[SLO], duration_s: float,
            avg_power_w: Mapping[str, float | None] | None = None,
            window_output_tokens: float | None = None) -> Goodput:
    """Goodput of one level (warm-up records are ignored).

    ``window_output_tokens``: the tokens the server produced in the window from every stream
    (``metrics.window_tokens``). When given, ``output_tokens_per_s`` is those tokens times the
    share of the measured requests' output tokens that met every SLO, over the duration — the
    same token basis as every other efficiency figure (the window's energy also paid for warm-up
    leftovers). Without it, the good requests' own tokens over the duration.

    Returns a ``core.schema.Goodput``: ``requests_per_s``, ``output_tokens_per_s`` (of requests that succeeded and met every
    SLO), ``good_requests``, ``total_requests``, ``fraction`` (good / all, failures included),
    ``per_slo`` (requests meeting each SLO alone), ``level`` (:func:`level_check`), ``all_met``
    (every level check holds) and ``per_kw`` — per boundary, ``requests_per_s_per_kw`` and
    ``output_tokens_per_s_per_kw`` from the boundary's average power (None where power is unknown).
    """
    if not duration_s > 0:
        raise UserError(f"goodput needs a positive duration, got {duration_s!r} s")
    rs = as_record_set(records)
    c = rs.columns("ok", "warmup", "output_tokens")
    measured = ~c["warmup"]
    done = measured & c["ok"]
    tokens = np.where(c["output_tokens"] == NONE, 0, c["output_tokens"])
    del c
    figs = _figures(rs, done)
    all_good = done.copy()
    per_slo = {}
    for s in slos:
        meets = _meets(rs, done, figs, s)
        per_slo[s.name] = int(meets.sum())
        all_good &= meets
    good = int(all_good.sum())
    all_tokens = int(tokens[done].sum())
    good_tokens = int(tokens[all_good].sum())
    n = int(measured.sum())
    level = _level_check(rs, done, slos, figs)
    if window_output_tokens is not None:
        good_out = window_output_tokens * (good_tokens / all_tokens) if all_tokens else 0.0
        basis = "tokens_in_window"
    else:
        good_out, basis = float(good_tokens), "measured_request_tokens"
    out: dict[str, Any] = {  # the level's goodput block (core.schema.Goodput)
        "slos": [s.to_dict() for s in slos],
        "duration_s": duration_s,
        "good_requests": good,
        "total_requests": n,
        "fraction": good / n if n else None,
        "requests_per_s": good / duration_s,
        "output_tokens_per_s": good_out / duration_s,
        "token_basis": basis,
        "good_output_share": good_tokens / all_tokens if all_tokens else None,
        "per_slo": per_slo,
        "level": level,
        "all_met": all(v["met"] for v in level.values()),
        "per_kw": {},
    }
    for boundary, p in (avg_power_w or {}).items():
        if p is None or not p > 0:
            out["per_kw"][boundary] = {"requests_per_s_per_kw": None, "output_tokens_per_s_per_kw": None,
                                       "avg_power_w": p}
            continue
        kw = p / 1000.0
        out["per_kw"][boundary] = {"requests_per_s_per_kw": out["requests_per_s"] / kw,
                                   "output_tokens_per_s_per_kw": out["output_tokens_per_s"] / kw,
                                   "avg_power_w": p}
    return Goodput.model_validate(out)


def good_output_share(gp: Goodput, throughput: Throughput) -> float | None:
    """The share of a window's output tokens that ``gp`` counts as good (0..1): the good requests'
    share of the measured completed requests' output tokens (the rule of :func:`goodput`). Read from
    the block; a block written before it was kept recovers it on the ``tokens_in_window`` basis
    (its good tokens over the window's tokens, ``throughput`` being the level's full window). None
    when neither is possible (no output token, or the older ``measured_request_tokens`` basis)."""
    if gp.good_output_share is not None:
        return gp.good_output_share
    window = throughput.tokens_in_window
    if gp.token_basis != "tokens_in_window" or window is None or not window.output > 0 or not gp.duration_s:
        return None
    return gp.output_tokens_per_s * gp.duration_s / window.output


def goodput_in_window(gp: Goodput, share: float, energy: Mapping[str, BoundaryEnergy],
                      output_tokens_per_s: float, duration_s: float | None) -> Goodput:
    """``gp`` read in another window of the same level (the steady-state window): its output tokens
    per second and per kW are ``share`` (:func:`good_output_share`) of that window's
    ``output_tokens_per_s`` and of each boundary's output tokens/s per kW in ``energy`` — the rule
    :func:`goodput` applies to the full window. Request counts and the SLO checks stay the level's
    (they describe its measured requests, not a window's energy); ``requests_per_s_per_kw`` is not a
    figure of the other window (None)."""
    out = gp.model_copy(deep=True)
    out.duration_s = duration_s
    out.output_tokens_per_s = share * output_tokens_per_s
    out.good_output_share = share
    out.per_kw = {}
    for b in gp.per_kw:
        e = energy.get(b)
        if e is None:
            continue
        per_kw = e.output_tokens_per_s_per_kw
        out.per_kw[b] = GoodputPerKw(requests_per_s_per_kw=None, avg_power_w=e.avg_power_w,
                                     output_tokens_per_s_per_kw=None if per_kw is None else share * per_kw)
    return out


def figures_meet(figures: LevelFigures, slos: list[SLO]) -> bool:
    """Whether a level's figures meet every SLO: ``figures.latency_ms(metric, stat) <= bound``; a
    missing figure fails."""
    for s in slos:
        v = figures.latency_ms(s.metric, s.stat)
        if v is None or v > s.threshold_ms:
            return False
    return True


def run_slo_text(result: Result) -> str | None:
    """A run's SLO as written (``ttft_p99=500ms,tpot_p99=50ms``): from the first level whose goodput
    block holds its SLOs, else the run's ``--slo`` as configured; None without one. The one home for
    reports (``report/goodput.slo_text``) and planners (``planning/measured``)."""
    for lv in result.levels:
        text = lv.goodput.slo_text if lv.goodput is not None else None
        if text:
            return text
    return result.config.slo or None

