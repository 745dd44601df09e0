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
