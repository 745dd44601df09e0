import os
from pathlib import Path

import pytest
from tests.fakes.telemetry_sysfs import jetson_tree, rapl_tree, set_energy

from wattbench.core.errors import SensorError
from wattbench.telemetry.jetson import JetsonSensor
from wattbench.telemetry.rapl import RaplSensor


def test_rapl_channels_and_values(tmp_path):
    root = rapl_tree(tmp_path, packages=((0, 1_500_000, 262_143_328_850), (1, 2_000_000, 262_143_328_850)))
    s = RaplSensor(root=root)
    chans = {c.id: c for c in s.open()}
    assert set(chans) == {"rapl.intel-rapl:0", "rapl.intel-rapl:0:0", "rapl.intel-rapl:0:1",
                          "rapl.intel-rapl:1", "rapl.intel-rapl:1:0", "rapl.intel-rapl:1:1"}  # mmio skipped
    p0 = chans["rapl.intel-rapl:0"]
    assert (p0.kind, p0.boundary, p0.primary, p0.unit) == ("counter", "cpu", True, "J")
    assert p0.max_value == pytest.approx(262_143.328850)
    assert chans["rapl.intel-rapl:0:0"].boundary == "dram" and chans["rapl.intel-rapl:0:0"].primary
    assert chans["rapl.intel-rapl:0:1"].primary is False  # core is inside the package
    got = {r.channel: r.value for r in s.read()}
    assert got["rapl.intel-rapl:0"] == pytest.approx(1.5)
    assert got["rapl.intel-rapl:1"] == pytest.approx(2.0)
    set_energy(root, "intel-rapl:0", 11_500_000)
    got = {r.channel: r.value for r in s.read()}
    assert got["rapl.intel-rapl:0"] == pytest.approx(11.5)


def test_rapl_wrap_is_reported_raw_with_range(tmp_path):
    # a small range so the counter wraps: accounting unwraps with max_value
    root = rapl_tree(tmp_path, packages=((0, 990_000, 1_000_000),), dram=False, core=False, mmio=False)
    s = RaplSensor(root=root)
    (c,) = s.open()
    assert c.max_value == pytest.approx(1.0)
    a = s.read()[0].value
    set_energy(root, "intel-rapl:0", 10_000)
    b = s.read()[0].value
    assert (a, b) == (pytest.approx(0.99), pytest.approx(0.01))
    assert (b - a) % c.max_value == pytest.approx(0.02)


def test_rapl_domains_filter(tmp_path):
    s = RaplSensor(root=rapl_tree(tmp_path), domains=["dram"])
    assert [c.id for c in s.open()] == ["rapl.intel-rapl:0:0"]


def test_rapl_permission_error_via_seam(tmp_path):
    # tests may run as root, where chmod 000 does not block reads: simulate at the read seam
    root = rapl_tree(tmp_path)

    def deny(path: Path) -> str:
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return path.read_text().strip()

    with pytest.raises(SensorError) as e:
        RaplSensor(root=root, read_text=deny).open()
    assert "chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj" in e.value.fix
    assert "udev" in e.value.fix and "root" in e.value.fix


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads through chmod 000")
def test_rapl_permission_error_real_chmod(tmp_path):
    root = rapl_tree(tmp_path, dram=False, core=False, mmio=False)
    (root / "intel-rapl:0" / "energy_uj").chmod(0)
    with pytest.raises(SensorError, match="permission denied"):
        RaplSensor(root=root).open()


def test_rapl_absent(tmp_path):
    with pytest.raises(SensorError, match="does not exist"):
        RaplSensor(root=tmp_path / "nope").open()
    with pytest.raises(SensorError, match="no intel-rapl"):
        RaplSensor(root=tmp_path).open()


def test_amd_rapl_layout(tmp_path):
    z = tmp_path / "amd-rapl:0"
    z.mkdir()
    (z / "name").write_text("package-0\n")
    (z / "energy_uj").write_text("42000000\n")
    s = RaplSensor(root=tmp_path)
    (c,) = s.open()
    assert c.boundary == "cpu" and c.max_value is None
    assert s.read()[0].value == pytest.approx(42.0)


def test_jetson_rails(tmp_path):
    jetson_tree(tmp_path, {1: ("VDD_IN", 1500, 19_000), 2: ("VDD_CPU_GPU_CV", 400, 19_000),
                           3: ("VDD_SOC", 300, 19_000), 4: ("VDD_GPU_SOC", 800, 5_000)})
    s = JetsonSensor(root=tmp_path)
    chans = {c.id: c for c in s.open()}
    assert chans["jetson.vdd_in"].boundary == "node" and chans["jetson.vdd_in"].primary
    assert chans["jetson.vdd_gpu_soc"].boundary == "accelerator"
    assert chans["jetson.vdd_cpu_gpu_cv"].kind == "aux"
    assert not any("sum" in c for c in chans)
    got = {r.channel: r.value for r in s.read()}
    assert got["jetson.vdd_in"] == pytest.approx(28.5)  # 1.5 A x 19 V
    assert got["jetson.vdd_gpu_soc"] == pytest.approx(4.0)


def test_jetson_absent(tmp_path):
    with pytest.raises(SensorError, match="no INA3221"):
        JetsonSensor(root=tmp_path).open()
