"""What runs inside the Ray actors: a load worker and a node sensor.

Both are plain classes (testable without Ray); ``remote_classes()`` wraps them with
``ray.remote`` when a distributed run starts. Every timestamp they hand out is on their own
node's ``perf_counter_ns`` clock; the driver maps them (``distributed.clock``).

A load actor's process has nothing of the driver's but what its job carries: each run sends its
targets' query strings (``TargetSpec.query``) with every request to them, and registers the
targets' secrets in its process (``load.client.sending_for``), as the driver's own process does.

Nothing leaves an actor's process holding a secret or raw hostile text. Its stdout and stderr (a
print, a log line, a warning, a traceback, C code's output: Ray writes them to the session's
``logs/worker-*.out``/``.err`` and may forward them to the driver's terminal) pass through
``core.process_output.hold_output`` for the actor's life, scrubbed of every secret its jobs
carried (kept as long as the actor lives: one run's) and of its node's credential variables
(``redact.env_secrets``), and made safe for a terminal. A run that fails raises
``LoadActorFailed``: the error's type and message scrubbed and its controls shown escaped
(``safe_text.term``), with no cause or context attached, so what Ray stores, logs and hands to the
driver holds nothing of the original; its traceback, scrubbed, goes to the actor's stderr. The
plain classes (in-process, tests) do the same but for the process-wide output, which is their
caller's. A sensor actor, which the driver gives no secret, scrubs its node's credential variables
(a BMC's password) from its output, from what it returns (a meter's problem or failed read that
quotes it) and from what it raises (``SensorActorFailed``).

``clock_skew_ns`` is a test seam: the actor behaves as if its node's clock read ``skew`` ns more
than ``perf_counter_ns`` (what it reports is shifted by ``+skew``, what it is told is shifted by
``−skew``), which is how a node whose monotonic clock started elsewhere looks to the driver.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
import asyncio
import os
import sys

import numpy as np

from wattbench.core.clock import now_ns
from wattbench.telemetry.base import Channel, Reading, Sensor, SensorFailure
from wattbench.core.errors import Interrupted, WattbenchError
from wattbench.core.process_output import ProcessSecrets, hold_output, safe_traceback
from wattbench.core.secret_scope import scope
from wattbench.core.safe_text import LINE_CHARS, term
from wattbench.core.target import TargetSpec
from wattbench.core.recordset import NONE, RecordSet
from wattbench.core.schema import TargetDownInfo
from wattbench.distributed.messages import ClosedJob, OpenJob, Reply, expect, unseal
from wattbench.load.client import new_event_loop, sending_for
from wattbench.load.executor import LevelControl
from wattbench.load.level import end_column, run_level
from wattbench.load.liveness import TargetDown
from wattbench.load.link import LocalLink
from wattbench.load.worker import cancel_pending, run_worker_on_loop, Worker
from wattbench.telemetry.detect import autodetect
from wattbench.telemetry.sampler import Sampler
from wattbench.telemetry.spec import parse_sensor_spec

__all__ = ["LoadWorker", "NodeSensor", "LoadActorFailed", "SensorActorFailed", "remote_classes", "current_node_id"]


class LoadActorFailed(WattbenchError):
    """A load actor's run failed; the message is the error's type and text, scrubbed and made safe
    in the actor (module doc)."""


def _described(e: BaseException) -> str:
    """``e`` as one safe text: the registered secrets scrubbed, then cut; controls shown escaped."""
    return term(f"{type(e).__name__}: {e}", LINE_CHARS, newlines=True)


def current_node_id() -> str:
    """The Ray node id of this process (hostname outside Ray)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.get_runtime_context().get_node_id()
    except ImportError:
        pass
    return socket.gethostname()


def _ip() -> str | None:
    try:
        import ray

        if ray.is_initialized():
            ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
            return ip
    except ImportError:
        pass
    return None


def _sleep_until(t_ns: int) -> None:
    while True:
        d = t_ns - now_ns()
        if d <= 0:
            return
        time.sleep(min(d / 1e9, 0.5))


