import time

import pytest
from tests.fakes.fake_nvml import FakeGPU, FakeNvml, NVMLError

from wattbench.core.errors import SensorError
from wattbench.telemetry.nvml import NvmlSensor, gpu_inventory


def by_id(readings):
    out = {}
    for r in readings:
        out.setdefault(r.channel, []).append(r)
    return out


def test_channels_and_units():
    nv = FakeNvml(gpus=[FakeGPU(power_mw=312_500, mem_power_mw=47_250, energy_mj=5_000_123, reasons=0x4)])
    s = NvmlSensor(nvml=nv)
    chans = {c.id: c for c in s.open()}
    e = chans["nvml.gpu0.energy"]
    assert (e.kind, e.unit, e.boundary, e.primary) == ("counter", "J", "accelerator", True)
    assert chans["nvml.gpu0.power_instant"].primary is False
    assert chans["nvml.gpu0.memory_power"].boundary == "accelerator_memory"
    assert chans["nvml.gpu0.power_avg"].quantity == "power_avg"
    assert "nvml.gpu0.power" not in chans  # fallback only without field 186
    assert chans["nvml.gpu0.clock_event_reasons"].kind == "aux"
    r = by_id(s.read())
    assert r["nvml.gpu0.energy"][0].value == pytest.approx(5000.123)
    assert r["nvml.gpu0.power_instant"][0].value == pytest.approx(312.5)
    assert r["nvml.gpu0.power_avg"][0].value == pytest.approx(302.5)
    assert r["nvml.gpu0.memory_power"][0].value == pytest.approx(47.25)
    assert r["nvml.gpu0.power_limit_w"][0].value == pytest.approx(700.0)
    assert r["nvml.gpu0.memory_used_bytes"][0].value == 70_000_000_000
    assert r["nvml.gpu0.clock_event_reasons"][0].value == 4
    s.close()
    assert nv.inits == 0


def test_counter_delta_matches_script():
    nv = FakeNvml(gpus=[FakeGPU(power_mw=400_000)])
    s = NvmlSensor(nvml=nv, counter_every_s=0)
    s.open()
    a = by_id(s.read())["nvml.gpu0.energy"][0].value
    nv.advance(2.5)
    b = by_id(s.read())["nvml.gpu0.energy"][0].value
    assert b - a == pytest.approx(1000.0)  # 400 W x 2.5 s


def test_not_supported_drops_channels_and_power_becomes_primary():
    nv = FakeNvml(unsupported={"nvmlDeviceGetTotalEnergyConsumption", "field:186", "field:185:2",
                               "nvmlDeviceGetSamples", "nvmlDeviceGetCurrentClocksEventReasons"})
    s = NvmlSensor(nvml=nv)
    chans = {c.id: c for c in s.open()}
    assert "nvml.gpu0.energy" not in chans
    assert "nvml.gpu0.power_instant" not in chans and "nvml.gpu0.memory_power" not in chans
    assert "nvml.gpu0.power_samples" not in chans
    assert "nvml.gpu0.clock_event_reasons" not in chans
    assert chans["nvml.gpu0.power"].primary is True  # nvmlDeviceGetPowerUsage fallback
    assert s.warnings == []  # NotSupported is silent
    assert by_id(s.read())["nvml.gpu0.power"][0].value == pytest.approx(300.0)


def test_other_error_at_probe_is_a_warning():
    nv = FakeNvml()
    nv.fail_next["nvmlDeviceGetTemperature"] = NVMLError(4)
    s = NvmlSensor(nvml=nv)
    ids = [c.id for c in s.open()]
    assert "nvml.gpu0.temperature_c" not in ids
    assert any("temperature_c" in w for w in s.warnings)


def test_init_failure_names_fix():
    s = NvmlSensor(nvml=FakeNvml(init_error=NVMLError(12)))
    with pytest.raises(SensorError, match="nvidia-ml-py"):
        s.open()


def test_bad_index():
    s = NvmlSensor(indices=[0, 3], nvml=FakeNvml(gpus=[FakeGPU(), FakeGPU()]))
    with pytest.raises(SensorError, match="index 3"):
        s.open()


def test_indices_subset():
    nv = FakeNvml(gpus=[FakeGPU(power_mw=100_000), FakeGPU(power_mw=200_000)])
    s = NvmlSensor(indices=[1], nvml=nv)
    ids = {c.id for c in s.open()}
    assert "nvml.gpu1.energy" in ids and "nvml.gpu0.energy" not in ids
    assert by_id(s.read())["nvml.gpu1.power_instant"][0].value == pytest.approx(200.0)


