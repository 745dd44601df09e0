import time

import pytest

from wattbench.core.errors import SensorError
from wattbench.telemetry.jsonl import TelemetryWriter, read_anchor, read_telemetry, write_telemetry
from wattbench.core.clock import ClockAnchor
from wattbench.telemetry.sampler import Sampler, period_of
from tests.fakes.scripted_clock import SamplerClock
from tests.fakes.scripted_sensor import ScriptedSensor as _Scripted


def ScriptedSensor(**kw):  # noqa: N802  (reads like the class it builds)
    """The suite's scripted sensor as these tests use it: constant power, no own poll interval
    unless given (the sampler's applies), device "d0"."""
    return _Scripted(**{"poll_interval_s": None, "update_period_s": None, "device": "d0", **kw})


def _until(cond, hang_s: float = 60.0) -> None:
    """Wait for a condition the test needs (not a timing claim: the deadline only ends a hang)."""
    deadline = time.monotonic() + hang_s
    while not cond():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.005)


def test_period_of():
    assert period_of(ScriptedSensor(), 0.05) == pytest.approx(0.05, rel=1e-9)  # no own interval -> the sampler's
    assert period_of(ScriptedSensor(poll_interval_s=1.0), 0.05) == pytest.approx(1.0, rel=1e-9)


def test_deadlines_do_not_drift_and_counter_matches():
    """Absolute deadlines on a scripted clock: every read takes 3 ms and the 11th stalls for 50 ms
    (2.5 periods); reads stay on the 20 ms grid (relative deadlines would drift 3 ms a read), the
    stall skips the two slots it overran instead of bursting, and the counter is exact."""
    span = 500_000_000
    sc = SamplerClock(span)

    class Timed(_Scripted):
        def read(self):
            out = super().read()
            sc.spend(50_000_000 if self.reads == 11 else 3_000_000)
            return out

    s = Timed(power_w=250.0, poll_interval_s=None, update_period_s=None, device="d0", clock=sc)
    sm = Sampler([s], interval_s=0.02, clock=sc)
    assert sm.open() == []
    sm.start()
    sc.elapse()
    log = sm.stop()
    assert s.closed
    slots = [(t - sc.start_ns) / 20_000_000 for t in s.read_times]
    # slots 0..10, the stall (read 11 at slot 10 ends at 53 ms into it: slots 11 and 12 are
    # missed), then 13..24: the last slot before the 500 ms horizon
    assert slots == [float(k) for k in [*range(11), *range(13, 25)]]
    assert sm.overhead()["missed_deadlines"] == 2
    t, v = log.series("scripted.energy")
    assert list(t) == s.read_times
    # the counter is scripted: energy between first and last reading = 250 W x elapsed
    assert v[-1] - v[0] == pytest.approx(250.0 * (t[-1] - t[0]) / 1e9, rel=1e-9)


def test_own_poll_interval_respected():
    """Each sensor on its own interval, in its own thread: over a scripted 450 ms the 20 ms sensor
    reads 23 times (0, 20, …, 440 ms), the one with its own 200 ms interval 3 times (0, 200, 400)."""
    sc = SamplerClock(450_000_000)
    fast = ScriptedSensor(name="fast", clock=sc)
    slow = ScriptedSensor(name="slow", poll_interval_s=0.2, clock=sc)
    sm = Sampler([fast, slow], interval_s=0.02, clock=sc)
    sm.start()
    sc.elapse()
    sm.stop()
    assert [t - sc.start_ns for t in fast.read_times] == [k * 20_000_000 for k in range(23)]
    assert [t - sc.start_ns for t in slow.read_times] == [0, 200_000_000, 400_000_000]


def test_failure_mid_run_leaves_gap_and_continues():
    sc = SamplerClock(250_000_000)
    s = ScriptedSensor(fail_on={3, 4}, clock=sc)
    sm = Sampler([s], interval_s=0.02, clock=sc)
    sm.start()
    sc.elapse()
    log = sm.stop()
    assert s.reads == 13  # 0, 20, …, 240 ms
    assert len(log.failures) == 2
    assert all("scripted failure" in f.error for f in log.failures)
    t, _ = log.series("scripted.energy")
    assert len(t) == s.reads - 2
    # the gap: the failed reads (3rd and 4th) are missing, every other reading is kept at the
    # time it was read (the sensor's own read log: exact, whatever the host's timing)
    assert list(t) == [x for k, x in enumerate(s.read_times, 1) if k not in (3, 4)]
    assert t[2] == s.read_times[4] and t[2] - t[1] > s.read_times[3] - s.read_times[1]
    assert sm.overhead()["failures"] == 2


