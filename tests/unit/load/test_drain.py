"""``load.level.await_drained``: wait until the server's in-flight count is back to its baseline,
bounded; a scripted count and a scripted clock (no server, no sleeping)."""

from __future__ import annotations

import pytest

from wattbench.load.level import await_drained


class Script:
    """Counts read in turn (the last repeats); a clock advanced by ``sleep``."""

    def __init__(self, counts):
        self.counts = list(counts)
        self.t = 0.0
        self.reads = 0

    def read(self):
        self.reads += 1
        return self.counts.pop(0) if len(self.counts) > 1 else self.counts[0]

    def clock(self):
        return self.t

    def sleep(self, s):
        self.t += s


def _wait(s: Script, **kw):
    kw.setdefault("limit_s", 10.0)
    return await_drained(s.read, clock=s.clock, sleep=s.sleep, poll_s=0.5, **kw)


def test_it_waits_until_the_server_is_back_to_its_baseline():
    s = Script([64, 40, 12, 0])
    d = _wait(s)
    assert d.drained is True and d.in_flight == 0 and d.waited_s == pytest.approx(1.5, rel=1e-9) and s.reads == 4
    s = Script([5, 3])  # a server that serves 3 of someone else's requests: drained at 3
    assert _wait(s, baseline=3.0).drained is True


def test_a_server_that_does_not_drain_is_waited_for_no_longer_than_the_limit():
    s = Script([64, 64, 63])
    d = _wait(s, limit_s=2.0)
    assert d.drained is False and d.in_flight == 63 and d.waited_s == pytest.approx(2.0, rel=1e-9)


def test_an_idle_server_costs_one_read_and_a_server_without_a_count_none():
    s = Script([0])
    d = _wait(s)
    assert d.drained is True and d.waited_s == pytest.approx(0.0, abs=1e-12) and s.reads == 1
    d = _wait(Script([None]))
    assert d.drained is None and d.in_flight is None


def test_a_failed_read_keeps_the_last_count_until_the_next():
    s = Script([10, None, None, 0])
    d = _wait(s)
    assert d.drained is True and s.reads == 4


def test_a_count_that_stops_falling_ends_the_wait_early_and_says_so():
    """A server whose count never comes down (a leaked request) costs ``no_progress_s`` before each
    level, not the whole limit: the wait ends once the count has not fallen for that long."""
    s = Script([5, 4, 3] + [3] * 200)
    d = _wait(s, limit_s=120.0, no_progress_s=10.0)
    assert d.drained is False and d.stuck is True and d.in_flight == 3
    assert d.waited_s == pytest.approx(1.0 + 10.0, abs=0.5 + 1e-9)  # last fall at 1.0 s, then 10 s
    s = Script([4] * 200)  # never falls at all
    d = _wait(s, limit_s=120.0, no_progress_s=10.0)
    assert d.stuck is True and d.waited_s == pytest.approx(10.0, abs=0.5 + 1e-9)


def test_a_slow_but_steady_drain_is_waited_for():
    """A count that falls every 9.5 s (each fall inside ``no_progress_s`` of the last) is draining: waited
    for until it is back to the baseline."""
    counts = []
    for n in (3, 2, 1):
        counts += [n] * 19  # 19 polls of 0.5 s = 9.5 s at each count
    s = Script(counts + [0])
    d = _wait(s, limit_s=120.0, no_progress_s=10.0)
    assert d.drained is True and d.stuck is False and d.waited_s == pytest.approx(28.5, rel=1e-9)
