"""Stationarity of a level: whether its figures moved while it was measured (drift), why, and
whether its steady window agrees with a warm-up estimate (docs/accounting.md "Stationarity").

``steady_series(records, log, window)`` — one trial's per-second series over its steady window
(``trim_warmup``: without the buckets before the warm-up estimate, below, where it ends inside the
window — a ramp an open loop's steady window holds is not a trend of the level):
output tokens/s per bucket (``metrics.timeline.output_tokens_per_s_buckets``: the crediting of
``metrics/window_tokens.py``, tokens spread over their chunk stamps) and each boundary's mean power
per bucket (the boundary's power polyline, ``boundaries.boundary_totals``, integrated over the
bucket). Buckets are of equal length, as near ``BUCKET_S`` as the window allows.

``stationarity(trials)`` — the level's trials together, in time order:

* **trends** of output tokens/s, of each boundary's power and of tokens/s per kW (the per-bucket
  ratio), each the Theil–Sen change over the trials' steady windows with its 99% interval, fitted
  on the log scale (``metrics/drift.trend``: ``exp(slope · span) − 1``, never below −100%; a bucket
  with nothing in it is left out of the fit), and the trend of the trial figures (each trial's steady mean, in trial
  order). A figure *moves* when its interval excludes 0; a move is sized (its change) and judged
  by the materiality rule (``findings.judged``, ``EFFICIENCY_MATERIAL_PCT``): below the bound a
  ``note``, at or above it a ``drift`` warning — and the figure is *drifting*: no noise verdict
  rests on it (``metrics/noise.judge``).
* **the likely cause**, from what the run recorded between the first trial and the last (or, for
  one trial, between the 3 s before it and its window): the GPU's temperature (a change of
  ``TEMP_CHANGE_C`` or more), its SM clock (``CLOCK_CHANGE`` or more), capping throttle reasons,
  the server's running/waiting counts and KV-cache use (a change of ``QUEUE_CHANGE`` requests or
  ``KV_CHANGE_PCT`` points), the client's loop lag (p99 over ``LAG_CAUSE_MS``), the host's CPUs
  (``host_cpu_cause``, over each trial's ``HostCpu``: a change of ``STEAL_CHANGE_PCT`` points or
  more in the steal share of all CPUs' time, of ``BUSY_CHANGE_PCT`` points in their busy share —
  with the share of the host's other processes beside it where the server's is known — of
  ``IOWAIT_CHANGE_PCT`` points in iowait, or of ``SERVER_CPU_CHANGE`` (relative) in the CPU the
  launched server's process tree used; what to do: measure on a host without other tenants or
  load and pin the server's cores), and what to do. Where nothing moved and the host's CPUs were
  read, the sentence says they held still too.
* **another thermal state** (``other_state``): a trial whose peak GPU temperature is
  ``TEMP_STATE_C`` or more from the median of the trials, or whose mean SM clock is ``CLOCK_STATE``
  or more from theirs, or that alone saw capping throttle reasons, is named (``thermal_state``).
* **the warm-up estimate**: MSER-5 (``metrics.drift.mser``) over output tokens per
  ``MSER_BUCKET_S`` from the full window's start to the steady window's end (the drain left out);
  where it and the steady window's start differ by more than ``warmup_bound_s`` (the larger of one
  MSER batch, 1 s, and ``MSER_BOUND_SHARE`` of that span) the level is named: when the estimate is
  later, the effect on throughput of the transient left in the window is judged by the
  materiality rule; when earlier, a note.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from wattbench.accounting.boundaries import boundary_totals, contains_work
from wattbench.accounting.findings import EFFICIENCY_MATERIAL_PCT, Finding, judged, rule
from wattbench.accounting.sampling import trapezoid_j, window_polyline
from wattbench.core.recordset import RecordSet
from wattbench.core.schema import (FigureTrend, FindingKind, HostCpu, LevelResult, Stationarity, SteadySeries, Thermal,
                                   Window)
from wattbench.metrics.drift import MSER_BATCH, Trend, mser, trend, trials_trend
from wattbench.metrics.timeline import output_tokens_per_s_buckets
from wattbench.telemetry.base import TelemetryLog

BUCKET_S = 1.0
MSER_BUCKET_S = 0.2  # MSER-5's points: 5 of them make a 1 s batch
MSER_BOUND_SHARE = 0.10  # of the span MSER reads (full start to steady end)
TEMP_CHANGE_C = 3.0  # a temperature change named as a cause
CLOCK_CHANGE = 0.02  # a relative SM clock change named as a cause
QUEUE_CHANGE = 1.0  # running/waiting requests (time-weighted means)
KV_CHANGE_PCT = 5.0  # KV-cache use, percentage points
LAG_CAUSE_MS = 50.0  # client loop lag p99 named as a cause
TEMP_STATE_C = 5.0  # a trial this far from the trials' median peak temperature: another state
CLOCK_STATE = 0.03  # a trial's mean SM clock this far (relative) from the trials' median
STEAL_CHANGE_PCT = 5.0  # the host's steal share of all CPUs' time, percentage points
BUSY_CHANGE_PCT = 20.0  # the host's busy share of all CPUs' time, percentage points
IOWAIT_CHANGE_PCT = 10.0  # the host's iowait share, percentage points
SERVER_CPU_CHANGE = 0.25  # the launched server's CPU (cores), relative

TOKENS = "output_tokens_per_s"
POWER = "avg_power_w"
PER_KW = "output_tokens_per_s_per_kw"
FIGURE_WORDS = {TOKENS: "output tokens/s", POWER: "power", PER_KW: "output tokens/s per kW"}
FIGURE_GROUPS = {TOKENS: ("throughput", "efficiency"), POWER: ("energy", "efficiency"),
                 PER_KW: ("efficiency", "energy")}

__all__ = ["steady_series", "stationarity", "stationarity_findings", "warmup_bound_s", "mser_estimate_s",
           "other_state", "trim_warmup", "host_cpu_cause", "rounds_host_cpu", "BUCKET_S"]


def _buckets(t0: int, t1: int, bucket_s: float) -> tuple[int, float]:
    """How many equal buckets of about ``bucket_s`` fit ``[t0, t1]`` and their length (s)."""
    dur = (t1 - t0) / 1e9
    k = max(1, int(math.floor(dur / bucket_s + 1e-9)))
    return k, dur / k


def _token_rates(records: RecordSet, t0: int, t1: int, bucket_s: float) -> tuple[np.ndarray, np.ndarray]:
    k, width = _buckets(t0, t1, bucket_s)
    starts, rates = output_tokens_per_s_buckets(records, t0, t1, width)
    # rounding of the bucket's ns can leave a sliver of a last bucket: fold it away
    if starts.size > k:
        starts, rates = starts[:k], rates[:k]
    return starts, rates


def steady_series(records: RecordSet, log: TelemetryLog | None, window: Window | None,
                  bucket_s: float = BUCKET_S) -> SteadySeries | None:
    """One trial's per-second series over ``window`` (module docstring); None without a window of
    at least one bucket."""
    if window is None or window.end_ns <= window.start_ns or window.duration_s < bucket_s:
        return None
    t0, t1 = window.start_ns, window.end_ns
    starts, rates = _token_rates(records, t0, t1, bucket_s)
    k, width = _buckets(t0, t1, bucket_s)
    edges = [int(s) for s in starts] + [t1]
    power: dict[str, list[float | None]] = {}
    if log is not None:
        totals = boundary_totals(log, t0, t1)
        names = list(totals)
        for b, tot in totals.items():
            if not contains_work(b, names) or len(tot.poly_w) < 2:
                continue
            pt, pw = np.asarray(tot.poly_t_ns, dtype=np.int64), np.asarray(tot.poly_w, dtype=np.float64)
            vals: list[float | None] = []
            for a, z in zip(edges[:-1], edges[1:]):
                tt, vv = window_polyline(pt, pw, a, z)
                vals.append(trapezoid_j(tt, vv) / ((z - a) / 1e9) if z > a else None)
            power[b] = vals
    mids = [(a + z) / 2e9 for a, z in zip(edges[:-1], edges[1:])]
    return SteadySeries(bucket_s=width, t_s=mids, output_tokens_per_s=[float(r) for r in rates], power_w=power)


def trim_warmup(series: SteadySeries | None, full: Window | None, est_s: float | None) -> SteadySeries | None:
    """``series`` without its buckets that end before the warm-up estimate (``est_s``, seconds after
    the full window's start): a ramp left in the steady window is the warm-up estimate's finding
    (``warmup_finding``), not a trend of the level. Unchanged without an estimate."""
    if series is None or full is None or est_s is None:
        return series
    cut_s = full.start_ns / 1e9 + est_s
    half = series.bucket_s / 2.0
    keep = [i for i, t in enumerate(series.t_s) if t + half > cut_s]
    if len(keep) == len(series.t_s):
        return series
    return SteadySeries(bucket_s=series.bucket_s, t_s=[series.t_s[i] for i in keep],
                        output_tokens_per_s=[series.output_tokens_per_s[i] for i in keep],
                        power_w={b: [v[i] for i in keep] for b, v in series.power_w.items()})


def warmup_bound_s(span_s: float) -> float:
    """How far the warm-up estimate and the steady window's start may differ before the level is
    named: one MSER batch (``MSER_BATCH × MSER_BUCKET_S``, the estimate's resolution) or
    ``MSER_BOUND_SHARE`` of the span it reads, whichever is larger."""
    return max(MSER_BATCH * MSER_BUCKET_S, MSER_BOUND_SHARE * span_s)


def mser_estimate_s(records: RecordSet, full: Window | None, steady: Window | None) -> float | None:
    """MSER-5's warm-up, in seconds after the full window's start, over output tokens per
    ``MSER_BUCKET_S`` from the full window's start to the steady window's end; None when either
    window is missing or the span holds too few batches."""
    if full is None or steady is None or steady.end_ns <= full.start_ns:
        return None
    _, rates = _token_rates(records, full.start_ns, steady.end_ns, MSER_BUCKET_S)
    m = mser(rates.tolist())
    if m is None:
        return None
    _, width = _buckets(full.start_ns, steady.end_ns, MSER_BUCKET_S)
    return m.truncate * width


def _span_trend(series: Sequence[SteadySeries], values: Sequence[Sequence[float | None]]) -> Trend | None:
    t: list[float] = []
    y: list[float] = []
    for s, vs in zip(series, values):
        for ti, v in zip(s.t_s, vs):
            if v is not None and math.isfinite(v):
                t.append(ti)
                y.append(float(v))
    return trend(t, y)


def _ratio(tok: Sequence[float], pw: Sequence[float | None]) -> list[float | None]:
    return [a / p * 1000.0 if p is not None and p > 0 else None for a, p in zip(tok, pw)]


def _mean(vals: Sequence[float | None]) -> float | None:
    xs = [v for v in vals if v is not None and math.isfinite(v)]
    return sum(xs) / len(xs) if xs else None


def _pct(x: float | None) -> float | None:
    return None if x is None else x * 100.0


def figure_trend(figure: str, boundary: str | None, tr: Trend | None,
                 trial_values: list[float | None] | None = None) -> FigureTrend | None:
    """``tr`` (a log-scale trend, ``metrics/drift.trend``) as a level records it (``FigureTrend``: the
    change and its interval in percent of the fitted start, whether it moves and whether by a material amount), with the trend of
    ``trial_values`` (one figure per trial) beside it; None without a trend."""
    if tr is None:
        return None
    trial_values = trial_values or []
    tt = trials_trend(trial_values) if len(trial_values) > 1 else None
    change = tr.change
    moves = tr.moves
    material = bool(moves and change is not None and abs(change) * 100.0 >= EFFICIENCY_MATERIAL_PCT)
    return FigureTrend(figure=figure, boundary=boundary, change_pct=_pct(change), ci_low_pct=_pct(tr.change_low),
                       ci_high_pct=_pct(tr.change_high), span_s=tr.span, points=tr.n,
                       trials_change_pct=_pct(tt.change) if tt is not None else None,
                       trial_values=trial_values, moves=moves, drifting=material)


def _thermal_of(t: LevelResult) -> Thermal | None:
    th = t.thermal
    return th if th is not None and th.model_fields_set else None


HOST_CPU_TODO = "measure on a host without other tenants or load; pin the server's cores"


def _moved(a: float | None, b: float | None, points: float) -> bool:
    return a is not None and b is not None and abs(b - a) >= points


def host_cpu_cause(a: HostCpu | None, b: HostCpu | None) -> tuple[list[str], str | None]:
    """What of the host's CPUs moved from ``a`` (the first trial's, or load's) to ``b`` (the
    last's), in words, and what to do; ``([], None)`` when nothing moved by its bound (module
    docstring) or either was not read."""
    if a is None or b is None:
        return [], None
    out: list[str] = []
    if _moved(a.steal_pct, b.steal_pct, STEAL_CHANGE_PCT):
        out.append(f"host CPU steal {a.steal_pct:.0f}→{b.steal_pct:.0f}%")
    if _moved(a.busy_pct, b.busy_pct, BUSY_CHANGE_PCT):
        oa, ob = a.others_busy_pct, b.others_busy_pct
        others = f" (others' processes {oa:.0f}→{ob:.0f}%)" if oa is not None and ob is not None else ""
        out.append(f"host CPUs busy {a.busy_pct:.0f}→{b.busy_pct:.0f}%{others}")
    if _moved(a.iowait_pct, b.iowait_pct, IOWAIT_CHANGE_PCT):
        out.append(f"host CPU iowait {a.iowait_pct:.0f}→{b.iowait_pct:.0f}%")
    x, y = a.server_cpu_cores, b.server_cpu_cores
    if x is not None and y is not None and max(x, y) > 0 and abs(y - x) >= SERVER_CPU_CHANGE * max(x, y):
        out.append(f"the server's CPU {x:.1f}→{y:.1f} cores")
    if a.cpu_count and b.cpu_count and a.cpu_count != b.cpu_count:
        out.append(f"host CPUs online {a.cpu_count}→{b.cpu_count}")
    return out, (HOST_CPU_TODO if out else None)


def rounds_host_cpu(rounds: Sequence[HostCpu | None]) -> str | None:
    """What of the host's CPUs moved from the first ``--precondition`` load to the last
    (``host_cpu_cause``), as the clause an unsettled precondition's reason ends with; None when
    nothing moved or fewer than two loads were read."""
    if len(rounds) < 2:
        return None
    moved, todo = host_cpu_cause(rounds[0], rounds[-1])
    return f"the host's CPUs moved over the loads: {'; '.join(moved)}; {todo}" if moved else None


def _host_cpu_read(h: HostCpu | None) -> bool:
    return h is not None and h.busy_pct is not None


def _cause(trials: Sequence[LevelResult]) -> tuple[str | None, str | None]:
    """What the run recorded that moved with the figures, and what to do (module docstring)."""
    first, last = trials[0], trials[-1]
    a = (first.thermal_before if len(trials) == 1 else _thermal_of(first))
    b = _thermal_of(last)
    causes: list[str] = []
    todo: list[str] = []
    thermal = False
    if a is not None and b is not None:
        if (a.max_temperature_c is not None and b.max_temperature_c is not None
                and abs(b.max_temperature_c - a.max_temperature_c) >= TEMP_CHANGE_C):
            causes.append(f"GPU temperature {a.max_temperature_c:.0f}→{b.max_temperature_c:.0f} °C")
            thermal = True
        if (a.mean_sm_clock_mhz and b.mean_sm_clock_mhz
                and abs(b.mean_sm_clock_mhz / a.mean_sm_clock_mhz - 1.0) >= CLOCK_CHANGE):
            causes.append(f"SM clock {a.mean_sm_clock_mhz:,.0f}→{b.mean_sm_clock_mhz:,.0f} MHz")
            thermal = True
        if a.cpu_mhz and b.cpu_mhz and abs(b.cpu_mhz / a.cpu_mhz - 1.0) >= CLOCK_CHANGE:
            causes.append(f"host CPU clock {a.cpu_mhz:,.0f}→{b.cpu_mhz:,.0f} MHz")
    capping = sorted({r for t in trials if _thermal_of(t) is not None for r in (t.thermal.capping_reasons_seen or [])})
    if capping:
        causes.append("throttle reasons " + ", ".join(capping))
        thermal = True
    if thermal:
        todo.append("precondition the device until its temperature settles (--precondition)")
    sa, sb = first.server_metrics, last.server_metrics
    if len(trials) > 1 and sa is not None and sb is not None and sa.available and sb.available:
        for key, word in (("mean_waiting_requests", "waiting"), ("mean_running_requests", "running")):
            x, y = getattr(sa, key), getattr(sb, key)
            if x is not None and y is not None and abs(y - x) >= QUEUE_CHANGE:
                causes.append(f"server {word} requests {x:.1f}→{y:.1f}")
                if word == "waiting" and y > x:
                    todo.append("wait for the server to drain between trials (--cooldown S)")
        x, y = sa.mean_kv_cache_usage_pct, sb.mean_kv_cache_usage_pct
        if x is not None and y is not None and abs(y - x) >= KV_CHANGE_PCT:
            causes.append(f"KV-cache use {x:.0f}→{y:.0f}%")
    lags = [(k, t.load.client_loop_lag_ms.p99) for k, t in enumerate(trials)
            if t.load is not None and t.load.client_loop_lag_ms.p99 is not None]
    worst_lag = max(lags, key=lambda kv: kv[1]) if lags else None
    if worst_lag is not None and worst_lag[1] >= LAG_CAUSE_MS:
        where = f" in trial {worst_lag[0] + 1}" if len(trials) > 1 else ""
        causes.append(f"client loop lag p99 {worst_lag[1]:,.0f} ms{where}")
        todo.append("give the client its own cores (fewer other processes, --workers N)")
    ha, hb = first.host_cpu, last.host_cpu
    host_read = len(trials) > 1 and _host_cpu_read(ha) and _host_cpu_read(hb)
    if host_read:
        moved, what = host_cpu_cause(ha, hb)
        causes += moved
        if what:
            todo.append(what)
    if not todo:
        todo.append("repeat the run, or measure the configurations alternated (A B B A) so drift common to both "
                    "cancels")
    if causes:
        return "; ".join(causes), "; ".join(todo)
    held = ("temperature, clocks, the server's queue, the client's lag and the host's CPUs held still" if host_read
            else "temperature, clocks, the server's queue and the client's lag held still")
    return f"no recorded cause: {held}", "; ".join(todo)


def other_state(trials: Sequence[LevelResult]) -> tuple[list[int], str | None]:
    """The trials in another thermal or clock state than the rest (module docstring), and the
    words naming them; ([], None) with fewer than two trials with a thermal record."""
    th: list[tuple[int, Thermal]] = []
    for k, t in enumerate(trials):
        x = _thermal_of(t)
        if x is not None:
            th.append((k, x))
    if len(th) < 2:
        return [], None
    temps = [x.max_temperature_c for _, x in th if x.max_temperature_c is not None]
    clocks = [x.mean_sm_clock_mhz for _, x in th if x.mean_sm_clock_mhz]
    t_med = float(np.median(temps)) if len(temps) == len(th) else None
    c_med = float(np.median(clocks)) if len(clocks) == len(th) else None
    capped = [k for k, x in th if x.capping_reasons_seen]
    out: list[int] = []
    words: list[str] = []
    for k, x in th:
        why: list[str] = []
        if t_med is not None and x.max_temperature_c is not None and abs(x.max_temperature_c - t_med) >= TEMP_STATE_C:
            why.append(f"{x.max_temperature_c:.0f} °C against the trials' median {t_med:.0f} °C")
        if c_med and x.mean_sm_clock_mhz and abs(x.mean_sm_clock_mhz / c_med - 1.0) >= CLOCK_STATE:
            why.append(f"SM clock {x.mean_sm_clock_mhz:,.0f} MHz against {c_med:,.0f} MHz")
        if capped and len(capped) < len(th) and k in capped:
            why.append("capped (" + ", ".join(x.capping_reasons_seen) + ") where the others were not")
        if why:
            out.append(k)
            words.append(f"trial {k + 1}: " + ", ".join(why))
    return out, ("; ".join(words) if words else None)


def stationarity(trials: Sequence[LevelResult], warmup_s: float | None = None,
                 steady_start_s: float | None = None) -> Stationarity | None:
    """The level's trends over its trials' steady series, the likely cause, the trials in another
    thermal state, and the warm-up estimate of its last trial (``warmup_s``, ``steady_start_s``:
    seconds after the full window's start). None when no trial has a series."""
    with_series = [t for t in trials if t.series is not None and t.series.t_s]
    if not with_series:
        return None
    series = [t.series for t in with_series if t.series is not None]
    tok = [s.output_tokens_per_s for s in series]
    trends: list[FigureTrend] = []
    ft = figure_trend(TOKENS, None, _span_trend(series, tok), [_mean(v) for v in tok])
    if ft is not None:
        trends.append(ft)
    boundaries = [b for b in series[-1].power_w if all(b in s.power_w for s in series)]
    for b in boundaries:
        pw = [s.power_w[b] for s in series]
        ft = figure_trend(POWER, b, _span_trend(series, pw), [_mean(v) for v in pw])
        if ft is not None:
            trends.append(ft)
        kw = [_ratio(t_, p_) for t_, p_ in zip(tok, pw)]
        trial_kw = [(_mean(t_) or 0.0) / m * 1000.0 if (m := _mean(p_)) else None for t_, p_ in zip(tok, pw)]
        ft = figure_trend(PER_KW, b, _span_trend(series, kw), trial_kw)
        if ft is not None:
            trends.append(ft)
    idx, words = other_state(trials)
    st = Stationarity(trials=len(with_series), trends=trends, warmup_estimate_s=warmup_s, steady_start_s=steady_start_s,
                      other_state_trials=idx, other_state=words)
    if any(f.drifting or f.moves for f in trends):
        st.cause, st.todo = _cause(trials)
    return st


def drift_phrase(f: FigureTrend, trials: int) -> str:
    """``drifts −15.4% over its 3 trials`` / ``moves +0.6% over its steady window (20 s)``."""
    verb = "drifts" if f.drifting else "moves"
    if trials > 1 and f.trials_change_pct is not None:
        return f"{verb} {f.trials_change_pct:+.1f}% over its {trials} trials"
    return f"{verb} {f.change_pct or 0.0:+.1f}% over its steady window ({f.span_s or 0.0:.0f} s)"


def stationarity_findings(st: Stationarity | None) -> list[Finding]:
    """The level's ``drift``, ``thermal_state`` and ``warmup_estimate`` findings (module
    docstring)."""
    if st is None:
        return []
    out: list[Finding] = []
    for f in st.trends:
        if not f.moves or f.change_pct is None:
            continue
        what = FIGURE_WORDS.get(f.figure, f.figure) + (f" ({f.boundary})" if f.boundary else "")
        text = (f"{what} {drift_phrase(f, st.trials)} (fitted {f.change_pct:+.1f}%, 99% interval "
                f"{f.ci_low_pct:+.1f} to {f.ci_high_pct:+.1f}%, over {f.span_s:.0f} s of steady windows): "
                f"{st.cause}; {st.todo}")
        out.append(judged(FindingKind.DRIFT, text, FIGURE_GROUPS.get(f.figure, ("efficiency",)), f.change_pct,
                          EFFICIENCY_MATERIAL_PCT, basis=f.figure,
                          summary="a figure drifted while the level was measured"))
    if st.other_state:
        out.append(rule(FindingKind.THERMAL_STATE, "warn",
                        f"{st.other_state}: its figures were taken in another thermal or clock state than the rest; "
                        "precondition the device (--precondition) or leave a --cooldown between trials",
                        ("efficiency", "energy", "throughput"),
                        summary="a trial ran in another thermal or clock state"))
    return out


def warmup_finding(records: RecordSet, full: Window | None, steady: Window | None, est_s: float | None
                   ) -> Finding | None:
    """The ``warmup_estimate`` finding: the steady window's start and MSER-5's estimate differ by
    more than ``warmup_bound_s`` (module docstring); None when they agree or either is missing."""
    if full is None or steady is None or est_s is None:
        return None
    start_s = (steady.start_ns - full.start_ns) / 1e9
    span_s = (steady.end_ns - full.start_ns) / 1e9
    bound = warmup_bound_s(span_s)
    gap = est_s - start_s
    if abs(gap) <= bound:
        return None
    if gap < 0:
        return rule(FindingKind.WARMUP_ESTIMATE, "note",
                    f"the steady window starts {start_s:.1f} s into the level, {-gap:.1f} s after the warm-up estimate "
                    f"(MSER-5: {est_s:.1f} s; bound ±{bound:.1f} s): its figures leave out load that already looked "
                    "steady", ("throughput",), summary="the steady window starts later than the warm-up estimate")
    cut = full.start_ns + int(est_s * 1e9)
    _, all_rates = _token_rates(records, steady.start_ns, steady.end_ns, MSER_BUCKET_S)
    _, kept = _token_rates(records, cut, steady.end_ns, MSER_BUCKET_S) if steady.end_ns > cut else (None, np.zeros(0))
    effect = None
    if all_rates.size and kept.size and float(np.mean(kept)) > 0:
        effect = (float(np.mean(all_rates)) / float(np.mean(kept)) - 1.0) * 100.0
    return judged(FindingKind.WARMUP_ESTIMATE,
                  f"the steady window starts {start_s:.1f} s into the level but the warm-up estimate (MSER-5) ends at "
                  f"{est_s:.1f} s (bound ±{bound:.1f} s): the window holds {gap:.1f} s of warm-up, "
                  + (f"moving its output tokens/s by {effect:+.1f}%" if effect is not None else "of unknown effect")
                  + "; give the level a longer --warmup", ("throughput", "efficiency"), effect,
                  EFFICIENCY_MATERIAL_PCT, basis="output_tokens_per_s",
                  summary="the steady window holds part of the warm-up (MSER-5)")
