import numpy as np
import pytest

from tests.fakes.scripted_sensor import build_log, counter_channel, grid, power_channel
from wattbench.accounting.window import account_window
from wattbench.accounting.boundaries import PER_TOKEN_FIGURES, boundary_totals
from wattbench.telemetry.base import Channel

S = 1_000_000_000
T = grid(0, 10, 0.1)
W0, W1 = 1 * S, 9 * S  # 8 s window


def counter(cid, watts, boundary="accelerator", device="dev0", **kw):
    return (counter_channel(cid, boundary=boundary, device=device, update_period_s=0.1, **kw), T, watts * T)


def power(cid, watts, boundary="accelerator", device="dev0", **kw):
    return (power_channel(cid, boundary=boundary, device=device, update_period_s=0.1, **kw), T,
            np.full(len(T), float(watts)))


def declared(cid, watts, boundary):
    ch = Channel(id=cid, sensor="const", kind="power", quantity="power", unit="W", boundary=boundary,
                 method="declared", primary=True)
    return (ch, [0.0], [float(watts)])


def test_eight_gpus_sum():
    log = build_log(*[counter(f"g{i}", 100 + 10 * i, device=f"gpu{i}") for i in range(8)])
    acc = boundary_totals(log, W0, W1)["accelerator"]
    assert acc.energy_j == pytest.approx(8 * 1080.0)
    assert acc.method == "counter"
    assert acc.devices == [f"gpu{i}" for i in range(8)]
    assert acc.avg_power_w == pytest.approx(1080.0)
    assert acc.power_stats()["max_power_w"] == pytest.approx(1080.0)


def test_mixed_counter_and_power_devices_and_cross_check():
    log = build_log(counter("g0.c", 200, device="gpu0"), power("g0.p", 190, device="gpu0"),
                    power("g1.p", 150, device="gpu1"))
    acc = boundary_totals(log, W0, W1)["accelerator"]
    assert acc.method == "sum(counter,power_integral)"
    assert acc.energy_j == pytest.approx(8 * 200 + 8 * 150)
    assert acc.channels == ["g0.c", "g1.p"]
    x = acc.cross_check
    assert x.counter_j == pytest.approx(1600.0)
    assert x.power_integral_j == pytest.approx(1520.0)
    assert x.diff_pct == pytest.approx(-5.0)
    assert list(x.devices) == ["gpu0"]
    assert x.devices["gpu0"].diff_pct == pytest.approx(-5.0) and x.devices["gpu0"].power_channel == "g0.p"
    # the boundary's peaks come from the power channel where one exists: 190 + 150
    assert acc.power_stats()["p95_power_w"] == pytest.approx(340.0)


def test_channel_choice_order():
    # no primary flags: a counter beats power; instant power beats the 1 s average
    log = build_log(counter("c", 200, primary=False), power("p", 210), power("pa", 190, quantity="power_avg"))
    acc = boundary_totals(log, W0, W1)["accelerator"]
    assert acc.channels == ["c"]
    assert acc.cross_check.devices["dev0"].power_channel == "p"
    assert acc.cross_check.devices["dev0"].others["pa"].diff_pct == pytest.approx(-5.0)
    log = build_log(power("p", 210), power("pa", 190, quantity="power_avg"))
    assert boundary_totals(log, W0, W1)["accelerator"].channels == ["p"]
    log = build_log(power("p", 210, primary=True), counter("c", 200, primary=False))
    assert boundary_totals(log, W0, W1)["accelerator"].channels == ["p"]


def test_counter_reset_filled_from_power_channel():
    t = T
    v = np.where(t < 5.05, 200.0 * t, 200.0 * (t - 5.05))
    ch = counter_channel("c", update_period_s=0.1)
    log = build_log((ch, t, v), power("p", 300))
    acc = boundary_totals(log, W0, W1)["accelerator"]
    assert acc.resets == 1
    assert acc.energy_j == pytest.approx(1600.0 - 20.0 + 30.0)


def test_no_double_counting_node_meter_and_parts():
    log = build_log(counter("g", 300), counter("cpu", 50, boundary="cpu", device="pkg0"),
                    power("bmc", 700, boundary="node", device=""))
    tot = boundary_totals(log, W0, W1)
    assert tot["node"].energy_j == pytest.approx(700 * 8)
    assert tot["accelerator"].energy_j == pytest.approx(300 * 8)
    assert tot["host"].energy_j == pytest.approx(50 * 8)  # host = cpu only
    assert "dram not metered" in " ".join(tot["host"].notes)
    assert list(tot) == ["accelerator", "cpu", "host", "node"]


def test_accelerator_memory_not_added_to_accelerator():
    log = build_log(counter("g", 300), power("mem", 50, boundary="accelerator_memory"))
    tot = boundary_totals(log, W0, W1)
    assert tot["accelerator"].energy_j == pytest.approx(2400.0)
    assert tot["accelerator_memory"].energy_j == pytest.approx(400.0)


