"""Sensors for the Ray tests: a known power per node, and one that kills its actor's process.

Importable on Ray workers (the test cluster gets ``src`` and the repo root on PYTHONPATH), so the
factories below can be shipped to sensor actors by reference.
"""

from __future__ import annotations

import os

from tests.fakes.scripted_sensor import ScriptedSensor


class DyingSensor(ScriptedSensor):
    """Reads like ``ScriptedSensor`` and then, on read ``die_on``, ends its process abruptly (as a
    node's sensor process killed by the OOM killer or a crash would)."""

    def __init__(self, die_on: int, **kw):
        super().__init__(**kw)
        self.die_on = die_on

    def read(self):
        if self.reads + 1 >= self.die_on:
            os._exit(17)
        return super().read()


class PowerByNode:
    """``sensor_factory`` for ``RayCluster``: node ``k`` (in the order given) reads ``watts[k]``;
    a node listed in ``die`` gets a ``DyingSensor`` dying on that read number."""

    def __init__(self, node_ids: list[str], watts: list[float], die: dict[str, int] | None = None,
                 poll_interval_s: float = 0.05):
        self.watts = dict(zip(node_ids, watts))
        self.die = dict(die or {})
        self.poll = poll_interval_s

    def __call__(self, node_id: str):
        w = self.watts.get(node_id)
        if w is None:
            return None
        if node_id in self.die:
            return _Make(DyingSensor, dict(die_on=self.die[node_id], power_w=w, poll_interval_s=self.poll))
        return _Make(ScriptedSensor, dict(power_w=w, poll_interval_s=self.poll))


class _Make:
    def __init__(self, cls, kw):
        self.cls, self.kw = cls, kw

    def __call__(self):
        return [self.cls(**self.kw)]


BMC_ENV = "WB_TEST_BMC_PASSWORD"  # a node's BMC password, as a sensor reads it from its environment


class LeakySensor(ScriptedSensor):
    """Reads like ``ScriptedSensor``, but reads 2 and 3 print the node's BMC password (``BMC_ENV``)
    and fail quoting it, as a meter whose BMC echoes the credential it refused would."""

    def read(self):
        if self.reads + 1 in (2, 3):
            self.reads += 1
            pw = os.environ.get(BMC_ENV, "")
            print(f"LEAKY-SENSOR read {self.reads}: {pw}", flush=True)
            raise OSError(f"BMC refused {pw}")
        return super().read()


class RefusedSensor(ScriptedSensor):
    """A meter whose BMC refuses the password at open, quoting it in its error."""

    def open(self):
        from wattbench.core.errors import SensorError

        raise SensorError(f"bmc refused the password {os.environ.get(BMC_ENV, '')}")


class LeakyMeters:
    """``sensor_factory``: every node gets a ``LeakySensor`` (100 W) and a ``RefusedSensor``."""

    def __call__(self, node_id: str):
        return _Leaky()


class _Leaky:
    def __call__(self):
        return [LeakySensor(power_w=100.0, poll_interval_s=0.05), RefusedSensor(name="refused")]
