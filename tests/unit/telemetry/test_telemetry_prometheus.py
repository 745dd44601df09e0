
import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric

from tests.fakes.ports import refused_port
from wattbench.core.errors import SensorError
from wattbench.telemetry.prometheus import DcgmSensor


class DcgmCollector:
    """Exposes series named exactly as dcgm-exporter names them (counter without _total)."""

    def __init__(self):
        self.power = {"0": 312.5, "1": 150.25}
        self.energy_mj = {"0": 9_000_000, "1": 4_000_000}

    def collect(self):
        p = Metric("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge")
        e = Metric("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).", "counter")
        for gpu in self.power:
            labels = {"gpu": gpu, "UUID": f"GPU-{gpu}", "device": f"nvidia{gpu}", "modelName": "NVIDIA H200",
                      "Hostname": "node1"}
            p.add_sample("DCGM_FI_DEV_POWER_USAGE", labels, self.power[gpu])
            e.add_sample("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", labels, self.energy_mj[gpu])
        yield p
        yield e


@pytest.fixture(scope="module")
def _endpoint():
    """One real exposition endpoint for the module (its shutdown takes 0.5 s)."""
    reg = CollectorRegistry()
    holder = {"col": DcgmCollector()}

    class Proxy:
        def collect(self):
            return holder["col"].collect()

    reg.register(Proxy())
    server, thread = start_http_server(0, addr="127.0.0.1", registry=reg)  # the port the system gives
    yield holder, f"http://127.0.0.1:{server.server_port}/metrics"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def exporter(_endpoint):
    holder, url = _endpoint
    holder["col"] = DcgmCollector()  # fresh scripted values per test
    return holder["col"], url


def test_dcgm_all_series(exporter):
    col, url = exporter
    s = DcgmSensor(url)
    chans = {c.id: c for c in s.open()}
    assert set(chans) == {"dcgm.Hostnamenode1.gpu0.power", "dcgm.Hostnamenode1.gpu0.energy",
                          "dcgm.Hostnamenode1.gpu1.power", "dcgm.Hostnamenode1.gpu1.energy"}
    e = chans["dcgm.Hostnamenode1.gpu0.energy"]
    assert (e.kind, e.unit, e.primary, e.boundary) == ("counter", "J", True, "accelerator")
    assert chans["dcgm.Hostnamenode1.gpu0.power"].primary is False  # the counter is preferred
    got = {r.channel: r.value for r in s.read()}
    assert got["dcgm.Hostnamenode1.gpu0.energy"] == pytest.approx(9000.0, rel=1e-9)  # mJ -> J
    assert got["dcgm.Hostnamenode1.gpu1.power"] == pytest.approx(150.25, rel=1e-9)
    col.energy_mj["0"] += 312_500
    got = {r.channel: r.value for r in s.read()}
    assert got["dcgm.Hostnamenode1.gpu0.energy"] == pytest.approx(9312.5, rel=1e-9)


def test_dcgm_label_matcher(exporter):
    _, url = exporter
    s = DcgmSensor(url, matchers={"gpu": "1", "Hostname": "node1"}, boundary="accelerator")
    ids = sorted(c.id for c in s.open())
    assert ids == ["dcgm.Hostnamenode1.gpu1.energy", "dcgm.Hostnamenode1.gpu1.power"]
    assert {r.channel for r in s.read()} == set(ids)


def test_dcgm_no_match_names_fix(exporter):
    _, url = exporter
    with pytest.raises(SensorError, match="matching"):
        DcgmSensor(url, matchers={"gpu": "7"}).open()


def test_dcgm_unreachable():
    with pytest.raises(SensorError, match="cannot reach"):
        with refused_port() as port:
            DcgmSensor(f"http://127.0.0.1:{port}/metrics").open()


# The PromQL sensor (PromQuerySensor) is tested against a real Prometheus scraping a scripted power
# exporter: tests/integration/test_prometheus_real.py (no fake of the query API here).
