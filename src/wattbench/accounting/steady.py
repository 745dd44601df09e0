"""Steady-state and full measurement windows from request timestamps — the one implementation,
used by the level runner (``load/level.py``), and so by the runner, the multi-target and the Ray
(``distributed/``) paths alike — and the default level size that lets a steady state be long
enough to earn a ``valid`` verdict (``docs/accounting.md`` §1).

Windows
-------
Input: ``(sent_ns, end_ns)`` of **every** stream of the level, warm-up ones included (they load
the server as much as measured ones), with ``end_ns`` the request's end (last content chunk, else
stream close; ``metrics.latency.request_end_ns``) or ``None`` for a request that never ended (it
then stays in flight). ``start_ns`` is the full window's start (the first measured send): the
steady window never starts before it (warm-up is not measured).

* **closed loop** (``mode="concurrency"``): from the later of ``start_ns`` and the first moment
  the number of requests in flight reaches ``target_concurrency`` to the first completion
  strictly after the last send that left ``target_concurrency`` in flight (the drain begins
  there: from then on the server sees fewer than the target). That is the last send itself
  unless the requests ran out mid-step: a server that ends its streams together (one batching
  step) frees all of them at once, and when fewer requests are left than streams (100 requests
  on 8 streams: 4 in the last step) those last few run alone — that is drain, not the load
  asked (before this rule, such a tail of one request's lifetime at 4 of 8 read as a client
  that lost its streams). A completion at the same nanosecond as that send is the one that triggered it, not
  the drain.
* **open loop** (``mode="rate"`` or ``"trace"``): from ``start_ns`` (default: the first send) to
  the first completion strictly after the last send.

At equal timestamps a completion is counted before a send (a freed slot refilled at the same
nanosecond never lowers the count). Returns ``None`` when the window is empty or the target is
never reached.

Minimum steady state (the verdict is in ``accounting.validity.steady_findings``)
-------------------------------------------------------------------------------
:func:`min_steady_s`: ``max(energy term, STEADY_MIN_E2E × the level's median E2E)``. Two median
request lifetimes mean every stream turned over at least twice inside the window, so the batch
holds the level's mix of prefills and decodes rather than one cohort. The energy term is set from
the accounting's measured edge error, not from a count of meter updates: ``STEADY_MIN_ENERGY_S``
is the shortest window whose energy stays within ``findings.EFFICIENCY_MATERIAL_PCT`` (1 %) of an
independent read of the counter (docs/accounting.md §1, "The energy term": on the H200, windows
cut every 1 s across loaded runs had a p95 absolute error of 1.26 % at 2 s, 0.58 % at 5 s, 0.25 %
at 10 s, 0.021 % at 20 s). A counter whose edges are split by a finer power channel records that
resolution as its period (NVML: 0.1 s, read every 0.9 s; the closing reads make the split possible
at a window's end), so 5 s applies; a meter slower than ``STEADY_MIN_ENERGY_S / STEADY_MIN_PERIODS``
(IPMI's 1 s averages, linear edges) needs ``STEADY_MIN_PERIODS`` of its updates instead. The term applies to
measured boundaries that contain the work only (:func:`steady_energy_periods`): a rail (the board's
1 s memory power field) is a part, a declared constant has no edge error, and an estimate's ±50 %
dwarfs one.
The steady window must also be at least ``STEADY_MIN_SHARE`` of the full window.

Default level size
------------------
:func:`default_num_requests` (a level given neither ``--num-requests`` nor ``--duration``):
closed loop, ``concurrency × rounds`` requests (at least 32), where a round is one request per
stream and ``rounds = max(4, ceil(1.5 × min_steady_s / e2e) + 2)``: half again the minimum steady
state, plus two rounds — the drain (about one E2E at falling concurrency after the last send) and
one for streams desynchronised by unequal lengths. Measured on the scripted server with a
declared sensor (the worst case: power does not fall in the drain) and output lengths ±25%: steady
vs full J/token −10% at 5 rounds, −11% at 6 (an extra round does not buy a measurable margin), inside
the 15% tolerance of ``validity.steady_findings``. Open loop, ``rate × max(10 s, 1.5 × min_steady_s
+ 2 × e2e)`` requests (at least 32). ``e2e`` is the median E2E measured at the previous level (E2E
grows with load, so this errs towards more requests); before any level is measured, 4 rounds /
10 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from wattbench.core.schema import BoundaryEnergy, Window
from wattbench.accounting.boundaries import contains_work

NO_END = -1  # an end stamp that is missing (the request never ended); RecordSet's NONE

# The energy term of the minimum steady state (module docstring; docs/accounting.md §1): the 5 s
# windows of benches/gpu/window_error.py stayed within 0.58 % (p95) of an independent counter read
# on the H200, under the 1 % materiality bound; 2 s windows did not (1.26 %). It holds at run time
# because every window's end gets a closing read (telemetry/sampler.await_reads_after).
STEADY_MIN_ENERGY_S = 5.0
STEADY_MIN_PERIODS = 10.0  # update periods of a meter slower than STEADY_MIN_ENERGY_S / 10 (linear edges)
STEADY_MIN_E2E = 2.0  # median request lifetimes
STEADY_MIN_SHARE = 0.5  # of the full window
SIZE_MARGIN = 1.5  # default sizes aim at this multiple of the minimum steady state
MIN_ROUNDS = 4
EXTRA_ROUNDS = 2  # the drain, desynchronisation
MIN_OPEN_S = 10.0
MIN_REQUESTS = 32


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
    *,
    start_ns: int | None = None,
) -> Window | None:
    """The steady-state window (rule in the module docstring) of ``(sent_ns, end_ns)`` pairs."""
    reqs = list(requests)
    sent = np.fromiter((s for s, _ in reqs), dtype=np.int64, count=len(reqs))
    end = np.fromiter((NO_END if e is None else e for _, e in reqs), dtype=np.int64, count=len(reqs))
    return steady_window_ns(sent, end, mode, target_concurrency, start_ns=start_ns)


def steady_window_ns(
    sent_ns: np.ndarray,
    end_ns: np.ndarray,
    mode: str,
    target_concurrency: int | None = None,
    *,
    start_ns: int | None = None,
) -> Window | None:
    """``steady_window`` over columns: ``sent_ns`` and ``end_ns`` (int64, ``NO_END`` = -1 for a
    request that never ended), in any order. Vectorised: no Python object per request."""
    sent = np.asarray(sent_ns, dtype=np.int64)
    end = np.asarray(end_ns, dtype=np.int64)
    if sent.size == 0:
        return None
    last_send = int(sent.max())
    ended = end[end != NO_END]
    first = int(sent.min()) if start_ns is None else start_ns
    if mode == "concurrency":
        if not target_concurrency or target_concurrency < 1:
            return None
        # Only a send raises the count, so the target is first reached at a send: after the k-th
        # send in time order (0-based; equal stamps in any order) the count is k + 1 minus the
        # completions at or before it (a completion at the same nanosecond comes first).
        sends = np.sort(sent)
        ends = np.sort(ended)
        inflight = np.arange(1, sends.size + 1, dtype=np.int64)
        inflight -= np.searchsorted(ends, sends, side="right")
        hit = np.flatnonzero(inflight >= target_concurrency)
        if hit.size == 0:
            return None
        start = max(int(sends[hit[0]]), first)
        last_send = int(sends[hit[-1]])  # the last send that left the target in flight
    else:
        start = first
    drains = ended[ended > last_send]
    if drains.size == 0:
        return None
    stop = int(drains.min())
    if stop <= start:
        return None
    return Window(start_ns=start, end_ns=stop, duration_s=(stop - start) / 1e9, kind="steady")


def steady_energy_periods(energies: Iterable[BoundaryEnergy]) -> float | None:
    """The update period that sets the energy term of the minimum steady state: the largest among
    the measured boundaries of ``energies`` (``BoundaryEnergy``s) that contain the devices doing the
    work (``boundaries.contains_work``: not a rail such as the board's memory power, not the host of
    a GPU server; declared constants and estimates left out: module docstring), 0.0 when they
    declare none; ``None`` when there is no such boundary (the minimum is then the E2E term alone)."""
    energies = list(energies)
    names = [e.boundary for e in energies]
    periods = [e.update_period_s or 0.0 for e in energies
               if e.label == "measured" and contains_work(e.boundary, names) and e.energy_j is not None]
    return max(periods) if periods else None


def min_steady_s(update_period_s: float | None, e2e_s: float | None) -> float:
    """The shortest steady state that earns ``valid`` (module docstring). ``update_period_s``: from
    :func:`steady_energy_periods` (``None``: no measured whole boundary, no energy term); 0 when
    neither is known."""
    energy = 0.0 if update_period_s is None else max(STEADY_MIN_ENERGY_S, STEADY_MIN_PERIODS * update_period_s)
    return max(energy, STEADY_MIN_E2E * (e2e_s or 0.0))


def default_num_requests(mode: str, value: float, e2e_s: float | None = None,
                         update_period_s: float | None = None) -> int:
    """Requests for a level given neither ``--num-requests`` nor ``--duration`` (module docstring)."""
    need_s = SIZE_MARGIN * min_steady_s(update_period_s, e2e_s)
    if mode == "concurrency":
        rounds = MIN_ROUNDS
        if e2e_s and e2e_s > 0:
            rounds = max(MIN_ROUNDS, _ceil(need_s / e2e_s) + EXTRA_ROUNDS)
        return max(MIN_REQUESTS, int(value) * rounds)
    span_s = max(MIN_OPEN_S, need_s + 2 * (e2e_s or 0.0))
    return max(MIN_REQUESTS, _ceil(value * span_s))


def _ceil(x: float) -> int:
    """``ceil`` of a ratio that is whole up to floating-point rounding (1.5 × 0.2 / 0.1 is
    3.0000000000000004): a round is not added for the last bit of a division."""
    return math.ceil(x - 1e-9 * max(1.0, abs(x)))
