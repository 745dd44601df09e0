"""Records and telemetry onto the driver's clock; node-prefixed channels; no Ray."""

from __future__ import annotations

import pytest

from wattbench.accounting.boundaries import boundary_totals
from wattbench.distributed.merge import NodeLogMerger, node_channel, shift_record, split_by_node
from wattbench.core.schema import RequestRecord
from wattbench.telemetry.base import Channel


def test_shift_record_moves_every_timestamp_and_keeps_intervals():
    r = RequestRecord(id=1, level=0, scheduled_ns=90, sent_ns=100, first_token_ns=150, last_token_ns=190,
                      end_ns=200, chunk_ns=[150, 170, 190])
    shift_record(r, lambda t: t - 1000)
    assert (r.scheduled_ns, r.sent_ns, r.first_token_ns, r.last_token_ns, r.end_ns) == (-910, -900, -850, -810, -800)
    assert r.chunk_ns == [-850, -830, -810]
    r2 = RequestRecord(id=2, level=0, sent_ns=5, ok=False)
    shift_record(r2, lambda t: t + 1)
    assert r2.sent_ns == 6 and r2.first_token_ns is None and r2.chunk_ns == []


def _gpu(cid="nvml.gpu0.energy", dev="gpu0"):
    return Channel(id=cid, sensor="nvml", kind="counter", quantity="energy", unit="J", boundary="accelerator",
                   device=dev, primary=True, update_period_s=0.1)


def test_two_nodes_gpu0_stay_two_devices_and_sum():
    m = NodeLogMerger()
    for node, watts, off in (("aaaa", 300.0, 5_000_000_000), ("bbbb", 100.0, -2_000_000_000)):
        ids = m.add_channels(node, [_gpu()])
        assert ids == [f"{node}/nvml.gpu0.energy"]
        # node clock = driver + off; readings every 0.1 s for 10 s of driver time
        rs = [(k * 100_000_000 + off, "nvml.gpu0.energy", watts * k / 10) for k in range(101)]
        m.add_readings(node, rs, lambda t, off=off: t - off)
    m.add_failures("bbbb", [("nvml", 3_000_000_000 - 2_000_000_000, "boom")], lambda t: t + 2_000_000_000)
    log = m.log
    assert log.channels["aaaa/nvml.gpu0.energy"].device == "aaaa/gpu0"
    assert log.channels["aaaa/nvml.gpu0.energy"].node == "aaaa"
    t = boundary_totals(log, 1_000_000_000, 9_000_000_000)
    assert t["accelerator"].energy_j == pytest.approx(400 * 8)
    assert sorted(t["accelerator"].devices) == ["aaaa/gpu0", "bbbb/gpu0"]
    assert t["cluster"].energy_j == pytest.approx(400 * 8)
    per = split_by_node(log)
    assert set(per) == {"aaaa", "bbbb"}
    assert boundary_totals(per["aaaa"], 1_000_000_000, 9_000_000_000)["accelerator"].energy_j == pytest.approx(2400)
    assert [f.t_ns for f in per["bbbb"].failures] == [3_000_000_000] and not per["aaaa"].failures


def test_node_channel_without_device():
    c = node_channel(Channel(id="ipmi.power", sensor="ipmi", kind="power", quantity="power", unit="W",
                             boundary="node"), "n1")
    assert (c.id, c.device, c.node) == ("n1/ipmi.power", "n1", "n1")
