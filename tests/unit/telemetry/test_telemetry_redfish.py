import pytest
from tests.fakes.telemetry_http import JsonServer, self_signed_cert

from wattbench.core.errors import SensorError
from wattbench.telemetry.redfish import RedfishSensor

CREDS = {"REDFISH_USER": "root", "REDFISH_PASSWORD": "calvin"}


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


def legacy_routes(watts):
    return {
        "/redfish/v1/Chassis": {"Members": [{"@odata.id": "/redfish/v1/Chassis/1"}]},
        "/redfish/v1/Chassis/1": {"Id": "1", "Power": {"@odata.id": "/redfish/v1/Chassis/1/Power"}},
        "/redfish/v1/Chassis/1/Power": lambda q: {"PowerControl": [{"PowerConsumedWatts": watts.pop(0)}]},
    }


def test_legacy_power_with_verify_on_and_ca(cert):
    with JsonServer(legacy_routes([640, 655]), auth=("root", "calvin"), tls=cert) as srv:
        s = RedfishSensor(srv.url, ca_file=str(cert[0]), env=CREDS)
        (c,) = s.open()
        assert (c.boundary, c.kind, c.id) == ("node", "power", "redfish.1.node")
        assert "PowerConsumedWatts" in c.source
        assert s.read()[0].value == pytest.approx(655.0, rel=1e-9)


def test_verify_on_rejects_self_signed(cert):
    with JsonServer(legacy_routes([1]), tls=cert) as srv:
        with pytest.raises(SensorError) as e:
            RedfishSensor(srv.url, env={}).open()
    assert "not trusted" in str(e.value) and "insecure" in e.value.fix


def test_insecure_accepts_self_signed(cert):
    with JsonServer(legacy_routes([500, 501]), tls=cert) as srv:
        s = RedfishSensor(srv.url, verify_tls=False, env={})
        s.open()
        assert s.read()[0].value == pytest.approx(501.0, rel=1e-9)


def test_bad_credentials_name_fix(cert):
    with JsonServer(legacy_routes([1]), auth=("root", "calvin"), tls=cert) as srv:
        with pytest.raises(SensorError) as e:
            RedfishSensor(srv.url, verify_tls=False, env={"REDFISH_USER": "root", "REDFISH_PASSWORD": "no"}).open()
    assert "401" in str(e.value) and "REDFISH_USER" in e.value.fix
    assert "calvin" not in str(e.value) and "no" not in e.value.fix.split()


def test_credentials_file(cert, tmp_path):
    f = tmp_path / "creds"
    f.write_text("root:calvin\n")
    with JsonServer(legacy_routes([700, 701]), auth=("root", "calvin"), tls=cert) as srv:
        s = RedfishSensor(srv.url, verify_tls=False, cred_file=str(f), env={})
        s.open()
        assert s.read()[0].value == pytest.approx(701.0, rel=1e-9)


def test_environment_metrics_preferred_and_other_chassis_warned(cert):
    routes = {
        "/redfish/v1/Chassis": {"Members": [{"@odata.id": "/redfish/v1/Chassis/Node"},
                                            {"@odata.id": "/redfish/v1/Chassis/HGX_Baseboard"}]},
        "/redfish/v1/Chassis/Node": {"EnvironmentMetrics": {"@odata.id": "/redfish/v1/Chassis/Node/EnvironmentMetrics"}},
        "/redfish/v1/Chassis/Node/EnvironmentMetrics": {"PowerWatts": {"Reading": 1234.5}},
        "/redfish/v1/Chassis/Node/Power": {"PowerControl": [{"PowerConsumedWatts": 1}]},
    }
    with JsonServer(routes, tls=cert) as srv:
        s = RedfishSensor(srv.url, verify_tls=False, env={})
        (c,) = s.open()
        assert c.id == "redfish.Node.node" and "EnvironmentMetrics" in c.source
        assert s.read()[0].value == pytest.approx(1234.5, rel=1e-9)
    assert any("HGX_Baseboard" in w for w in s.warnings)


def test_power_subsystem_supplies_summed(cert):
    base = "/redfish/v1/Chassis/1/PowerSubsystem"
    routes = {
        "/redfish/v1/Chassis/1": {"PowerSubsystem": {"@odata.id": base}},
        base: {"PowerSupplies": {"@odata.id": base + "/PowerSupplies"}},
        base + "/PowerSupplies": {"Members": [{"@odata.id": base + "/PowerSupplies/0"},
                                              {"@odata.id": base + "/PowerSupplies/1"}]},
        base + "/PowerSupplies/0": {"Metrics": {"@odata.id": base + "/PowerSupplies/0/Metrics"}},
        base + "/PowerSupplies/1": {},
        base + "/PowerSupplies/0/Metrics": {"InputPowerWatts": {"Reading": 410.0}},
        base + "/PowerSupplies/1/Metrics": {"InputPowerWatts": {"Reading": 395.5}},
    }
    with JsonServer(routes, tls=cert) as srv:
        s = RedfishSensor(srv.url, chassis="1", verify_tls=False, env={})
        s.open()
        assert s.read()[0].value == pytest.approx(805.5, rel=1e-9)


def test_unreachable():
    with pytest.raises(SensorError, match="cannot reach"):
        RedfishSensor("https://127.0.0.1:9", verify_tls=False, env={}, timeout_s=1).open()
