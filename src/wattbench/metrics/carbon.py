"""Carbon arithmetic: grams of CO2-equivalent from energy and a grid's carbon intensity.

Pure functions, no I/O (the one loader of intensity files is ``metrics/carbon_series.py``). Each
returns ``None`` when its figure is not computable, like ``metrics/efficiency.py``.

Identities (E in J, I in gCO2e/kWh, N tokens)::

    carbon_g                      = E / 3.6e6 · pue · I
    carbon_g per 1e6 tokens       = carbon_g / N · 1e6
    carbon_g per request          = carbon_g / requests

``pue`` is applied exactly as for cost (``metrics/efficiency.cost_per_million_tokens``): each
boundary's carbon is what the electricity for that part of the machine emitted at the building's
meter; pass 1.0 for the ``facility`` boundary, which already includes it.

**A time series of intensity** (:class:`IntensitySeries`): points ``(wall time, gCO2e/kWh)`` as an
electricity-map export gives them. A point's value holds from its time until the next point; the
last point holds for one typical step (the median spacing; for one point, forever). A run's window on
the monotonic clock is placed on the wall clock through the result's clock anchor
(``wall = anchor_wall + (mono − anchor_mono)``) and cut where the intensity changes; the window's
intensity is **energy-weighted**: ``Σ E_k · I_k / Σ E_k`` over the pieces, with ``E_k`` the
boundary's energy measured in piece ``k`` (so a change mid-run weighs each side by the energy
used under it, not by its time). A window that leaves the series' span has no intensity (None with
the reason).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence, TypedDict
import datetime as _dt

J_PER_KWH = 3.6e6
G_PER_TONNE = 1e6
SECONDS_PER_YEAR = 365.0 * 24 * 3600


def carbon_g(energy_j: float | None, intensity_g_per_kwh: float | None, pue: float = 1.0) -> float | None:
    """Grams CO2e of ``energy_j`` at ``intensity_g_per_kwh`` (× ``pue`` for what the building draws)."""
    if energy_j is None or intensity_g_per_kwh is None or intensity_g_per_kwh < 0 or energy_j < 0:
        return None
    return energy_j / J_PER_KWH * pue * intensity_g_per_kwh


def carbon_g_per_million_tokens(energy_j: float | None, tokens: float | None,
                                intensity_g_per_kwh: float | None, pue: float = 1.0) -> float | None:
    g = carbon_g(energy_j, intensity_g_per_kwh, pue)
    if g is None or tokens is None or not tokens > 0:
        return None
    return g / tokens * 1e6


def carbon_g_per_request(energy_j: float | None, requests: int | None, intensity_g_per_kwh: float | None,
                         pue: float = 1.0) -> float | None:
    g = carbon_g(energy_j, intensity_g_per_kwh, pue)
    if g is None or requests is None or requests <= 0:
        return None
    return g / requests


def annual_tonnes(avg_power_w: float | None, intensity_g_per_kwh: float | None, pue: float = 1.0,
                  utilization: float = 1.0) -> float | None:
    """Tonnes CO2e a year of a load drawing ``avg_power_w`` for ``utilization`` of the year."""
    if avg_power_w is None or avg_power_w < 0:
        return None
    g = carbon_g(avg_power_w * SECONDS_PER_YEAR * utilization, intensity_g_per_kwh, pue)
    return None if g is None else g / G_PER_TONNE


class _IntensitySource(TypedDict):
    source: str  # always given (the part of ``IntensityDescription`` that is required)


class IntensityDescription(_IntensitySource, total=False):
    """``IntensitySeries.describe()``: the fields of the result's ``CarbonIntensity`` it fills (a
    constant gives ``g_per_kwh``, a series the rest); ``source`` always."""

    g_per_kwh: float
    points: int
    start_wall_s: float
    end_wall_s: float
    min_g_per_kwh: float
    max_g_per_kwh: float


@dataclass(frozen=True)
class IntensitySeries:
    """Carbon intensity over wall time: ``wall_s`` ascending (s since the epoch), ``g_per_kwh``."""

    wall_s: tuple[float, ...]
    g_per_kwh: tuple[float, ...]
    source: str = "constant"

    @classmethod
    def constant(cls, g_per_kwh: float) -> "IntensitySeries":
        return cls((), (float(g_per_kwh),), "constant")

    @property
    def is_constant(self) -> bool:
        return not self.wall_s

    def span_s(self) -> tuple[float, float]:
        """Covered wall span ``[first point, last point + one typical step)``."""
        if self.is_constant:
            return (-math.inf, math.inf)
        t = self.wall_s
        if len(t) == 1:
            return (t[0], math.inf)
        steps = sorted(b - a for a, b in zip(t, t[1:]))
        return (t[0], t[-1] + steps[len(steps) // 2])

    def value_at(self, wall_s: float) -> float | None:
        if self.is_constant:
            return self.g_per_kwh[0]
        lo, hi = self.span_s()
        if not lo <= wall_s < hi:
            return None
        k = _index_at(self.wall_s, wall_s)
        return self.g_per_kwh[k]

    def mean_g_per_kwh(self) -> float:
        """Time-weighted mean over the covered span (a planning figure, not a window's)."""
        if self.is_constant or len(self.wall_s) == 1:
            return self.g_per_kwh[0]
        lo, hi = self.span_s()
        ends = list(self.wall_s[1:]) + [hi]
        return sum(g * (b - a) for g, a, b in zip(self.g_per_kwh, self.wall_s, ends)) / (hi - lo)

    def describe(self) -> IntensityDescription:
        if self.is_constant:
            return {"source": "constant", "g_per_kwh": self.g_per_kwh[0]}
        lo, hi = self.span_s()
        return {"source": self.source, "points": len(self.wall_s), "start_wall_s": lo, "end_wall_s": hi,
                "min_g_per_kwh": min(self.g_per_kwh), "max_g_per_kwh": max(self.g_per_kwh)}


def _index_at(times: Sequence[float], t: float) -> int:
    lo, hi = 0, len(times)
    while lo < hi:  # last index with times[i] <= t
        mid = (lo + hi) // 2
        if times[mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    return max(0, lo - 1)


def mono_to_wall_s(mono_ns: int, anchor_wall_ns: int, anchor_mono_ns: int) -> float:
    return (anchor_wall_ns + (mono_ns - anchor_mono_ns)) / 1e9


def window_intensity(series: IntensitySeries, t0_ns: int, t1_ns: int, anchor_wall_ns: int, anchor_mono_ns: int,
                     energy_fn: Callable[[int, int], float | None]) -> tuple[float | None, str | None]:
    """Energy-weighted intensity (g/kWh) over ``[t0_ns, t1_ns]`` of the run's monotonic clock.

    ``energy_fn(a_ns, b_ns)`` gives the boundary's energy (J) over a piece of the window. Returns
    ``(g_per_kwh, None)``, or ``(None, reason)`` when the series does not cover the window or no
    energy was measured in it. A constant intensity needs no energy.
    """
    if series.is_constant:
        return series.g_per_kwh[0], None
    if t1_ns <= t0_ns:
        return None, "the window is empty"
    off = anchor_wall_ns - anchor_mono_ns
    w0, w1 = (t0_ns + off) / 1e9, (t1_ns + off) / 1e9
    lo, hi = series.span_s()
    if w0 < lo or w1 > hi:
        return None, (f"the carbon-intensity series covers {_iso(lo)} to {_iso(hi)}, the window runs "
                      f"{_iso(w0)} to {_iso(w1)}")
    cuts = [t0_ns] + [int(round(t * 1e9)) - off for t in series.wall_s if w0 < t < w1] + [t1_ns]
    num = den = 0.0
    for a, b in zip(cuts, cuts[1:]):
        if b <= a:
            continue
        e = energy_fn(a, b)
        if e is None or not math.isfinite(e):
            return None, "the energy of part of the window is unknown, so its intensity cannot be weighted"
        g = series.value_at((a + off) / 1e9)
        assert g is not None  # every piece starts inside the span checked above
        num += max(e, 0.0) * g
        den += max(e, 0.0)
    if den <= 0:
        return None, "no energy was measured in the window to weight the intensity by"
    return num / den, None


def _iso(wall_s: float) -> str:
    if not math.isfinite(wall_s):
        return "open end"

    return _dt.datetime.fromtimestamp(wall_s, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