def _target_down(d: TargetDownInfo | None) -> TargetDown | None:
    """A level outcome's ``target_down`` (``TargetDownInfo``) as the ``TargetDown`` it was."""
    if d is None or d.first_failure_ns is None:
        return None
    return TargetDown(d.target, d.last_ok_ns, d.first_failure_ns, d.refusals, d.failures)


def _shift_dict(rec: dict[str, Any], d: int) -> dict[str, Any]:
    for f in ("scheduled_ns", "sent_ns", "first_token_ns", "last_token_ns", "end_ns"):
        if rec.get(f) is not None:
            rec[f] += d
    if rec.get("chunk_ns"):
        rec["chunk_ns"] = [t + d for t in rec["chunk_ns"]]
    return rec


class LoadWorker:
    """One load-generator actor: its share of a level's streams or arrivals.

    The driver's coordinator (``distributed/executor.py``) starts a run (``run_closed`` /
    ``run_open``, a job carrying its run id ``job["run"]``), polls ``progress`` and may ``stop`` or
    ``cancel`` that run; the actor takes those calls while the run goes on (two concurrent calls,
    ``remote_classes``). A stop or cancel that arrives before its run started is applied when it
    starts (a threaded actor does not keep the calls' order)."""

    def __init__(self, index: int, clock_skew_ns: int = 0) -> None:
        self.index = index
        self.skew = int(clock_skew_ns)
        self.output: ProcessSecrets | None = None  # an actor process's own output guard (``remote_classes``)
        self._progress: tuple[int, int, int] = (0, 0, 0)
        self._lock = threading.Lock()
        self._asked: dict[int, set[str]] = {}  # run id -> {"stop", "cancel"} asked so far
        self._hooks: dict[int, Callable[[str], None]] = {}  # run id -> applies a stop/cancel to it

    def info(self) -> dict[str, Any]:
        return {"node_id": current_node_id(), "hostname": socket.gethostname(), "ip": _ip(), "pid": os.getpid()}

    def clock(self) -> int:
        return now_ns() + self.skew

    def prepare(self) -> bool:
        """Import the load machinery before the level's start time is fixed."""
        import aiohttp  # noqa: F401

        import wattbench.load.client  # noqa: F401
        import wattbench.load.level  # noqa: F401

        return True

    def progress(self) -> tuple[int, int, int]:
        with self._lock:
            return self._progress

    def _set_progress(self, done: int, failed: int, output_tokens: int) -> None:
        with self._lock:
            self._progress = (done, failed, output_tokens)

    # -- stop / cancel from the driver
    def stop(self, run: int) -> None:
        """Stop sending in run ``run``; its requests in flight finish."""
        self._ask(run, "stop")

    def cancel(self, run: int) -> None:
        """Stop sending in run ``run`` and cancel its requests in flight (the driver's interrupt)."""
        self._ask(run, "cancel")

    def _ask(self, run: int, what: str) -> None:
        with self._lock:
            self._asked.setdefault(run, set()).add(what)
            hook = self._hooks.get(run)
            if hook is not None:  # under the lock: the run cannot end (and close its loop) meanwhile
                hook(what)

    def _attach(self, run: int, hook: Callable[[str], None]) -> None:
        with self._lock:
            self._hooks[run] = hook
            for what in sorted(self._asked.get(run, ())):  # asked before the run started
                hook(what)

    def _detach(self, run: int) -> None:
        with self._lock:
            self._hooks.pop(run, None)
            self._asked.pop(run, None)

    # -- runs
    def _contained(self, targets: list[TargetSpec], run: Callable[[], Reply]) -> Reply:
        """``run()`` with the targets' secrets registered (and kept by the actor process's output
        guard); a failure leaves as ``LoadActorFailed`` with nothing of the original (module doc)."""
        secrets = [s for t in targets for s in t.secrets()]
        if self.output is not None:
            self.output.add(*secrets)
        with scope(*secrets):
            try:
                return run()
            except Exception as e:  # noqa: BLE001 - every failure leaves scrubbed
                failure = _described(e)
                if self.output is not None:  # the actor's own log (in-process, the caller's stderr is not ours)
                    print(safe_traceback(self.output.text), file=sys.stderr)
        raise LoadActorFailed(failure)  # outside the handler: no context holds the original

    def run_closed(self, job: ClosedJob, targets: list[TargetSpec] | None = None) -> Reply:
        """Closed loop: ``run_level`` on this actor's share, started at ``job.t0_node_ns``
        (``targets``: the job's targets whole, when it was sent sealed: ``messages.seal``).

        The actor's requests are the factory's indices ``i ≡ index (mod n)``; record ids are those
        global indices."""
        job = expect(unseal(expect(job, ClosedJob, "run_closed's job"), targets), ClosedJob, "run_closed's job")
        return self._contained(list(job.targets), lambda: self._run_closed(job))

    def _run_closed(self, job: ClosedJob) -> Reply:
        a, n = job.index, job.n
        factory = job.request_factory

        def source(j: int) -> Any:  # the factory's request (RequestSpec), or None when it ran out
            return factory(a + j * n)

        targets = job.targets
        routes = job.routes
        route = routes.__getitem__ if routes else None
        control = LevelControl()
        run = job.run
        self._attach(run, lambda what: (control.cancel if what == "cancel" else control.stop).set())
        try:
            with sending_for(targets):  # this process (another node's) sends as the driver does
                _sleep_until(job.t0_node_ns - self.skew)
                try:
                    out = run_level(job.spec, targets if routes else targets[0], source,
                                    lambda p: self._set_progress(p.requests_done, p.requests_failed, p.output_tokens),
                                    route=route, control=control)
                except Interrupted as e:  # the driver cancelled: what completed is kept
                    out = getattr(e, "outcome")  # settle_outcome attaches it (core.errors cannot name it)
        finally:
            self._detach(run)
        recs = []
        for r in out.records:
            d = r.model_dump()
            d["id"] = a + d["id"] * n
            d["worker"] = a
            recs.append(_shift_dict(d, self.skew))
        last_end = None
        if len(out.records):  # the last request's end (else its send), from columns
            assert isinstance(out.records, RecordSet)  # run_level streams its records into one
            c = out.records.columns("sent_ns", "last_token_ns", "end_ns")
            ends = end_column(c)
            last_end = int(np.where(ends != NONE, ends, c["sent_ns"]).max())
        stop = None
        if last_end is not None and out.load.drain_s is not None:
            stop = last_end - int(out.load.drain_s * 1e9) + self.skew
        return Reply(records=recs, cpu_pct=out.load.client_cpu_pct, stop_ns=stop, stopped_early=out.stopped_early,
                     info=self.info(), progress=self.progress(), saturation_reasons=list(out.load.saturation_reasons),
                     down=self._down(_target_down(out.target_down)))

    def run_open(self, job: OpenJob, targets: list[TargetSpec] | None = None) -> Reply:
        """Open loop / trace: ``job.plan`` (a ``WorkerPlan`` with this actor's arrivals) at
        ``t0 + offset`` on the driver's timeline (``targets``: as ``run_closed``'s)."""
        job = expect(unseal(expect(job, OpenJob, "run_open's job"), targets), OpenJob, "run_open's job")
        return self._contained(list(job.plan.targets or [job.plan.target]), lambda: self._run_open(job))

    def _run_open(self, job: OpenJob) -> Reply:
        plan = job.plan
        t0 = job.t0_node_ns - self.skew
        run = job.run
        loop = new_event_loop()
        try:
            asyncio.set_event_loop(loop)
            worker = Worker(plan, LocalLink(None, 0))

            def apply(what: str) -> None:
                worker.link.stop.set()
                if what == "cancel":
                    worker.link.cancel.set()

            def tell(what: str) -> None:  # from the driver's call, on another thread
                loop.call_soon_threadsafe(apply, what)

            self._attach(run, tell)
            try:
                with sending_for(plan.targets or [plan.target]):  # as the driver sends (another node's process)
                    interrupted, cpu_pct = run_worker_on_loop(
                        loop, worker, t0, lambda p: self._set_progress(p.done, p.failed, p.output_tokens),
                        plan.progress_period_s)
            finally:
                self._detach(run)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            cancel_pending(loop)
            asyncio.set_event_loop(None)
            loop.close()
        self._set_progress(worker.done, worker.failed, worker.output_tokens)
        assert isinstance(worker.records, RecordSet)  # a Worker made without a stream keeps a RecordSet
        recs = [_shift_dict(r.model_dump(), self.skew) for r in worker.records]
        return Reply(records=recs, cpu_pct=cpu_pct,
                     stop_ns=None if worker.stop_ns is None else worker.stop_ns + self.skew,
                     stopped_early="interrupted" if interrupted else None, info=self.info(),
                     progress=self.progress(), loop_lag_ns=list(worker.loop_lag_ns), down=self._down(worker.down))

    def _down(self, down: TargetDown | None) -> TargetDown | None:
        """A target this actor saw stop answering (``load/liveness.py``), times on this node's clock."""
        if down is None:
            return None
        last_ok = down.last_ok_ns
        return dataclasses.replace(down, last_ok_ns=None if last_ok is None else last_ok + self.skew,
                                   first_failure_ns=down.first_failure_ns + self.skew)


