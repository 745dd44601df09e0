"""A target's query string in the processes that send a run's load for it: spawned load workers
(``--workers 2``, each a fresh process: the level alone, then a whole ``wattbench run`` under a
memory limit) and a Ray load actor's code (``distributed.actors.LoadWorker``, run here without Ray;
the Ray run itself is ``test_ray_cluster.py``'s).

Against the hostile server's ``echo_query`` (``tests/fakes/hostile_server.py``): it logs every request
it receives with the query string it came with, and refuses every third completion request with a
401 that quotes that query back. The query went with every request, exactly as given; this test's
process never registers it (the query reaches the workers with their target alone,
``TargetSpec.query``), so the records the workers hand back are scrubbed by the workers or not at all:
none holds any 8-character piece of the secret value, and the 401s' details show it masked.
"""

from __future__ import annotations

import pytest

from tests.fakes.hostile_server import MODEL
from tests.fakes.reliability_procs import HOSTILE, child_env, run_argv, run_limited, server
from wattbench.core import origin
from wattbench.core.clock import now_ns
from wattbench.core.load_types import LevelSpec
from wattbench.core.secret_scope import registered
from wattbench.core.target import TargetSpec
from wattbench.distributed.actors import LoadWorker
from wattbench.distributed.messages import ClosedJob, OpenJob
from wattbench.load.level import run_level
from wattbench.load.plan import WorkerPlan, open_arrivals
from wattbench.workload.base import RequestSpec

SECRET = "qK7sEcReTvAlUe9zX2wP"
QUERY = f"api-version=2024-06-01&key={SECRET}"
PIECES = {SECRET[i:i + 8].lower() for i in range(len(SECRET) - 7)}


def _req(i: int) -> RequestSpec:
    return RequestSpec(prompt="a b c", max_tokens=4)


def _pieces_in(text: str) -> list[str]:
    low = text.lower()
    return sorted(p for p in PIECES if p in low)


@pytest.fixture
def echo():
    origin.forget_queries()
    assert not registered().found_in(SECRET)  # this process knows nothing of the secret
    with server("--behaviour", "echo_query", script=HOSTILE) as s:
        yield s
    assert origin.held_queries() == 0  # whatever sent for the target held its query only while it sent


def _target(s) -> TargetSpec:
    return TargetSpec(base_url=s.base + "/v1", model=MODEL, query=QUERY)


def _check(s, details: list[str | None], dumps: list[str], sent: int) -> None:
    posts = [e for e in s.get("/log") if e["method"] == "POST"]
    # the query went with every request, exactly as given
    assert len(posts) == sent and [e["query"] for e in posts] == [QUERY] * sent, posts[:3]
    refused = [d for d in details if d is not None]
    assert len(refused) == sent // 3, details  # requests 1, 4, 7 … were refused quoting it back
    assert all(d.startswith('{"error": {"message": "signature refused for /v1/completions?api-version=2024-06-01'
                            '&key=***') for d in refused), refused[:2]
    leaks = [(i, _pieces_in(d)) for i, d in enumerate(dumps) if _pieces_in(d)]
    assert not leaks, leaks[:3]
    assert not registered().found_in(SECRET)  # registered while the workers ran, and only then


def test_spawned_workers_send_the_query_and_scrub_what_it_echoes(echo):
    spec = LevelSpec(index=0, mode="concurrency", value=2, num_requests=9, workers=2)
    out = run_level(spec, _target(echo), _req)
    assert out.load.workers == 2  # two spawned processes sent the load
    recs = list(out.records)
    _check(echo, [r.error_detail for r in recs], [r.model_dump_json() for r in recs], 9)
    assert origin.target_query(echo.base) == ""  # this process's own table was never given it


def test_a_load_actors_runs_send_the_query_and_scrub_what_it_echoes(echo):
    target = _target(echo)
    w = LoadWorker(0)
    w.prepare()
    t0 = now_ns() + 50_000_000
    closed = w.run_closed(ClosedJob(index=0, n=1, spec=LevelSpec(index=0, mode="concurrency", value=2, num_requests=6,
                                                                 workers=1),
                                    targets=[target], routes=None, request_factory=_req, t0_node_ns=t0))
    _check(echo, [r["error_detail"] for r in closed.records], [repr(r) for r in closed.records], 6)
    spec = LevelSpec(index=1, mode="rate", value=50.0, arrival="constant", num_requests=6)
    parts, _, _ = open_arrivals(spec, _req, 1)
    opened = w.run_open(OpenJob(WorkerPlan(0, 1, "rate", target, arrivals=parts[0]), t0_node_ns=now_ns() + 50_000_000))
    records = closed.records + opened.records
    _check(echo, [r["error_detail"] for r in records], [repr(r) for r in records], 12)