def test_aux_read_at_its_own_rate():
    s = NvmlSensor(nvml=FakeNvml(), aux_every_s=3600, counter_every_s=0)
    s.open()
    first = by_id(s.read())
    second = by_id(s.read())
    assert "nvml.gpu0.temperature_c" in first
    assert "nvml.gpu0.temperature_c" not in second
    assert "nvml.gpu0.energy" in second


def test_sample_buffer_drain_maps_wall_us_to_mono(monkeypatch):
    from wattbench.core.clock import ClockAnchor
    from wattbench.telemetry import nvml as nvml_module

    nv = FakeNvml()
    g = nv.gpus[0]
    now_wall_us = time.time_ns() // 1000
    # the drain's wall/monotonic pairing is an input (a real one is off by however long the host
    # kept the thread between its two clock reads): wall "now" is monotonic 10^12 ns
    mono_now = 10**12
    anchor = ClockAnchor(wall_ns=now_wall_us * 1000, mono_ns=mono_now, uncertainty_ns=0)
    monkeypatch.setattr(nvml_module, "ClockAnchor", type("Fixed", (), {"take": staticmethod(lambda: anchor)}))
    g.samples = [(now_wall_us - 40_000, 290_000), (now_wall_us - 20_000, 300_000)]
    s = NvmlSensor(nvml=nv, samples_every_s=0)
    s.open()
    got = by_id(s.read())["nvml.gpu0.power_samples"]
    assert [r.value for r in got] == pytest.approx([290.0, 300.0], rel=1e-9)
    # mapped onto the monotonic clock through the anchor, exactly: 40 and 20 ms before it
    assert [r.t_ns for r in got] == [mono_now - 40_000_000, mono_now - 20_000_000]
    assert s.sample_offset_mode == "wall_anchor"
    # next drain returns only new samples (last timestamp seen)
    g.samples.append((now_wall_us, 310_000))
    got2 = by_id(s.read())["nvml.gpu0.power_samples"]
    assert [r.value for r in got2] == pytest.approx([310.0], rel=1e-9)
    # nothing new: NOT_FOUND is not an error
    assert "nvml.gpu0.power_samples" not in by_id(s.read())


def test_sample_buffer_non_wall_timestamps_fall_back():
    nv = FakeNvml()
    nv.gpus[0].samples = [(1_000_000, 250_000), (1_020_000, 260_000)]  # µs since boot, not epoch
    s = NvmlSensor(nvml=nv, samples_every_s=0)
    s.open()
    t0 = time.perf_counter_ns()
    got = by_id(s.read())["nvml.gpu0.power_samples"]
    t1 = time.perf_counter_ns()
    assert s.sample_offset_mode == "newest_at_drain"
    assert t0 <= got[1].t_ns <= t1
    assert got[1].t_ns - got[0].t_ns == 20_000_000


def test_gpu_inventory():
    nv = FakeNvml(gpus=[FakeGPU(name="NVIDIA H200")], cuda=12080)
    inv = gpu_inventory(nv)
    assert len(inv) == 1
    g = inv[0]
    assert g.name == "NVIDIA H200" and g.driver == "580.65.06" and g.cuda_driver == "12.8"
    assert g.power_limit_w == pytest.approx(700.0, rel=1e-9) and g.memory_total_bytes == 143_771_000_000 and g.pstate == "P0"
    assert nv.inits == 0


def test_gpu_inventory_without_nvml():
    assert gpu_inventory(FakeNvml(init_error=NVMLError(12))) == []


def test_aux_failure_mid_run_keeps_energy():
    nv = FakeNvml()
    s = NvmlSensor(nvml=nv, aux_every_s=0, counter_every_s=0)
    s.open()
    nv.fail_next["nvmlDeviceGetTemperature"] = NVMLError(15)  # GPU lost, for this one call
    got = by_id(s.read())
    assert "nvml.gpu0.energy" in got and "nvml.gpu0.temperature_c" not in got
    assert s.soft_errors == {"nvml.gpu0.temperature_c": 1}
    nv.fail_next["nvmlDeviceGetTotalEnergyConsumption"] = NVMLError(15)
    with pytest.raises(NVMLError):  # the energy figure's failure reaches the sampler as a gap
        s.read()


