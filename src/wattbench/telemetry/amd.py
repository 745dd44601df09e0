"""AMD GPUs through ``amdsmi`` (ROCm), imported lazily; ``amdsmi=`` is the seam for a fake.

Per GPU: the energy accumulator (``amdsmi_get_energy_count``: ``energy_accumulator`` ×
``counter_resolution`` µJ -> J; counter, boundary ``accelerator``, primary; 64-bit range used
for wrap) and socket power (``amdsmi_get_power_info``: ``current_socket_power``, else
``average_socket_power``, W; not primary). Values ``"N/A"`` are skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wattbench.core.clock import now_ns
from wattbench.core.errors import SensorError
from wattbench.telemetry.base import Channel, Reading, Sensor
from wattbench.telemetry.probe import Found, Machine

FIX = "install ROCm and its Python bindings (`pip install amdsmi` matching your ROCm) and check `amd-smi` runs"


def _num(v: Any) -> float | None:
    if isinstance(v, dict):
        v = v.get("value")
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class AmdSensor(Sensor):
    name = "amd"

    def __init__(self, indices: list[int] | None = None, amdsmi: Any = None) -> None:
        self.indices = indices
        self._mod_arg = amdsmi
        self.smi: Any = None
        self._gpus: list[tuple[int, Any, bool, str | None, float]] = []
        self._init = False

    def open(self) -> list[Channel]:
        smi = self._mod_arg
        if smi is None:
            try:
                import amdsmi  # type: ignore[import-not-found]  # AMD's bindings: no stubs, and absent off ROCm hosts
            except ImportError:
                raise SensorError("amdsmi not importable", FIX) from None
            smi = amdsmi
        self.smi = smi
        try:
            smi.amdsmi_init()
        except Exception as e:
            raise SensorError(f"amdsmi could not initialise: {e}", FIX) from None
        self._init = True
        handles = smi.amdsmi_get_processor_handles()
        idx = self.indices if self.indices is not None else list(range(len(handles)))
        chans: list[Channel] = []
        for i in idx:
            if i < 0 or i >= len(handles):
                self.close()
                raise SensorError(f"amd: GPU index {i} does not exist ({len(handles)} GPUs)", "pick indices from `amd-smi list`")
            h = handles[i]
            res = 0.0
            has_counter = False
            try:
                energy = smi.amdsmi_get_energy_count(h)
                res = float(energy["counter_resolution"])
                has_counter = _num(energy.get("energy_accumulator", energy.get("power"))) is not None and res > 0
            except Exception:
                pass
            pkey = None
            try:
                p = smi.amdsmi_get_power_info(h)
                for k in ("current_socket_power", "average_socket_power"):
                    if _num(p.get(k)) is not None:
                        pkey = k
                        break
            except Exception:
                pass
            if has_counter:
                chans.append(Channel(id=f"amd.gpu{i}.energy", sensor=self.name, kind="counter", quantity="energy",
                                     unit="J", boundary="accelerator", device=f"gpu{i}", resolution=res / 1e6,
                                     source="amdsmi_get_energy_count", primary=True, max_value=(2**64) * res / 1e6))
            if pkey:
                chans.append(Channel(id=f"amd.gpu{i}.power", sensor=self.name, kind="power", quantity="power",
                                     unit="W", boundary="accelerator", device=f"gpu{i}", resolution=1.0,
                                     source=f"amdsmi_get_power_info {pkey}", primary=not has_counter))
            self._gpus.append((i, h, has_counter, pkey, res))
        if not chans:
            self.close()
            raise SensorError("amd: no GPU reports energy or power", FIX)
        return chans

    def read(self) -> list[Reading]:
        out = []
        for i, h, has_counter, pkey, res in self._gpus:
            if has_counter:
                a = now_ns()
                e = self.smi.amdsmi_get_energy_count(h)
                b = now_ns()
                acc = _num(e.get("energy_accumulator", e.get("power")))
                if acc is not None:
                    out.append(Reading((a + b) // 2, f"amd.gpu{i}.energy", acc * res / 1e6))
            if pkey:
                a = now_ns()
                v = _num(self.smi.amdsmi_get_power_info(h).get(pkey))
                b = now_ns()
                if v is not None:
                    out.append(Reading((a + b) // 2, f"amd.gpu{i}.power", v))
        return out

    def close(self) -> None:
        if self._init:
            self._init = False
            try:
                self.smi.amdsmi_shut_down()
            except Exception:
                pass


def detect(m: Machine) -> Found:
    """AMD GPUs through ``amdsmi``, only where ``kfd_device`` exists (hwmon's ``amdgpu`` reads the
    same boards); a problem line with the fix where ``amdsmi`` is not importable."""
    looked = f"AMD GPU ({m.kfd_device} absent)"
    if not Path(m.kfd_device).exists():
        return Found(looked=looked)
    try:
        import amdsmi  # noqa: F401  (optional: ROCm's bindings)
    except ImportError:
        return Found(problems=["amd: /dev/kfd exists but amdsmi is not importable "
                               "(fix: install ROCm's Python bindings, `pip install amdsmi` matching your ROCm)"],
                     looked=looked)
    return Found([AmdSensor()], reads=("amdgpu",), looked=looked)
