"""Distributed load levels on a Ray cluster, with per-node sensing, merged onto one clock.

``RayCluster`` spans a whole run (sensors measure the idle baseline and every level)::

    with RayCluster("auto", sensors=cfg.sensors) as cl:      # --ray auto|local|ADDRESS
        cl.start_sensors()
        ... idle ...
        outcome = cl.run_level(spec, targets, request_factory, on_progress)
        log = cl.telemetry()                                  # merged, driver clock
        nodes = cl.node_infos(); problems = cl.sensor_problems

``run_distributed_level(spec, targets, request_factory, ray_address, n_actors)`` does the same for
one level and returns ``(LevelOutcome, DistributedRun)``.

``"auto"`` joins the cluster this machine belongs to, an address joins that one, ``"local"``
starts a one-machine cluster for the run, bound to loopback: its node IP is 127.0.0.1 and nothing
of it listens on the machine's interface address (``start_local``).

How a level is shared
---------------------
- ``n_actors`` load-generator actors (default: one per alive node, at most the concurrency),
  placed with Ray's ``SPREAD`` strategy. Each gets ``actor_cpus`` logical CPUs.
- closed loop: actor ``a`` of ``n`` runs ``concurrency/n`` streams (remainder to the first),
  ``num_requests/n`` and ``warmup_requests/n`` likewise, with the request factory's indices
  ``i ≡ a (mod n)``; the duration bound is the same for all. A workload with sessions is refused
  in a distributed closed loop (a session's turns would be spread over actors); use a rate.
- open loop and trace: the driver builds the whole arrival schedule with ``load.plan.build_plans``,
  one worker plan per actor, as ``run_level`` does for its workers (arrival ``k`` to actor
  ``k mod n``, a session stays with one actor, ``--max-concurrency`` split over the actors); the
  schedule's start ``t0`` is an absolute time on the driver's clock, which each actor converts
  to its own clock with its measured offset, so arrivals keep their absolute times.
- several targets: the streams (closed) or requests (open) are routed exactly as
  ``load.targets.run_level_multi`` routes them in one process.

Control: the level runs under ``load.executor.coordinate``, the one coordinator loop of every
level, with ``RayExecutor`` (``distributed/executor.py``): Ctrl-C cancels every actor's requests
(the completed ones are kept, ``Interrupted``), the open loop's backlog guard stops every actor's
sending, a target an actor sees stop answering ends the level (``target_down``), progress is the
actors' counts polled without blocking; an actor that fails or dies fails the level with its node
and error named.

Clocks: the offset of every actor is measured (``distributed.clock``) before and after each
level; every timestamp of every record is mapped with the offset interpolated at its time
(drift corrected) before the records are merged and the window, steady window and load
statistics computed (``load.level``'s own code). Sensor readings likewise.

Sensing: a ``NodeSensor`` actor on every alive node (node affinity, no CPU slot); nodes without
meters are dropped (``sensor_status="no_meters"``). Readings are drained every
``drain_period_s``; a sensor actor that dies is reported in ``sensor_problems`` and its node's
``sensor_status="died"``, what it sent before is kept, and the run goes on.
"""

from __future__ import annotations

import os
import signal
import threading
from types import ModuleType
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from wattbench.distributed.clock import ClockOffset, measure_offset
from wattbench.distributed.executor import (
    START_MARGIN_NS, LoadActor, offset_line, run_on_actors, share_level, short_error, short_id,
)
from wattbench.distributed.merge import node_channel
from wattbench.core.errors import Interrupted, UserError
from wattbench.core.interrupt import Handler, restore_handler
from wattbench.core.load_types import LevelOutcome, LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.core.schema import LoadActorInfo, NodeInfo
from wattbench.telemetry.base import Channel, Reading, Sensor, SensorFailure, TelemetryLog
from wattbench.distributed.actors import remote_classes
from wattbench.load.executor import LoadProgress
from wattbench.load.plan import validate_spec
from wattbench.load.targets import check_targets, weighted_route

__all__ = ["RayCluster", "DistributedRun", "run_distributed_level", "START_MARGIN_NS"]

LOOPBACK = "127.0.0.1"


def _ray() -> ModuleType:
    """Ray, imported when a --ray run needs it (read as a module: its remote methods and actor
    handles are built at run time, so its calls are untyped here)."""
    try:
        import ray
    except ImportError:
        raise UserError("--ray needs Ray: install the extra with `pip install 'wattbench[ray]'`") from None
    return ray


