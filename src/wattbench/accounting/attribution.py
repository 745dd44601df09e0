"""Prefill vs decode energy in co-located continuous batching.

**Regression.** The run is cut into intervals of ``interval_s``. For each interval i we know its
energy ``E_i`` (J, at one boundary), its length ``dt_i`` (s), the prompt tokens processed ``P_i``
and the tokens generated ``D_i``. The model is::

    E_i = p_idle · dt_i + e_prefill · P_i + e_decode · D_i + noise

fitted by non-negative least squares (all three coefficients >= 0; the "intercept" is idle power
times interval length, so intervals of unequal length are handled). With dynamic energy (gross −
idle) pass ``fit_idle=False`` to fit through the origin. Reported: J per prefill token, J per
decode token, the fitted idle power, R², residual standard deviation, the number of intervals, and
the condition of the design (prefill and decode counts that move together cannot be separated:
``collinearity`` near 1 says so).

**Reliability** (:func:`fit_problems`). A fit is ``unreliable`` — its coefficients are then *not*
reported as figures (``j_per_prefill_token`` / ``j_per_decode_token`` / ``idle_power_w`` are None, the
fitted values are kept under ``unreliable_fit`` for diagnosis, and ``reasons`` says why in sentences)
when any of these holds:

- R² is below ``R2_MIN`` (0.5): the token counts explain less than half of the energy's variation
  (or the energy does not vary at all, R² undefined);
- a coefficient sits at its bound (exactly 0): NNLS clamped it, so the data cannot tell it from
  zero or wanted it negative;
- a coefficient's standard error is larger than the coefficient itself;
- the prefill and decode counts are collinear (|correlation| above ``COLLINEAR_MAX``, 0.95): the
  two phases cannot be separated by these intervals.

``status`` is ``ok`` or ``unreliable``; consumers (reports, per-request attribution) use the split
only when it is ``ok``.

NNLS with three unknowns is solved exactly by trying every subset of free coefficients (2³ = 8
ordinary least-squares fits) and keeping the best one whose coefficients are all >= 0 — the
active-set answer, without scipy.

**Token counts per interval** come from the server's counters where they were scraped
(``vllm:prompt_tokens_total`` / ``vllm:generation_tokens_total`` deltas), else from client timing
(:func:`intervals_from_records`, every stream, warm-up ones too): a request's input tokens go to the interval holding its first
token (prefill finishes just before it), its output tokens are spread evenly over its content
chunk arrivals (or evenly between first and last token when chunks were not kept).

**Isolating pair** (:func:`isolating_pair`): a prefill-heavy level (``max_tokens=1``) and a
decode-heavy level (short prompts, long outputs) give two equations ``E = e_p·P + e_d·D`` in
dynamic energy; solved exactly as a cross-check of the regression.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from wattbench.core.errors import UserError
from wattbench.core.schema import RequestRecord

R2_MIN = 0.5  # below this the fit explains too little of the energy's variation to split it
COLLINEAR_MAX = 0.95  # |corr(prefill, decode)| above this: the two phases cannot be separated
_COEF_NAMES = {"idle_power_w": "the idle power", "j_per_prefill_token": "J per prefill token",
               "j_per_decode_token": "J per decode token"}


@dataclass
class Intervals:
    start_ns: np.ndarray
    duration_s: np.ndarray
    energy_j: np.ndarray
    prefill_tokens: np.ndarray
    decode_tokens: np.ndarray

    def __len__(self) -> int:
        return int(self.energy_j.size)


def _get(rec: RequestRecord | Mapping[str, Any], name: str) -> Any:
    return rec.get(name) if isinstance(rec, Mapping) else getattr(rec, name, None)


def intervals_from_records(records: Iterable[RequestRecord | Mapping[str, Any]],
                           energy_series_fn: Callable[[int, int], float | None], interval_s: float, start_ns: int | None = None, end_ns: int | None = None,
                           ) -> Intervals:
    """Per-interval energy and token counts from client records (see the module docstring).

    ``energy_series_fn(t0_ns, t1_ns)`` returns the energy (J) of one boundary over that span of the
    run's clock (None where it cannot: that interval is dropped). Counted: the
    tokens of every stream that produced any, warm-up and failed ones included (the energy of an
    interval paid for them too; the same rule as ``metrics.window_tokens``: a stream without
    usage counts its chunks). The span defaults to first send .. last token of the measured,
    successful requests.

    ``records`` is read one record at a time (a list, a ``RecordSet``, or the records of a
    ``requests.jsonl`` as they are read): nothing is held per request. Without ``start_ns`` and
    ``end_ns`` it is iterated twice (the span first), so it must then be re-iterable.
    """
    if not interval_s > 0:
        raise UserError(f"attribution interval must be > 0 s, got {interval_s}")
    if start_ns is None or end_ns is None:
        span = _measured_span(records)
        t0 = start_ns if start_ns is not None else span[0]
        t1 = end_ns if end_ns is not None else span[1]
    else:
        t0, t1 = start_ns, end_ns
    step = int(round(interval_s * 1e9))
    n = max(1, int(math.ceil((t1 - t0) / step)))
    edges = t0 + step * np.arange(n + 1, dtype=np.int64)
    pre = np.zeros(n)
    dec = np.zeros(n)

    def bin_of(t: int) -> int | None:
        if t < t0 or t > edges[-1]:
            return None
        return min(n - 1, int((t - t0) // step))

    any_ok = start_ns is None or end_ns is None  # _measured_span checked it
    for r in records:
        ft = _get(r, "first_token_ns")
        if ft is None:
            continue
        any_ok = any_ok or (bool(_get(r, "ok")) and not _get(r, "warmup"))
        b = bin_of(ft)
        inp = _get(r, "input_tokens") or _get(r, "requested_input_tokens") or 0
        if b is not None:
            pre[b] += inp
        chunks = _get(r, "chunk_ns") or []
        out = _get(r, "output_tokens")
        out = (len(chunks) or 1) if out is None else out
        if out <= 0:
            continue
        if chunks:
            share = out / len(chunks)
            for c in chunks:
                bc = bin_of(c)
                if bc is not None:
                    dec[bc] += share
        else:
            lt = _get(r, "last_token_ns") or ft
            if out == 1 or lt == ft:
                if b is not None:
                    dec[b] += out
            else:
                ts = np.linspace(ft, lt, out)
                for tok_t in ts:
                    bc = bin_of(int(tok_t))
                    if bc is not None:
                        dec[bc] += 1.0
    if not any_ok:
        raise UserError(_NO_OK)
    energy = np.full(n, np.nan)
    for i in range(n):
        e = energy_series_fn(int(edges[i]), int(edges[i + 1]))
        if e is not None and math.isfinite(e):
            energy[i] = e
    keep = ~np.isnan(energy)
    return Intervals(edges[:-1][keep], np.full(int(keep.sum()), step / 1e9), energy[keep], pre[keep], dec[keep])


_NO_OK = "no successful requests with a first token: nothing to attribute"


def _measured_span(records: Iterable[RequestRecord | Mapping[str, Any]]) -> tuple[int, int]:
    """First send .. last token (first token where there is none) of the measured, successful
    requests with a first token, in one pass."""
    t0: int | None = None
    t1: int | None = None
    for r in records:
        ft = _get(r, "first_token_ns")
        if not _get(r, "ok") or _get(r, "warmup") or ft is None:
            continue
        s, e = _get(r, "sent_ns"), (_get(r, "last_token_ns") or ft)
        t0 = s if t0 is None or s < t0 else t0
        t1 = e if t1 is None or e > t1 else t1
    if t0 is None or t1 is None:  # set together
        raise UserError(_NO_OK)
    return t0, t1


def intervals_from_counters(times_ns: Sequence[int], prompt_tokens_total: Sequence[float],
                            generation_tokens_total: Sequence[float],
                            energy_series_fn: Callable[[int, int], float | None]) -> Intervals:
    """Per-interval token counts from scraped cumulative server counters (one interval per scrape gap).

    ``prompt_tokens_total`` / ``generation_tokens_total`` are the counters' values at ``times_ns``
    (e.g. ``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``). A counter that goes down
    was reset (server restart): the interval's count is then the new value. Intervals whose energy
    is unknown are dropped.
    """
    t = np.asarray(times_ns, dtype=np.int64)
    p = np.asarray(prompt_tokens_total, dtype=float)
    g = np.asarray(generation_tokens_total, dtype=float)
    if not (t.size == p.size == g.size) or t.size < 2:
        raise UserError("counter series need the same length and at least two scrapes")
    if np.any(np.diff(t) <= 0):
        raise UserError("scrape times must increase")
    dp, dg = np.diff(p), np.diff(g)
    dp = np.where(dp < 0, p[1:], dp)
    dg = np.where(dg < 0, g[1:], dg)
    keep, energy = [], []
    for i in range(t.size - 1):
        e = energy_series_fn(int(t[i]), int(t[i + 1]))
        if e is not None and math.isfinite(e):
            keep.append(i)
            energy.append(e)
    k = np.asarray(keep, dtype=int)
    return Intervals(t[:-1][k], (np.diff(t) / 1e9)[k], np.asarray(energy, dtype=float), dp[k], dg[k])


def _nnls_small(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Exact NNLS for a few columns: the best non-negative fit over all subsets of free columns."""
    k = X.shape[1]
    best, best_rss = np.zeros(k), float(np.sum(y * y))
    for r in range(1, k + 1):
        for cols in itertools.combinations(range(k), r):
            sub = X[:, cols]
            coef, *_ = np.linalg.lstsq(sub, y, rcond=None)
            if np.any(coef < 0):
                continue
            rss = float(np.sum((y - sub @ coef) ** 2))
            if rss < best_rss - 1e-12 * max(1.0, best_rss):
                full = np.zeros(k)
                full[list(cols)] = coef
                best, best_rss = full, rss
    return best


