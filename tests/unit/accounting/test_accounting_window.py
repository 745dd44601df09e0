import math

import numpy as np
import pytest

from tests.fakes.scripted_sensor import aux_channel, build_log, counter_channel, grid, power_channel
from wattbench.accounting.idle import IdlePower, measure_idle
from wattbench.accounting.thermal import thermal_summary
from wattbench.accounting.window import account_window
from wattbench.core.errors import UserError
from wattbench.telemetry.base import Channel

S = 1_000_000_000


def const_node(watts=700.0):
    ch = Channel(id="const.node", sensor="const", kind="power", quantity="power", unit="W", boundary="node",
                 method="declared", primary=True)
    return (ch, [0.0, 30.0], [watts, watts])


def test_declared_const_node_700():
    log = build_log(const_node())
    start, end = 2 * S, round(12.5 * S)  # 10.5 s
    acc = account_window(log, start, end, output_tokens=21000, total_tokens=42000, idle=None, price_per_kwh=0.15,
                         pue=1.0)
    node = acc.energy["node"]
    assert node.energy_j == 700.0 * 10.5
    assert node.avg_power_w == pytest.approx(700.0, rel=1e-15)
    out_tok_s = 21000 / 10.5
    assert node.output_tokens_per_s_per_kw == pytest.approx(out_tok_s / 0.7, rel=1e-12)
    assert node.output_tokens_per_s_per_kw == pytest.approx(2857.142857142857, rel=1e-12)
    assert node.j_per_output_token == pytest.approx(0.35)
    assert node.j_per_token == pytest.approx(0.175)
    assert node.tokens_per_kwh == pytest.approx(42000 / (7350 / 3.6e6))
    assert node.output_tokens_per_kwh == pytest.approx(21000 / (7350 / 3.6e6))
    assert node.cost_per_million_output_tokens == pytest.approx(7350 / 3.6e6 * 0.15 / 21000 * 1e6)
    assert (node.method, node.label, node.coverage, node.uncertainty_pct) == ("declared", "declared", pytest.approx(1.0, rel=1e-9), pytest.approx(20.0, rel=1e-9))
    assert acc.validity.verdict == "valid"
    assert acc.window.duration_s == pytest.approx(10.5, rel=1e-9)


def test_all_fields_filled_with_idle_and_dynamic_split():
    t = grid(0, 20, 0.1)
    watts = np.where((t >= 5) & (t < 15), 400.0, 80.0)
    e = np.concatenate([[0.0], np.cumsum((watts[:-1] + watts[1:]) / 2 * 0.1)])
    nv = counter_channel("nvml.gpu0.energy", sensor="nvml", device="gpu0", update_period_s=0.1)
    log = build_log((nv, t, e))
    idle = measure_idle(log, 0, round(4.9 * S))
    assert idle["accelerator"].power_w == pytest.approx(80.0)
    acc = account_window(log, 6 * S, 14 * S, output_tokens=4000, total_tokens=5000, idle=idle, price_per_kwh=0.1,
                         pue=1.2, kind="steady")
    g = acc.energy["accelerator"]
    assert g.energy_j == pytest.approx(3200.0)
    assert g.idle_power_w == pytest.approx(80.0)
    assert g.idle_energy_j == pytest.approx(640.0)
    assert g.dynamic_energy_j == pytest.approx(2560.0)
    assert (g.p95_power_w, g.p99_power_w, g.max_power_w) == (pytest.approx(400.0),) * 3
    # nvml: meter 5%; edges 0.1 s x 400 W each = 80 J of 3200 J = 2.5%
    assert g.uncertainty_pct == pytest.approx(math.sqrt(5**2 + 2.5**2))
    # idle window 0..4.9 s at 80 W: edges 2 x 0.1 s x 80 W = 16 J of 392 J
    u_idle = math.sqrt(5**2 + (100 * 16 / 392) ** 2)
    assert idle["accelerator"].uncertainty_pct == pytest.approx(u_idle)
    assert g.dynamic_uncertainty_pct == pytest.approx((3200 * g.uncertainty_pct + 640 * u_idle) / 2560)
    assert acc.window.kind == "steady"
    dumped = g.model_dump()
    for k in ("energy_j", "avg_power_w", "p95_power_w", "p99_power_w", "max_power_w", "idle_power_w",
              "idle_energy_j", "dynamic_energy_j", "j_per_output_token", "j_per_token",
              "output_tokens_per_s_per_kw", "tokens_per_kwh", "output_tokens_per_kwh",
              "cost_per_million_output_tokens", "uncertainty_pct", "coverage", "largest_gap_s"):
        assert dumped[k] is not None, k