def test_a_run_with_two_workers_sends_the_query_and_writes_no_piece_of_it(echo, tmp_path):
    """``wattbench run -t 'URL?api-version=…&key=…' --workers 2``: the load's requests come from two
    spawned processes; every request the server received carried the query, and no file of the run
    nor a line printed holds a piece of the key."""
    from wattbench.results.rundir import load_requests, load_result

    out = tmp_path / "run"
    p, _ = run_limited(run_argv(f"{echo.base}/v1?{QUERY}", out, "--workers", "2", "-c", "2", "-n", "9",
                                "--sensor", "const:node=100", "--keep-output-text"),
                       env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    log = echo.get("/log")
    posts = [e for e in log if e["method"] == "POST"]
    assert len(posts) >= 9 and {e["query"] for e in log} == {QUERY}, [(e["path"], e["query"]) for e in log][:5]
    assert load_result(out).levels[0].load.workers == 2
    details = [r.error_detail for r in load_requests(out) if r.error == "http_401"]
    assert details and all("?api-version=2024-06-01&key=***" in d for d in details), details[:2]
    blobs = {str(f): f.read_bytes().decode("utf-8", "replace") for f in tmp_path.rglob("*") if f.is_file()}
    blobs.update(stdout=p.stdout, stderr=p.stderr)
    assert len(blobs) > 4  # result.json, requests.jsonl, telemetry … were searched
    leaks = {where: _pieces_in(text) for where, text in blobs.items() if _pieces_in(text)}
    assert not leaks, leaks


def test_two_runs_in_one_process_keep_each_targets_query_to_its_own_run(echo, tmp_path):
    """A library user (a notebook, the monitor, tune) runs twice in one process against one server:
    first with ``?api-version=…&key=…``, then with no query. The first run's requests carry its query;
    the second run's carry none (the first target's query was released with its run), and after each
    run no query is held and no piece of the key is registered in this process."""
    from wattbench.config.run import RunConfig
    from wattbench.run import run_benchmark

    def run(url: str, out: str) -> None:
        run_benchmark(RunConfig(target=url, concurrency=[2], num_requests=6, input_tokens="8", output_tokens="4",
                                sensors=["const:node=100"], idle_s=0.0, prime=False, history_check=False,
                                calibrate_prompts=False, out=str(tmp_path / out), register_run=False, html=False))
        assert origin.held_queries() == 0 and origin.target_query(echo.base) == ""
        assert not registered().found_in(SECRET)

    run(f"{echo.base}/v1?{QUERY}", "first")
    first = echo.get("/log")
    run(f"{echo.base}/v1", "second")
    second = echo.get("/log")[len(first):]
    assert len([e for e in first if e["method"] == "POST"]) >= 6 and {e["query"] for e in first} == {QUERY}
    assert len([e for e in second if e["method"] == "POST"]) >= 6 and {e["query"] for e in second} == {""}, \
        [(e["path"], e["query"]) for e in second][:4]


def test_a_level_in_this_process_sends_its_own_targets_query(echo):
    """Two runs in one process hold a query each for one origin (``wattbench ab``'s two sides behind
    one host): a level run here (one worker, in-process) sends its own target's query, not the one
    given last, and leaves the other as it was."""
    from wattbench.core.secret_scope import scope

    other = "api-version=2023-01-01&key=OtHeRsIdEsEcReT4"
    with scope():
        origin.send_query(f"{echo.base}/v1?{other}")  # the other side's, given after this target's
        assert origin.target_query(echo.base) == other
        run_level(LevelSpec(index=0, mode="concurrency", value=2, num_requests=6), _target(echo), _req)
        assert origin.target_query(echo.base) == other
    posts = [e for e in echo.get("/log") if e["method"] == "POST"]
    assert len(posts) == 6 and {e["query"] for e in posts} == {QUERY}, [e["query"] for e in posts][:3]