@dataclass
class DistributedRun:
    """What a distributed level produced beside its ``LevelOutcome``."""

    nodes: list[NodeInfo]
    telemetry: TelemetryLog
    sensor_problems: list[str]
    actors: list[LoadActorInfo] = field(default_factory=list)  # per load actor: node, offset, cpu, records


@dataclass
class _Sensor:
    handle: Any
    node_id: str
    hostname: str | None = None
    ip: str | None = None
    status: str = "starting"
    channels: list[Channel] = field(default_factory=list)  # as the node described them
    problems: list[str] = field(default_factory=list)
    readings: list[tuple[int, str, float]] = field(default_factory=list)  # node clock
    failures: list[tuple[str, int, str]] = field(default_factory=list)
    offsets: list[ClockOffset] = field(default_factory=list)
    overhead: dict[str, Any] | None = None  # the node sampler's own cost (Sampler.overhead)


class RayCluster:
    """A connection to a Ray cluster with load actors and per-node sensor actors (module doc)."""

    def __init__(
        self,
        address: str = "auto",
        *,
        n_actors: int | None = None,
        actor_cpus: float = 1.0,
        sensors: Sequence[str] | None = None,
        sensor_interval_s: float = 0.1,
        sensor_factory: Callable[[str], Callable[[], list[Sensor]] | None] | None = None,
        estimate_cpu: bool = False,
        drain_period_s: float = 1.0,
        pings: int = 16,
        runtime_env: dict[str, Any] | None = None,
        init_kwargs: dict[str, Any] | None = None,
        clock_skew_ns: Callable[[str, int], int] | None = None,
    ) -> None:
        if n_actors is not None and n_actors < 1:
            raise UserError(f"--ray-actors must be >= 1, got {n_actors}")
        if not actor_cpus >= 0:
            raise UserError(f"actor CPUs must be >= 0, got {actor_cpus}")
        self.address = address
        self.n_actors = n_actors
        self.actor_cpus = actor_cpus
        self.sensor_specs = list(sensors or [])
        self.sensor_interval_s = sensor_interval_s
        self.sensor_factory = sensor_factory  # node_id -> zero-arg callable building the node's sensors
        self.estimate_cpu = estimate_cpu
        self.drain_period_s = drain_period_s
        self.pings = pings
        self.runtime_env = runtime_env
        self.init_kwargs = dict(init_kwargs or {})
        self.skew = clock_skew_ns or (lambda kind, i: 0)  # test seam: ("load"|"sensor", index) -> ns
        self.loads: list[LoadActor] = []
        self.sensors: list[_Sensor] = []
        self.sensor_problems: list[str] = []
        self._we_initialized = False
        self._sigterm_before: list[Handler] = []  # the caller's SIGTERM handler, while we hold Ray
        self._drainer: threading.Thread | None = None
        self._stop_drain = threading.Event()
        self._lock = threading.Lock()
        self.alive_nodes: list[dict[str, Any]] = []  # ray.nodes()'s entries of the nodes alive
        self.last_actors: list[LoadActorInfo] = []

    # -- connection ----------------------------------------------------------------------------
    def connect(self) -> "RayCluster":
        ray = _ray()
        if not ray.is_initialized():
            kw = dict(self.init_kwargs)
            if self.runtime_env:
                kw["runtime_env"] = self.runtime_env
            kw.setdefault("log_to_driver", False)
            # ray.init installs its own SIGTERM handler (sys.exit) for the whole process: where the
            # caller has one (run's: stop as on Ctrl-C, keeping what was measured), the caller's
            # stays; where it has none, Ray's does until close() puts the default back
            before = self._sigterm_before = (
                [signal.getsignal(signal.SIGTERM)] if threading.current_thread() is threading.main_thread() else [])
            started = False
            try:
                if self.address == "local":
                    start_local(ray, kw)
                else:
                    ray.init(address=self.address, **kw)
                started = True
            except ConnectionError as e:
                raise UserError(
                    f"cannot reach a Ray cluster at {self.address!r} ({e}); start one with `ray start --head` "
                    "or pass --ray ADDRESS (host:6379 of the head node)"
                ) from None
            finally:
                if before and (not started or before[0] not in (signal.SIG_DFL, None)):
                    restore_handler(signal.SIGTERM, before[0])
                if not started:
                    self._sigterm_before = []
            self._we_initialized = True
        self.alive_nodes = [n for n in ray.nodes() if n.get("Alive")]
        return self

    def __enter__(self) -> "RayCluster":
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        ray = _ray()
        if self.sensors and self._drainer is not None:
            try:
                self.stop_sensors()
            except Exception:  # closing must not hide the error that got us here
                pass
        for ld in self.loads:
            try:
                ray.kill(ld.handle)
            except Exception:
                pass
        self.loads = []
        if self._we_initialized and ray.is_initialized():
            ray.shutdown()
            self._we_initialized = False
        if self._sigterm_before and threading.current_thread() is threading.main_thread():
            restore_handler(signal.SIGTERM, self._sigterm_before.pop())

    # -- clocks --------------------------------------------------------------------------------
    def _offset(self, handle: Any) -> ClockOffset:
        ray = _ray()
        return measure_offset(lambda: ray.get(handle.clock.remote()), n=self.pings)

    # -- load actors ---------------------------------------------------------------------------
    def _ensure_loads(self, n: int) -> list[LoadActor]:
        ray = _ray()
        if len(self.loads) < n:
            LoadRemote, _ = _remote()
            new = []
            for i in range(len(self.loads), n):
                h = LoadRemote.options(num_cpus=self.actor_cpus, scheduling_strategy="SPREAD",
                                       name=None).remote(i, self.skew("load", i))
                new.append((i, h))
            infos = ray.get([h.info.remote() for _, h in new])
            ray.get([h.prepare.remote() for _, h in new])
            for (i, h), info in zip(new, infos):
                self.loads.append(LoadActor(h, i, info["node_id"], info.get("hostname"), info.get("ip")))
        return self.loads[:n]

    def default_actors(self, spec: LevelSpec) -> int:
        n = self.n_actors or max(1, len(self.alive_nodes))
        if spec.mode == "concurrency":
            n = min(n, int(spec.value))
            if spec.num_requests is not None:
                n = min(n, spec.num_requests)
        return max(1, n)

    # -- sensors -------------------------------------------------------------------------------
    def start_sensors(self) -> list[str]:
        """One sensor actor per alive node; keep those that find meters. Returns problems."""
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        _, SensorRemote = _remote()
        started = []
        for k, n in enumerate(self.alive_nodes):
            node_id = n["NodeID"]
            factory = self.sensor_factory(node_id) if self.sensor_factory else None
            h = SensorRemote.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            ).remote(node_id, self.sensor_specs, self.sensor_interval_s, factory, self.skew("sensor", k),
                     self.estimate_cpu)
            started.append(_Sensor(h, node_id, n.get("NodeManagerHostname"), n.get("NodeManagerAddress")))
        # clocks first (the samplers are not running yet), then open every node's meters at once
        for s in started:
            try:
                s.offsets.append(self._offset(s.handle))
            except Exception as e:  # the actor could not start on its node
                s.status = "died"
                self._problem(s, f"sensor actor did not start ({short_error(e)})")
        live = [s for s in started if s.status != "died"]
        opened = [s.handle.open.remote() for s in live]
        for s, ref in zip(live, opened):
            try:
                r = ray.get(ref)
            except Exception as e:  # the actor died while opening
                s.status = "died"
                self._problem(s, f"sensor actor died while opening its meters ({short_error(e)})")
                continue
            s.status = r["status"]
            s.channels = list(r["channels"])
            s.problems = list(r["problems"])
            self.sensor_problems += [f"node {short_id(s.node_id)}: {p}" for p in r["problems"]]
            if s.status != "ok":
                try:
                    ray.kill(s.handle)
                except Exception:
                    pass
        self.sensors = started
        self._stop_drain.clear()
        self._drainer = threading.Thread(target=self._drain_loop, name="wattbench-ray-drain", daemon=True)
        self._drainer.start()
        return list(self.sensor_problems)

    def _problem(self, s: _Sensor, text: str) -> None:
        line = f"node {short_id(s.node_id)} ({s.hostname or '?'}): {text}; its energy after that is missing, " \
               "the run goes on"
        s.problems.append(text)
        self.sensor_problems.append(line)

    def _drain_one(self, s: _Sensor, final: bool = False) -> None:
        ray = _ray()
        try:
            r = ray.get((s.handle.stop if final else s.handle.drain).remote(), timeout=60)
        except Exception as e:  # RayActorError and friends: the node's sensing is gone
            with self._lock:
                if s.status == "ok":
                    s.status = "died"
                    self._problem(s, f"sensor actor died ({short_error(e)})")
            return
        with self._lock:
            s.readings += r["readings"]
            s.failures += r["failures"]
            if final:
                s.overhead = r.get("overhead")

    def _drain_loop(self) -> None:
        while not self._stop_drain.wait(self.drain_period_s):
            for s in list(self.sensors):
                if s.status == "ok":
                    self._drain_one(s)

    def closing_reads(self, end_ns: int, timeout_s: float) -> bool:
        """Every live node's closing reads after a window that ended at ``end_ns`` (driver clock;
        ``Sampler.await_reads_after`` on each node, at once), then a drain of each, so the window's
        end is bracketed on every node before the driver accounts it. True when every node's did."""
        ray = _ray()
        live = [s for s in list(self.sensors) if s.status == "ok" and s.offsets]
        refs = []
        for s in live:
            t_node = int(round(end_ns + offset_line(s.offsets).offset_at(end_ns)))
            refs.append(s.handle.closing_reads.remote(t_node, timeout_s))
        ok = True
        for s, ref in zip(live, refs):
            try:
                ok = bool(ray.get(ref, timeout=timeout_s + 60)) and ok
            except Exception:  # the node's sensing is gone: the drain below says so
                ok = False
            self._drain_one(s)
        return ok

    def remeasure_sensor_offsets(self) -> None:
        for s in self.sensors:
            if s.status == "ok":
                try:
                    s.offsets.append(self._offset(s.handle))
                except Exception as e:
                    with self._lock:
                        if s.status == "ok":
                            s.status = "died"
                            self._problem(s, f"sensor actor died ({short_error(e)})")

    def stop_sensors(self) -> TelemetryLog:
        """Last offsets, final drain, stop the samplers; the merged log."""
        ray = _ray()
        self._stop_drain.set()
        if self._drainer is not None:
            self._drainer.join()
            self._drainer = None
        self.remeasure_sensor_offsets()
        for s in self.sensors:
            if s.status == "ok":
                self._drain_one(s, final=True)
                if s.status == "ok":
                    s.status = "stopped"
                try:
                    ray.kill(s.handle)
                except Exception:
                    pass
        return self.telemetry()

    def telemetry(self) -> TelemetryLog:
        """Every node's channels and readings so far, on the driver's clock (``node`` set,
        ids and devices prefixed by the node id)."""
        log = TelemetryLog()
        with self._lock:
            for s in self.sensors:
                if not s.channels or not s.offsets:
                    continue
                node = short_id(s.node_id)
                to_driver = offset_line(s.offsets).to_driver
                log.add_channels([node_channel(c, node) for c in s.channels])
                log.add([Reading(to_driver(t), f"{node}/{cid}", v) for t, cid, v in s.readings])
                log.failures += [SensorFailure(f"{node}/{n}", to_driver(t), e) for n, t, e in s.failures]
        for cid in log.t_ns:  # drains arrive in order per channel, but keep the contract explicit
            t = log.t_ns[cid]
            if any(b < a for a, b in zip(t, t[1:])):
                order = sorted(range(len(t)), key=t.__getitem__)
                log.t_ns[cid] = [t[i] for i in order]
                log.values[cid] = [log.values[cid][i] for i in order]
        return log

    # -- a level -------------------------------------------------------------------------------
    def run_level(
        self,
        spec: LevelSpec,
        targets: TargetSpec | Sequence[TargetSpec],
        request_factory: Callable[[int], Any],
        on_progress: Callable[[LoadProgress], None] | None = None,
        weights: Sequence[float] | None = None,
        n_actors: int | None = None,
    ) -> LevelOutcome:
        """One level spread over the load actors (module doc), run by the one coordinator loop
        (``distributed/executor.py``); records on the driver's clock. An interrupt raises
        ``Interrupted`` carrying the completed requests."""
        _ray()  # a clear error when ray is not installed

        tlist = [targets] if isinstance(targets, TargetSpec) else list(targets)
        validate_spec(spec, targets=len(tlist))
        route = weighted_route(check_targets(tlist, weights))
        multi = len(tlist) > 1 or not isinstance(targets, TargetSpec)
        share = share_level(spec, tlist, multi, route, request_factory, n_actors or self.default_actors(spec))
        loads = self._ensure_loads(len(share.jobs))
        try:
            outcome = run_on_actors(spec, share, loads, on_progress, pings=self.pings)
        except Interrupted as e:
            partial: LevelOutcome = getattr(e, "outcome")  # settle_outcome attaches it (core.errors cannot name it)
            self.last_actors = list(partial.load.actors or [])
            raise
        self.last_actors = list(outcome.load.actors or [])
        return outcome

    # -- reporting -----------------------------------------------------------------------------
    def node_infos(self) -> list[NodeInfo]:
        """Per node: its load actors, clock offset (sensor actor's, else first load actor's) and
        sensing status."""
        by: dict[str, NodeInfo] = {}
        for n in self.alive_nodes:
            nid = n["NodeID"]
            by[nid] = NodeInfo(node_id=short_id(nid), hostname=n.get("NodeManagerHostname"),
                               ip=n.get("NodeManagerAddress"))
        for ld in self.loads:
            ni = by.setdefault(ld.node_id, NodeInfo(node_id=short_id(ld.node_id), hostname=ld.hostname, ip=ld.ip))
            ni.load_actors += 1
            if ni.clock_offset_ns is None and ld.offsets:
                _fill_clock(ni, ld.offsets)
        for s in self.sensors:
            ni = by.setdefault(s.node_id, NodeInfo(node_id=short_id(s.node_id), hostname=s.hostname, ip=s.ip))
            ni.sensor_status = {"stopped": "ok"}.get(s.status, s.status)
            ni.channels = [f"{short_id(s.node_id)}/{c.id}" for c in s.channels]
            ni.problems = list(s.problems)
            if s.offsets:
                _fill_clock(ni, s.offsets)
        return list(by.values())


