"""What a saturated load generator does to a level's figures, and marking them.

``load/level.py`` decides *whether* the client was the bottleneck (``LoadStats.saturated`` with
reasons: send-lag p99 above ``max(5 ms, 10% of the mean inter-arrival)``, achieved rate below 95%
of the target, a worker above 90% of a core, the event loop's lag p99 above 2 ms) and accounting
turns that into a ``warn``. This module says *which figures* it biases, so reports can mark them:

- a busy client (CPU) stamps arrivals late and may cap the request rate: latency and throughput;
- a client whose event loop waited (``loop_lag``: its own work, or other processes holding the
  CPUs, as on a shared host) stamps arrivals late by up to that lag even at low CPU: latency
  first (TTFT most: ITL mostly telescopes), throughput through the request end times;
- an open loop that fell behind (rate, send lag) offered less load than its label says: every
  load-dependent figure describes a lighter load than the one named.

Either way the level's latency statistics, throughput and the per-token / per-kW efficiency
figures at every boundary (full and steady window) are marked. Energy and average power stay
unmarked: they are measured correctly, for whatever load was offered.

``mark_saturated(level)`` writes ``level.extra["saturated_figures"]`` (dotted paths into the
level, ``*`` for "every key") and ``level.extra["saturation_kinds"]`` (``cpu``, ``rate``,
``send_lag``, ``loop_lag``); nothing when the level was not saturated.
"""

from __future__ import annotations

from wattbench.results.schema import LevelResult, LoadStats

__all__ = ["EFFICIENCY_FIELDS", "saturation_kinds", "saturated_figures", "mark_saturated"]

EFFICIENCY_FIELDS = ("output_tokens_per_s_per_kw", "j_per_output_token", "j_per_token", "tokens_per_kwh",
                     "output_tokens_per_kwh", "cost_per_million_output_tokens")


def saturation_kinds(load: LoadStats) -> list[str]:
    """Which of the saturation guard's tests fired (the thresholds are level.py's)."""
    from wattbench.load.level import (
        SAT_CPU_PCT,
        SAT_LAG_FLOOR_MS,
        SAT_LAG_FRACTION,
        SAT_LOOP_LAG_MIN_PROBES,
        SAT_LOOP_LAG_MS,
        SAT_RATE_FRACTION,
    )

    if not load.saturated:
        return []
    kinds = []
    if load.client_cpu_pct is not None and load.client_cpu_pct > SAT_CPU_PCT:
        kinds.append("cpu")
    target = load.target_rate_rps
    if load.mode != "concurrency" and target and load.achieved_rate_rps is not None \
            and load.achieved_rate_rps < SAT_RATE_FRACTION * target:
        kinds.append("rate")
    if target and load.send_lag_ms.count and load.send_lag_ms.p99 is not None \
            and load.send_lag_ms.p99 > max(SAT_LAG_FLOOR_MS, SAT_LAG_FRACTION * 1e3 / target):
        kinds.append("send_lag")
    lag = load.client_loop_lag_ms
    if lag.count >= SAT_LOOP_LAG_MIN_PROBES and lag.p99 is not None and lag.p99 > SAT_LOOP_LAG_MS:
        kinds.append("loop_lag")
    return kinds or ["unspecified"]


def saturated_figures(level: LevelResult) -> list[str]:
    """Dotted paths of the figures a saturated client biases (empty when it was not saturated)."""
    if not level.load.saturated:
        return []
    out = ["latency.*", "throughput.*"]
    for window in ("energy", "energy_steady"):
        for b in sorted(getattr(level, window)):
            out += [f"{window}.{b}.{f}" for f in EFFICIENCY_FIELDS]
    return out


def mark_saturated(level: LevelResult) -> LevelResult:
    if level.load.saturated:
        level.extra["saturated_figures"] = saturated_figures(level)
        level.extra["saturation_kinds"] = saturation_kinds(level.load)
    return level
