import pytest

from wattbench.accounting import full_window, steady_window


def test_closed_loop_from_target_reached_to_first_drain_completion():
    reqs = [(0, 10), (1, 11), (2, 12), (10, 20), (11, 21), (12, 22)]
    w = steady_window(reqs, "concurrency", 3)
    assert (w.start_ns, w.end_ns, w.kind) == (2, 20, "steady")
    assert w.duration_s == pytest.approx(18e-9)


def test_closed_loop_refill_at_same_instant_keeps_target():
    # a slot freed and refilled at the same ns never lowers the count
    reqs = [(0, 5), (0, 9), (5, 30), (9, 31)]
    w = steady_window(reqs, "concurrency", 2)
    assert (w.start_ns, w.end_ns) == (0, 30)


def test_closed_loop_never_reaching_target():
    assert steady_window([(0, 5), (6, 10)], "concurrency", 2) is None
    assert steady_window([(0, 5)], "concurrency", None) is None


def test_open_loop():
    reqs = [(0, 300), (100, 250), (200, 350), (300, 500)]
    w = steady_window(reqs, "rate")
    assert (w.start_ns, w.end_ns) == (0, 350)


def test_unfinished_requests_stay_in_flight():
    reqs = [(0, None), (5, 20), (8, 30)]
    w = steady_window(reqs, "concurrency", 3)
    assert (w.start_ns, w.end_ns) == (8, 20)
    assert full_window(reqs).end_ns == 30


def test_empty_and_full():
    assert steady_window([], "rate") is None
    assert full_window([]) is None
    w = full_window([(5, 10), (2, 40)])
    assert (w.start_ns, w.end_ns, w.kind) == (2, 40, "full")
