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
    for n, (label, ma, mv) in rails.items():
        (h / f"in{n}_label").write_text(label + "\n")
        (h / f"curr{n}_input").write_text(f"{ma:g}\n")
        (h / f"in{n}_input").write_text(f"{mv:g}\n")
    (h / "in7_label").write_text("sum of shunt voltages\n")
    return h
