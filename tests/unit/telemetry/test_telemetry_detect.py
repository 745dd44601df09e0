import json

import pytest
from tests.fakes.fake_nvml import FakeGPU, FakeNvml, NVMLError
from tests.fakes.telemetry_sysfs import jetson_tree, rapl_tree
from typer.testing import CliRunner

from wattbench.telemetry.detect import autodetect, inventory
from wattbench.telemetry.estimate import CpuEstimateSensor
from wattbench.telemetry.ipmi import IpmiSensor
from wattbench.telemetry.jetson import JetsonSensor
from wattbench.telemetry.nvidia_smi import NvidiaSmiSensor
from wattbench.telemetry.nvml import NvmlSensor
from wattbench.telemetry.rapl import RaplSensor


def base_kw(tmp_path, **kw):
    d = dict(powercap_root=tmp_path / "pc", jetson_root=tmp_path / "i2c", hwmon_root=tmp_path / "hwmon",
             ipmi_device=tmp_path / "ipmi0",
             kfd_device=tmp_path / "kfd", which=lambda name: None)
    d.update(kw)
    return d


def test_nothing_here(tmp_path):
    sensors, problems = autodetect(**base_kw(tmp_path, nvml=FakeNvml(init_error=NVMLError(12))))
    assert sensors == []
    # one line that says what was looked for and how to get a figure anyway
    assert len(problems) == 1 and problems[0].startswith("no power meter found: looked for NVIDIA GPU")
    assert "const:node=WATTS" in problems[0] and "estimate:cpu" in problems[0]


def test_nothing_here_but_cpu_estimate_opted_in(tmp_path):
    from wattbench.telemetry.estimate import CpuEstimateSensor

    sensors, problems = autodetect(**base_kw(tmp_path, nvml=FakeNvml(init_error=NVMLError(12))), estimate_cpu=True)
    assert [type(s) for s in sensors] == [CpuEstimateSensor] and problems == []


def test_nvml_rapl_ipmi(tmp_path):
    rapl_tree(tmp_path / "pc")
    (tmp_path / "ipmi0").write_text("")
    sensors, problems = autodetect(**base_kw(tmp_path, nvml=FakeNvml(), which=lambda n: f"/usr/bin/{n}"))
    assert [type(s) for s in sensors] == [NvmlSensor, RaplSensor, IpmiSensor]
    assert problems == []


def test_nvml_broken_falls_back_to_nvidia_smi(tmp_path):
    sensors, problems = autodetect(**base_kw(tmp_path, nvml=FakeNvml(init_error=NVMLError(18)),
                                             which=lambda n: "/usr/bin/nvidia-smi" if n == "nvidia-smi" else None))
    assert [type(s) for s in sensors] == [NvidiaSmiSensor]
    assert "falling back to nvidia-smi" in problems[0] and "nvidia-ml-py" in problems[0]


def test_rapl_permission_and_missing_ipmitool(tmp_path):
    rapl_tree(tmp_path / "pc")
    (tmp_path / "ipmi0").write_text("")

    def deny(path):
        raise PermissionError(13, "Permission denied")

    sensors, problems = autodetect(**base_kw(tmp_path, nvml=FakeNvml(gpus=[]), read_text=deny))
    assert sensors == []
    text = "\n".join(problems)
    assert "rapl: permission denied" in text and "chmod a+r" in text
    assert "ipmitool is missing" in text and "apt-get install ipmitool" in text
    assert "estimate:cpu" in text  # says how to get CPU power without adding an estimate


def test_estimate_only_when_asked_and_no_cpu_meter(tmp_path):
    kw = base_kw(tmp_path, nvml=FakeNvml(gpus=[]))
    assert autodetect(**kw)[0] == []
    sensors, _ = autodetect(**kw, estimate_cpu=True)
    assert [type(s) for s in sensors] == [CpuEstimateSensor]
    rapl_tree(tmp_path / "pc")
    sensors, _ = autodetect(**kw, estimate_cpu=True)
    assert [type(s) for s in sensors] == [RaplSensor]


