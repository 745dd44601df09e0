"""The ``cluster`` boundary: sum over nodes of each node's outermost boundary (rule 9)."""

from __future__ import annotations

import pytest

from wattbench.accounting.window import account_window
from wattbench.accounting.boundaries import boundary_totals
from wattbench.telemetry.base import Channel, Reading, TelemetryLog

S = 1_000_000_000


def _counter(log: TelemetryLog, node: str, dev: str, boundary: str, watts: float, t_end_s: int = 10) -> None:
    cid = f"{node}/{dev}.energy" if node else f"{dev}.energy"
    log.add_channels([Channel(id=cid, sensor="fake", kind="counter", quantity="energy", unit="J",
                              boundary=boundary, device=f"{node}/{dev}" if node else dev, primary=True,
                              update_period_s=0.1, node=node)])
    log.add([Reading(k * S // 10, cid, 1000.0 + watts * k / 10) for k in range(t_end_s * 10 + 1)])


def _power(log: TelemetryLog, node: str, dev: str, boundary: str, watts: float, method="measured") -> None:
    cid = f"{node}/{dev}.power"
    log.add_channels([Channel(id=cid, sensor="fake", kind="power", quantity="power", unit="W", boundary=boundary,
                              device=f"{node}/{dev}", primary=True, update_period_s=1.0, node=node,
                              method=method)])
    log.add([Reading(k * S, cid, watts) for k in range(11)])


def test_gpu_only_node_plus_bmc_node():
    log = TelemetryLog()
    # node a: two GPUs, no node meter -> contributes its accelerator sum (300 + 200 W)
    _counter(log, "a", "gpu0", "accelerator", 300.0)
    _counter(log, "a", "gpu1", "accelerator", 200.0)
    # node b: a GPU and a BMC -> contributes its node figure (900 W), not node + GPU
    _counter(log, "b", "gpu0", "accelerator", 400.0)
    _power(log, "b", "bmc", "node", 900.0)
    t = boundary_totals(log, 2 * S, 8 * S, pue=1.5)
    # two nodes' gpu0 are two devices: accelerator = 300 + 200 + 400 W over 6 s
    assert t["accelerator"].energy_j == pytest.approx(900 * 6)
    assert len(t["accelerator"].devices) == 3
    assert t["node"].energy_j == pytest.approx(900 * 6)
    assert t["cluster"].energy_j == pytest.approx((500 + 900) * 6)
    assert t["cluster"].composite
    assert t["cluster"].method == "sum(accelerator,node)"
    assert "a: accelerator; b: node" in t["cluster"].notes[0]
    assert any("different boundaries" in n for n in t["cluster"].notes)
    # facility via PUE prefers the cluster sum
    assert t["facility"].energy_j == pytest.approx((500 + 900) * 6 * 1.5)
    assert "cluster × PUE" in t["facility"].notes[0]


def test_disjoint_accelerator_and_host_are_added_and_estimates_are_not_used():
    log = TelemetryLog()
    _counter(log, "a", "gpu0", "accelerator", 250.0)
    _counter(log, "a", "pkg0", "cpu", 80.0)
    _counter(log, "a", "dram0", "dram", 20.0)
    _power(log, "a", "declared", "node", 5000.0, method="declared")  # not measured: ignored for cluster
    t = boundary_totals(log, 1 * S, 9 * S)
    assert t["host"].energy_j == pytest.approx(100 * 8)  # composite cpu + dram
    assert t["cluster"].energy_j == pytest.approx((250 + 100) * 8)
    assert "a: accelerator + host" in t["cluster"].notes[0]


def test_local_log_has_no_cluster_and_energy_dict_carries_it():
    log = TelemetryLog()
    _counter(log, "", "gpu0", "accelerator", 300.0)
    assert "cluster" not in boundary_totals(log, 0, 10 * S)
    log2 = TelemetryLog()
    _counter(log2, "n1", "gpu0", "accelerator", 300.0)
    _counter(log2, "n2", "gpu0", "accelerator", 100.0)
    acc = account_window(log2, 0, 10 * S, output_tokens=4000, total_tokens=8000, idle=None, price_per_kwh=0.1, pue=1.0)
    assert acc.energy["cluster"].energy_j == pytest.approx(4000.0)
    assert acc.energy["cluster"].j_per_output_token == pytest.approx(1.0)


def test_node_without_data_withholds_the_cluster_total():
    log = TelemetryLog()
    _counter(log, "a", "gpu0", "accelerator", 300.0)
    log.add_channels([Channel(id="b/gpu0.energy", sensor="fake", kind="counter", quantity="energy", unit="J",
                              boundary="accelerator", device="b/gpu0", primary=True, node="b")])
    t = boundary_totals(log, 0, 10 * S)
    assert t["cluster"].energy_j is None
    assert any("withheld" in n for n in t["cluster"].notes)
