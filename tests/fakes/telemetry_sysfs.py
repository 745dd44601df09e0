"""Fake sysfs trees: powercap RAPL zones and Jetson INA3221 hwmon rails."""

from __future__ import annotations

from pathlib import Path


def rapl_tree(root: Path, packages=((0, 1_000_000, 262_143_328_850),), dram=True, core=True, mmio=True) -> Path:
    """``packages``: (index, energy_uj, max_energy_range_uj)."""
    for n, uj, max_uj in packages:
        z = root / f"intel-rapl:{n}"
        z.mkdir(parents=True)
        (z / "name").write_text(f"package-{n}\n")
        (z / "energy_uj").write_text(f"{uj}\n")
        (z / "max_energy_range_uj").write_text(f"{max_uj}\n")
        if dram:
            d = root / f"intel-rapl:{n}:0"
            d.mkdir()
            (d / "name").write_text("dram\n")
            (d / "energy_uj").write_text("5000000\n")
            (d / "max_energy_range_uj").write_text("65532610987\n")
        if core:
            c = root / f"intel-rapl:{n}:1"
            c.mkdir()
            (c / "name").write_text("core\n")
            (c / "energy_uj").write_text("700000\n")
            (c / "max_energy_range_uj").write_text(f"{max_uj}\n")
    if mmio:
        m = root / "intel-rapl-mmio:0"
        m.mkdir()
        (m / "name").write_text("package-0\n")
        (m / "energy_uj").write_text("1\n")
    return root


def set_energy(root: Path, zone: str, uj: int) -> None:
    (root / zone / "energy_uj").write_text(f"{uj}\n")


def jetson_tree(root: Path, rails: dict[int, tuple[str, float, float]]) -> Path:
    """``rails``: channel number -> (label, mA, mV)."""
    h = root / "ina3221" / "1-0040" / "hwmon" / "hwmon3"
    h.mkdir(parents=True)
    (h / "name").write_text("ina3221\n")
    for n, (label, ma, mv) in rails.items():
        (h / f"in{n}_label").write_text(label + "\n")
        (h / f"curr{n}_input").write_text(f"{ma:g}\n")
        (h / f"in{n}_input").write_text(f"{mv:g}\n")
    (h / "in7_label").write_text("sum of shunt voltages\n")
    return h


# ---- generic hwmon trees, laid out as the real drivers lay them out (Documentation/hwmon/*.rst)

def _hwmon_dev(root: Path, n: int, name: str, device: str | None, files: dict[str, object]) -> Path:
    """``root/hwmonN`` with ``name``, a ``device`` link to ``root/../devices/<device>`` and ``files``."""
    h = root / f"hwmon{n}"
    h.mkdir(parents=True)
    (h / "name").write_text(name + "\n")
    if device:
        target = root.parent / "devices" / device
        target.mkdir(parents=True, exist_ok=True)
        (h / "device").symlink_to(target)
    for f, v in files.items():
        (h / f).write_text(f"{v}\n")
    return h


def ina226(root: Path, n: int = 0, addr: str = "1-0040", *, bus_mv=5120.0, ma=1500.0, uw=7_680_000) -> Path:
    """drivers/hwmon/ina2xx.c: in0 shunt (mV), in1 bus (mV), curr1 (mA), power1 (µW), no labels."""
    return _hwmon_dev(root, n, "ina226", addr, {
        "in0_input": round(ma * 0.002, 4), "in1_input": bus_mv, "curr1_input": ma, "power1_input": uw,
        "shunt_resistor": 2000, "update_interval": 2, "in1_crit": 36000, "curr1_crit": 40000})


def ina3221(root: Path, n: int = 1, addr: str = "2-0040",
            rails: dict[int, tuple[str, float, float]] | None = None) -> Path:
    """drivers/hwmon/ina3221.c: in[123] bus (mV) + labels, curr[123] (mA), in[456] shunt (µV),
    in7 sum of shunts (µV) + label, curr4 sum of currents (mA); no power attribute."""
    rails = rails or {1: ("VDD_5V_IN", 5000.0, 900.0), 2: ("VDD_3V3", 3300.0, 200.0), 3: ("VDD_1V8", 1800.0, 100.0)}
    files: dict[str, object] = {"update_interval": 5}
    for i, (label, mv, ma) in rails.items():
        files.update({f"in{i}_label": label, f"in{i}_input": mv, f"curr{i}_input": ma,
                      f"in{i + 3}_input": int(ma * 10), f"shunt{i}_resistor": 10000, f"in{i}_enable": 1})
    files.update({"in7_label": "sum of shunt voltages", "in7_input": sum(int(ma * 10) for _, _, ma in rails.values()),
                  "curr4_input": sum(ma for _, _, ma in rails.values())})
    return _hwmon_dev(root, n, "ina3221", addr, files)


def acpi_power_meter(root: Path, n: int = 2, uw: int = 212_000_000, oem_info: str | None = None,
                     device: str = "ACPI000D:00") -> Path:
    """drivers/hwmon/acpi_power_meter.c: power1_average (µW) over power1_average_interval (ms)."""
    files: dict[str, object] = {"power1_average": uw, "power1_average_interval": 1000,
                                "power1_accuracy": "98.0%", "power1_model_number": "PM", "power1_is_battery": 0}
    if oem_info is not None:
        files["power1_oem_info"] = oem_info
    return _hwmon_dev(root, n, "power_meter", device, files)


def amdgpu(root: Path, n: int = 3, uw_avg: int = 150_000_000, uw_in: int = 160_000_000) -> Path:
    """drivers/gpu/drm/amd/pm/amdgpu_pm.c: power1_average/power1_input (µW), power1_label PPT,
    plus temperatures and fans that are not power."""
    return _hwmon_dev(root, n, "amdgpu", "0000:03:00.0", {
        "power1_average": uw_avg, "power1_input": uw_in, "power1_label": "PPT", "power1_cap": 300_000_000,
        "temp1_input": 45000, "temp1_label": "edge", "fan1_input": 1200, "in0_input": 800, "in0_label": "vddgfx"})


def amd_energy(root: Path, n: int = 4, socket_uj: int = 5_000_000, core_uj: int = 1_000_000) -> Path:
    """drivers/hwmon/amd_energy.c: energyN_input (µJ) per core (Ecore000…) then per socket
    (Esocket0), 64-bit accumulated by the driver; readable by root only (0400)."""
    return _hwmon_dev(root, n, "amd_energy", None, {
        "energy1_input": core_uj, "energy1_label": "Ecore000", "energy2_input": core_uj, "energy2_label": "Ecore001",
        "energy3_input": socket_uj, "energy3_label": "Esocket0"})


def xe(root: Path, n: int = 5, card_uj: int = 9_000_000, pkg_uj: int = 7_000_000) -> Path:
    """drivers/gpu/drm/xe/xe_hwmon.c: energy1 card, energy2 pkg (µJ), power1/2 caps (not readings)."""
    return _hwmon_dev(root, n, "xe", "0000:04:00.0", {
        "energy1_input": card_uj, "energy1_label": "card", "energy2_input": pkg_uj, "energy2_label": "pkg",
        "power1_max": 200_000_000, "power1_label": "card", "power2_max": 150_000_000, "power2_label": "pkg"})


def k10temp(root: Path, n: int = 6) -> Path:
    """drivers/hwmon/k10temp.c: temperatures only (no power channel)."""
    return _hwmon_dev(root, n, "k10temp", "0000:00:18.3", {"temp1_input": 41000, "temp1_label": "Tctl"})


def set_value(h: Path, attr: str, value) -> None:
    (h / attr).write_text(f"{value}\n")
