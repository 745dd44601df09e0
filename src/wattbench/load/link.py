"""The link between a load worker and its coordinator: the protocol and the typed messages.

The link protocol (``WorkerLink``): ``fetch(n)`` → up to ``n`` closed-loop items and an end flag;
``give_back(items)`` returns timed-warm-up items sent too late; ``stop`` (stop sending, let the
requests in flight finish) and ``cancel`` (cancel them too) are events the coordinator sets.
``LocalLink`` calls the feeder directly (worker in the calling process, or a Ray actor with no
feeder); ``PipeLink`` speaks the typed messages below over a ``multiprocessing`` pipe.

Messages, worker → coordinator: ``Ready``, ``Need``, ``Back``, ``Progress``, ``Records``,
``WorkerDone``, ``Error``; coordinator → worker: ``Start``, ``Items``, ``Stop``, ``Cancel``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Protocol

from wattbench.load.liveness import TargetDown
from wattbench.load.plan import Drawn, Feeder, Item
from wattbench.core.recordset import RecordSet
from wattbench.core.schema import RequestRecord


# ---------------------------------------------------------------------------------- messages


@dataclass
class Ready:
    """Worker → coordinator: imports done, the loop is up."""

    t_ns: int


@dataclass
class Start:
    """Coordinator → worker: the level's common start time."""

    t0_ns: int


@dataclass
class Need:
    """Worker → coordinator: up to ``n`` closed-loop items, please."""

    n: int


@dataclass
class Items:
    """Coordinator → worker: the answer to ``Need``; ``end``: no more will ever come."""

    items: list[Item]
    end: bool


@dataclass
class Back:
    """Worker → coordinator: timed-warm-up items it could only have sent after the warm-up (their
    warm-up is decided again when they are handed out again)."""

    items: list[Drawn]


@dataclass
class Stop:
    """Coordinator → worker: stop sending; the requests in flight finish."""


@dataclass
class Cancel:
    """Coordinator → worker: stop sending and cancel the requests in flight (interrupt)."""


@dataclass
class Progress:
    """Worker → coordinator: counts so far."""

    done: int
    failed: int
    output_tokens: int


@dataclass
class Records:
    """Worker → coordinator: a batch of records finished since the last batch (dicts of the
    ``RequestRecord`` fields), sent during the level (``load/worker.py`` ``RecordStream``)."""

    records: list[dict[str, Any]]


@dataclass
class WorkerDone:
    """Worker → coordinator: the worker ended (after its last ``Records``)."""

    cpu_pct: float | None
    stop_ns: int | None
    interrupted: bool
    progress: Progress
    loop_lag_ns: list[int]
    down: TargetDown | None


@dataclass
class Error:
    """Worker → coordinator: a bug in the worker, with its traceback."""

    traceback: str


@dataclass
class WorkerResult:
    """What the coordinator keeps of one worker. ``records``: its records when it kept its own
    (Ray's load actors, tests); ``None`` when they went into the executor's level ``RecordSet``."""

    records: "list[RequestRecord] | RecordSet | None"
    cpu_pct: float | None
    stop_ns: int | None
    interrupted: bool
    loop_lag_ns: list[int] = field(default_factory=list)
    down: TargetDown | None = None  # the target this worker saw stop answering


class WorkerLink(Protocol):
    """How a worker talks to its coordinator (module doc)."""

    stop: asyncio.Event
    cancel: asyncio.Event

    async def fetch(self, n: int) -> tuple[list[Item], bool]: ...

    def give_back(self, items: list[Drawn]) -> None: ...


# ------------------------------------------------------------------------------------ links


class LocalLink:
    """The worker runs in the calling process: the feeder is called directly."""

    def __init__(self, feeder: Feeder | None, worker: int):
        self.feeder = feeder
        self.worker = worker
        self.stop = asyncio.Event()
        self.cancel = asyncio.Event()

    async def fetch(self, n: int) -> tuple[list[Item], bool]:
        assert self.feeder is not None, "a link without a feeder serves open-loop plans, which fetch nothing"
        return self.feeder.take(self.worker, n)

    def give_back(self, items: list[Drawn]) -> None:
        assert self.feeder is not None, "a link without a feeder serves open-loop plans, which give nothing back"
        self.feeder.give_back(self.worker, items)


class PipeLink:
    """The worker is a subprocess: requests come from the parent over a pipe."""

    def __init__(self, conn: Connection, loop: asyncio.AbstractEventLoop):
        self.conn = conn
        self.loop = loop
        self.stop = asyncio.Event()
        self.cancel = asyncio.Event()
        self._waiting: asyncio.Future[tuple[list[Item], bool]] | None = None
        loop.add_reader(conn.fileno(), self._readable)
        # uvloop (libuv's uv_poll) switches a watched fd to non-blocking; a Connection needs a
        # blocking fd, or sending a large batch of records fails half-way with EAGAIN.
        os.set_blocking(conn.fileno(), True)

    def _readable(self) -> None:
        try:
            while self.conn.poll():
                msg = self.conn.recv()
                if isinstance(msg, Items):
                    if self._waiting is not None and not self._waiting.done():
                        self._waiting.set_result((msg.items, msg.end))
                elif isinstance(msg, Stop):
                    self.stop.set()
                elif isinstance(msg, Cancel):
                    self.stop.set()
                    self.cancel.set()
        except (EOFError, OSError):  # the parent is gone
            self.loop.remove_reader(self.conn.fileno())
            self.stop.set()
            self.cancel.set()
            if self._waiting is not None and not self._waiting.done():
                self._waiting.set_result(([], True))

    async def fetch(self, n: int) -> tuple[list[Item], bool]:
        self._waiting = self.loop.create_future()
        self.conn.send(Need(n))
        return await self._waiting

    def give_back(self, items: list[Drawn]) -> None:
        self.conn.send(Back(items))  # before any later "need" on the same pipe

    def close(self) -> None:
        try:
            self.loop.remove_reader(self.conn.fileno())
        except (ValueError, OSError):
            pass
