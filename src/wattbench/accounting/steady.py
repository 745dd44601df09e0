"""Steady-state and full measurement windows from request timestamps.

Input: ``(sent_ns, end_ns)`` of the *measured* (non-warm-up) requests; ``end_ns`` may be ``None``
for a request that never ended (it then stays in flight and never completes).

* **closed loop** (``mode="concurrency"``): from the first moment the number of requests in flight
  reaches ``target_concurrency`` to the first completion strictly after the last send (the drain
  begins there: from then on the server sees fewer than the target). A completion at the same
  nanosecond as the last send is the one that triggered that send, not the drain.
* **open loop** (``mode="rate"`` or ``"trace"``): from the first send to the first completion
  strictly after the last send.

At equal timestamps a completion is counted before a send (a freed slot refilled at the same
nanosecond never lowers the count). Returns ``None`` when the window is empty or the target is
never reached.
"""

from __future__ import annotations

from collections.abc import Iterable

from wattbench.results.schema import Window


def full_window(requests: Iterable[tuple[int, int | None]]) -> Window | None:
    """First send to last end."""
    reqs = list(requests)
    ends = [e for _, e in reqs if e is not None]
    if not reqs or not ends:
        return None
    s, e = min(s for s, _ in reqs), max(ends)
    return Window(start_ns=s, end_ns=e, duration_s=(e - s) / 1e9, kind="full") if e > s else None


def steady_window(
    requests: Iterable[tuple[int, int | None]],
    mode: str,
    target_concurrency: int | None = None,
) -> Window | None:
    reqs = list(requests)
    if not reqs:
        return None
    last_send = max(s for s, _ in reqs)
    drains = [e for _, e in reqs if e is not None and e > last_send]
    if not drains:
        return None
    end = min(drains)
    if mode == "concurrency":
        if not target_concurrency or target_concurrency < 1:
            return None
        events = [(s, 1) for s, _ in reqs] + [(e, 0) for _, e in reqs if e is not None]
        events.sort()  # at equal time: completion (0) before send (1)
        inflight = 0
        start = None
        for t, kind in events:
            inflight += 1 if kind == 1 else -1
            if inflight >= target_concurrency:
                start = t
                break
        if start is None:
            return None
    else:
        start = min(s for s, _ in reqs)
    if end <= start:
        return None
    return Window(start_ns=start, end_ns=end, duration_s=(end - start) / 1e9, kind="steady")