def test_jetson_detected(tmp_path):
    jetson_tree(tmp_path / "i2c", {1: ("VDD_IN", 1000, 5000)})
    sensors, _ = autodetect(**base_kw(tmp_path, nvml=FakeNvml(gpus=[])))
    assert [type(s) for s in sensors] == [JetsonSensor]


class ScriptedClock:
    """The monotonic clock of one inventory run, scripted: every read costs ``read_ns``; every
    sleep overruns by a seeded draw of up to ``overrun_ms`` (a host busy with other work). The
    fake NVML's refresh grid runs on the same clock, so the run is the same on any machine."""

    def __init__(self, read_ns: int = 20_000, overrun_ms: float = 4.0, seed: int = 7):
        import random

        self.ns, self.read_ns, self.overrun_ms, self.rng = 10**12, read_ns, overrun_ms, random.Random(seed)

    def now_ns(self) -> int:
        self.ns += self.read_ns
        return self.ns

    def sleep(self, s: float) -> None:
        self.ns += int((s + self.rng.uniform(0, self.overrun_ms / 1e3)) * 1e9)

    def seconds(self) -> float:
        return self.ns / 1e9


@pytest.mark.parametrize("period_s", [0.1, 0.25])
def test_inventory_measures_update_period(tmp_path, monkeypatch, period_s):
    import types

    import wattbench.telemetry.detect as detect
    import wattbench.telemetry.nvml as nvml_mod

    clock = ScriptedClock()
    monkeypatch.setattr(detect, "now_ns", clock.now_ns)
    monkeypatch.setattr(nvml_mod, "now_ns", clock.now_ns)
    monkeypatch.setattr(detect, "time", types.SimpleNamespace(sleep=clock.sleep))
    nv = FakeNvml(gpus=[FakeGPU()], update_period_s=period_s, unsupported={"nvmlDeviceGetSamples"},
                  clock=clock.seconds)
    rows = inventory(None, measure_s=2.0, **base_kw(tmp_path, nvml=nv))
    chans = {r["id"]: r for r in rows if r["type"] == "channel"}
    e = chans["nvml.gpu0.energy"]
    assert e["value"] == pytest.approx(1000.0, abs=50)
    # polled every 10 ms (+ the 2 ms idle sleep, + up to 4 ms overrun): a refresh is seen at most
    # one poll late, so the median gap between seen changes is the grid within one poll
    poll_s = 0.010 + 0.002 + 0.004
    assert e["measured_update_s"] == pytest.approx(period_s, abs=poll_s)
    assert chans["nvml.gpu0.power_instant"]["measured_update_s"] == pytest.approx(period_s, abs=poll_s)
    assert abs(e["changes"] - 2.0 / period_s) <= 1  # every refresh in the 2 s seen, none invented
    assert e["read_ms"] is not None and e["read_ms"] > 0
    assert e["boundary"] == "accelerator"
    assert chans["nvml.gpu0.temperature_c"]["measured_update_s"] is None  # never changes in the fake


def test_inventory_specs_and_problems(tmp_path):
    rows = inventory(["const:node=700", f"file:{tmp_path / 'missing.csv'}"], measure_s=0.1)
    chans = [r for r in rows if r["type"] == "channel"]
    probs = [r["problem"] for r in rows if r["type"] == "problem"]
    assert [(c["id"], c["value"], c["method"]) for c in chans] == [("const.node", 700.0, "declared")]
    assert len(probs) == 1 and "does not exist" in probs[0]