def test_host_composite_with_declared_overhead():
    log = build_log(counter("cpu", 50, boundary="cpu", device="pkg0"),
                    counter("dram", 10, boundary="dram", device="pkg0"), declared("const.host", 30, "host"))
    host = boundary_totals(log, W0, W1)["host"]
    assert host.energy_j == pytest.approx(90 * 8)
    assert host.method == "sum(cpu,dram,declared)"
    assert host.label == "declared"


def test_measured_host_meter_wins_over_sum():
    log = build_log(counter("cpu", 50, boundary="cpu"), counter("dram", 10, boundary="dram"),
                    power("hostmeter", 120, boundary="host"), declared("const.host", 30, "host"))
    host = boundary_totals(log, W0, W1)["host"]
    assert host.energy_j == pytest.approx(120 * 8)
    assert host.method == "power_integral"
    assert any("const.host" in n for n in host.notes)


def test_estimate_never_mixed_with_measured_in_one_boundary_but_labels_composite():
    est = Channel(id="est.cpu", sensor="estimate", kind="power", quantity="power", unit="W", boundary="cpu",
                  device="", method="estimate")
    log = build_log(counter("rapl", 50, boundary="cpu", device="pkg0"), (est, T, np.full(len(T), 80.0)))
    cpu = boundary_totals(log, W0, W1)["cpu"]
    assert cpu.energy_j == pytest.approx(400.0)
    assert any("est.cpu" in n for n in cpu.notes)
    log = build_log((est, T, np.full(len(T), 80.0)), counter("dram", 10, boundary="dram"))
    host = boundary_totals(log, W0, W1)["host"]
    assert host.energy_j == pytest.approx(90 * 8)
    assert host.label == "estimate"


def test_facility_from_outermost_times_pue_and_cost_not_double_counted():
    log = build_log(power("wall", 1000, boundary="wall", device=""), power("bmc", 900, boundary="node", device=""),
                    counter("g", 400))
    acc = account_window(log, W0, W1, output_tokens=8000, total_tokens=16000, idle=None, price_per_kwh=0.2,
                         pue=1.5)
    fac = acc.energy["facility"]
    assert fac.energy_j == pytest.approx(1500 * 8)
    assert fac.method == "pue"
    assert "wall" in fac.notes[0]
    assert acc.energy["wall"].cost_per_million_output_tokens == pytest.approx(fac.cost_per_million_output_tokens)
    # accelerator cost: own energy x PUE x price
    assert acc.energy["accelerator"].cost_per_million_output_tokens == pytest.approx(
        3200 / 3.6e6 * 1.5 * 0.2 / 8000 * 1e6)
    assert "× PUE 1.5" in acc.energy["accelerator"].notes[-1]


def test_no_facility_without_pue_or_outer_boundary():
    log = build_log(counter("g", 400))
    assert "facility" not in boundary_totals(log, W0, W1, pue=1.5)
    log = build_log(power("wall", 1000, boundary="wall", device=""))
    assert "facility" not in boundary_totals(log, W0, W1, pue=1.0)


def test_device_with_no_readings_falls_through_to_next_channel():
    empty = (counter_channel("c", update_period_s=0.1), [], [])
    log = build_log(empty, power("p", 250))
    acc = boundary_totals(log, W0, W1)["accelerator"]
    assert acc.energy_j == pytest.approx(2000.0)
    assert acc.method == "power_integral"


def test_poorly_covered_power_channel_does_not_judge_the_counter():
    t = T[T <= 5.0 + 1e-9]  # power channel stops half-way through the window
    log = build_log(counter("c", 200), (power_channel("p", update_period_s=0.1), t, np.full(len(t), 200.0)))
    acc = boundary_totals(log, W0, W1)["accelerator"]
    dev = acc.cross_check.devices["dev0"]
    assert dev.power_coverage == pytest.approx(4.0 / 8.0)
    assert dev.diff_pct == pytest.approx(0.0)
    assert acc.cross_check.max_abs_device_diff_pct is None
    assert acc.parts[0].uncertainty_parts["cross_check"] == pytest.approx(0.0, rel=1e-9)


