"""Ray's load executor under the one coordinator loop, without Ray: the real ``LoadWorker`` actor
code on threads at the executor's seam (``tests/fakes/ray_actors.py``), against a real scripted
streaming server whose own per-request log is the ground truth.

What the executor must get right whatever runs the actors: records on the driver's clock (the
actors' clocks are skewed by seconds), every arrival at its absolute time, the closed loop's
shares, progress, an interrupt and the backlog guard reaching every actor, and an actor that
fails named in the error. ``tests/integration/test_ray_cluster.py`` runs the same code on a real
two-node Ray cluster."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from tests.fakes.distributed_servers import FixedRequests, scripted_server_with_log
from tests.fakes.ray_actors import thread_call, threaded_actors
from tests.fakes.stream_server_proc import stream_server
from wattbench.core.clock import now_ns
from wattbench.distributed.actors import LoadWorker
from wattbench.distributed.executor import run_on_actors, share_level
from wattbench.distributed.messages import ClosedJob, OpenJob, Reply, timed
from wattbench.core.errors import Interrupted, UserError, WattbenchError
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.load.executor import LoadProgress

SKEWS = {0: 7_000_000_000, 1: -3_000_000_000}
# how late a loaded host may read a finished answer (scheduling, not clock error): well below the
# skews, so a time left on an actor's clock still shows
READ_LAG_NS = 1_000_000_000
TTFT_MS, OUT = 30.0, 4
factory = FixedRequests(max_tokens=OUT, tagged=True)


@pytest.fixture(scope="module")
def served():
    with scripted_server_with_log("--ttft-ms", str(TTFT_MS), "--itl-ms", "4") as (url, stats):
        yield TargetSpec(base_url=url, model="fake-model"), stats


def _run(spec, target, n=2, on_progress=None, workers=None, requests=factory):
    workers = workers or [LoadWorker(i, clock_skew_ns=SKEWS.get(i, 0)) for i in range(n)]
    share = share_level(spec, [target], False, lambda k: 0, requests, len(workers))
    with threaded_actors(workers) as loads:
        return run_on_actors(spec, share, loads, on_progress, calls=thread_call, pings=8)


def _on_server_clock(out, stats, before: int, after: int) -> None:
    """Every record against the server's own log (same host: one monotonic clock): its first and
    last chunk stamped no earlier than the server wrote them (within the offsets' uncertainty) and
    no later than the request ended, before the level returned to the driver (``before``/``after``:
    its readings around the level; the skews are seconds, so a mapping error shows on one side or
    the other), and its TTFT not below the server's."""
    truth = stats.per_request()
    stats(reset=True)
    u = max(a.clock_uncertainty_ns for a in out.load.actors)
    for r in out.records:
        read, first_w, last_w = truth[f"r{r.id}"]
        assert -u <= r.first_token_ns - first_w and -u <= r.last_token_ns - last_w
        assert before < r.sent_ns < r.first_token_ns <= r.last_token_ns <= r.end_ns < after
        assert r.first_token_ns - r.sent_ns >= first_w - read >= TTFT_MS * 1e6


def test_open_loop_on_skewed_actors_lands_on_the_driver_clock(served):
    target, stats = served
    stats(reset=True)
    spec = LevelSpec(index=0, mode="rate", value=40.0, arrival="constant", num_requests=40)
    progress: list[dict] = []
    before = now_ns()
    out = _run(spec, target, on_progress=progress.append)
    after = now_ns()
    assert sorted(r.id for r in out.records) == list(range(40)) and all(r.ok for r in out.records)
    acts = {a.index: a for a in out.load.actors}
    for i, skew in SKEWS.items():  # one process: the true offset is the injected skew
        assert abs(acts[i].clock_offset_ns - skew) <= acts[i].clock_uncertainty_ns
        assert acts[i].records == 20 and acts[i].drift_ppm is not None
    u = max(a.clock_uncertainty_ns for a in acts.values())
    assert all(before < r.scheduled_ns <= r.sent_ns < r.end_ns < after for r in out.records)
    # the two actors' interleaved arrivals are one 25 ms grid again (10 s apart uncorrected)
    gaps = np.diff(np.sort([r.scheduled_ns for r in out.records]))
    assert np.all(np.abs(gaps - 25_000_000) <= 2 * u + 1_000)
    _on_server_clock(out, stats, before, after)
    assert out.load.workers == 2 and out.load.target_rate_rps == pytest.approx(40.0, rel=1e-9) and out.stopped_early is None
    assert out.load.send_lag_ms.count == 40 and out.load.client_loop_lag_ms.count > 0
    # progress came through the one loop, and its last word is the actors' final counts
    done = [p.requests_done for p in progress]
    assert len(progress) >= 2 and done == sorted(done)
    assert progress[-1].requests_done == 40 and progress[-1].requests_failed == 0
    assert progress[-1].output_tokens == sum(r.output_tokens for r in out.records)


def test_closed_loop_shares_streams_requests_and_indices(served):
    target, stats = served
    stats(reset=True)
    spec = LevelSpec(index=0, mode="concurrency", value=5, num_requests=21, warmup_requests=3)
    before = now_ns()
    out = _run(spec, target)
    after = now_ns()
    # actor a runs the factory's indices a, a+2, …: 3+1 streams, 11+10 measured, 2+1 warm-up
    measured = [r for r in out.records if not r.warmup]
    assert len(measured) == 21 and sum(r.warmup for r in out.records) == 3
    assert sorted(r.id for r in out.records if r.worker == 0) == list(range(0, 26, 2))
    assert sorted(r.id for r in out.records if r.worker == 1) == list(range(1, 23, 2))
    assert sorted(a.records for a in out.load.actors) == [11, 13]
    assert out.load.target_concurrency == 5 and out.load.workers == 2
    _on_server_clock(out, stats, before, after)


@pytest.mark.parametrize("spec", [
    LevelSpec(index=0, mode="rate", value=20.0, arrival="constant", num_requests=1200),  # a 60 s schedule
    LevelSpec(index=0, mode="concurrency", value=4, duration_s=60.0),  # each actor's own run_level
], ids=["open", "closed"])
def test_interrupt_cancels_every_actor_and_keeps_what_completed(served, spec):
    target, _ = served

    def ctrl_c(p: LoadProgress) -> None:
        if p.requests_done >= 6:
            signal.raise_signal(signal.SIGINT)  # the coordinator's handler turns it into its flag

    with pytest.raises(Interrupted) as e:
        _run(spec, target, on_progress=ctrl_c)
    out = e.value.outcome
    assert out.stopped_early == "interrupted"
    assert len(out.records) >= 6 and all(r.ok for r in out.records)
    # both actors stopped before their 60 s and returned what completed: a cancel that does not
    # reach them runs the whole schedule (open), or sends for the whole duration (closed: its
    # records then span ~60 s; the interrupt came after 6 of them, so half is a wide margin)
    if spec.mode == "rate":
        assert len(out.records) < spec.num_requests
    else:
        assert out.end_ns - out.start_ns < spec.duration_s * 1e9 / 2
    assert sorted(a.index for a in out.load.actors) == [0, 1]
    assert all(a.records > 0 for a in out.load.actors)


@pytest.mark.parametrize("spec", [
    LevelSpec(index=0, mode="rate", value=50.0, arrival="constant", num_requests=3000),  # a 60 s schedule
    LevelSpec(index=0, mode="concurrency", value=4, duration_s=60.0),
], ids=["open", "closed"])
def test_a_target_that_stops_answering_ends_the_level_on_the_driver_clock(spec):
    """The server dies at its 21st request (connections reset, then refused): each actor's liveness
    watch stops it, and the level says which target stopped answering and when, on the driver's
    clock (the actors' clocks are seconds off), as a one-machine level does."""
    with stream_server("--ttft-ms", "10", "--itl-ms", "2", "--die-after-requests", "20") as (base, _):
        target = TargetSpec(base_url=base + "/v1", model="fake-model")
        before = now_ns()
        out = _run(spec, target)
        after = now_ns()
    down = out.target_down
    assert out.stopped_early == "target stopped answering" and down is not None and down.target == target.base_url
    ok = [r for r in out.records if r.ok]
    # the server answered at most 20 (those in flight when it died were reset); the level stopped
    # instead of failing for a minute
    assert 0 < len(ok) <= 20 and len(out.records) < 1000
    u = max(a.clock_uncertainty_ns for a in out.load.actors)
    # one timeline: the verdict's times are on the driver's clock, inside the level (an actor's time
    # left unmapped is 7 s late or 3 s early), and the server died after its last answer and before
    # the first failure. That order is the server's; the client stamps each end when its actor reads
    # it, and on a loaded host one actor reads an answer the server sent before dying after another
    # actor saw the connection fail (measured: 6.7 ms late in 1 of 30 runs beside two CPU hogs; the
    # actors here are threads of one process), so the order holds within READ_LAG_NS, far below the
    # skews.
    assert down.first_failure_ns is not None and down.last_ok_ns is not None
    assert before < down.first_failure_ns - 2 * u and down.first_failure_ns + 2 * u < after
    assert before < down.last_ok_ns - 2 * u and down.last_ok_ns + 2 * u < after
    assert before < max(r.end_ns for r in ok) <= down.first_failure_ns + 2 * u + READ_LAG_NS
    # the last answer is the target's, whichever actor read it (the actor that saw the first failure
    # may have had none answered: under load one actor can send its first request after the other
    # has had all 20 answered)
    assert down.last_ok_ns == max(r.end_ns for r in ok)
    assert down.last_ok_ns <= down.first_failure_ns + 2 * u + READ_LAG_NS
    assert "stopped answering" in down.text


def test_a_stop_asked_before_its_run_started_is_applied(served):
    """A threaded actor does not keep the calls' order: a stop that overtakes its run still stops it."""
    target, _ = served
    spec = LevelSpec(index=0, mode="rate", value=50.0, arrival="constant", num_requests=20)
    share = share_level(spec, [target], False, lambda k: 0, factory, 1)
    w = LoadWorker(0)
    w.stop(7)
    job = share.jobs[0]
    assert isinstance(job, OpenJob)
    res = w.run_open(timed(job, now_ns() + 20_000_000, 7))
    assert res.records == [] and res.stop_ns is not None
    res = w.run_open(timed(job, now_ns() + 20_000_000, 8))  # another run: not stopped
    assert len(res.records) == 20


def test_a_job_or_reply_of_another_shape_is_refused_at_the_boundary(served):
    """What crosses Ray is checked where it lands: an actor given a plain dict (a driver of another
    wattbench version) refuses it in one line naming it and before sending anything; a driver
    given an actor's reply that is not a Reply fails the level naming the actor."""
    target, stats = served
    spec = LevelSpec(index=0, mode="rate", value=50.0, arrival="constant", num_requests=4)
    share = share_level(spec, [target], False, lambda k: 0, factory, 1)
    job = share.jobs[0]
    assert isinstance(job, OpenJob) and not isinstance(job, ClosedJob)
    before = stats()["requests"]
    with pytest.raises(WattbenchError, match=r"^run_open's job: expected a OpenJob, got dict; run the same "
                                             r"wattbench version on every node of the Ray cluster$"):
        LoadWorker(0).run_open({"plan": job.plan, "t0_node_ns": now_ns()})  # type: ignore[arg-type]
    with pytest.raises(WattbenchError, match=r"^run_closed's job: expected a ClosedJob, got OpenJob"):
        LoadWorker(0).run_closed(job)  # type: ignore[arg-type]
    assert stats()["requests"] == before  # refused before any request was sent
    with pytest.raises(WattbenchError, match=r"load actor 1's reply: expected a Reply, got dict"):
        _run(spec, target, workers=[LoadWorker(0), _OldReply(1)])


class _OldReply(LoadWorker):
    def run_open(self, job: OpenJob, targets=None) -> Reply:
        return {"records": [], "stop_ns": None}  # type: ignore[return-value]


class _Dies(LoadWorker):
    def run_open(self, job: OpenJob, targets=None) -> Reply:
        raise RuntimeError("the actor's process died")


def test_an_actor_that_fails_fails_the_level_naming_it(served):
    target, _ = served
    spec = LevelSpec(index=0, mode="rate", value=50.0, arrival="constant", num_requests=10)
    with pytest.raises(WattbenchError, match=r"load actor 1 on node node1 \(host1\) failed: "
                                             r"RuntimeError: the actor's process died"):
        _run(spec, target, workers=[LoadWorker(0), _Dies(1)])


def test_closed_loop_refusals_name_the_flag():
    spec = LevelSpec(index=0, mode="concurrency", value=2, num_requests=4)
    with pytest.raises(UserError, match="at most one actor per stream"):
        share_level(spec, [TargetSpec(base_url="http://127.0.0.1:9/v1", model="m")], False, lambda k: 0, factory, 3)


@pytest.mark.slow
def test_backlog_guard_stops_every_actor():
    """Twice a scripted server's capacity (2 streams, 20 + 9 x 10 = 110 ms each: ~18 requests/s) over
    two actors: the driver's backlog guard trips, every actor stops sending, what was sent drains
    complete (``test_oversaturation_stop.py`` is the same on one worker)."""
    with stream_server("--ttft-ms", "20", "--itl-ms", "10", "--max-concurrent", "2") as (base, stats):
        target = TargetSpec(base_url=base + "/v1", model="fake-model")
        spec = LevelSpec(index=0, mode="rate", value=36.0, arrival="constant", duration_s=12.0)
        out = _run(spec, target, workers=[LoadWorker(0), LoadWorker(1)], requests=FixedRequests(max_tokens=10))
        served = stats()
    assert out.stopped_early and out.stopped_early.startswith("over-saturated")
    assert len(out.records) < 36.0 * 12.0 * 0.75 and all(r.ok for r in out.records)
    assert served["streams_done"] == len(out.records)
    assert all(a.records > 0 for a in out.load.actors)
