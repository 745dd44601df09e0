import pytest
from tests.fakes.telemetry_amd import FakeAmdSmi

from wattbench.core.errors import SensorError, UserError
from wattbench.telemetry.amd import AmdSensor
from wattbench.telemetry.const import ConstSensor
from wattbench.telemetry.estimate import CpuEstimateSensor
from wattbench.telemetry.external import CommandSensor, FileSensor
from wattbench.telemetry.ipmi import IpmiSensor
from wattbench.telemetry.nvidia_smi import NvidiaSmiSensor
from wattbench.telemetry.nvml import NvmlSensor
from wattbench.telemetry.prometheus import DcgmSensor, PromQuerySensor
from wattbench.telemetry.rapl import RaplSensor
from wattbench.telemetry.redfish import RedfishSensor
from wattbench.telemetry.spec import parse_sensor_spec


def test_amd_counter_and_power():
    smi = FakeAmdSmi(n=2)
    s = AmdSensor(amdsmi=smi, indices=[1])
    chans = {c.id: c for c in s.open()}
    assert chans["amd.gpu1.energy"].primary and not chans["amd.gpu1.power"].primary
    assert "average_socket_power" in chans["amd.gpu1.power"].source  # current is N/A
    a = {r.channel: r.value for r in s.read()}
    smi.acc[1] += 65_536
    b = {r.channel: r.value for r in s.read()}
    assert b["amd.gpu1.energy"] - a["amd.gpu1.energy"] == pytest.approx(65_536 * 15.259e-6)
    assert b["amd.gpu1.power"] == pytest.approx(550.0, rel=1e-9)
    s.close()
    assert smi.inits == 0


def test_amd_init_failure():
    with pytest.raises(SensorError, match="amdsmi"):
        AmdSensor(amdsmi=FakeAmdSmi(fail_init=RuntimeError("no driver"))).open()


@pytest.mark.parametrize("spec,cls,check", [
    ("nvml", NvmlSensor, lambda s: s.indices is None and s.samples),
    ("nvml:0,1", NvmlSensor, lambda s: s.indices == [0, 1]),
    ("nvml:2,samples=off,interval=0.05", NvmlSensor, lambda s: not s.samples and s.poll_interval_s == pytest.approx(0.05, rel=1e-9)),
    ("nvidia-smi", NvidiaSmiSensor, lambda s: s.stream and s.interval_ms == 100),
    ("nvidia-smi:oneshot,1", NvidiaSmiSensor, lambda s: not s.stream and s.indices == [1]),
    ("rapl", RaplSensor, lambda s: str(s.root) == "/sys/class/powercap"),
    ("rapl:dram,root=/tmp/pc", RaplSensor, lambda s: s.domains == {"dram"} and str(s.root) == "/tmp/pc"),
    ("ipmi", IpmiSensor, lambda s: s.host is None),
    ("ipmi:lan=10.1.1.1,user=admin", IpmiSensor, lambda s: s.host == "10.1.1.1" and s.user == "admin"),
    ("redfish:https://bmc,chassis=1,insecure", RedfishSensor,
     lambda s: s.base_url == "https://bmc" and s.chassis == "1" and not s.verify_tls),
    ("dcgm:http://host:9400/metrics,gpu=0", DcgmSensor,
     lambda s: s.url == "http://host:9400/metrics" and s.matchers == {"gpu": "0"} and s.boundary == "accelerator"),
    ("dcgm:http://host:9400,Hostname=n1,boundary=node", DcgmSensor,
     lambda s: s.url == "http://host:9400/metrics" and s.matchers == {"Hostname": "n1"} and s.boundary == "node"),
    ('prom:http://prom:9090,query=sum(x{a="1",b="2"}),boundary=wall', PromQuerySensor,
     lambda s: s.query == 'sum(x{a="1",b="2"})' and s.boundary == "wall"),
    ("prom:http://prom:9090,query=node_power", PromQuerySensor, lambda s: s.boundary == "node"),
    ("amd:0", AmdSensor, lambda s: s.indices == [0]),
    ("cmd:/usr/bin/meter,--port,/dev/ttyUSB0", CommandSensor,
     lambda s: s.argv == ["/usr/bin/meter", "--port", "/dev/ttyUSB0"] and s.boundary == "wall"),
    ('cmd:["/usr/bin/meter","a,b"]', CommandSensor, lambda s: s.argv == ["/usr/bin/meter", "a,b"]),
    ("cmd:/m,boundary=node,interval=2", CommandSensor,
     lambda s: s.argv == ["/m"] and s.boundary == "node" and s.poll_interval_s == pytest.approx(2.0, rel=1e-9)),
    ("file:/var/log/pdu.csv", FileSensor, lambda s: str(s.path) == "/var/log/pdu.csv" and s.boundary == "wall"),
    ("file:/x.jsonl,boundary=facility", FileSensor, lambda s: s.boundary == "facility"),
    ("const:node=700", ConstSensor, lambda s: s.boundary == "node" and s.watts == pytest.approx(700.0, rel=1e-9)),
    ("estimate:cpu,tdp=280", CpuEstimateSensor, lambda s: s.tdp_w == pytest.approx(280.0, rel=1e-9) and s.idle_w is None),
])
def test_spec_forms(spec, cls, check):
    s = parse_sensor_spec(spec)
    assert isinstance(s, cls)
    assert check(s)


@pytest.mark.parametrize("spec,why", [
    ("", "empty"),
    ("gpu", "unknown sensor kind 'gpu'"),
    ("nvml:a", "GPU indices must be integers"),
    ("nvml:0,bogus=1", "unknown option 'bogus'"),
    ("const:node", "exactly one BOUNDARY=WATTS"),
    ("const:rack=5", "unknown boundary 'rack'"),
    ("const:node=abc", "is not a number"),
    ("const:node=-5", "watts must be >= 0"),
    ("estimate:gpu", "only estimate:cpu"),
    ("estimate:cpu,tdp=0", "tdp must be > 0"),
    ("prom:http://p:9090", "give query=EXPR"),
    ("prom:query=up", "URL first"),
    ("dcgm:host:9400", "exporter's URL"),
    ("redfish:", "BMC's URL"),
    ("ipmi:user=x", "need lan=HOST"),
    ("cmd:", "give the program"),
    ("cmd:[1,2]", "list of strings"),
    ("file:", "one file path"),
    ("nvml:0,interval=-1", "interval must be > 0"),
])
def test_spec_errors(spec, why):
    with pytest.raises(UserError) as e:
        parse_sensor_spec(spec)
    msg = str(e.value)
    assert why in msg
    assert f"bad --sensor {spec!r}" in msg and "accepted forms:" in msg and "const:node=700" in msg