def test_seldom_read_counter_with_a_fine_power_channel_is_exact_and_valid():
    """NVML as wattbench reads it on an H200: the counter every 0.9 s, the power sample buffer at
    20 ms. The accelerator energy over a window whose edges fall mid-bracket, after power steps,
    matches the trace; the counter stays the figure and no gap is reported."""
    from tests.fakes.scripted_sensor import step_trace
    from wattbench.accounting.validity import energy_findings

    tr = step_trace([(0, 120), (2.05, 650), (7.6, 300), (7.95, 140)])
    tc, tp = grid(0, 9.9, 0.9), grid(0, 10, 0.02)
    log = build_log(
        (counter_channel("nvml.gpu0.energy", device="gpu0", update_period_s=0.1), tc,
         [tr.energy(0, x) for x in tc]),
        (power_channel("nvml.gpu0.power_samples", device="gpu0", update_period_s=0.02), tp,
         [tr(x) for x in tp]),
    )
    a, b = round(2.2 * S), round(8.0 * S)
    tot = boundary_totals(log, a, b)["accelerator"]
    truth = tr.energy(2.2, 8.0)
    assert tot.energy_j == pytest.approx(truth, rel=1e-3)
    assert tot.method == "counter" and tot.update_period_s == pytest.approx(0.1)
    assert tot.largest_gap_s < 1.0 and tot.coverage == pytest.approx(1.0, rel=1e-9)
    assert energy_findings({"accelerator": tot}, 5.8) == []


def test_per_token_figures_only_where_the_work_is():
    """Rule 10: on a GPU server the board has tokens per kW; its HBM rail and the host (the
    CPU estimate, which leaves the GPU out) have power, no per-token figure, and say why. Ground truth
    by hand: 8 s, 16,000 output tokens, board 270 W -> 2,160 J, 16,000 / 2.160 kJ = 7,407 tok/s/kW."""
    log = build_log(counter("g", 270), counter("m", 59.5, boundary="accelerator_memory"),
                    power("cpu", 45, boundary="cpu", device="cpu0", method="estimate"))
    acc = account_window(log, W0, W1, output_tokens=16_000, total_tokens=20_000, idle=None,
                         price_per_kwh=0.2, pue=1.0)
    board = acc.energy["accelerator"]
    assert board.output_tokens_per_s_per_kw == pytest.approx(16_000 / 8 / 0.270)
    assert board.j_per_output_token == pytest.approx(2160.0 / 16_000)
    for b in ("accelerator_memory", "cpu", "host"):
        be = acc.energy[b]
        assert be.avg_power_w is not None and be.energy_j is not None
        assert all(getattr(be, f) is None for f in PER_TOKEN_FIGURES), b
    assert acc.energy["accelerator_memory"].avg_power_w == pytest.approx(59.5)
    assert any("part of the accelerator" in n for n in acc.energy["accelerator_memory"].notes)
    assert any("excludes the accelerators" in n for n in acc.energy["host"].notes)


def test_on_a_cpu_machine_the_cpu_and_host_keep_their_per_token_figures():
    log = build_log(counter("pkg", 60, boundary="cpu", device="pkg0"), counter("dram", 9, boundary="dram", device="d0"))
    acc = account_window(log, W0, W1, output_tokens=800, total_tokens=1000, idle=None, price_per_kwh=0.2, pue=1.0)
    assert acc.energy["cpu"].output_tokens_per_s_per_kw == pytest.approx(800 / 8 / 0.060)
    assert acc.energy["host"].output_tokens_per_s_per_kw == pytest.approx(800 / 8 / 0.069)
    assert acc.energy["dram"].output_tokens_per_s_per_kw is None  # memory alone does not do the work


def test_an_older_result_has_the_rule_applied_when_read(tmp_path):
    """A result.json written before rule 10 carries host and HBM-rail tokens per kW (the H200 README
    run's HTML plotted 12,688 and 9,435 above the board's 2,046); read back, they are withheld."""
    from tests.fakes.results_factory import make_level, make_result
    from wattbench.results.rundir import load_result, write_result
    from wattbench.core.schema import Goodput, TrialsBlock

    lv = make_level(0, power_w={"accelerator": 700.0, "accelerator_memory": 151.0, "host": 113.0})
    lv.goodput = Goodput.model_validate({"per_kw": {b: {"output_tokens_per_s_per_kw": 1.0} for b in lv.energy}})
    lv.trials = TrialsBlock.model_validate({"n": 3, "figures": {
        f"output_tokens_per_s_per_kw@{b}": {"mean": 1.0} for b in lv.energy}})
    assert lv.energy["host"].output_tokens_per_s_per_kw is not None
    write_result(tmp_path, make_result("old", levels=[lv]))
    got = load_result(tmp_path).levels[0]
    assert got.energy["accelerator"].output_tokens_per_s_per_kw == pytest.approx(lv.energy["accelerator"].output_tokens_per_s_per_kw)
    for b in ("accelerator_memory", "host"):
        assert got.energy[b].output_tokens_per_s_per_kw is None and got.energy[b].j_per_output_token is None
        assert got.energy[b].avg_power_w == lv.energy[b].avg_power_w
        assert b not in got.goodput.per_kw and f"output_tokens_per_s_per_kw@{b}" not in got.trials.figures
    assert "accelerator" in got.goodput.per_kw