def test_idle_before_and_after_averaged_with_drift():
    t = grid(0, 30, 0.1)
    p = np.where(t < 10, 80.0, np.where(t < 20, 400.0, 90.0))
    log = build_log((power_channel("p", update_period_s=0.1), t, p))
    idle = measure_idle(log, 0, 9 * S, after_start_ns=21 * S, after_end_ns=30 * S)
    ip = idle["accelerator"]
    assert (ip.before_w, ip.after_w) == (pytest.approx(80.0), pytest.approx(90.0))
    assert ip.power_w == pytest.approx(85.0)
    assert ip.drift_pct == pytest.approx(12.5)
    assert ip.duration_s == pytest.approx(18.0)
    assert ip.to_dict()["power_w"] == pytest.approx(85.0)


def test_idle_split_for_boundary_without_idle_leaves_none():
    log = build_log(const_node())
    acc = account_window(log, 0, 10 * S, output_tokens=10, total_tokens=20,
                         idle={"accelerator": IdlePower("accelerator", 80.0, 3.0)}, price_per_kwh=0.1, pue=1.0)
    assert acc.energy["node"].idle_energy_j is None and acc.energy["node"].dynamic_energy_j is None


def test_zero_tokens_give_none_not_infinity():
    log = build_log(const_node())
    n = account_window(log, 0, 10 * S, output_tokens=0, total_tokens=0, idle=None, price_per_kwh=0.1,
                       pue=1.0).energy["node"]
    assert n.energy_j == pytest.approx(7000.0, rel=1e-9)
    assert n.j_per_output_token is None and n.output_tokens_per_s_per_kw is None
    assert n.cost_per_million_output_tokens is None


@pytest.mark.parametrize("kw,msg", [({"pue": 0.9}, "PUE"), ({"price_per_kwh": -1.0}, "price")])
def test_bad_input_is_user_error(kw, msg):
    args = dict(output_tokens=1, total_tokens=1, idle=None, price_per_kwh=0.1, pue=1.0) | kw
    with pytest.raises(UserError, match=msg):
        account_window(build_log(const_node()), 0, S, **args)
    with pytest.raises(UserError, match="empty"):
        account_window(build_log(const_node()), S, S, output_tokens=1, total_tokens=1, idle=None,
                       price_per_kwh=0.1, pue=1.0)


def test_thermal_summary():
    t = [1.0, 2.0, 3.0]
    log = build_log(
        (aux_channel("temp0", "temperature_c", device="gpu0"), t, [60, 71, 65]),
        (aux_channel("temp1", "temperature_c", device="gpu1"), t, [50, 55, 58]),
        (aux_channel("clk0", "sm_clock_mhz", device="gpu0"), t, [1980, 1500, 1800]),
        (aux_channel("why0", "clock_event_reasons", device="gpu0"), t, [0, 0x4, 0x24]),
        (aux_channel("why1", "clock_event_reasons", device="gpu1"), t, [0x1, 0, 0]),
        (aux_channel("lim0", "power_limit_w", device="gpu0"), t, [700, 700, 700]),
        (aux_channel("lim1", "power_limit_w", device="gpu1"), t, [600, 600, 600]),
        (aux_channel("late", "temperature_c", device="gpu2"), [50.0], [99]),
    )
    th = thermal_summary(log, 0, 10 * S)
    assert th.max_temperature_c == pytest.approx(71.0, rel=1e-9)
    assert th.min_sm_clock_mhz == pytest.approx(1500.0, rel=1e-9)
    assert th.mean_sm_clock_mhz == pytest.approx((1980 + 1500 + 1800) / 3)
    assert th.throttle_reasons_seen == ["gpu_idle", "sw_power_cap", "sw_thermal_slowdown"]
    assert th.capping_reasons_seen == ["sw_power_cap", "sw_thermal_slowdown"]
    assert th.power_limit_w == pytest.approx(1300.0, rel=1e-9)
    assert th.devices["gpu0"].capping_fraction == pytest.approx(2 / 3)
    assert "gpu2" not in th.devices
    # written with the keys the summary had: gpu1 reports no clock, so it has no clock key
    assert set(th.model_dump()["devices"]["gpu1"]) == {"max_temperature_c", "power_limit_w", "throttle_reasons",
                                                       "capping_fraction"}
    acc = account_window(log, 0, 10 * S, output_tokens=1, total_tokens=1, idle=None, price_per_kwh=0.1, pue=1.0)
    assert acc.thermal == th
    assert acc.validity.verdict == "warn"
    assert acc.reasons == ["warn: gpu0: clocks capped (sw_power_cap, sw_thermal_slowdown) in 67% of samples"]
    # thermal capping is the ML.ENERGY gate "temperature in range": the finding is named as that gate
    (capped,) = [f for f in acc.validity.findings if f.kind == "clocks_capped"]
    assert capped.summary == "gpu0: clocks capped (ML.ENERGY gate: temperature in range not met)"
