"""The load generator's own saturation: its thresholds, the judgement, and the figures it biases.

The client's **own signals only** (``client_saturation_reasons``; never the server's, never the
rate it achieved):

- send-lag p99 above ``max(SAT_LAG_FLOOR_MS, SAT_LAG_FRACTION × the mean inter-arrival)``
  (open loop: arrivals went out late);
- a worker above ``SAT_CPU_PCT`` % of one core (a note only: what it does to the figures shows in
  the event loop's lag, judged beside it);
- the event loop's lag p99 above ``SAT_LOOP_LAG_MS`` (the process waits for a CPU).

An achieved rate below the target is *not* such a signal: a Poisson level of 15 requests at 4/s
may well draw 2.8/s. ``rate_finding`` judges achieved vs target against the arrival process's own
spread — the span of ``n - 1`` gaps of a ``gamma:K`` process at rate ``r`` is
Gamma(shape ``K(n-1)``, scale ``1/(K r)``) (Poisson: K = 1) — and warns only outside its central
``RATE_SPREAD_COVERAGE`` interval *and* beyond ``RATE_WARN_PCT``; a constant schedule (no spread)
warns beyond ``RATE_WARN_PCT`` alone. A shortfall then says the load was not the one asked for;
whether the client caused it is for the send lag to say.

``load/level.py`` records the client's signals (``LoadStats.saturation_reasons``); whether they
bias a figure is judged by their effect (``accounting.validity.client_findings``, with the level's
latencies): the event loop's lag p99 against the TTFT p50 and ITL p99 it stamps (a note below
``accounting.findings.LATENCY_MATERIAL_PCT``), the send lag against the inter-arrival time. A
``--max-concurrency`` cap holds sends back by design: its send lag is not a signal, and the level
reports the cap with its achieved rate. ``mark_saturated(level)`` then sets ``load.saturated``
(only when a client finding is material), ``level.saturated_figures`` (dotted paths into the level,
``*`` for "every key") and ``level.saturation_kinds`` (``loop_lag``, ``send_lag``: the client
findings that can be material; a rate shortfall is the ``rate`` finding and a ``--max-concurrency``
cap the ``cap`` note, neither the client's doing):

- late stamps (``loop_lag``: the client's own work, or other processes holding the CPUs, as on a
  shared host) bias the latencies they stamp — TTFT, ITL, E2E; TPOT telescopes — and, only for a
  window short enough that the lag is a material share of it, throughput and efficiency;
- an open loop that fell behind (send lag) offered less load than its label says: every
  load-dependent figure describes a lighter load than the one named.

Energy and average power stay unmarked: they are measured correctly, for whatever load was offered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from wattbench.core.schema import Finding, FindingKind, LevelResult, LoadStats
from wattbench.metrics.trials import t_ppf

__all__ = ["CLIENT_KINDS", "EFFICIENCY_FIELDS", "saturation_kinds", "saturated_figures", "mark_saturated",
           "client_saturation_reasons", "client_bias", "CLIENT_BIAS_TODO", "rate_finding", "rate_interval", "SaturationVerdict",
           "is_oversaturated"]

SAT_LOOP_LAG_MS = 2.0  # loop-lag p99 above this: arrival stamps may be late by that much
SAT_LOOP_LAG_MIN_PROBES = 20  # fewer loop-lag probes than this: no p99 to judge by
SAT_CPU_PCT = 90.0
SAT_LAG_FLOOR_MS = 5.0
SAT_LAG_FRACTION = 0.10
RATE_WARN_PCT = 10.0  # achieved vs target beyond this (and beyond the draw's spread): warn
RATE_SPREAD_COVERAGE = 0.99  # central interval of the arrival process's rate estimate

EFFICIENCY_FIELDS = ("output_tokens_per_s_per_kw", "j_per_output_token", "j_per_token", "tokens_per_kwh",
                     "output_tokens_per_kwh", "cost_per_million_output_tokens")


CLIENT_KINDS = (FindingKind.LOOP_LAG, FindingKind.SEND_LAG, FindingKind.CLIENT_CPU)  # findings about the client's own timing (validity.py)
_LATENCY_PATHS = {"ttft": "latency.ttft_ms", "itl": "latency.itl_ms", "e2e": "latency.e2e_ms",
                  "tpot": "latency.tpot_ms"}


def _client_warns(level: LevelResult) -> list[Finding]:
    return [f for f in level.validity.findings if f.kind in CLIENT_KINDS and f.severity != "note"]


def saturation_kinds(level: LevelResult) -> list[str]:
    """Which client findings judged the client to bias the level's figures (``loop_lag``,
    ``send_lag``), from its validity findings."""
    return list(dict.fromkeys(f.kind for f in _client_warns(level)))


def saturated_figures(level: LevelResult) -> list[str]:
    """Dotted paths of the figures a client judged saturated biases (empty when it did not):
    late stamps bias the latencies they stamp; a window's edges (a sub-second level) or an open
    loop that fell behind (``load``) bias throughput and every per-token / per-kW figure too."""
    figures = {x for f in _client_warns(level) for x in f.figures}
    if not figures:
        return []
    if "load" in figures:
        out = ["latency.*", "throughput.*"]
    else:
        out = [p for k, p in _LATENCY_PATHS.items() if k in figures]
        if "throughput" in figures:
            out.append("throughput.*")
    if figures & {"load", "efficiency"}:
        for window in ("energy", "energy_steady"):
            for b in sorted(getattr(level, window)):
                out += [f"{window}.{b}.{f}" for f in EFFICIENCY_FIELDS]
    return out


CLIENT_BIAS_TODO = ("rerun that side on a quieter host (or with more --workers) until its level carries no client "
                    "finding")


def client_bias(level: LevelResult, name: str, boundary: str | None) -> tuple[str, str] | None:
    """Whether the level's client, judged saturated (``mark_saturated``), biases the figure ``name``
    (at ``boundary`` for a figure of energy): its words and what to do, for a comparison to read as
    inconclusive (``metrics.noise.judge``); None when it does not. A figure is biased when a path of
    ``level.saturated_figures`` names it: ``*``, its own path, or its block's ``throughput.*`` /
    ``latency.*``."""
    paths = level.saturated_figures
    if not paths:
        return None
    throughput = name in type(level.throughput).model_fields
    for p in paths:
        head, _, tail = p.rpartition(".")
        block, _, rest = head.partition(".")
        at = boundary is None or block not in ("energy", "energy_steady") or rest == boundary
        if p == "*" or (tail == name and at) or (tail == "*" and ((block == "throughput" and throughput)
                                                                or (block == "latency" and name in _LATENCY_PATHS))):
            why = "; ".join(f.text for f in _client_warns(level)) or ", ".join(level.load.saturation_reasons)
            return f"load generator biased the figure ({why})", CLIENT_BIAS_TODO
    return None


def mark_saturated(level: LevelResult) -> LevelResult:
    """Judge the client by what its timing did to the figures (the level's ``client_findings``):
    ``load.saturated`` only when one of them is material (a ``warn``), with the figures it biases.
    ``load.saturation_reasons`` keeps the client's raw signals."""
    kinds = saturation_kinds(level)
    level.load.saturated = bool(kinds)
    level.saturated_figures = saturated_figures(level) if kinds else []
    level.saturation_kinds = kinds
    return level


def client_saturation_reasons(load: LoadStats, target_rate: float | None) -> list[str]:
    """Why the client itself may have biased the level (empty: it did not), from its own signals."""
    reasons = []
    # --rate inf has no schedule; under a --max-concurrency cap a send waits for a free slot by design
    if load.send_lag_ms.count and target_rate and math.isfinite(target_rate) and load.max_in_flight is None:
        limit = max(SAT_LAG_FLOOR_MS, SAT_LAG_FRACTION * 1e3 / target_rate)
        send_p99 = load.send_lag_ms.p99
        if send_p99 is not None and send_p99 > limit:
            reasons.append(f"send lag p99 {send_p99:.1f} ms > {limit:.1f} ms")
    lag = load.client_loop_lag_ms
    if lag.count >= SAT_LOOP_LAG_MIN_PROBES and lag.p99 is not None and lag.p99 > SAT_LOOP_LAG_MS:
        reasons.append(
            f"client event loop lag p99 {lag.p99:.1f} ms > {SAT_LOOP_LAG_MS:.0f} ms "
            "(arrival timestamps may be late by that much: the client waits for a CPU or is busy)"
        )
    if load.client_cpu_pct is not None and load.client_cpu_pct > SAT_CPU_PCT:
        reasons.append(f"client worker CPU {load.client_cpu_pct:.0f}% of a core > {SAT_CPU_PCT:.0f}%")
    return reasons


def _gamma_shape(arrival: str | None) -> float | None:
    """Shape K of one inter-arrival gap (Poisson 1, gamma:K K); None for a constant schedule."""
    a = (arrival or "poisson").strip().lower()
    if a == "poisson":
        return 1.0
    if a.startswith("gamma:"):
        try:
            k = float(a.split(":", 1)[1])
        except ValueError:
            return None
        return k if k > 0 else None
    return None


def rate_interval(target_rps: float, n: int, arrival: str | None,
                  coverage: float = RATE_SPREAD_COVERAGE) -> tuple[float, float] | None:
    """The central ``coverage`` interval of the rate a ``(n - 1)/span`` estimate draws from the
    arrival process at ``target_rps`` (None: a constant schedule, or fewer than 2 arrivals)."""
    k = _gamma_shape(arrival)
    if k is None or n < 2 or not target_rps > 0:
        return None
    from wattbench.metrics.trials import gamma_ppf  # no scipy at run time

    shape, scale = k * (n - 1), 1.0 / (k * target_rps)
    lo_span = gamma_ppf((1 - coverage) / 2, shape) * scale
    hi_span = gamma_ppf((1 + coverage) / 2, shape) * scale
    return (n - 1) / hi_span, (n - 1) / lo_span


def rate_finding(load: LoadStats, n: int) -> str | None:
    """A warn reason when an open loop's achieved rate is off its target beyond ``RATE_WARN_PCT``
    and beyond what the arrival process draws for ``n`` requests; None when it is within."""
    target, achieved = load.target_rate_rps, load.achieved_rate_rps
    if load.mode != "rate" or not target or achieved is None or not math.isfinite(target):
        return None  # --rate inf has no rate to reach
    if load.max_in_flight is not None and achieved < target:
        return None  # a --max-concurrency cap holds the rate down by design
    diff = 100.0 * (achieved - target) / target
    if abs(diff) <= RATE_WARN_PCT:
        return None
    iv = rate_interval(target, n, load.arrival)
    if iv is not None and iv[0] <= achieved <= iv[1]:
        return None
    spread = ("" if iv is None else
              f", outside the {RATE_SPREAD_COVERAGE:.0%} range {iv[0]:.3g}-{iv[1]:.3g} req/s that "
              f"{load.arrival or 'poisson'} arrivals draw for {n} requests")
    return (f"achieved rate {achieved:.3g} req/s is {diff:+.1f}% from the target {target:.3g} "
            f"(> {RATE_WARN_PCT:g}%{spread}): the level did not offer the load asked for")


# ------------------------------------------------------------ backlog growth (over-saturation)

@dataclass
class SaturationVerdict:
    oversaturated: bool
    slope_per_s: float | None
    t_stat: float | None
    growth: float | None  # fitted growth over the tested window (requests)
    reason: str

    def to_dict(self) -> dict[str, bool | float | str | None]:
        return {"oversaturated": self.oversaturated, "slope_per_s": self.slope_per_s, "t_stat": self.t_stat,
                "growth": self.growth, "reason": self.reason}


def is_oversaturated(times_s: Sequence[float], backlog: Sequence[float], *, min_points: int = 20,
                     min_window_s: float = 2.0, alpha: float = 0.001, min_growth: float = 5.0,
                     rel_growth: float = 0.5) -> SaturationVerdict:
    """Whether a backlog (waiting requests, or sent − completed) grows without bound.

    Tested on the last half of the timeline: a least-squares line through the backlog must rise
    with a one-sided t-test significant at ``alpha`` AND the fitted rise over that half must be at
    least ``max(min_growth, rel_growth × the mean backlog of the first half)`` requests — samples
    of a queue are autocorrelated, so significance alone would flag ordinary wander; the size test
    asks for growth that matters. Needs ``min_points`` samples over ``min_window_s`` in that half.
    A closed loop's in-flight count is capped by its concurrency and never trips this; feed it the
    server's waiting queue or an open loop's sent − completed.
    """
    t = np.asarray(times_s, dtype=float)
    y = np.asarray(backlog, dtype=float)
    if t.shape != y.shape:
        raise ValueError("times and backlog must have the same length")
    n = t.size
    half = n // 2
    tt, yy = t[half:], y[half:]
    if tt.size < min_points or (tt[-1] - tt[0]) < min_window_s:
        return SaturationVerdict(False, None, None, None, f"too little timeline ({tt.size} samples in the last half)")
    tc = tt - tt.mean()
    sxx = float(np.sum(tc * tc))
    slope = float(np.sum(tc * (yy - yy.mean())) / sxx)
    resid = yy - (yy.mean() + slope * tc)
    dof = tt.size - 2
    s2 = float(np.sum(resid * resid)) / dof
    se = math.sqrt(s2 / sxx) if s2 > 0 else 0.0
    tstat = math.inf if se == 0 and slope > 0 else (slope / se if se > 0 else 0.0)
    growth = slope * float(tt[-1] - tt[0])
    base = float(np.mean(y[:half])) if half else 0.0
    need = max(min_growth, rel_growth * base)
    crit = t_ppf(1.0 - alpha, dof)
    over = slope > 0 and tstat > crit and growth >= need
    if over:
        reason = f"backlog rising {slope:.2f}/s (t={tstat:.1f}), +{growth:.0f} over the last half"
    elif slope <= 0 or tstat <= crit:
        reason = f"no significant rise (slope {slope:.3f}/s, t={tstat:.1f})"
    else:
        reason = f"rise of {growth:.1f} is below {need:.1f}"
    return SaturationVerdict(bool(over), slope, float(tstat), growth, reason)


class BacklogGuard:
    """The level's over-saturation guard (open loop and trace replay): the backlog (requests whose
    scheduled time has passed minus those finished) sampled every ``PERIOD_NS``; once it grows
    without bound (:func:`is_oversaturated` over the samples, checked every ``CHECK_NS`` once
    ``MIN_SAMPLES`` are in), the level stops sending early and drains. Closed loops never trip it
    (their backlog is capped): build it with ``enabled=False`` for them.

    ``offsets_s``: every arrival's offset from ``t0_ns``; ``update(finished, now_ns)`` is fed the
    number of finished requests and returns the stop reason once, when the guard trips."""

    PERIOD_NS = 100_000_000
    CHECK_NS = 1_000_000_000
    MIN_SAMPLES = 40

    def __init__(self, enabled: bool, offsets_s: Sequence[float], t0_ns: int):
        self.enabled = enabled
        self.offsets = np.sort(np.asarray(list(offsets_s), dtype=float))
        self.t0_ns = t0_ns
        self.times: list[float] = []
        self.backlog: list[float] = []
        self.last_ns = 0
        self.last_check_ns = 0
        self.reason: str | None = None

    def update(self, finished: int, now_ns: int) -> str | None:
        if not self.enabled or self.reason is not None:
            return None
        if now_ns - self.last_ns < self.PERIOD_NS or now_ns < self.t0_ns:
            return None
        self.last_ns = now_ns
        elapsed = (now_ns - self.t0_ns) / 1e9
        sent = int(np.searchsorted(self.offsets, elapsed, side="right"))
        if sent >= self.offsets.size:  # everything sent: nothing left to stop
            self.enabled = False
            return None
        self.times.append(elapsed)
        self.backlog.append(float(sent - finished))
        if now_ns - self.last_check_ns >= self.CHECK_NS and len(self.times) >= self.MIN_SAMPLES:
            self.last_check_ns = now_ns
            verdict = is_oversaturated(self.times, self.backlog)
            if verdict.oversaturated:
                self.reason = f"over-saturated after {elapsed:.1f} s: {verdict.reason}"
                return self.reason
        return None
