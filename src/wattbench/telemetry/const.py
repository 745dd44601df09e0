"""A declared constant power: ``--sensor const:BOUNDARY=WATTS`` (e.g. ``const:node=700``).

For parts nobody meters (fans, PSU losses, a nameplate). Labelled ``method="declared"``. It
emits its value at every poll, so the integral over any window is exactly W × window.
"""

from __future__ import annotations

from wattbench.core.clock import now_ns
from wattbench.core.errors import UserError
from wattbench.telemetry.base import BOUNDARIES, Channel, Reading, Sensor


class ConstSensor(Sensor):
    name = "const"

    def __init__(self, boundary: str, watts: float) -> None:
        if boundary not in BOUNDARIES:
            raise UserError(f"const: unknown boundary {boundary!r}; use one of {', '.join(BOUNDARIES)}")
        if not watts >= 0:
            raise UserError(f"const: watts must be >= 0, got {watts}")
        self.boundary = boundary
        self.watts = float(watts)
        self.name = f"const:{boundary}"
        self.cid = f"const.{boundary}"

    def open(self) -> list[Channel]:
        return [Channel(id=self.cid, sensor=self.name, kind="power", quantity="power", unit="W",
                        boundary=self.boundary, device="declared", source=f"--sensor const:{self.boundary}={self.watts:g}",
                        method="declared", primary=True, notes="declared constant, not measured")]

    def read(self) -> list[Reading]:
        return [Reading(now_ns(), self.cid, self.watts)]
