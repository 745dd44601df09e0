"""Levels that look valid but are not: the scripted server gives the ground truth.

- a timed warm-up with requests longer than the warm-up: requests sent after the warm-up are
  measured (before, the prefetch labelled a whole second round warm-up: 0 measured, verdict valid);
- requests in flight at the ``--duration`` deadline are drained and measured;
- a level with no completed measured request is ``invalid`` with the reason and the run exits 3;
- a dataset shorter than the levels cycles;
- a server killed (SIGKILL by PID) mid-level stops the level and the run (exit 4).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.fakes.reliability_procs import child_env, server
from tests.fakes.stream_server_proc import stream_server
from wattbench.load.level import run_level
from wattbench.load.liveness import FAILURES_DOWN
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.results.rundir import load_requests, load_result
from wattbench.workload.base import RequestSpec

ROOT = Path(__file__).resolve().parents[2]


def _req(i: int) -> RequestSpec:
    return RequestSpec(prompt=f"w{i} a b", max_tokens=40)


def _said(stderr: str) -> list[str]:
    """What a run said on stderr besides its plain progress lines (``wattbench: <phase or level>``,
    printed where stderr is not a terminal): errors, warnings and anything else."""
    return [ln for ln in stderr.splitlines() if ln.strip() and (
        not ln.startswith("wattbench: ") or ln.startswith(("wattbench: error:", "wattbench: warning:")))]


def _wb(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=cwd, env=child_env(),
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("workers", [1, 2])
def test_requests_sent_after_a_timed_warmup_are_measured(workers):
    # 40 tokens x 20 ms + 50 ms = 0.85 s per request; warm-up 0.3 s; 1.0 s of measured load.
    # The first round (sent at t0) is warm-up; the second round is sent at ~0.85 s, after the
    # warm-up: it must be measured, and it is in flight at the deadline (1.3 s): drained.
    with stream_server("--ttft-ms", "50", "--itl-ms", "20") as (base, stats):
        target = TargetSpec(base_url=base + "/v1", model="fake-model")
        spec = LevelSpec(index=0, mode="concurrency", value=4, duration_s=1.0, warmup_s=0.3, workers=workers)
        out = run_level(spec, target, _req)
        served = stats()
    recs = out.records
    warm = [r for r in recs if r.warmup]
    measured = [r for r in recs if not r.warmup]
    t0 = min(r.sent_ns for r in recs)
    # the label follows the send time: warm-up sent within the warm-up, measured after it
    assert all((r.sent_ns - t0) / 1e9 < 0.3 for r in warm), [(r.sent_ns - t0) / 1e9 for r in warm]
    assert all((r.sent_ns - t0) / 1e9 >= 0.3 for r in measured)
    # the first round (4 streams, sent at t0) is warm-up; the second is sent after it (before the fix
    # the prefetch had labelled it warm-up too: 8 warm-up, 0 measured)
    assert 1 <= len(warm) <= 4 and len(measured) >= 1
    # in flight at the deadline (t0 + 1.3 s) and drained: every request completed, none lost
    assert any(r.sent_ns < t0 + 1_300_000_000 < r.end_ns for r in measured)
    assert all(r.ok for r in recs) and len(recs) == served["streams_completed"]
    # the level ends after the deadline, once the drained request is in; drain_s counts from the last
    # worker's stop, which a worker that noticed the stop only after its streams ended makes 0
    assert out.end_ns > t0 + 1_300_000_000 and out.load.drain_s >= 0
    assert out.end_ns - out.start_ns > 0


def test_a_level_of_only_warmup_requests_is_invalid_and_the_run_exits_3(tmp_path):
    # the H200 case in small: requests (0.85 s) longer than warm-up + duration (0.3 + 0.2 s): the
    # two streams' first requests are warm-up and nothing is sent after the warm-up. Primed, the run
    # knows it before the level (run/prime.unmeasurable) and stops after the priming with the
    # duration to give (exit 2); unprimed (--no-prime) it cannot know: the level runs, is invalid,
    # and the run exits 3.
    args = ("-c", "2", "--warmup", "0.3s", "--duration", "0.2", "--output-tokens", "40", "--input-tokens", "8",
            "--sensor", "const:node=300", "--idle", "0", "--no-register", "--no-html")
    with stream_server("--ttft-ms", "50", "--itl-ms", "20") as (base, stats):
        p = _wb("run", "--target", base, *args, "--out", str(tmp_path / "primed"), cwd=tmp_path)
        primed_served = stats(reset=True)
        q = _wb("run", "--target", base, *args, "--no-prime", "--out", str(tmp_path / "run"), cwd=tmp_path)
        served = stats()
    # one error line, after the progress lines a non-TTY stderr gets (the calibration, the priming)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("wattbench: error:")]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("wattbench: error: c=2 cannot measure: priming took ") and "give --duration 2 " in lines[0]
    assert p.stderr.rstrip().endswith(lines[0])
    refused = load_result(tmp_path / "primed")
    probes = refused.prompt_calibration.probes if refused.prompt_calibration else 0
    assert refused.levels == [] and refused.noise.priming.completed == 8
    assert primed_served["streams_completed"] == 8 + probes  # the priming and the prompt calibration only
    assert q.returncode == 3, q.stderr
    assert "1 level(s) completed no measured request (concurrency=2)" in q.stderr and "Traceback" not in q.stderr
    res = load_result(tmp_path / "run")
    lv = res.levels[0]
    assert res.noise.priming is None
    probes = res.prompt_calibration.probes if res.prompt_calibration else 0
    assert (lv.requests.warmup, lv.requests.completed, lv.requests.failed) == (2, 0, 0) == (
        served["streams_completed"] - probes, 0, 0)
    assert lv.validity.verdict == "invalid" and res.validity.verdict == "invalid"
    reason = next(r for r in lv.validity.reasons if "no measured request completed" in r)
    assert "every request sent was a warm-up request" in reason
    # a sensor was sampled: the level says why it has no energy, not "no sensor was sampled"
    assert "no measurement window" in lv.energy_unavailable_reason
    assert lv.timing.model_dump() == {"warmup_s": pytest.approx(0.3, rel=1e-9), "warmup_requests": None,
                                      "duration_s": pytest.approx(0.2, rel=1e-9), "duration_includes_warmup": False}


def test_a_level_whose_requests_all_failed_is_invalid_and_the_run_exits_3(tmp_path):
    with stream_server("--ttft-ms", "5", "--itl-ms", "2", "--fail-rate", "1") as (base, stats):
        p = _wb("run", "--target", base, "-c", "2", "-n", "6", "--no-sensors", "--idle", "0", "--no-register",
                "--no-html", "--out", str(tmp_path / "run"), cwd=tmp_path)
        served = stats()
    assert p.returncode == 3, p.stderr
    res = load_result(tmp_path / "run")
    lv = res.levels[0]
    pr = res.noise.priming  # the priming's requests failed too, and are counted there, not in the level
    assert (pr.requests, pr.completed, pr.failed) == (8, 0, 8)
    cal = res.prompt_calibration  # the prompt-length probes failed as well: no fit, and the run says why
    assert not cal.used and f"none of the {cal.probes} probe requests completed" in cal.reason
    assert lv.requests.failed == 6 == served["requests"] - served.get("streams_completed", 0) - pr.failed - cal.probes
    reason = next(r for r in lv.validity.reasons if "no measured request completed" in r)
    assert "6 failed" in reason and "http_500" in reason and lv.validity.verdict == "invalid"


def test_dataset_shorter_than_the_levels_cycles(tmp_path):
    # the case: 4 rows, --concurrency 1,2,4 --num-requests 3 ran 3, then 1, then 0 requests
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"row{i} tell me", "output_tokens": 4}) + "\n" for i in range(4)))
    with stream_server("--ttft-ms", "5", "--itl-ms", "2") as (base, stats):
        p = _wb("run", "--target", base, "-c", "1,2,4", "-n", "3", "--workload", str(data), "--no-sensors",
                "--idle", "0", "--no-register", "--no-html", "--out", str(tmp_path / "run"), cwd=tmp_path)
        served = stats()
    assert p.returncode == 0, p.stderr
    res = load_result(tmp_path / "run")
    assert [lv.requests.completed for lv in res.levels] == [3, 3, 3]
    # the server also served the priming (two rounds of 4 streams) and the history check's repeat
    # of c=1 (as many requests as it had, 3: a quarter of them would be under the 8 a repeat needs);
    # neither is a level's, neither is in requests.jsonl
    extra = res.noise.priming.completed + res.noise.history_check.repeat.requests.completed
    assert (res.noise.priming.completed, res.noise.history_check.repeat.requests.completed) == (8, 3)
    assert served["streams_completed"] == sum(1 for r in load_requests(tmp_path / "run") if r.ok) + extra
    assert all(lv.validity.verdict != "valid" or lv.requests.completed for lv in res.levels)


def test_server_sigkilled_mid_level_stops_the_run_with_exit_4(tmp_path):
    """Kill the scripted server by PID while a 3,000-request level runs at 8 streams."""
    with server("--ttft-ms", "5", "--itl-ms", "5") as s:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wattbench", "run", "--target", s.base, "-c", "8", "-n", "3000",
             "--input-tokens", "8", "--output-tokens", "8", "--no-sensors", "--idle", "0", "--no-register",
             "--no-html", "--out", str(tmp_path / "run")],
            cwd=tmp_path, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        done_before = 0
        deadline = time.monotonic() + 60
        while done_before < 40 and time.monotonic() < deadline:  # let it measure something first
            time.sleep(0.05)
            with urllib.request.urlopen(s.base + "/stats", timeout=10) as r:
                done_before = json.loads(r.read())["streams_completed"]
        assert done_before >= 40
        os.kill(s.proc.pid, signal.SIGKILL)
        s.proc.wait(timeout=60)
        dead_ns = time.perf_counter_ns()  # the run's clock (CLOCK_MONOTONIC, shared by processes)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    lines = _said(err)
    assert len(lines) == 1 and f"the target {s.base}/v1 stopped answering" in lines[0], err
    res = load_result(tmp_path / "run")
    recs = load_requests(tmp_path / "run")
    ok = [r for r in recs if r.ok]
    primed = res.noise.priming.completed  # 16 priming streams went first; they are not a level's
    assert primed == 16
    probes = res.prompt_calibration.counted  # the prompt-length probes went before it: not a level's either
    assert len(ok) >= done_before - primed - probes  # every request completed before the kill is kept
    assert len(recs) < 3000 and res.status == "failed"
    lv = res.levels[0]
    # it stopped because of the liveness rule, not a clock: on a closed loop each send after the
    # server died follows a failed request, and each worker's watch trips by its FAILURES_DOWN-th
    # failure in a row, so no more than that many requests per worker were sent to a dead server
    after = [r for r in recs if r.sent_ns > dead_ns]
    assert not any(r.ok for r in after)
    assert len(after) <= FAILURES_DOWN * lv.load.workers, (len(after), lv.load.workers)
    assert lv.requests.completed == len([r for r in ok if not r.warmup])
    assert lv.validity.verdict == "invalid" and lv.target_down is not None and lv.target_down.refusals >= 5


@pytest.mark.parametrize("bad, needle", [
    (("--arrival", "poison"), "--arrival 'poison'"),
    (("--arrival", "gamma:-1"), "gamma:-1"),
    (("--workers", "0"), "--workers must be >= 1"),
    (("--sample-interval", "0"), "--sample-interval must be > 0"),
    (("--speedup", "0"), "--speedup must be > 0"),
    (("--cooldown", "-1"), "--cooldown must be >= 0"),
    (("--price-per-kwh", "-1"), "--price-per-kwh must be >= 0"),
])
def test_bad_input_writes_nothing(tmp_path, bad, needle):
    """Validated before anything is written: no run directory, no telemetry, no history database."""
    out, db = tmp_path / "run", tmp_path / "h.sqlite3"
    with stream_server("--ttft-ms", "5", "--itl-ms", "2") as (base, stats):
        p = _wb("run", "--target", base, "-r", "2", "-n", "3", *bad, "--sensor", "const:node=100", "--idle", "0",
                "--db", str(db), "--out", str(out), cwd=tmp_path)
        served = stats()
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr, p.stderr
    assert not out.exists() and not db.exists()
    assert served["requests"] == 0  # nothing was sent either


def test_history_import_never_registers_a_result_without_a_finished_level(tmp_path):
    from tests.fakes.results_factory import make_result
    from wattbench.results import rundir
    from wattbench.results.store import HistoryStore

    empty = make_result("started-only")
    empty.levels = []
    empty.status = "running"
    rundir.write_result(tmp_path / "runs" / "a", empty)
    rundir.write_result(tmp_path / "runs" / "b", make_result("finished"))
    db = tmp_path / "h.sqlite3"
    p = _wb("history", "import", str(tmp_path / "runs"), "--db", str(db), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "no finished level (status running); not registered" in p.stderr
    with HistoryStore(db) as s:
        assert [r.run_id for r in s.list_runs()] == ["finished"]
        s.register(empty, tmp_path / "runs" / "a")  # even registered directly, it is not indexed as valid
        assert s.get("started-only").verdict == "invalid"


def test_a_run_without_a_meter_says_so_once_and_compare_still_compares(tmp_path):
    with stream_server("--ttft-ms", "5", "--itl-ms", "2") as (base, _):
        runs = []
        # two runs without a meter (a meter named with --sensor that cannot be read is refused before
        # any load: tests/integration/test_named_meter.py)
        for name, flags in (("nometer", ("--no-sensors",)), ("nometer-again", ("--no-sensors",))):
            p = subprocess.run([sys.executable, "-m", "wattbench", "run", "--target", base, "-c", "2", "-n", "6",
                                *flags, "--idle", "0", "--no-register", "--no-html", "--out", str(tmp_path / name)],
                               cwd=tmp_path, env=child_env(COLUMNS="400"), capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, p.stderr
            # the reason once (not per level and line); the answer says there is no efficiency answer
            assert p.stdout.count("energy: unavailable") == 1, p.stdout
            assert "answer: no efficiency answer (energy unavailable); give a power meter with --sensor" in p.stdout
            assert "verdict: warn (efficiency)" in p.stdout and "· energy unavailable" in p.stdout
            res = load_result(tmp_path / name)
            assert res.validity.energy == "unavailable" and res.validity.verdict != "valid"
            runs.append(tmp_path / name)
        c = subprocess.run([sys.executable, "-m", "wattbench", "compare", *map(str, runs), "--json"], cwd=tmp_path,
                           env=child_env(), capture_output=True, text=True, timeout=120)
    assert c.returncode == 0, c.stderr
    cmp = json.loads(c.stdout)
    assert cmp["boundary"] is None
    row = cmp["levels"][0]
    a, b = (load_result(r).levels[0] for r in runs)
    assert row["figures"][0]["output_tokens_per_s"] == pytest.approx(a.throughput.output_tokens_per_s)
    assert row["figures"][1]["ttft_p99_ms"] == pytest.approx(b.latency.ttft_ms.p99)
    assert row["figures"][0]["output_tokens_per_s_per_kw"] is None
    assert any("latency and throughput are compared" in w for w in cmp["warnings"])


def test_the_drain_at_the_deadline_is_bounded_by_the_request_timeout(tmp_path):
    # one stream, a 2.05 s response (100 tokens, 20 ms apart), --duration 0.3, --request-timeout 0.6:
    # the request in flight at the deadline is drained only until its timeout, recorded as cut
    # (timeout) with the tokens it received inside the window credited, and the level says why
    with stream_server("--ttft-ms", "50", "--itl-ms", "20") as (base, stats):
        p = _wb("run", "--target", base, "-c", "1", "--duration", "0.3", "--request-timeout", "0.6",
                "--output-tokens", "100", "--input-tokens", "8", "--no-sensors", "--idle", "0", "--no-register",
                "--no-html", "--keep-chunks", "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert p.returncode == 3, p.stderr
    res = load_result(tmp_path / "run")
    recs = load_requests(tmp_path / "run")
    assert len(recs) == 1
    r = recs[0]
    assert r.error == "timeout" and not r.ok
    # cut at the request timeout (counted by aiohttp from just before the bytes went out), not after 2 s
    assert 0.55 <= (r.end_ns - r.sent_ns) / 1e9 < 1.6
    n = len(r.chunk_ns)
    assert 1 <= n <= int((0.6 - 0.05) / 0.02) + 1  # the server cannot send faster than its schedule
    lv = res.levels[0]
    assert lv.throughput.output_tokens == n  # the cut stream's tokens inside the window, credited
    assert lv.requests.failed == 1 and lv.requests.errors == {"timeout": 1}
    reason = next(x for x in lv.validity.reasons if "no measured request completed" in x)
    assert "most failures: timeout" in reason