def test_open_error_becomes_problem():
    bad = ScriptedSensor(name="bad", open_error=SensorError("no access", "run as root"))
    good = ScriptedSensor(name="good")
    sm = Sampler([bad, good], interval_s=0.05)
    problems = sm.open()
    assert problems == ["bad: no access (run as root)"]
    assert [c.id for c in sm.channels] == ["good.energy", "good.power"]
    sm.close()


def test_snapshot_and_latest_power():
    a = ScriptedSensor(name="a", power_w=300.0)
    b = ScriptedSensor(name="b", power_w=200.0)
    n = ScriptedSensor(name="n", power_w=900.0, boundary="node")
    sm = Sampler([a, b, n], interval_s=0.02)
    sm.start()
    _until(lambda: min(x.reads for x in (a, b, n)) >= 2)  # every sensor read (twice: a power needs two counter reads)
    snap = sm.snapshot()
    per = sm.latest_power_by_channel()
    total = sm.latest_power_w()
    sm.stop()
    assert snap["a.power"][1] == pytest.approx(300.0, rel=1e-9)
    assert per == pytest.approx({"a.energy": 300.0, "b.energy": 200.0, "n.energy": 900.0}, rel=1e-9)
    assert total == pytest.approx(500.0, rel=1e-9)  # accelerator boundary only, never added to node


def test_overhead_measured():
    sc = SamplerClock(300_000_000)
    sm = Sampler([ScriptedSensor(clock=sc)], interval_s=0.01, clock=sc)
    sm.start()
    sc.elapse()
    sm.stop()
    o = sm.overhead()
    assert o["wall_s"] == pytest.approx(0.3, rel=1e-9) and o["reads"] == 30  # 0, 10, …, 290 ms
    assert o["cpu_s"] > 0  # the thread's own CPU time (real)
    assert o["cpu_pct_of_core"] == pytest.approx(100 * o["cpu_s"] / o["wall_s"])


def test_jsonl_roundtrip_incremental(tmp_path):
    s = ScriptedSensor(fail_on={2})
    sm = Sampler([s], interval_s=0.01)
    sm.start()
    anchor = ClockAnchor.take()
    w = TelemetryWriter(tmp_path / "telemetry.jsonl", sm.channels, anchor)
    _until(lambda: s.reads >= 2)  # the failing 2nd read is in the first flush
    w.flush(sm.log)
    _until(lambda: s.reads >= 4)  # and more after it
    log = sm.stop()
    w.flush(log)
    back = read_telemetry(tmp_path / "telemetry.jsonl")
    assert back.channels == log.channels
    assert back.series("scripted.energy") == log.series("scripted.energy")
    assert len(back.failures) == 1 and back.failures[0].t_ns == log.failures[0].t_ns
    assert read_anchor(tmp_path / "telemetry.jsonl") == anchor
    # a torn last line is ignored
    with open(tmp_path / "telemetry.jsonl", "a") as f:
        f.write('{"c": "scripted.energy", "t": [1,')
    assert read_telemetry(tmp_path / "telemetry.jsonl").series("scripted.power") == log.series("scripted.power")


def test_write_whole_log(tmp_path):
    from wattbench.telemetry.base import Channel, Reading, TelemetryLog

    log = TelemetryLog()
    log.add_channels([Channel(id="x", sensor="s", kind="power", quantity="power", unit="W")])
    log.add([Reading(5, "x", 1.5), Reading(9, "x", 2.5)])
    p = write_telemetry(tmp_path / "t.jsonl", log)
    assert read_telemetry(p).series("x") == ([5, 9], [1.5, 2.5])
    assert read_anchor(p) is None


def test_jsonl_batches_split_and_other_writers_lines(tmp_path, monkeypatch):
    import json

    from wattbench.telemetry import jsonl
    from wattbench.telemetry.base import Channel, Reading, TelemetryLog

    monkeypatch.setattr(jsonl, "BATCH_ROWS", 3)
    log = TelemetryLog()
    log.add_channels([Channel(id="a", sensor="s", kind="power", quantity="power", unit="W")])
    log.add([Reading(i, "a", float(i)) for i in range(7)])
    p = write_telemetry(tmp_path / "t.jsonl", log)
    lines = p.read_text().splitlines()
    assert [len(json.loads(x)["r"]) for x in lines[1:]] == [3, 3, 1]
    # lines another writer may produce: single samples and a later channels line
    with p.open("a") as f:
        f.write(json.dumps({"channels": [{"id": "b", "sensor": "s", "kind": "counter", "quantity": "energy",
                                          "unit": "J", "extra_field": 1}]}) + "\n")
        f.write(json.dumps({"t_ns": 100, "c": "b", "v": 5.0}) + "\n")
    back = read_telemetry(p)
    assert back.series("a") == (list(range(7)), [float(i) for i in range(7)])
    assert back.channels["b"].kind == "counter" and back.series("b") == ([100], [5.0])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    from wattbench.core.errors import UserError

    with pytest.raises(UserError, match="not a wattbench telemetry file"):
        read_telemetry(bad)