def fit_prefill_decode(energy_j: npt.ArrayLike, prefill_tokens: npt.ArrayLike, decode_tokens: npt.ArrayLike,
                       duration_s: npt.ArrayLike | None = None, *, fit_idle: bool = True) -> dict[str, Any]:
    """Regress per-interval energy on prefill and decode tokens (see the module docstring).

    Returns ``j_per_prefill_token``, ``j_per_decode_token``, ``idle_power_w`` (None when
    ``fit_idle=False``), ``r2``, ``residual_std_j``, ``n_intervals``, ``collinearity`` (|corr| of the
    two token series) and ``method``.
    """
    y = np.asarray(energy_j, dtype=float)
    P = np.asarray(prefill_tokens, dtype=float)
    D = np.asarray(decode_tokens, dtype=float)
    n = y.size
    if not (P.size == D.size == n):
        raise UserError("energy and token series must have the same length")
    cols = [P, D]
    if fit_idle:
        if duration_s is None:
            raise UserError("fitting idle power needs the interval durations")
        dt = np.broadcast_to(np.asarray(duration_s, dtype=float), (n,)).astype(float)
        cols = [dt, P, D]
    k = len(cols)
    if n < k + 2:
        raise UserError(f"attribution needs at least {k + 2} intervals, got {n}; run the level longer or "
                        f"use shorter intervals")
    X = np.column_stack(cols)
    coef = _nnls_small(X, y)
    pred = X @ coef
    resid = y - pred
    ss_res = float(np.sum(resid ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else None
    dof = max(1, n - k)
    coll = None
    if P.std() > 0 and D.std() > 0:
        coll = float(abs(np.corrcoef(P, D)[0, 1]))
    # standard errors from the unconstrained covariance (indicative)
    se: list[float | None] = [None] * k
    try:
        cov = np.linalg.inv(X.T @ X) * (ss_res / dof)
        se = [float(math.sqrt(max(0.0, cov[i, i]))) for i in range(k)]
    except np.linalg.LinAlgError:
        pass
    off = 1 if fit_idle else 0
    out = {
        "method": "nnls" + ("+idle" if fit_idle else ""),
        "j_per_prefill_token": float(coef[off]),
        "j_per_decode_token": float(coef[off + 1]),
        "idle_power_w": float(coef[0]) if fit_idle else None,
        "se_j_per_prefill_token": se[off],
        "se_j_per_decode_token": se[off + 1],
        "r2": r2,
        "residual_std_j": math.sqrt(ss_res / dof),
        "n_intervals": int(n),
        "collinearity": coll,
        "prefill_tokens": float(P.sum()),
        "decode_tokens": float(D.sum()),
        "energy_j": float(y.sum()),
    }
    if fit_idle:
        out["prefill_energy_j"] = float(coef[1] * P.sum())
        out["decode_energy_j"] = float(coef[2] * D.sum())
        out["idle_energy_j"] = float(coef[0] * float(np.sum(X[:, 0])))
        out["se_idle_power_w"] = se[0]
    return judge_fit(out)


def fit_problems(fit: Mapping[str, Any]) -> list[str]:
    """Why a prefill/decode fit cannot be trusted, as sentences (empty: it can; see the module docstring)."""
    reasons = []
    r2 = fit.get("r2")
    if r2 is None:
        reasons.append("the interval energies do not vary, so R² is undefined and the split cannot be fitted")
    elif r2 < R2_MIN:
        reasons.append(f"the token counts explain only {max(r2, 0.0):.0%} of the energy's variation "
                       f"(R² {r2:.2f}, the bar is {R2_MIN:g})")
    for key, name in _COEF_NAMES.items():
        v = fit.get(key)
        if v is None:
            continue
        if v == 0.0:
            reasons.append(f"{name} was clamped at 0 by the non-negative fit: these intervals cannot tell it "
                           f"from zero")
            continue
        se = fit.get("se_" + key)
        if se is not None and se > abs(v):
            reasons.append(f"{name} ({v:.3g}) is smaller than its standard error ({se:.3g})")
    coll = fit.get("collinearity")
    if coll is not None and coll > COLLINEAR_MAX:
        reasons.append(f"the prefill and decode counts move together (|correlation| {coll:.2f} > "
                       f"{COLLINEAR_MAX:g}), so the two phases cannot be separated")
    elif coll is None and fit.get("prefill_tokens") is not None:
        reasons.append("the prefill or decode count is the same in every interval, so the two phases cannot "
                       "be separated")
    return reasons


def judge_fit(fit: dict[str, Any]) -> dict[str, Any]:
    """Mark a fit ``ok`` or ``unreliable``; an unreliable fit's coefficients move to ``unreliable_fit``."""
    reasons = fit_problems(fit)
    fit["status"] = "unreliable" if reasons else "ok"
    fit["reasons"] = reasons
    if reasons:
        keys = [k for k in fit if k.startswith(("j_per_", "se_", "prefill_energy", "decode_energy",
                                                   "idle_energy", "idle_power"))]
        fit["unreliable_fit"] = {k: fit[k] for k in keys}
        for k in keys:
            fit[k] = None
    return fit


def fit_intervals(iv: Intervals, *, fit_idle: bool = True) -> dict[str, Any]:
    return fit_prefill_decode(iv.energy_j, iv.prefill_tokens, iv.decode_tokens, iv.duration_s, fit_idle=fit_idle)


def _dyn(fig: Mapping[str, Any], which: str) -> float:
    e = fig.get("dynamic_energy_j")
    if e is None:
        gross, idle_w, dur = fig.get("energy_j"), fig.get("idle_power_w"), fig.get("duration_s")
        if gross is None or idle_w is None or dur is None:
            raise UserError(f"the {which} level needs dynamic_energy_j, or energy_j with idle_power_w and "
                            f"duration_s")
        e = gross - idle_w * dur
    return float(e)


def isolating_pair(prefill_level: Mapping[str, Any], decode_level: Mapping[str, Any]) -> dict[str, Any]:
    """J per prefill / decode token from two levels: solve ``E = e_p·P + e_d·D`` for both.

    Each level: ``dynamic_energy_j`` (or ``energy_j``, ``idle_power_w``, ``duration_s``),
    ``input_tokens`` and ``output_tokens`` (totals over the window). The prefill-heavy level is
    typically ``max_tokens=1`` so its decode term is small; the decode-heavy one has short prompts
    and long outputs. ``condition`` is the 2×2 system's condition number (large: the two levels do
    not isolate the two phases).
    """
    A = np.array([[float(prefill_level["input_tokens"]), float(prefill_level["output_tokens"])],
                  [float(decode_level["input_tokens"]), float(decode_level["output_tokens"])]])
    b = np.array([_dyn(prefill_level, "prefill-heavy"), _dyn(decode_level, "decode-heavy")])
    cond = float(np.linalg.cond(A))
    if not math.isfinite(cond) or cond > 1e12:
        raise UserError("the isolating pair does not separate prefill from decode (token mixes are proportional)")
    ep, ed = np.linalg.solve(A, b)
    return {"method": "isolating_pair", "j_per_prefill_token": float(ep), "j_per_decode_token": float(ed),
            "condition": cond,
            "naive_j_per_prefill_token": b[0] / A[0, 0] if A[0, 0] else None,
            "naive_j_per_decode_token": b[1] / A[1, 1] if A[1, 1] else None}


def cross_check(regression: Mapping[str, Any], pair: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Relative difference of the regression's coefficients from the isolating pair's."""
    out: dict[str, dict[str, Any]] = {}
    for k in ("j_per_prefill_token", "j_per_decode_token"):
        a, b = regression.get(k), pair.get(k)
        out[k] = {"regression": a, "pair": b,
                  "rel_diff": (a - b) / abs(b) if a is not None and b not in (None, 0) else None}
    return out
