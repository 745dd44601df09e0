"""The hwmon sensor against fake sysfs trees laid out as the real drivers lay them out."""

from pathlib import Path

import numpy as np
import pytest
from tests.fakes.telemetry_sysfs import acpi_power_meter, amd_energy, amdgpu, ina226, ina3221, jetson_tree, k10temp, set_value, xe

from wattbench.accounting.boundaries import direct_boundary
from wattbench.accounting.counters import counter_energy
from wattbench.core.errors import SensorError, UserError
from wattbench.telemetry.base import TelemetryLog
from wattbench.telemetry.hwmon import PERMISSION_FIX, HwmonSensor
from wattbench.telemetry.spec import parse_sensor_spec


def opened(s):
    return {c.id: c for c in s.open()}, s


def test_ina226_power_channel_unknown_rail_is_listed_not_counted(tmp_path):
    ina226(tmp_path, uw=7_680_000)
    k10temp(tmp_path)  # temperatures only: not a power device
    chans, s = opened(HwmonSensor(root=tmp_path))
    assert list(chans) == ["hwmon.ina226.power1"]  # curr1×in1 not paired: the chip reports power1
    c = chans["hwmon.ina226.power1"]
    assert (c.kind, c.boundary, c.quantity, c.unit, c.primary) == ("aux", None, "rail_power_w", "W", False)
    assert c.update_period_s == pytest.approx(0.002) and c.uncertainty_pct == pytest.approx(5.0, rel=1e-9)
    assert c.device == "ina226@1-0040/1"
    assert s.read()[0].value == pytest.approx(7.68)
    (w,) = s.warnings
    assert "not counted" in w and "hwmon:name=ina226,channel=power1,boundary=node" in w


def test_ina226_boundary_from_the_spec(tmp_path):
    h = ina226(tmp_path, uw=7_680_000)
    s = parse_sensor_spec(f"hwmon:name=ina226,channel=power1,boundary=node,root={tmp_path},interval=0.05")
    chans, _ = opened(s)
    c = chans["hwmon.ina226.power1"]
    assert (c.kind, c.boundary, c.quantity, c.primary) == ("power", "node", "power", True)
    assert s.poll_interval_s == pytest.approx(0.05, rel=1e-9) and s.warnings == []
    set_value(h, "power1_input", 12_345_678)
    assert s.read()[0].value == pytest.approx(12.345678)


def test_two_ina226_of_one_driver_stay_two_devices(tmp_path):
    ina226(tmp_path, 0, "1-0040", uw=1_000_000)
    ina226(tmp_path, 1, "1-0041", uw=2_000_000)
    chans, s = opened(HwmonSensor(root=tmp_path, boundary="node"))
    assert set(chans) == {"hwmon.ina226_1_0040.power1", "hwmon.ina226_1_0041.power1"}
    assert {c.device for c in chans.values()} == {"ina226@1-0040/1", "ina226@1-0041/1"}
    assert sorted(r.value for r in s.read()) == pytest.approx([1.0, 2.0])


def test_ina3221_voltage_times_current_and_labels(tmp_path):
    ina3221(tmp_path, rails={1: ("VDD_5V_IN", 5000.0, 900.0), 2: ("VDD_3V3", 3300.0, 200.0),
                             3: ("VDD_1V8", 1800.0, 100.0)})
    chans, s = opened(HwmonSensor(root=tmp_path))
    # curr4 (sum of currents) is not multiplied by in4 (a shunt voltage)
    assert set(chans) == {"hwmon.ina3221.curr1", "hwmon.ina3221.curr2", "hwmon.ina3221.curr3"}
    assert "VDD_5V_IN" in chans["hwmon.ina3221.curr1"].notes
    got = {r.channel: r.value for r in s.read()}
    assert got["hwmon.ina3221.curr1"] == pytest.approx(4.5)  # 5 V × 0.9 A
    assert got["hwmon.ina3221.curr2"] == pytest.approx(0.66)
    # one rail by its label, counted at the node
    chans, s = opened(parse_sensor_spec(f"hwmon:ina3221,channel=vdd_5v_in,boundary=node,root={tmp_path}"))
    assert list(chans) == ["hwmon.ina3221.curr1"] and chans["hwmon.ina3221.curr1"].boundary == "node"


