"""``run/telemetry.py``: which sensors a run samples, and the sampler it starts (or does not). Ground
truth: ``ScriptedSensor``s that read a known power, fail to open, or offer no channel; the sampler's
own log; and the session's stack, which must stop what was started."""

from __future__ import annotations

import contextlib
import time

import pytest

from tests.fakes.scripted_sensor import ScriptedSensor, build_log, power_channel
from wattbench.config.run import RunConfig
from wattbench.core.clock import ClockAnchor, now_ns
from wattbench.core.errors import SensorError
from wattbench.run.session import RunSession
from wattbench.run.telemetry import ClusterTelemetry, open_sensors, start_telemetry
from wattbench.telemetry.const import ConstSensor


def _session(**cfg) -> RunSession:
    cfg.setdefault("target", "http://127.0.0.1:9")
    return RunSession(config=RunConfig(**cfg), progress=lambda event: None, anchor=ClockAnchor.take(),
                      run_id="20261202-000000-abcd", stack=contextlib.ExitStack())


def test_no_sensors_means_none_and_given_specs_are_parsed_without_probing():
    assert open_sensors(RunConfig(target="http://h:1", no_sensors=True)) == ([], [])
    sensors, problems = open_sensors(RunConfig(target="http://h:1", sensors=["const:node=700",
                                                                             "const:accelerator=350"]))
    assert problems == []
    assert [type(s) for s in sensors] == [ConstSensor, ConstSensor]
    assert [(s.boundary, s.watts) for s in sensors] == [("node", 700.0), ("accelerator", 350.0)]


def test_a_reading_sensor_starts_a_sampler_that_the_session_stops(tmp_path):
    s = _session(sample_interval_s=0.01)
    sensor = ScriptedSensor(250.0, poll_interval_s=0.01)
    with s.stack:
        assert start_telemetry(s, [sensor]) == []
        assert s.sampler is not None and [c.id for c in s.sampler.channels] == ["scripted.energy", "scripted.power"]
        deadline = time.monotonic() + 1.0
        while sensor.reads < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sensor.reads >= 3  # sampling in the background
        seen = list(s.sampler.log.values["scripted.power"])
        assert seen == pytest.approx([250.0] * len(seen), rel=1e-12)
        assert s.log is s.sampler.log
    closed_ns = now_ns()
    assert sensor.closed and max(sensor.read_times) < closed_ns  # stopped (threads joined) with the stack


def test_a_meter_that_fails_to_open_is_a_problem_and_no_sampler():
    s = _session()
    broken = ScriptedSensor(100.0, name="meter", open_error=SensorError("permission denied: give --sensor …"))
    empty = ScriptedSensor(100.0, name="bare", counter=False, power=False)
    with s.stack:
        problems = start_telemetry(s, [broken, empty])
        assert s.sampler is None and s.log is None
    assert problems == ["meter: permission denied: give --sensor …", "bare: opened but offers no channel on "
                                                                      "this machine"]
    assert broken.reads == 0 and empty.reads == 0 and empty.closed


def test_one_meter_failing_leaves_the_others_sampled():
    s = _session(sample_interval_s=0.01)
    good = ScriptedSensor(300.0, name="good", counter=False)
    broken = ScriptedSensor(100.0, name="meter", open_error=SensorError("not found"))
    with s.stack:
        problems = start_telemetry(s, [broken, good])
        assert problems == ["meter: not found"]
        assert [c.id for c in s.sampler.channels] == ["good.power"]


def test_a_named_meter_that_fails_to_open_stops_the_run_and_closes_what_opened():
    """``--sensor`` named the meters: one that cannot be read is the run's error (exit 2, before any
    load), not a note; the meter that did open is closed, nothing samples."""
    from wattbench.core.errors import UserError

    s = _session(sensors=["const:node=300", "nvml"])
    good = ScriptedSensor(300.0, name="good", counter=False)
    broken = ScriptedSensor(100.0, name="nvml", open_error=SensorError("NVML could not initialise"))
    with s.stack:
        with pytest.raises(UserError) as e:
            start_telemetry(s, [good, broken])
        assert s.sampler is None
    assert str(e.value).startswith("--sensor nvml cannot be read on this machine (nvml: NVML could not initialise)")
    assert good.closed and good.reads == 0 and broken.reads == 0


def test_no_sensors_given_or_found_starts_nothing():
    s = _session(no_sensors=True)
    assert start_telemetry(s) == [] and s.sampler is None


class _Cluster:
    """A Ray cluster's telemetry as ``RayCluster`` offers it (merged log, closing reads, stop)."""

    def __init__(self, log):
        self.log, self.closing, self.stopped = log, [], 0

    def telemetry(self):
        return self.log

    def closing_reads(self, t_ns, timeout_s):
        self.closing.append((t_ns, timeout_s))
        return True

    def stop_sensors(self):
        self.stopped += 1
        return self.log


def test_the_clusters_merged_stream_is_seen_through_the_samplers_interface():
    log = build_log((power_channel("n1.p", boundary="node"), [0.0, 1.0], [400.0, 400.0]))
    cluster = _Cluster(log)
    t = ClusterTelemetry(cluster)
    assert t.log is log and [c.id for c in t.channels] == ["n1.p"]
    assert t.await_reads_after(123, 2.0) and cluster.closing == [(123, 2.0)]
    assert t.latest_power_w() is None and t.gpu_inventory() == []
    t.close()
    assert cluster.stopped == 1
