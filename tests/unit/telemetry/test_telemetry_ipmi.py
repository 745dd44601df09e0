import json

import pytest
from tests.fakes.telemetry_bin import FAKE_IPMITOOL, install

from wattbench.core.errors import SensorError
from wattbench.telemetry.ipmi import IpmiSensor


@pytest.fixture
def ipmitool(tmp_path, monkeypatch):
    install(monkeypatch, tmp_path / "bin", ipmitool=FAKE_IPMITOOL)
    monkeypatch.setenv("FAKE_IPMI_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.delenv("IPMI_PASSWORD", raising=False)
    return tmp_path


def calls(tmp_path):
    return [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_local_reading(ipmitool, monkeypatch):
    monkeypatch.setenv("FAKE_IPMI_WATTS", "612")
    s = IpmiSensor()
    (c,) = s.open()
    assert (c.boundary, c.kind, c.unit, c.primary) == ("node", "power", "W", True)
    assert s.poll_interval_s == pytest.approx(1.0, rel=1e-9)
    (r,) = s.read()
    assert r.value == pytest.approx(612.0, rel=1e-9) and r.channel == "ipmi.node"
    assert calls(ipmitool)[0]["argv"] == ["dcmi", "power", "reading"]


def test_lanplus_password_from_env_never_in_argv(ipmitool, monkeypatch):
    monkeypatch.setenv("IPMI_PASSWORD", "s3cret-pw")
    monkeypatch.setenv("FAKE_IPMI_EXPECT_PW", "s3cret-pw")
    s = IpmiSensor(host="10.0.0.5", user="admin")
    s.open()
    assert s.read()[0].value == pytest.approx(512.0, rel=1e-9)
    c = calls(ipmitool)[0]
    assert c["argv"] == ["-I", "lanplus", "-H", "10.0.0.5", "-U", "admin", "-E", "dcmi", "power", "reading"]
    assert c["has_env_pw"] and "s3cret-pw" not in json.dumps(c["argv"])


def test_lanplus_password_file(ipmitool, monkeypatch):
    pw = ipmitool / "pw"
    pw.write_text("filepw\n")
    monkeypatch.setenv("FAKE_IPMI_EXPECT_PW", "filepw")
    s = IpmiSensor(host="bmc", user="u", password_file=str(pw))
    s.open()
    assert calls(ipmitool)[0]["argv"][-5:] == ["-f", str(pw), "dcmi", "power", "reading"]


def test_lan_without_password_names_fix(ipmitool):
    with pytest.raises(SensorError, match="IPMI_PASSWORD"):
        IpmiSensor(host="bmc", user="u").open()


@pytest.mark.parametrize("mode,fix", [("nodev", "ipmi_devintf"), ("auth", "address, user"), ("nodcmi", "redfish")])
def test_errors_name_fix(ipmitool, monkeypatch, mode, fix):
    monkeypatch.setenv("FAKE_IPMI_MODE", mode)
    with pytest.raises(SensorError) as e:
        IpmiSensor().open()
    assert fix in e.value.fix


def test_missing_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SensorError, match="apt-get install ipmitool"):
        IpmiSensor().open()
