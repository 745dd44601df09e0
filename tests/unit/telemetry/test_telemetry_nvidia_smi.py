import time

import pytest
from tests.fakes.telemetry_bin import FAKE_NVIDIA_SMI, install

from wattbench.core.errors import SensorError
from wattbench.telemetry.nvidia_smi import NvidiaSmiSensor, parse_value


@pytest.fixture
def smi(tmp_path, monkeypatch):
    install(monkeypatch, tmp_path / "bin", nvidia_smi=FAKE_NVIDIA_SMI)
    monkeypatch.delenv("FAKE_SMI_UNKNOWN", raising=False)


def test_parse_value():
    assert parse_value("power.draw", " [N/A]") is None
    assert parse_value("power.draw", "[Not Supported]") is None
    assert parse_value("power.draw", "312.40") == pytest.approx(312.4, rel=1e-9)
    assert parse_value("pstate", "P8") == 8
    assert parse_value("clocks_event_reasons.active", "0x0000000000000044") == 0x44
    assert parse_value("memory.used", "1024") == 1024 * 1024 * 1024


def test_oneshot(smi):
    s = NvidiaSmiSensor(stream=False)
    chans = {c.id: c for c in s.open()}
    assert chans["nvidia_smi.gpu0.power_instant"].primary
    assert not chans["nvidia_smi.gpu0.power_draw"].primary
    assert "nvidia_smi.gpu0.power_avg" not in chans  # [N/A] at open -> no channel
    assert chans["nvidia_smi.gpu1.power_instant"].kind == "power"
    got = {r.channel: r.value for r in s.read()}
    assert got["nvidia_smi.gpu0.power_instant"] == pytest.approx(301.25, rel=1e-9)
    assert got["nvidia_smi.gpu1.power_instant"] == pytest.approx(401.25, rel=1e-9)
    assert got["nvidia_smi.gpu0.clock_event_reasons"] == 4
    s.close()


def test_old_driver_falls_back_to_base_fields(smi, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_UNKNOWN", "power.draw.instant")
    s = NvidiaSmiSensor(stream=False, indices=[1])
    chans = {c.id: c for c in s.open()}
    assert "nvidia_smi.gpu1.power_instant" not in chans
    assert chans["nvidia_smi.gpu1.power_draw"].primary
    assert "nvidia_smi.gpu0.power_draw" not in chans
    assert {r.channel: r.value for r in s.read()}["nvidia_smi.gpu1.power_draw"] == pytest.approx(250.5, rel=1e-9)


def test_stream(smi):
    s = NvidiaSmiSensor(interval_ms=50)
    s.open()
    rs = []
    deadline = time.monotonic() + 60  # ends a hang only; the test waits for lines, not a time
    try:
        while len(rs) < 4:
            assert time.monotonic() < deadline, rs
            time.sleep(0.05)
            rs += [r for r in s.read() if r.channel == "nvidia_smi.gpu0.power_instant"]
    finally:
        s.close()
    assert s._proc is None
    assert len(rs) >= 4
    vals = [r.value for r in rs]
    assert vals == [301.25 + k for k in range(len(vals))]  # every line, in order
    ts = [r.t_ns for r in rs]
    assert all(b > a for a, b in zip(ts, ts[1:]))


def test_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SensorError, match="nvidia-smi not found"):
        NvidiaSmiSensor().open()