def test_acpi_power_meter_is_node_by_default(tmp_path):
    acpi_power_meter(tmp_path, uw=212_000_000)
    chans, s = opened(HwmonSensor(root=tmp_path))
    c = chans["hwmon.power_meter.power1_avg"]
    assert (c.kind, c.boundary, c.quantity, c.primary) == ("power", "node", "power_avg", True)
    assert c.update_period_s == pytest.approx(1.0) and c.uncertainty_pct == pytest.approx(10.0, rel=1e-9)
    assert s.read()[0].value == pytest.approx(212.0) and s.warnings == []


def test_grace_hopper_power_meters_by_oem_info(tmp_path):
    for n, info in enumerate(["Module Power Socket 0", "Grace Power Socket 0", "CPU Power Socket 0",
                              "SysIO Power Socket 0"]):
        acpi_power_meter(tmp_path, n, uw=(n + 1) * 100_000_000, oem_info=info, device=f"NVDA2008:0{n}")
    chans, _ = opened(HwmonSensor(root=tmp_path))
    by_b = {c.notes.split("'")[1]: c.boundary for c in chans.values()}
    assert by_b == {"Module Power Socket 0": "node", "Grace Power Socket 0": "host",
                    "CPU Power Socket 0": "cpu", "SysIO Power Socket 0": None}


def test_amdgpu_instant_is_primary_average_cross_checks(tmp_path):
    amdgpu(tmp_path, uw_avg=150_000_000, uw_in=160_000_000)
    chans, s = opened(HwmonSensor(root=tmp_path))
    inst, avg = chans["hwmon.amdgpu.power1"], chans["hwmon.amdgpu.power1_avg"]
    assert (inst.boundary, inst.primary, avg.boundary, avg.primary) == ("accelerator", True, "accelerator", False)
    assert inst.device == avg.device == "amdgpu@0000:03:00.0/PPT"
    assert {r.channel: r.value for r in s.read()} == {"hwmon.amdgpu.power1": pytest.approx(160.0),
                                                       "hwmon.amdgpu.power1_avg": pytest.approx(150.0)}


def test_xe_card_counter_counted_pkg_inside_it_listed(tmp_path):
    xe(tmp_path, card_uj=9_000_000, pkg_uj=7_000_000)
    chans, s = opened(HwmonSensor(root=tmp_path))
    card, pkg = chans["hwmon.xe.energy1"], chans["hwmon.xe.energy2"]
    assert (card.kind, card.unit, card.boundary, card.primary) == ("counter", "J", "accelerator", True)
    assert (pkg.kind, pkg.boundary) == ("aux", None)
    assert {r.channel: r.value for r in s.read()}["hwmon.xe.energy1"] == pytest.approx(9.0)


def test_amd_energy_socket_counted_cores_listed(tmp_path):
    amd_energy(tmp_path, socket_uj=5_000_000)
    chans, _ = opened(HwmonSensor(root=tmp_path))
    assert chans["hwmon.amd_energy.energy3"].boundary == "cpu" and chans["hwmon.amd_energy.energy3"].primary
    assert chans["hwmon.amd_energy.energy1"].boundary is None


def _deny(chip_dir: Path):
    def read(path):
        if Path(path).parent == chip_dir:
            raise PermissionError(13, "Permission denied")
        return Path(path).read_text().strip()
    return read


def test_permission_denied_everywhere_names_the_fix(tmp_path):
    h = amd_energy(tmp_path)
    with pytest.raises(SensorError) as e:
        HwmonSensor(root=tmp_path, read_text=_deny(h)).open()
    assert "permission denied reading" in str(e.value) and "energy1_input" in str(e.value)
    assert e.value.fix == PERMISSION_FIX and "udev" in PERMISSION_FIX and "chmod a+r" in PERMISSION_FIX


def test_permission_denied_on_one_chip_keeps_the_others_and_warns(tmp_path):
    h = amd_energy(tmp_path, n=4)
    ina226(tmp_path, n=0)
    s = HwmonSensor(root=tmp_path, boundary="node", chip=None, read_text=_deny(h))
    chans = {c.id for c in s.open()}
    assert chans == {"hwmon.ina226.power1"}
    assert any("permission denied" in w and "energy3_input" in w and "chmod a+r" in w for w in s.warnings)
    # asked for by name, an unreadable chip is an error, not a warning
    with pytest.raises(SensorError, match="permission denied"):
        HwmonSensor(root=tmp_path, chip="amd_energy", read_text=_deny(h)).open()


