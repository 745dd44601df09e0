"""Sensors: small adapters that read meters. No integration, windowing or statistics here
(``wattbench.accounting`` does that, once, for all sensors)."""

from wattbench.telemetry.base import BOUNDARIES, Channel, Reading, Sensor

__all__ = ["BOUNDARIES", "Channel", "Reading", "Sensor"]
