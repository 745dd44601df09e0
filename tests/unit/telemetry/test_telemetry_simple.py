import json
import time

import pytest
from tests.fakes.telemetry_bin import write_script

from wattbench.core.clock import ClockAnchor
from wattbench.core.errors import SensorError, UserError
from wattbench.telemetry.const import ConstSensor
from wattbench.telemetry.estimate import CpuEstimateSensor, cpu_model_and_sockets, lookup_tdp_w
from wattbench.telemetry.external import CommandSensor, FileSensor, parse_meter_line


def test_const():
    s = ConstSensor("node", 700)
    (c,) = s.open()
    assert (c.method, c.boundary, c.kind, c.primary) == ("declared", "node", "power", True)
    assert s.read()[0].value == pytest.approx(700.0, rel=1e-9)
    with pytest.raises(UserError):
        ConstSensor("rack", 1)


def test_estimate_linear_in_utilization():
    util = iter([0.0, 0.0, 50.0, 100.0, 25.0])
    s = CpuEstimateSensor(tdp_w=300, idle_w=60, cpu_percent=lambda: next(util))
    (c,) = s.open()
    assert (c.method, c.uncertainty_pct, c.boundary) == ("estimate", pytest.approx(30.0, rel=1e-9), "cpu")
    assert "estimate" in c.notes
    assert [s.read()[0].value for _ in range(4)] == pytest.approx([60.0, 180.0, 300.0, 120.0], rel=1e-9)


def test_estimate_tdp_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\nphysical id\t: 0\n\n"
                    "processor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\nphysical id\t: 1\n")
    assert cpu_model_and_sockets(info) == ("AMD EPYC 9654 96-Core Processor", 2)
    s = CpuEstimateSensor(cpuinfo=info, cpu_percent=lambda: 100.0)
    s.open()
    assert s.tdp_w == 720 and s.idle_w == pytest.approx(216)
    assert s.read()[0].value == pytest.approx(720)
    assert lookup_tdp_w("Intel(R) Xeon(R) Platinum 8480+") == 350


def test_estimate_unknown_cpu_falls_back_per_cpu_and_names_fix(tmp_path, monkeypatch):
    import os

    from wattbench.telemetry import estimate

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    info = tmp_path / "cpuinfo"
    info.write_text("model name\t: Mystery CPU 9000\n")
    s = CpuEstimateSensor(cpuinfo=info, cpu_percent=lambda: 100.0)
    (c,) = s.open()
    assert s.tdp_w == estimate.FALLBACK_W_PER_CPU * 4
    assert c.uncertainty_pct == estimate.FALLBACK_UNCERTAINTY_PCT and c.method == "estimate"
    assert "tdp=WATTS" in c.source and "assumed" in c.source
    assert s.read()[0].value == pytest.approx(s.tdp_w)


def test_command_sensor(tmp_path):
    prog = write_script(tmp_path, "meter", "import sys\nprint('power:', float(sys.argv[1]) * 2, 'W')\n")
    s = CommandSensor([str(prog), "215.5"], boundary="wall")
    (c,) = s.open()
    assert c.boundary == "wall" and c.kind == "power"
    assert s.read()[0].value == pytest.approx(431.0, rel=1e-9)


def test_command_sensor_errors(tmp_path):
    with pytest.raises(SensorError, match="not found"):
        CommandSensor([str(tmp_path / "none")]).open()
    bad = write_script(tmp_path, "bad", "import sys\nprint('oops', file=sys.stderr)\nsys.exit(3)\n")
    with pytest.raises(SensorError, match="exited 3: oops"):
        CommandSensor([str(bad)]).open()
    slow = write_script(tmp_path, "slow", "import time\ntime.sleep(5)\n")
    with pytest.raises(SensorError, match="took more than"):
        CommandSensor([str(slow)], timeout_s=0.3).open()
    words = write_script(tmp_path, "words", "print('no number here')\n")
    with pytest.raises(SensorError, match="no number"):
        CommandSensor([str(words)]).open()


def test_parse_meter_line():
    assert parse_meter_line("unix_time_s,watts") is None
    assert parse_meter_line("1700000000.5, 812.25") == pytest.approx((1700000000.5, 812.25), rel=1e-9)
    assert parse_meter_line('{"t": 1700000001, "w": 800}') == pytest.approx((1700000001.0, 800.0), rel=1e-9)
    assert parse_meter_line("") is None


def test_file_sensor_tails_and_maps_wall_to_mono(tmp_path):
    log = tmp_path / "pdu.csv"
    now = round(time.time(), 3)
    log.write_text(f"unix_time_s,watts\n{now - 10:.3f},700\n{now - 1:.3f},710\n")
    s = FileSensor(log)
    (c,) = s.open()
    assert c.boundary == "wall"
    anchor: ClockAnchor = s.anchor
    first = s.read()
    assert [r.value for r in first] == pytest.approx([710.0], rel=1e-9)  # the last line before open, not the whole history
    assert abs(first[0].t_ns - anchor.to_mono_ns(int(round((now - 1) * 1e9)))) < 1000
    with log.open("a") as f:
        f.write(f"{now + 0.5:.3f},720\n")
        f.write(json.dumps({"t": now + 1.0, "w": 730}) + "\n")
        f.write(f"{now + 1.5:.3f},7")  # torn line: waits for its newline
    assert [r.value for r in s.read()] == pytest.approx([720.0, 730.0], rel=1e-9)
    with log.open("a") as f:
        f.write("40\n")
    got = s.read()
    assert [r.value for r in got] == pytest.approx([740.0], rel=1e-9)
    assert got[0].t_ns - first[0].t_ns == pytest.approx(2.5e9, abs=2e6)
    log.write_text(f"{now + 2:.3f},750\n")  # rotated: starts over
    assert [r.value for r in s.read()] == pytest.approx([750.0], rel=1e-9)


def test_file_sensor_missing(tmp_path):
    with pytest.raises(SensorError, match="does not exist"):
        FileSensor(tmp_path / "x.csv").open()