def test_real_permission_bits(tmp_path):
    import os

    h = ina226(tmp_path)
    os.chmod(h / "power1_input", 0o000)
    try:
        if os.access(h / "power1_input", os.R_OK):
            pytest.skip("root reads through chmod 000")
        with pytest.raises(SensorError, match="permission denied"):
            HwmonSensor(root=tmp_path).open()
    finally:
        os.chmod(h / "power1_input", 0o644)


def test_disabled_input_is_skipped_with_a_warning(tmp_path):
    h = ina3221(tmp_path)
    (h / "curr3_input").unlink()
    (h / "curr3_input").mkdir()  # reading it fails with an OSError, as ENODATA does on a disabled input
    chans, s = opened(HwmonSensor(root=tmp_path))
    assert set(chans) == {"hwmon.ina3221.curr1", "hwmon.ina3221.curr2"}
    assert any("curr3_input not readable" in w for w in s.warnings)


def test_nothing_matching(tmp_path):
    k10temp(tmp_path)
    with pytest.raises(SensorError, match="no power or energy channel"):
        HwmonSensor(root=tmp_path).open()
    ina226(tmp_path)
    with pytest.raises(SensorError, match="matching name=ina3221"):
        HwmonSensor(root=tmp_path, chip="ina3221").open()


def _counter_series(tmp_path, uj_values, max_uj=None):
    """Values read through the sensor (units checked), on a synthetic 1 s clock (deterministic)."""
    h = xe(tmp_path)
    s = HwmonSensor(root=tmp_path, chip="xe", channel="energy1", max_uj=max_uj)
    (c,) = s.open()
    vals = []
    for uj in uj_values:
        set_value(h, "energy1_input", uj)
        vals.append(s.read()[0].value)
    t = np.arange(len(vals), dtype=np.int64) * 1_000_000_000
    return c, t, np.array(vals)


def test_wrap_unwrapped_by_the_accounting_with_max_uj(tmp_path):
    wrap = 2**32
    seq = [wrap - 3_000_000, wrap - 1_000_000, 1_000_000, 3_000_000]  # +2 J each second, wrapping once
    c, t, v = _counter_series(tmp_path, seq, max_uj=wrap)
    assert c.max_value == pytest.approx(wrap / 1e6)
    r = counter_energy(t, v, int(t[0]), int(t[-1]), max_value=c.max_value)
    assert r.wraps == 1 and r.resets == 0 and r.energy_j == pytest.approx(6.0)


def test_decrease_without_range_is_a_reset_not_negative_energy(tmp_path):
    seq = [10_000_000, 12_000_000, 14_000_000, 1_000_000, 3_000_000]  # the driver reloaded
    c, t, v = _counter_series(tmp_path, seq)
    assert c.max_value is None
    r = counter_energy(t, v, int(t[0]), int(t[-1]), max_value=c.max_value)
    assert r.resets == 1 and r.energy_j == pytest.approx(8.0)  # the reset second bridged at 2 W


def test_node_energy_through_the_accounting(tmp_path):
    """A power meter through the whole path: sensor -> log -> boundary energy."""
    h = acpi_power_meter(tmp_path, uw=200_000_000)
    s = HwmonSensor(root=tmp_path)
    log = TelemetryLog()
    log.add_channels(s.open())
    for k, uw in enumerate([200_000_000, 200_000_000, 300_000_000, 300_000_000, 300_000_000]):
        set_value(h, "power1_average", uw)
        (r,) = s.read()
        r.t_ns = k * 1_000_000_000
        log.add([r])
    b = direct_boundary(log, "node", 0, 4_000_000_000)
    assert b.energy_j == pytest.approx(200 + 250 + 300 + 300)  # trapezoids over 4 s


def test_spec_errors():
    for bad, why in [("hwmon:boundary=moon", "unknown boundary"), ("hwmon:foo=1", "unknown option"),
                     ("hwmon:a,b", "one device name"), ("hwmon:max_uj=-5", "max_uj"), ("hwmon:name=", "empty")]:
        with pytest.raises(UserError, match=why):
            parse_sensor_spec(bad)


def test_jetson_is_a_configuration_of_hwmon(tmp_path):
    from wattbench.telemetry.jetson import JetsonSensor

    jetson_tree(tmp_path, {1: ("VDD_IN", 1500, 19_000), 2: ("VDD_SOC", 300, 19_000)})
    s = JetsonSensor(root=tmp_path)
    assert isinstance(s, HwmonSensor)
    chans = {c.id: c for c in s.open()}
    assert chans["jetson.vdd_in"].boundary == "node" and chans["jetson.vdd_soc"].kind == "aux"
    assert s.warnings == []  # known aux rails need no advice
