import math

import numpy as np
import pytest

from tests.fakes.scripted_sensor import build_log, counter_channel, grid, power_channel
from wattbench.accounting.boundaries import boundary_totals
from wattbench.accounting.uncertainty import combine_pct, meter_pct, sum_pct
from wattbench.telemetry.base import Channel

S = 1_000_000_000


def ch(sensor="x", boundary="accelerator", method="measured", **kw):
    return Channel(id="c", sensor=sensor, kind="power", quantity="power", unit="W", boundary=boundary,
                   method=method, **kw)


@pytest.mark.parametrize("channel,pct", [
    (ch("nvml"), 5.0), (ch("nvidia-smi"), 5.0), (ch("prometheus", source="DCGM_FI_DEV_POWER_USAGE"), 5.0),
    (ch("rapl", boundary="cpu"), 5.0), (ch("rapl", boundary="dram"), 10.0), (ch("ipmi", boundary="node"), 10.0),
    (ch("redfish", boundary="node"), 10.0), (ch("external", boundary="wall"), 1.0), (ch("jetson"), 5.0),
    (ch("amdsmi"), 10.0), (ch("const", method="declared"), 20.0), (ch("estimate", method="estimate"), 50.0),
    (ch("mystery"), 10.0), (ch("nvml", uncertainty_pct=2.5), 2.5), (ch("const", method="declared", uncertainty_pct=3), 3.0),
])
def test_meter_defaults(channel, pct):
    assert meter_pct(channel) == pytest.approx(pct, rel=1e-9)


def test_combine_quadrature_terms():
    u, parts = combine_pct(100.0, meter_pct=5.0, edge_error_j=3.0, coverage=0.96)
    assert u == pytest.approx(math.sqrt(25 + 9 + 16))
    assert parts == pytest.approx({"meter": 5.0, "edge": 3.0, "gap": 4.0, "fill": 0.0, "cross_check": 0.0}, rel=1e-9)
    u, _ = combine_pct(100.0, meter_pct=5.0, edge_error_j=3.0, coverage=0.96, fill_interp_j=2.0, cross_diff_pct=-1.0)
    assert u == pytest.approx(math.sqrt(25 + 9 + 16 + 4 + 1))
    assert combine_pct(None, meter_pct=5.0) == (None, {})


def test_sum_is_linear_in_absolute_errors():
    assert sum_pct([(100.0, 5.0), (300.0, 10.0)]) == pytest.approx(8.75)
    assert sum_pct([(100.0, 5.0), (None, 10.0)]) is None


def test_boundary_uncertainty_end_to_end():
    t = grid(0, 10, 0.1)
    g0 = counter_channel("g0", sensor="nvml", device="gpu0", update_period_s=0.1)
    g1 = counter_channel("g1", sensor="nvml", device="gpu1", update_period_s=0.1)
    p1 = power_channel("p1", sensor="nvml", device="gpu1", update_period_s=0.1)
    log = build_log((g0, t, 200.0 * t), (g1, t, 100.0 * t), (p1, t, np.full(len(t), 104.0)))
    acc = boundary_totals(log, 1 * S, 9 * S)["accelerator"]
    u0 = math.sqrt(5**2 + 2.5**2)  # edges: 2 x 0.1 s x 200 W = 40 J of 1600 J
    u1 = math.sqrt(5**2 + 2.5**2 + 4**2)  # plus the 4% counter/integral disagreement
    assert acc.parts[0].uncertainty_pct == pytest.approx(u0)
    assert acc.parts[1].uncertainty_pct == pytest.approx(u1)
    assert acc.uncertainty_pct == pytest.approx((1600 * u0 + 800 * u1) / 2400)


def test_gap_raises_uncertainty():
    t = grid(0, 10, 0.1)
    t = t[(t <= 3 + 1e-9) | (t >= 5 - 1e-9)]
    c = counter_channel("g", sensor="nvml", update_period_s=0.1)
    acc = boundary_totals(build_log((c, t, 200.0 * t)), 1 * S, 9 * S)["accelerator"]
    assert acc.uncertainty_pct == pytest.approx(math.sqrt(5**2 + 2.5**2 + 25**2))
