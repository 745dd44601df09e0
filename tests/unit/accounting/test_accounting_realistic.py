"""A jittered NVML-like replay: counter and instant power refresh every 100 ms on the meter's own
schedule, a sampler reads them every ~100 ms with jitter and an occasional stall. Ground truth is
the exact energy of the power trace; the accounting must land within its own stated edge bound,
not raise false gap/coverage warnings, and the cross-check must agree within the meter's 5%."""

import numpy as np
import pytest

from tests.fakes.scripted_sensor import Trace, build_log, counter_channel, power_channel
from wattbench.accounting.window import account_window

S = 1_000_000_000


def bursty_trace(rng, seconds=60.0):
    pts = []
    t = 0.0
    w = 100.0
    while t < seconds:
        pts += [(t, w)]
        t += float(rng.uniform(0.3, 2.0))
        pts += [(t, w)]
        w = float(rng.choice([90.0, 300.0, 650.0, 700.0]))
    return Trace(pts)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_jittered_nvml_like_replay(seed):
    rng = np.random.default_rng(seed)
    tr = bursty_trace(rng)
    phase = float(rng.uniform(0, 0.1))
    refresh = phase + 0.1 * np.arange(int(59.0 / 0.1))
    # sampler: 100 ms +-30 ms, with a 250 ms stall now and then
    gaps = rng.uniform(0.07, 0.13, 700)
    gaps[rng.random(700) < 0.03] = 0.25
    reads = np.cumsum(gaps)
    reads = reads[reads < 58.5]
    last_refresh = refresh[np.searchsorted(refresh, reads, side="right") - 1]
    e_refresh = {r: tr.energy(0, r) for r in np.unique(last_refresh)}
    counter = np.array([e_refresh[r] for r in last_refresh])
    power = np.array([tr(r) for r in last_refresh])
    nv = counter_channel("nvml.gpu0.energy", sensor="nvml", device="gpu0", update_period_s=0.1)
    pw = power_channel("nvml.gpu0.power_instant", sensor="nvml", device="gpu0", update_period_s=0.1)
    log = build_log((nv, reads, counter), (pw, reads, power))
    t0, t1 = 5.0, 55.0
    acc = account_window(log, round(t0 * S), round(t1 * S), output_tokens=10_000, total_tokens=20_000, idle=None,
                         price_per_kwh=0.1, pue=1.0)
    g = acc.energy["accelerator"]
    truth = tr.energy(t0, t1)
    err = abs(g.energy_j - truth)
    edge_bound = acc.totals["accelerator"].parts[0].edge_error_j
    assert err <= edge_bound
    assert err / truth < 0.01  # a 50 s window: edges are small
    assert g.coverage >= 0.95
    assert acc.validity.verdict == "valid", acc.reasons
    assert abs(g.cross_check.diff_pct) < 5.0
    assert g.max_power_w == float(np.max(power[(reads >= t0) & (reads <= t1)]))