def test_throttle_reasons_fallback_on_older_driver():
    class Older(FakeNvml):
        def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
            return 0x20

    s = NvmlSensor(nvml=Older(unsupported={"nvmlDeviceGetCurrentClocksEventReasons"}))
    s.open()
    assert by_id(s.read())["nvml.gpu0.clock_event_reasons"][0].value == 0x20


def test_memory_scope_ignored_by_driver_is_dropped():
    # field 185's board value is power_mw - 10 W: a memory scope answering the same is ignored
    nv = FakeNvml(gpus=[FakeGPU(power_mw=90_000, mem_power_mw=80_000)])
    s = NvmlSensor(nvml=nv)
    ids = {c.id for c in s.open()}
    assert "nvml.gpu0.memory_power" not in ids and "nvml.gpu0.power_instant" in ids
    assert any("ignores the scope" in w for w in s.warnings)


def test_h200_memory_power_comes_from_the_1s_average_field():
    """Driver 580 on an H200: field 186 with the memory scope is NOT_SUPPORTED, field 185 with it
    answers (a 1 s average). Each pair is probed on its own, so the channel is kept, labelled as
    an average, and its readings are stamped at the centre of their averaging second."""
    nv = FakeNvml(gpus=[FakeGPU(power_mw=300_000, mem_power_mw=38_800)])
    s = NvmlSensor(nvml=nv)
    chans = {c.id: c for c in s.open()}
    m = chans["nvml.gpu0.memory_power"]
    assert (m.boundary, m.quantity, m.update_period_s) == ("accelerator_memory", "power_avg", pytest.approx(1.0, rel=1e-9))
    assert "field 185" in m.source and "1 s average" in m.source and m.uncertainty_pct == pytest.approx(10.0, rel=1e-9)
    assert not any("memory" in w for w in s.warnings)  # the refused 186+scope pair is NOT_SUPPORTED: silent
    t_before = time.perf_counter_ns()
    r = by_id(s.read())
    mem, inst = r["nvml.gpu0.memory_power"][0], r["nvml.gpu0.power_instant"][0]
    assert mem.value == pytest.approx(38.8)
    assert inst.t_ns - mem.t_ns == 500_000_000  # same call, half a second earlier
    assert mem.t_ns < t_before
    s.close()


def test_memory_power_prefers_the_instant_field_where_the_driver_answers_it():
    nv = FakeNvml(gpus=[FakeGPU(mem_power_mw=50_000, mem_scope_fields=(185, 186))])
    s = NvmlSensor(nvml=nv)
    m = {c.id: c for c in s.open()}["nvml.gpu0.memory_power"]
    assert (m.quantity, m.update_period_s, m.uncertainty_pct) == ("power", pytest.approx(0.1, rel=1e-9), None)
    r = by_id(s.read())
    assert r["nvml.gpu0.memory_power"][0].t_ns == r["nvml.gpu0.power_instant"][0].t_ns
    s.close()


def test_memory_scope_refused_on_both_fields_means_no_channel():
    nv = FakeNvml(gpus=[FakeGPU(mem_scope_fields=())])
    s = NvmlSensor(nvml=nv)
    assert "nvml.gpu0.memory_power" not in {c.id for c in s.open()}
    assert not any("memory" in w for w in s.warnings)


def test_counter_is_read_seldom_and_once_more_on_request(monkeypatch):
    """The counter costs ~3-5 ms of CPU per read on an H200: read at most every counter_every_s,
    power fields at every poll; force_full_read() (the sampler's closing read) includes it."""
    import wattbench.telemetry.nvml as nvml_mod

    clock = {"t": 10_000_000_000}
    monkeypatch.setattr(nvml_mod, "now_ns", lambda: clock["t"])
    nv = FakeNvml(unsupported={"nvmlDeviceGetSamples"})
    s = NvmlSensor(nvml=nv, counter_every_s=0.9)
    s.open()
    got = []
    for k in range(30):  # 3 s of 0.1 s polls, each a little late
        clock["t"] = 10_000_000_000 + k * 100_000_000 + (k % 3) * 1_000_000
        ids = {r.channel for r in s.read()}
        assert "nvml.gpu0.power_instant" in ids
        if "nvml.gpu0.energy" in ids:
            got.append(k)
    assert got == [0, 9, 18, 27]  # every 9th poll: 0.9 s apart, under the 1 s largest-gap warning
    s.force_full_read()
    assert "nvml.gpu0.energy" in {r.channel for r in s.read()}
    assert nv.calls.count("nvmlDeviceGetTotalEnergyConsumption") == len(got) + 1 + 1  # + the probe at open
    s.close()
