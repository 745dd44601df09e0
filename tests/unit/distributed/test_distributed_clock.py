"""Clock offsets (NTP-style) and drift lines; no Ray."""

from __future__ import annotations

import random

import pytest

from wattbench.distributed.clock import OffsetLine, drift_ppm, estimate_offset, measure_offset


def test_min_rtt_ping_is_kept_and_bounds_the_truth():
    true_off = 7_000_000_123
    rng = random.Random(1)
    samples = []
    t = 1_000_000
    for _ in range(50):
        out_ns, back_ns = rng.randint(50_000, 3_000_000), rng.randint(50_000, 3_000_000)  # asymmetric paths
        t0 = t
        a = t0 + out_ns + true_off
        t1 = t0 + out_ns + back_ns
        samples.append((t0, a, t1))
        t = t1 + 10_000
    est = estimate_offset(samples)
    best = min(samples, key=lambda s: s[2] - s[0])
    assert est.rtt_ns == best[2] - best[0]
    assert abs(est.offset_ns - true_off) <= est.uncertainty_ns
    assert est.uncertainty_ns == (est.rtt_ns + 1) // 2
    assert est.to_driver(est.to_node(123456789)) == 123456789


def test_measure_offset_against_a_skewed_clock():
    clock = iter(range(0, 10**9, 1000)).__next__  # driver clock: 1 µs per reading
    skew = -3_000_000_000

    def remote():
        return clock() + skew  # read between the driver's t0 and t1

    est = measure_offset(remote, n=8, clock=clock)
    assert est.pings == 8
    assert est.rtt_ns == 2000 and est.offset_ns == skew


def test_offset_line_corrects_drift():
    # node clock runs 40 ppm fast: node = driver * (1 + 40e-6) + 5 s
    def node_of(d):
        return int(d * (1 + 40e-6)) + 5_000_000_000

    def est_at(d):
        return estimate_offset([(d - 100, node_of(d), d + 100)])

    b, a = est_at(1_000_000_000), est_at(601_000_000_000)  # ten minutes apart
    line = OffsetLine(b, a)
    assert drift_ppm(b, a) == pytest.approx(40.0, abs=0.01)
    for d in (1_000_000_000, 300_000_000_000, 601_000_000_000):
        assert abs(line.to_driver(node_of(d)) - d) <= 101
    # a constant offset would be 24 ms off at the end
    assert abs(b.to_driver(node_of(601_000_000_000)) - 601_000_000_000) > 20_000_000
    assert OffsetLine(b).to_driver(node_of(1_000_000_000)) == pytest.approx(1_000_000_000, abs=101)


def test_no_usable_ping():
    with pytest.raises(ValueError):
        estimate_offset([(10, 5, 9)])
