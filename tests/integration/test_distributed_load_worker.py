"""The load actor's code without Ray, against a real scripted server: its share of a level,
started at an absolute time given on a skewed clock, reports on that clock."""

from __future__ import annotations

import pytest

from tests.fakes.distributed_servers import scripted_server
from wattbench.core.clock import now_ns
from wattbench.distributed.actors import LoadWorker
from wattbench.distributed.messages import ClosedJob, OpenJob
from wattbench.load.plan import WorkerPlan, open_arrivals
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.workload.base import RequestSpec

SKEW = -6_000_000_000


def _req(i):
    return RequestSpec(prompt="a b c", max_tokens=4)


@pytest.fixture(scope="module")
def target():
    with scripted_server("--ttft-ms", "20", "--itl-ms", "3") as url:
        yield TargetSpec(base_url=url, model="fake-model")


def test_open_share_keeps_absolute_times_on_a_skewed_clock(target):
    w = LoadWorker(1, clock_skew_ns=SKEW)
    w.prepare()
    spec = LevelSpec(index=2, mode="rate", value=50.0, arrival="constant", num_requests=20)
    parts, rate, _ = open_arrivals(spec, _req, 2)
    t0 = now_ns() + 100_000_000
    res = w.run_open(OpenJob(WorkerPlan(1, 2, "rate", target, arrivals=parts[1]), t0_node_ns=t0 + SKEW))
    returned_ns = now_ns()
    recs = res.records
    assert len(recs) == 10 and all(r["ok"] for r in recs)
    # the actor's arrivals are 1, 3, 5 … of a 50/s schedule: offsets 20, 60, 100 … ms after t0
    for r, (idx, off, _, _) in zip(sorted(recs, key=lambda r: r["id"]), parts[1]):
        assert r["scheduled_ns"] - SKEW == t0 + int(off * 1e9)
        # every stamp is on the actor's (skewed) clock: taken back to the driver's, each lies
        # between its schedule and when run_open returned (causality, no wall-clock bound; a stamp
        # left on the driver's clock would be 6 s off)
        assert r["scheduled_ns"] <= r["sent_ns"] < r["first_token_ns"] <= r["end_ns"] <= returned_ns + SKEW
        assert r["level"] == 2
    assert w.progress()[0] == 10


def test_closed_share_uses_its_indices(target):
    w = LoadWorker(1, clock_skew_ns=SKEW)
    seen = []

    def factory(i):
        seen.append(i)
        return _req(i)

    t0 = now_ns() + 50_000_000
    res = w.run_closed(ClosedJob(index=1, n=3, spec=LevelSpec(index=0, mode="concurrency", value=2, num_requests=6,
                                                               workers=1),
                                 targets=[target], routes=None, request_factory=factory, t0_node_ns=t0 + SKEW))
    returned_ns = now_ns()
    recs = res.records
    assert sorted(r["id"] for r in recs) == [1, 4, 7, 10, 13, 16]
    assert all(i % 3 == 1 for i in seen)
    assert min(r["sent_ns"] for r in recs) - SKEW >= t0
    assert all(r["worker"] == 1 for r in recs)
    ttft = [(r["first_token_ns"] - r["sent_ns"]) / 1e6 for r in recs]
    # one worker clock, so the skew cancels: never below the server's scripted 20 ms (causality,
    # exact), and every stamp, taken back to the driver's clock, between t0 and when run_closed
    # returned (a stamp left on the driver's clock would be 6 s off; no wall-clock ceiling: a
    # loaded host may stretch any TTFT; the accuracy bound is test_client_ground_truth's)
    assert all(t >= 20.0 for t in ttft), ttft
    assert all(t0 <= r["sent_ns"] - SKEW and r["end_ns"] - SKEW <= returned_ns for r in recs)
