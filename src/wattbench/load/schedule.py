"""Arrival schedules for open-loop load, as offsets (s) from the start of a level.

The load generator sleeps until ``t0 + offset`` on the monotonic clock for every arrival (absolute
times: a late send does not shift the ones after it). Inter-arrival gaps are drawn from:

- ``poisson``: exponential gaps with mean ``1/rate`` (coefficient of variation 1);
- ``constant``: every ``1/rate`` seconds (CV 0);
- ``gamma:K``: gamma gaps with shape ``K`` and mean ``1/rate`` (CV ``1/sqrt(K)``; K=1 is Poisson,
  K<1 burstier, K>1 more regular).

Schedules are seeded (numpy ``default_rng(seed)``) and reproducible: the same rate, kind, seed and
bound give the same offsets on every machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from wattbench.core.errors import UserError

__all__ = ["Arrival", "parse_arrival", "arrival_times", "iter_arrival_times"]


@dataclass(frozen=True)
class Arrival:
    kind: str  # poisson | constant | gamma
    shape: float = 1.0  # gamma shape K

    @property
    def cv(self) -> float:
        """Coefficient of variation of the gaps."""
        if self.kind == "constant":
            return 0.0
        return 1.0 / math.sqrt(self.shape)


def parse_arrival(text: str) -> Arrival:
    s = (text or "").strip().lower()
    if s == "poisson":
        return Arrival("poisson", 1.0)
    if s == "constant":
        return Arrival("constant", math.inf)
    if s.startswith("gamma:"):
        try:
            k = float(s.split(":", 1)[1])
        except ValueError:
            k = float("nan")
        if not (k > 0 and math.isfinite(k)):
            raise UserError(
                f"--arrival {text!r}: the gamma shape K must be a positive number, e.g. gamma:0.5"
            )
        return Arrival("gamma", k)
    raise UserError(f"--arrival {text!r} is not one of poisson, constant, gamma:K (e.g. gamma:2)")


INF_NEEDS_N = "--rate inf sends every request at once: give the number with --num-requests"


def _check_rate(rate_rps: float) -> None:
    """A positive number of requests/s, or ``inf``: every request at once (``vllm bench serve``'s
    default)."""
    if not (isinstance(rate_rps, (int, float)) and not math.isnan(rate_rps) and rate_rps > 0):
        raise UserError(f"--rate must be a positive number of requests/s (or inf), got {rate_rps!r}")


def iter_arrival_times(rate_rps: float, kind: str = "poisson", seed: int = 0) -> Iterator[float]:
    """Endless arrival offsets (s). The first arrival is at 0 (the level starts with a request)."""
    _check_rate(rate_rps)
    arr = parse_arrival(kind)
    if math.isinf(rate_rps):  # all at once
        while True:
            yield 0.0
    mean = 1.0 / rate_rps
    rng = np.random.default_rng(seed)
    t = 0.0
    block = 1024
    while True:
        if arr.kind == "constant":
            gaps = np.full(block, mean)
        elif arr.kind == "poisson":
            gaps = rng.exponential(mean, block)
        else:
            gaps = rng.gamma(arr.shape, mean / arr.shape, block)
        for g in gaps.tolist():
            yield t
            t += g


def arrival_times(
    rate_rps: float,
    n: int | None = None,
    duration_s: float | None = None,
    kind: str = "poisson",
    seed: int = 0,
) -> list[float]:
    """Arrival offsets (s): the first ``n``, and/or those before ``duration_s`` (both: whichever
    bound comes first)."""
    if n is None and duration_s is None:
        raise UserError("an arrival schedule needs a bound: a number of requests or a duration")
    if n is None and math.isinf(rate_rps):
        raise UserError(INF_NEEDS_N)
    if n is not None and n < 0:
        raise UserError(f"number of requests must be >= 0, got {n}")
    if duration_s is not None and not duration_s > 0:
        raise UserError(f"--duration must be positive, got {duration_s!r}")
    out: list[float] = []
    for t in iter_arrival_times(rate_rps, kind, seed):
        if n is not None and len(out) >= n:
            break
        if duration_s is not None and t >= duration_s:
            break
        out.append(t)
    return out