def test_cli_sensors_json_and_table(tmp_path):
    from wattbench.cli.main import build_app

    app = build_app()
    r = CliRunner().invoke(app, ["sensors", "--sensor", "const:wall=812.5", "--measure", "0.1", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert rows[0]["id"] == "const.wall" and rows[0]["value"] == pytest.approx(812.5, rel=1e-9)
    r = CliRunner().invoke(app, ["sensors", "--sensor", "const:wall=812.5", "--measure", "0.1"])
    assert r.exit_code == 0 and "const.wall" in r.output and "812 W" in r.output and "declared" in r.output
    r = CliRunner().invoke(app, ["sensors", "--sensor", "const:wall"])
    assert r.exit_code == 2 and "bad --sensor 'const:wall'" in r.output


def test_hwmon_detected_and_inventoried(tmp_path):
    from tests.fakes.telemetry_sysfs import acpi_power_meter, ina226, k10temp

    from wattbench.telemetry.hwmon import HwmonSensor

    k10temp(tmp_path / "hwmon")
    sensors, problems = autodetect(**base_kw(tmp_path, nvml=FakeNvml(gpus=[])))
    assert sensors == [] and problems[0].startswith("no power meter found")  # temperatures are no meter
    acpi_power_meter(tmp_path / "hwmon", uw=180_000_000)
    ina226(tmp_path / "hwmon", uw=5_000_000)
    rows = inventory(None, measure_s=0.05, **base_kw(tmp_path, nvml=FakeNvml(gpus=[])))
    chans = {r["id"]: r for r in rows if r["type"] == "channel"}
    assert chans["hwmon.power_meter.power1_avg"]["boundary"] == "node"
    assert chans["hwmon.power_meter.power1_avg"]["value"] == pytest.approx(180.0)
    assert chans["hwmon.ina226.power1"]["kind"] == "aux" and chans["hwmon.ina226.power1"]["value"] == pytest.approx(5.0)
    probs = [r["problem"] for r in rows if r["type"] == "problem"]
    assert any("boundary=node" in p for p in probs)  # how to count the INA rail
    sensors, _ = autodetect(**base_kw(tmp_path, nvml=FakeNvml(gpus=[])))
    assert [type(s) for s in sensors] == [HwmonSensor]


def test_hwmon_skips_chips_other_sensors_read(tmp_path):
    from tests.fakes.telemetry_sysfs import amd_energy, ina3221

    jetson_tree(tmp_path / "i2c", {1: ("VDD_IN", 1000, 5000)})
    ina3221(tmp_path / "hwmon")  # the same INA3221 seen through /sys/class/hwmon
    rapl_tree(tmp_path / "pc")
    amd_energy(tmp_path / "hwmon")  # the same socket energy RAPL reads
    sensors, problems = autodetect(**base_kw(tmp_path, nvml=FakeNvml(gpus=[])))
    assert [type(s) for s in sensors] == [RaplSensor, JetsonSensor] and problems == []


def test_hwmon_unreadable_is_a_problem_with_the_fix(tmp_path):
    from tests.fakes.telemetry_sysfs import amd_energy

    amd_energy(tmp_path / "hwmon")

    def deny(path):
        raise PermissionError(13, "Permission denied")

    sensors, problems = autodetect(**base_kw(tmp_path, nvml=FakeNvml(gpus=[]), read_text=deny))
    assert sensors == []
    (p,) = problems
    assert p.startswith("hwmon: permission denied reading") and "chmod a+r" in p and "udev" in p


def test_cli_sensors_named_meter_with_nothing_readable_exits_nonzero(tmp_path):
    """``sensors --sensor rapl`` on a machine whose powercap tree is empty: the reason, exit 1."""
    from wattbench.cli.main import build_app

    app = build_app()
    root = tmp_path / "powercap"  # exists, holds no RAPL zone
    root.mkdir()
    r = CliRunner().invoke(app, ["sensors", "--sensor", f"rapl:root={root}", "--measure", "0"])
    assert r.exit_code == 1, r.output
    assert "nothing readable" in r.stderr and "--sensor rapl" in r.stderr
    # the problem is said once, on stderr (a past defect: it was printed on stdout and stderr)
    assert "problem:" not in r.stdout and "RAPL" not in r.stdout and "rapl" not in r.stdout.lower()
    r = CliRunner().invoke(app, ["sensors", "--sensor", f"rapl:root={root}", "--measure", "0", "--json"])
    assert r.exit_code == 1
