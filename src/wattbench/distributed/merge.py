"""Bring what the nodes measured onto the driver's clock and into one result (no Ray here).

- Records: every timestamp of every record (``scheduled_ns``, ``sent_ns``, ``first_token_ns``,
  ``last_token_ns``, ``end_ns``, each of ``chunk_ns``) is mapped with the node's offset; intervals
  inside one record (TTFT, ITL) are unchanged by construction, only their place on the driver's
  timeline moves.
- Telemetry: each node's channels get ``node`` set, ``id`` and ``device`` prefixed with the node
  id (``"<node>/gpu0"``) so two nodes' ``gpu0`` stay two devices, and readings are shifted.
  ``wattbench.accounting`` then totals ``accelerator`` etc. over all nodes and ``cluster`` node by
  node (its rule 9).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

from wattbench.core.schema import RequestRecord
from wattbench.telemetry.base import Channel, Reading, SensorFailure, TelemetryLog

__all__ = ["shift_record", "node_channel", "NodeLogMerger", "split_by_node"]

_FIELDS = ("scheduled_ns", "sent_ns", "first_token_ns", "last_token_ns", "end_ns")


def shift_record(rec: RequestRecord, to_driver: Callable[[int], int]) -> RequestRecord:
    """The record with every timestamp mapped by ``to_driver`` (in place; returned)."""
    for f in _FIELDS:
        v = getattr(rec, f)
        if v is not None:
            setattr(rec, f, to_driver(v))
    if rec.chunk_ns:
        rec.chunk_ns = [to_driver(t) for t in rec.chunk_ns]
    return rec


def node_channel(ch: Channel, node: str) -> Channel:
    """``ch`` as seen in the merged log: node set, id and device prefixed."""
    return dataclasses.replace(ch, id=f"{node}/{ch.id}", device=f"{node}/{ch.device}" if ch.device else node,
                               node=node)


class NodeLogMerger:
    """Accumulates several nodes' telemetry (sent in pieces while the run goes) in one log."""

    def __init__(self) -> None:
        self.log = TelemetryLog()

    def add_channels(self, node: str, channels: Iterable[Channel]) -> list[str]:
        chans = [node_channel(c, node) for c in channels]
        self.log.add_channels(chans)
        return [c.id for c in chans]

    def add_readings(self, node: str, readings: Iterable[tuple[int, str, float]], to_driver: Callable[[int], int]
                     ) -> int:
        rs = [Reading(to_driver(t), f"{node}/{cid}", v) for t, cid, v in readings]
        self.log.add(rs)
        return len(rs)

    def add_failures(self, node: str, failures: Iterable[tuple[str, int, str]], to_driver: Callable[[int], int]
                     ) -> None:
        for sensor, t, err in failures:
            self.log.failures.append(SensorFailure(sensor=f"{node}/{sensor}", t_ns=to_driver(t), error=err))

    def add_failure(self, sensor: str, t_ns: int, error: str) -> None:
        self.log.failures.append(SensorFailure(sensor=sensor, t_ns=t_ns, error=error))


def split_by_node(log: TelemetryLog) -> dict[str, TelemetryLog]:
    """One log per node (channels carrying ``node``), series shared with ``log``; for per-node
    accounting (``LevelResult.per_node_energy``)."""
    out: dict[str, TelemetryLog] = {}
    for cid, ch in log.channels.items():
        if not ch.node:
            continue
        sub = out.setdefault(ch.node, TelemetryLog())
        sub.channels[cid] = ch
        sub.t_ns[cid], sub.values[cid] = log.series(cid)
    prefixes = {n: n + "/" for n in out}
    for f in log.failures:
        for n, p in prefixes.items():
            if f.sensor.startswith(p) or f.sensor == n:
                out[n].failures.append(f)
    return out
