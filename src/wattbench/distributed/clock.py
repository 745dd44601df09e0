"""Clock offsets between the driver and a node, NTP-style.

One ping: the driver reads its clock (``t0``), asks the node for its ``perf_counter_ns`` (``a``),
reads its clock again (``t1``). If the node read its clock at some instant inside ``[t0, t1]``,
``offset = a − (t0 + t1)/2`` is within ``± (t1 − t0)/2`` of the true offset (node − driver),
whatever the split of the round trip between the two directions. Of ``n`` pings the one with the
smallest round trip gives the tightest bound, so it is kept; its ``RTT/2`` is the stated
uncertainty. A timestamp ``x`` taken on the node maps to the driver's clock as ``x − offset``.

Monotonic clocks of different hosts also run at slightly different rates (tens of ppm: 50 ppm is
0.5 ms over 10 s, 180 ms over an hour); offsets are therefore measured before *and* after each
level, records are corrected with the offset interpolated at their time, and ``drift_ppm``
reports the rate difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from wattbench.core.clock import now_ns

__all__ = ["ClockOffset", "OffsetLine", "estimate_offset", "measure_offset", "drift_ppm"]

DEFAULT_PINGS = 16


@dataclass(frozen=True)
class ClockOffset:
    offset_ns: int  # node clock − driver clock
    uncertainty_ns: int  # the true offset lies within ± this (RTT / 2 of the best ping)
    rtt_ns: int
    at_driver_ns: int  # driver time of the best ping's midpoint
    pings: int

    def to_driver(self, node_ns: int) -> int:
        return node_ns - self.offset_ns

    def to_node(self, driver_ns: int) -> int:
        return driver_ns + self.offset_ns


@dataclass(frozen=True)
class OffsetLine:
    """The offset as a linear function of time between two estimates (drift corrected).

    With one estimate (``after`` None) it is that constant offset. The uncertainty is the larger
    of the two estimates' (the interpolation between two bounded values stays bounded by the
    larger bound)."""

    before: ClockOffset
    after: ClockOffset | None = None

    @property
    def uncertainty_ns(self) -> int:
        return max(self.before.uncertainty_ns, self.after.uncertainty_ns if self.after else 0)

    def offset_at(self, driver_ns: int) -> float:
        b, a = self.before, self.after
        if a is None or a.at_driver_ns == b.at_driver_ns:
            return float(b.offset_ns)
        slope = (a.offset_ns - b.offset_ns) / (a.at_driver_ns - b.at_driver_ns)
        return b.offset_ns + slope * (driver_ns - b.at_driver_ns)

    def to_driver(self, node_ns: int) -> int:
        # node = d + b + s·(d − tb)  =>  d = (node − b + s·tb) / (1 + s)
        b, a = self.before, self.after
        if a is None or a.at_driver_ns == b.at_driver_ns:
            return node_ns - b.offset_ns
        s = (a.offset_ns - b.offset_ns) / (a.at_driver_ns - b.at_driver_ns)
        rel = node_ns - b.offset_ns - b.at_driver_ns  # = (d − tb)·(1 + s)
        return b.at_driver_ns + int(round(rel / (1.0 + s)))


def estimate_offset(samples: Sequence[tuple[int, int, int]]) -> ClockOffset:
    """``samples``: ``(t0, node_time, t1)`` per ping, driver times ``t0 <= t1``."""
    good = [(t0, a, t1) for t0, a, t1 in samples if t1 >= t0]
    if not good:
        raise ValueError("no usable ping (every t1 < t0)")
    t0, a, t1 = min(good, key=lambda s: s[2] - s[0])
    mid2 = t0 + t1  # twice the midpoint, kept in integers
    offset = a - mid2 // 2
    rtt = t1 - t0
    return ClockOffset(offset_ns=offset, uncertainty_ns=(rtt + 1) // 2, rtt_ns=rtt, at_driver_ns=mid2 // 2,
                       pings=len(good))


def measure_offset(remote_clock: Callable[[], int], n: int = DEFAULT_PINGS,
                   clock: Callable[[], int] = now_ns) -> ClockOffset:
    """Ping ``remote_clock`` (a blocking call returning the node's clock in ns) ``n`` times."""
    if n < 1:
        raise ValueError("at least one ping")
    remote_clock()  # the first call pays for connection set-up and imports: not a sample
    samples = []
    for _ in range(n):
        t0 = clock()
        a = remote_clock()
        t1 = clock()
        samples.append((t0, a, t1))
    return estimate_offset(samples)


def drift_ppm(before: ClockOffset, after: ClockOffset) -> float | None:
    """Relative rate difference of the two clocks between two estimates (parts per million)."""
    dt = after.at_driver_ns - before.at_driver_ns
    if dt <= 0:
        return None
    return (after.offset_ns - before.offset_ns) / dt * 1e6