class _Buffer:
    """A sampler sink that keeps what arrived since the last drain."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.readings: list[Reading] = []
        self.failures: list[SensorFailure] = []

    def channels(self, channels: list[Channel]) -> None:
        pass

    def write(self, readings: list[Reading]) -> None:
        with self.lock:
            self.readings.extend(readings)

    def failure(self, failure: SensorFailure) -> None:
        with self.lock:
            self.failures.append(failure)

    def take(self) -> tuple[list[Reading], list[SensorFailure]]:
        with self.lock:
            r, f = self.readings, self.failures
            self.readings, self.failures = [], []
        return r, f


class NodeSensor:
    """One sensor actor per node: a ``Sampler`` over the node's meters.

    Sensors: ``sensor_factory()`` when given (a seam for custom meters), else the
    ``--sensor`` specs, else autodetection on that node. ``drain()`` hands over what was read
    since the last drain, so a node that dies later loses only its last seconds.
    """

    def __init__(self, node_id: str, specs: list[str] | None = None, interval_s: float = 0.1,
                 sensor_factory: Callable[[], list[Sensor]] | None = None, clock_skew_ns: int = 0,
                 estimate_cpu: bool = False) -> None:
        self.node_id = node_id
        self.specs = list(specs or [])
        self.interval_s = interval_s
        self.factory = sensor_factory
        self.skew = int(clock_skew_ns)
        self.estimate_cpu = estimate_cpu
        self.sampler: Sampler | None = None
        self.buffer = _Buffer()

    def clock(self) -> int:
        return now_ns() + self.skew

    def info(self) -> dict[str, Any]:
        return {"node_id": current_node_id(), "hostname": socket.gethostname(), "ip": _ip(), "pid": os.getpid()}

    def open(self) -> dict[str, Any]:
        """Build and start the sampler; status ``ok``, ``no_meters`` or ``failed``."""
        problems: list[str] = []
        try:
            if self.factory is not None:
                sensors = list(self.factory())
            elif self.specs:
                sensors = [parse_sensor_spec(s) for s in self.specs]
            else:
                sensors, problems = autodetect(estimate_cpu=self.estimate_cpu)
        except WattbenchError as e:
            return {"status": "failed", "channels": [], "problems": [str(e)], "info": self.info()}
        if not sensors:
            return {"status": "no_meters", "channels": [], "problems": problems, "info": self.info()}
        sampler = self.sampler = Sampler(sensors, interval_s=self.interval_s, sink=self.buffer)
        sampler.start()
        chans = sampler.channels
        problems += sampler.problems
        status = "ok" if chans else "no_meters"
        if not chans:
            sampler.stop()
            self.sampler = None
        return {"status": status, "channels": chans, "problems": problems, "info": self.info()}

    def closing_reads(self, t_ns: int, timeout_s: float) -> bool:
        """The node's closing reads after the driver's window ended at ``t_ns`` (this node's clock as
        the actor reports it: ``Sampler.await_reads_after``); True when there is no sampler."""
        if self.sampler is None:
            return True
        return self.sampler.await_reads_after(int(t_ns) - self.skew, timeout_s)

    def drain(self) -> dict[str, Any]:
        readings, failures = self.buffer.take()
        d = self.skew
        return {
            "readings": [(r.t_ns + d, r.channel, r.value) for r in readings],
            "failures": [(f.sensor, f.t_ns + d, f.error) for f in failures],
        }

    def stop(self) -> dict[str, Any]:
        overhead = None
        if self.sampler is not None:
            self.sampler.stop()
            overhead = self.sampler.overhead()
            self.sampler = None
        out = self.drain()
        out["overhead"] = overhead
        return out


_REMOTE: dict[str, Any] = {}


def remote_classes() -> tuple[Any, Any]:
    """``(RemoteLoadWorker, RemoteNodeSensor)``: the classes above as Ray actors (imports ray).

    The load worker takes two concurrent calls (its run and the driver's progress polls); the
    sensor actor needs no CPU slot of its own (it sleeps between reads) and takes drains while
    its sampler threads run.
    """
    if not _REMOTE:
        import ray

        # Ray's stubs type only the task options, not an actor's (max_concurrency)
        _REMOTE["load"] = ray.remote(max_concurrency=2)(_ActorLoadWorker)  # type: ignore[call-overload]
        _REMOTE["sensor"] = ray.remote(num_cpus=0, max_concurrency=2)(_ActorNodeSensor)  # type: ignore[call-overload]
    return _REMOTE["load"], _REMOTE["sensor"]


class _ActorLoadWorker(LoadWorker):
    """``LoadWorker`` in its own Ray actor process: the process's output guarded for its life."""

    def __init__(self, index: int, clock_skew_ns: int = 0) -> None:
        super().__init__(index, clock_skew_ns)
        self.output = ProcessSecrets()  # the node's credential variables; each job's secrets added
        hold_output(self.output)


class SensorActorFailed(WattbenchError):
    """A sensor actor's call failed; the message is the error's type and text, scrubbed of the node's
    credential variables and made safe in the actor."""


def _scrubbed(value: Any, scrub: Callable[[str], str]) -> Any:
    """``value`` (what a sensor actor returns: dicts, lists, tuples of strings, numbers, channels)
    with every string scrubbed; other objects as they are."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v, scrub) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_scrubbed(v, scrub) for v in value)
    return value


class _ActorNodeSensor(NodeSensor):
    """``NodeSensor`` in its own Ray actor process: the process's output guarded for its life, and
    what it returns or raises scrubbed, of the node's credential variables (a BMC's password in
    ``REDFISH_PASSWORD``, ``IPMI_PASSWORD``: a sensor's problem or failure may quote it)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.output = ProcessSecrets()
        hold_output(self.output)

    def _safe(self, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            out = call()
            # the texts (problems, read failures, info); the readings' and channels' ids are the
            # sensors' own names, and a drain carries thousands of them
            return {k: v if k in ("readings", "channels") else _scrubbed(v, self.output.text) for k, v in out.items()}
        except Exception as e:  # noqa: BLE001 - every failure leaves scrubbed
            failure = term(self.output.text(f"{type(e).__name__}: {e}"), LINE_CHARS, newlines=True)
        raise SensorActorFailed(failure)  # outside the handler: no context holds the original

    def open(self) -> dict[str, Any]:
        return self._safe(super().open)

    def drain(self) -> dict[str, Any]:
        return self._safe(super().drain)

    def stop(self) -> dict[str, Any]:
        return self._safe(super().stop)