def _fill_clock(ni: NodeInfo, offsets: list[ClockOffset]) -> None:
    line = offset_line(offsets)
    ni.clock_offset_ns = offsets[0].offset_ns
    ni.clock_uncertainty_ns = line.uncertainty_ns
    ni.clock_rtt_ns = min(o.rtt_ns for o in offsets)


def start_local(ray: ModuleType, init_kwargs: dict[str, Any]) -> None:
    """Start a new one-machine Ray cluster (``ray.init(address="local")``) bound to loopback.

    ``_node_ip_address="127.0.0.1"`` alone is not enough on Linux: Ray rewrites a loopback node
    address to the machine's interface address ("remotely reachable") unless it runs as the
    single-machine cluster it is on macOS and Windows. That switch (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
    for the processes the cluster starts, which inherit it, and Ray's constant in this process) is
    set while the cluster starts and restored after; the started node then runs on 127.0.0.1."""
    import ray._private.ray_constants as ray_constants

    key = ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR
    old_env, old_flag = os.environ.get(key), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[key] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(address="local", _node_ip_address=LOOPBACK, **init_kwargs)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = old_flag
        if old_env is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old_env


def _remote() -> tuple[Any, Any]:
    return remote_classes()


def run_distributed_level(
    spec: LevelSpec,
    targets: TargetSpec | Sequence[TargetSpec],
    request_factory: Callable[[int], Any],
    ray_address: str = "auto",
    n_actors: int | None = None,
    *,
    on_progress: Callable[[LoadProgress], None] | None = None,
    weights: Sequence[float] | None = None,
    sensing: bool = True,
    **cluster_kw: Any,
) -> tuple[LevelOutcome, DistributedRun]:
    """One level on Ray with per-node sensing around it (module doc). ``cluster_kw`` go to
    ``RayCluster`` (``sensors``, ``actor_cpus``, ``sensor_factory`` …)."""
    with RayCluster(ray_address, n_actors=n_actors, **cluster_kw) as cl:
        if sensing:
            cl.start_sensors()
        outcome = cl.run_level(spec, targets, request_factory, on_progress, weights=weights)
        log = cl.stop_sensors() if sensing else TelemetryLog()
        run = DistributedRun(nodes=cl.node_infos(), telemetry=log, sensor_problems=list(cl.sensor_problems),
                             actors=list(cl.last_actors))
    return outcome, run
