"""The target-liveness rule (load/liveness.py) on scripted request outcomes."""

from __future__ import annotations

from wattbench.load.liveness import FAILURES_DOWN, REFUSALS_DOWN, LivenessWatch
from wattbench.core.schema import RequestRecord

S = 1_000_000_000


def rec(i, ok=True, error=None, t=None):
    t = i * S // 10 if t is None else t
    return RequestRecord(id=i, level=0, sent_ns=t, end_ns=t + S // 20, ok=ok, error=error)


def test_refusals_in_a_row_trip_and_say_who_and_when():
    w = LivenessWatch("http://127.0.0.1:9/v1")
    for i in range(10):
        assert w.update(rec(i)) is None
    assert w.update(rec(10, False, "disconnect")) is None  # the in-flight stream dies
    for k in range(REFUSALS_DOWN - 1):
        assert w.update(rec(11 + k, False, "connect")) is None
    down = w.update(rec(11 + REFUSALS_DOWN, False, "connect"))
    assert down is not None and down.refusals == REFUSALS_DOWN and down.failures == REFUSALS_DOWN + 1
    text = down.text(0)
    assert text.startswith("the target http://127.0.0.1:9/v1 stopped answering 1.1 s into the level")
    assert "last answer 0.9 s into the level" in text  # request 9 ended at 0.9 + 0.05 s (0.9499…)
    assert w.update(rec(99, False, "connect")) is None  # said once


def test_a_success_or_an_answering_error_resets_nothing_it_should_not():
    w = LivenessWatch("t")
    for k in range(REFUSALS_DOWN - 1):
        w.update(rec(k, False, "connect"))
    w.update(rec(50))  # an answer: the streak starts again
    for k in range(REFUSALS_DOWN - 1):
        assert w.update(rec(60 + k, False, "connect")) is None
    for k in range(100):  # HTTP errors and stalls come from a server that answers: never "down"
        assert w.update(rec(100 + k, False, "http_500" if k % 2 else "stall")) is None


def test_dropped_streams_trip_only_when_every_one_fails():
    w = LivenessWatch("t")
    for k in range(FAILURES_DOWN - 1):
        assert w.update(rec(k, False, "disconnect")) is None
    assert w.update(rec(FAILURES_DOWN, False, "disconnect")) is not None
    live = LivenessWatch("t")  # a 30% drop rate with successes between never trips
    for k in range(3000):
        assert live.update(rec(k, ok=(k % 10) >= 3, error=None if (k % 10) >= 3 else "disconnect")) is None
