"""What the driver and a load actor (``distributed/actors.py``'s ``LoadWorker``) pass each other
over Ray: frozen dataclasses, picklable as Ray carries them, each checked where it crosses.

- ``ClosedJob``: a closed-loop actor's share of a level (``run_closed``'s argument): actor
  ``index`` of ``n`` runs ``spec`` (its streams and requests) against ``targets`` (``routes``: the
  target of each of its streams with several), its requests the factory's indices
  ``i ≡ index (mod n)``;
- ``OpenJob``: an open-loop actor's share (``run_open``'s): its ``WorkerPlan`` of arrivals;
- both carry the level's start on the actor's node clock (``t0_node_ns``) and the level's run id
  (``run``: a stop or cancel names it), set by ``timed`` when the driver sends the job;
- ``seal(job) -> (job, targets)``: the job as sent, its targets without their secrets (the key, the
  headers, the query string, the body's fields: ``public_target``), and the targets whole beside it,
  a second, small argument; ``unseal(job, targets)`` puts them back in the actor. Ray keeps an
  argument above its inline limit (~100 KiB: an open loop's arrivals, a request factory's data) in
  its object store, which lives in shared memory or, where that is small, in a file under ``/tmp``,
  and spills to disk when full; a small one travels inside the call itself. So a secret crosses to
  an actor only in memory and on the wire, never in a file;
- ``Reply``: what the run returns: its records (dicts, times on the driver's clock less the
  offset the driver corrects), when it stopped sending, the client's CPU, how it stopped, its
  loop-lag probes, its own saturation verdicts, its last progress and a target that stopped
  answering it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar, Union

from wattbench.core.errors import WattbenchError
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.load.liveness import TargetDown
from wattbench.load.plan import WorkerPlan


@dataclass(frozen=True)
class ClosedJob:
    """Actor ``index`` of ``n``'s share of a closed-loop level (module doc)."""

    index: int
    n: int
    spec: LevelSpec
    targets: list[TargetSpec]
    routes: list[int] | None
    request_factory: Callable[[int], Any]
    t0_node_ns: int = 0
    run: int = 0


@dataclass(frozen=True)
class OpenJob:
    """An actor's share of an open-loop level: its plan of arrivals."""

    plan: WorkerPlan
    t0_node_ns: int = 0
    run: int = 0


Job = Union[ClosedJob, OpenJob]


def timed(job: Job, t0_node_ns: int, run: int) -> Job:
    """``job`` as sent: the level's start on the actor's node clock and the level's run id."""
    return dataclasses.replace(job, t0_node_ns=t0_node_ns, run=run)


@dataclass(frozen=True)
class Reply:
    """What an actor's run returns (module doc); ``stopped_early`` is ``"interrupted"`` when the
    driver stopped or cancelled it, else the load's own reason or None."""

    records: list[dict[str, Any]]
    cpu_pct: float | None
    stop_ns: int | None
    stopped_early: str | None
    info: dict[str, Any]
    progress: tuple[int, int, int]  # (done, failed, output tokens)
    loop_lag_ns: list[int] = field(default_factory=list)
    saturation_reasons: list[str] = field(default_factory=list)
    down: TargetDown | None = None


def public_target(t: TargetSpec) -> TargetSpec:
    """``t`` without what may hold a secret: its key, headers, query string and extra body fields."""
    return dataclasses.replace(t, api_key=None, headers={}, secret_headers=(), query="", extra_body={})


def _targets_of(job: Job) -> list[TargetSpec]:
    if isinstance(job, ClosedJob):
        return list(job.targets)
    return [job.plan.target, *(job.plan.targets or [])]


def _with_targets(job: Job, targets: list[TargetSpec]) -> Job:
    if isinstance(job, ClosedJob):
        return dataclasses.replace(job, targets=list(targets))
    first, rest = targets[0], targets[1:]
    plan = dataclasses.replace(job.plan, target=first, targets=list(rest) if job.plan.targets is not None else None)
    return dataclasses.replace(job, plan=plan)


def seal(job: Job) -> tuple[Job, list[TargetSpec]]:
    """``job`` with its targets' secrets taken out, and its targets whole (module doc)."""
    targets = _targets_of(job)
    return _with_targets(job, [public_target(t) for t in targets]), targets


def unseal(job: Job, targets: list[TargetSpec] | None) -> Job:
    """A sealed ``job`` with its ``targets`` back (None: a job sent whole, in-process)."""
    if targets is None:
        return job
    if len(targets) != len(_targets_of(job)) or not all(isinstance(t, TargetSpec) for t in targets):
        raise WattbenchError(f"a load actor's job came with {len(targets)} targets for its "
                             f"{len(_targets_of(job))}; run the same wattbench version on every node of the Ray cluster")
    return _with_targets(job, targets)


T = TypeVar("T")


def expect(value: object, kind: type[T], what: str) -> T:
    """``value`` if it is a ``kind``; else one line naming what crossed the Ray boundary instead
    (a job or reply from another wattbench version on a node, an actor's bug)."""
    if not isinstance(value, kind):
        raise WattbenchError(f"{what}: expected a {kind.__name__}, got {type(value).__name__}; run the same "
                             "wattbench version on every node of the Ray cluster")
    return value