def test_slow_sensor_does_not_delay_fast_one():
    spans = []  # (start, end) of every slow read, on the run's clock

    class Slow(_Scripted):
        def read(self):
            a = time.perf_counter_ns()
            time.sleep(0.25)
            spans.append((a, time.perf_counter_ns()))
            return super().read()

    fast = ScriptedSensor(name="fast")
    slow = Slow(name="slow", poll_interval_s=0.3, device="d0")
    sm = Sampler([fast, slow], interval_s=0.02)
    sm.start()
    # until a slow read lies wholly between two fast reads (what the test judges; however long that takes)
    _until(lambda: any(fast.read_times[0] < a and b < fast.read_times[-1] for a, b in list(spans)))
    sm.stop()
    # counted, not timed: the fast sensor went on reading *while* each slow read was blocked (a
    # shared thread would read nothing inside those spans), however busy the host. Only spans
    # between the fast sensor's first and last reads count (not a read while the fast thread was
    # still starting, or the final reads at stop).
    lo, hi = fast.read_times[0], fast.read_times[-1]
    inner = [(a, b) for a, b in spans if lo < a and b < hi]
    assert inner, (spans, lo, hi)
    for a, b in inner:
        assert any(a < t < b for t in fast.read_times), (a, b)
    assert sm.overhead()["threads"] == 2
    assert sm.series("fast.power")[1][0] == pytest.approx(100.0, rel=1e-9)


def test_stop_takes_a_closing_read_of_a_seldom_read_counter():
    """NVML's counter is read about once a second; the sampler's closing read includes it, so the
    last window's end is bracketed by a counter reading."""
    from tests.fakes.fake_nvml import FakeNvml

    from wattbench.telemetry.nvml import NvmlSensor

    nv = FakeNvml(unsupported={"nvmlDeviceGetSamples"})
    sm = Sampler([NvmlSensor(nvml=nv, counter_every_s=3600)], interval_s=0.02)
    sm.start()
    _until(lambda: sm.overhead()["reads"] >= 2)  # polled before the closing read
    log = sm.stop()
    te, _ = log.series("nvml.gpu0.energy")
    tp, _ = log.series("nvml.gpu0.power_instant")
    assert 1 <= len(te) <= 2 and len(tp) > len(te)  # the first read (if the thread got one) and the closing one
    assert te[-1] > sorted(tp)[-2]  # the closing read comes after every poll (its power read a moment later)


def test_a_window_end_gets_a_closing_read_of_a_seldom_read_counter():
    """After a level's window ends, ``await_reads_after`` makes NVML's seldom-read counter (here once an
    hour) read again and waits for it, so the accounting brackets the window's end with a counter
    reading (without it the end is extrapolated; H200 2026-12-01: every level's end was, 0.2-0.7 s
    before the next scheduled read). The hour-long schedule makes the outcome independent of timing:
    only the closing read can put a counter reading after ``t``."""
    from tests.fakes.fake_nvml import FakeNvml

    from wattbench.core.clock import now_ns
    from wattbench.telemetry.nvml import NvmlSensor

    nv = FakeNvml(unsupported={"nvmlDeviceGetSamples"})
    slow = ScriptedSensor(name="slow", poll_interval_s=3600.0)  # polled hourly: not waited for
    sm = Sampler([NvmlSensor(nvml=nv, counter_every_s=3600), slow], interval_s=0.02)
    sm.start()
    try:
        _until(lambda: len(sm.series("nvml.gpu0.energy")[0]) >= 1 and len(sm.series("slow.power")[0]) >= 1)
        t = now_ns()
        assert sm.await_reads_after(t, timeout_s=600.0) is True  # True: every channel it waits for has one
        te, _ = sm.series("nvml.gpu0.energy")
        tp, _ = sm.series("nvml.gpu0.power_instant")
        assert te[-1] > t and tp[-1] > t
        assert len(te) == 2  # the first read and the closing one: nothing else reads an hourly counter
        assert max(sm.series("slow.power")[0]) < t  # the hourly sensor was left as it was
    finally:
        sm.stop()
    assert sm.await_reads_after(now_ns(), timeout_s=600.0) is True  # a stopped sampler: nothing to wait for
