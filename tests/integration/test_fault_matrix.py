"""The fault matrix: each fault has a defined, tested behaviour.

Every case runs a real ``wattbench run`` (a subprocess, so the exit code is the CLI's) or
``run_benchmark`` in-process where a seam is needed (scripted sensor, stall timeout, disk-full
seam), against ``tests/fakes/stream_server.py``. In every case: the run finishes or stops
cleanly with the documented exit code, ``result.json`` and ``requests.jsonl`` load, failed
requests are classified, and the number of successful records equals the server's own count of
streams it completed (no completed request's record is lost). docs/reliability.md has the table.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.fakes.reliability_procs import child_env, error_counts, run_cli, server, start_cli, stop_pid, wait_for
from wattbench.results.recovery import recover
from wattbench.results.rundir import REQUESTS_FILE, load_requests, load_result

FAST = ("--ttft-ms", "5", "--itl-ms", "1")


def _check_run(out: Path, stats: dict, *, status: str = "complete"):
    """The common guarantees: loads, status, classified failures, no lost completed record."""
    res = load_result(out)
    recs = load_requests(out)
    assert res.status == status
    ok = [r for r in recs if r.ok]
    assert len(ok) == stats["streams_completed"], (len(ok), stats)
    for r in recs:
        if not r.ok:
            assert r.error in {"connect", "disconnect", "stall", "timeout", "bad_stream", "bad_usage"} or (
                r.error or "").startswith("http_"), r.error
    # the per-level error counts are the failed measured records, class by class
    level_errors: Counter = Counter()
    for lv in res.levels:
        level_errors.update(lv.requests.errors)
        assert lv.requests.completed == sum(1 for r in recs if r.level == lv.index and r.ok and not r.warmup)
    assert level_errors == error_counts(r for r in recs if not r.warmup)
    return res, recs


# ---------------------------------------------------------------- server faults, run goes on


@pytest.mark.parametrize(
    "flag, error_class, fault",
    [
        ("--fail-rate", "http_500", "500"),
        ("--drop-rate", "disconnect", "drop"),
        ("--malformed-rate", "bad_stream", "malformed"),
        ("--error-event-rate", "bad_stream", "error_event"),
    ],
)
def test_server_fault_is_classified_and_run_completes(tmp_path, flag, error_class, fault):
    with server(*FAST, flag, "0.3", "--seed", "7") as s:
        p = run_cli(s.base, tmp_path / "run", "--concurrency", "4", "-n", "40", "--no-sensors", "--no-html")
        stats = s.stats()
    assert p.returncode == 0, p.stderr
    res, recs = _check_run(tmp_path / "run", stats)
    errs = error_counts(recs)
    assert errs[error_class] == stats["faults"][fault] > 0
    assert sum(errs.values()) == stats["faults"][fault]  # nothing else failed
    assert len(recs) == stats["requests"]  # one record per request the server saw
    lv = res.levels[0]
    assert lv.requests.failed == stats["faults"][fault]
    assert lv.validity.verdict in ("warn", "invalid")
    (f,) = [f for f in lv.validity.findings if f.kind == "failed"]  # with its breakdown by error
    assert f.text.startswith(f"{lv.requests.failed} of {lv.requests.failed + lv.requests.completed} failed: "
                             f"{error_class} {lv.requests.failed}")
    # failed requests never enter latency statistics
    assert lv.latency.ttft_ms.count == lv.requests.completed


def test_429_is_classified_not_retried(tmp_path):
    """Decision: a 429 is a failure of class http_429 and is NOT retried (Retry-After is not
    honoured): a benchmark must show rate limiting, not hide it behind retries."""
    with server(*FAST, "--rate-limit-rate", "0.4", "--seed", "3") as s:
        p = run_cli(s.base, tmp_path / "run", "--concurrency", "4", "-n", "40", "--no-sensors", "--no-html")
        stats = s.stats()
    assert p.returncode == 0, p.stderr
    res, recs = _check_run(tmp_path / "run", stats)
    n429 = stats["faults"]["429"]
    assert n429 > 0
    assert error_counts(recs) == Counter({"http_429": n429})
    # not retried: the server saw exactly one request per record, 40 measured in all
    assert stats["requests"] == len(recs) == 40
    assert all(r.http_status == 429 for r in recs if not r.ok)
    assert res.levels[0].requests.errors == {"http_429": n429}


def test_stalled_stream_times_out_as_stall(tmp_path):
    """No bytes for stall_timeout_s -> class ``stall``; the level does not hang on it."""
    from wattbench.config.run import RunConfig
    from wattbench.run import run_benchmark

    with server(*FAST, "--stall-rate", "0.25", "--seed", "5") as s:
        cfg = RunConfig(target=s.base, concurrency=[4], num_requests=24, input_tokens="16", output_tokens="16",
                        stall_timeout_s=0.4, no_sensors=True, idle_s=0, register_run=False, html=False,
                        out=str(tmp_path / "run"), prime=False, history_check=False, calibrate_prompts=False)
        result = run_benchmark(cfg)
        stats = s.stats()
    n_stall = stats["faults"]["stall"]
    assert n_stall > 0
    res, recs = _check_run(tmp_path / "run", stats)
    stalled = [r for r in recs if r.error == "stall"]
    assert len(stalled) == n_stall == result.levels[0].requests.errors["stall"]
    # every stall the server made was ended by the stall timer (class ``stall``; the request timeout
    # would say ``timeout``), never before the stall timeout after the stream's last token, and no
    # later than the timeout plus how late the client's own event loop ran its callbacks (the
    # loop-lag probe's worst wake-up in this level) and one 0.1 s scheduling slack
    assert not any(r.error == "timeout" for r in recs)
    late_s = result.levels[0].load.client_loop_lag_ms.max / 1e3
    for r in stalled:
        assert 0.35 <= (r.end_ns - r.last_token_ns) / 1e9 <= 0.4 + late_s + 0.1, ((r.end_ns - r.last_token_ns) / 1e9, late_s)


def test_server_killed_mid_level(tmp_path):
    """The server dies (abrupt exit) after 15 requests of a 400-request level: the requests in
    flight fail as ``disconnect``, the next ones as ``connect``; after REFUSALS_DOWN refusals in a
    row the level and the run stop (exit 4, one line naming the target), every record is kept."""
    from wattbench.load.liveness import REFUSALS_DOWN

    with server("--ttft-ms", "5", "--itl-ms", "5", "--die-after-requests", "15") as s:
        p = run_cli(s.base, tmp_path / "run", "--concurrency", "4", "-n", "400", "--no-sensors", "--no-html")
        stats = s.final_stats()
    assert p.returncode == 4, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"the target {s.base}/v1 stopped answering" in lines[0] and "s into the level" in lines[0]
    res, recs = _check_run(tmp_path / "run", stats, status="failed")
    errs = error_counts(recs)
    assert stats["streams_completed"] >= 10
    assert set(errs) <= {"connect", "disconnect"} and errs["connect"] >= REFUSALS_DOWN
    # it stopped firing: a few refusals per stream at most, not the rest of the 400
    assert len(recs) <= stats["requests"] + REFUSALS_DOWN + 4 * 2
    assert res.levels[0].validity.verdict == "invalid" and res.validity.verdict == "invalid"
    down = res.levels[0].target_down
    assert down is not None and down.target == s.base + "/v1" and down.refusals >= REFUSALS_DOWN


def test_target_gone_after_a_finished_level_summarises_and_registers_it(tmp_path):
    """A past defect: a target that died mid-run (exit 4) left the finished levels unsummarised and the
    run out of the history. Level c=1 (40 requests) finishes; the server dies during c=2: stdout has
    the summary of both levels, stderr the one line, and the history holds the run as failed."""
    from wattbench.results.store import HistoryStore

    db = tmp_path / "db" / "history.sqlite3"
    with server("--ttft-ms", "5", "--itl-ms", "5", "--die-after-requests", "45") as s:
        p = run_cli(s.base, tmp_path / "run", "--concurrency", "1,2", "-n", "40", "--warmup", "0",
                    "--no-sensors", "--no-html", "--db", str(db))
    assert p.returncode == 4, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "stopped answering" in lines[0], p.stderr
    assert "c=1" in p.stdout and "c=2" in p.stdout and "verdict: invalid" in p.stdout, p.stdout
    assert f"results:{tmp_path / 'run'}" in "".join(p.stdout.split())  # a long path folds at 80 columns
    res = load_result(tmp_path / "run")
    with HistoryStore(db) as store:
        rec = store.get(res.run_id)
    assert rec.status == "failed" and [lv["label"] for lv in rec.levels] == [lv.label for lv in res.levels]
    assert res.levels[0].requests.completed == 40


def test_sensor_failing_mid_run(tmp_path, monkeypatch):
    """A meter that fails for a while mid-level: the run goes on, energy still comes from the
    counter across the gap, the level's verdict names the failures. The gap is timed from the
    level's first send (0.3-0.7 s into it), so it lies inside the level's window whatever the
    time between the sensor's open and the level's start."""
    import threading
    import time

    import wattbench.load.client as client
    import wattbench.run.telemetry as run_telemetry
    from wattbench.run import run_benchmark
    from tests.fakes.scripted_sensor import ScriptedSensor, step_trace
    from wattbench.config.run import RunConfig

    sensor = ScriptedSensor(step_trace([(0.0, 200.0)]), name="meter", poll_interval_s=0.02)
    monkeypatch.setattr(run_telemetry, "open_sensors", lambda cfg: ([sensor], []))
    gap: dict[str, int] = {}
    timers: list[threading.Timer] = []

    def fail(on: bool) -> None:
        sensor.failing = on
        gap["start" if on else "end"] = time.perf_counter_ns()

    real = client.StreamClient.send

    async def send(self, *a, **kw):
        if not timers:  # the level's first send
            timers.extend([threading.Timer(0.3, fail, (True,)), threading.Timer(0.7, fail, (False,))])
            for t in timers:
                t.start()
        return await real(self, *a, **kw)

    monkeypatch.setattr(client.StreamClient, "send", send)
    with server("--ttft-ms", "5", "--itl-ms", "10") as s:
        cfg = RunConfig(target=s.base, concurrency=[2], duration_s=1.2, input_tokens="16", output_tokens="16",
                        idle_s=0, register_run=False, html=False, sample_interval_s=0.02, out=str(tmp_path / "run"),
                        prime=False, history_check=False, calibrate_prompts=False)
        result = run_benchmark(cfg)
        stats = s.stats()
    for t in timers:
        t.join()
    res, _ = _check_run(tmp_path / "run", stats)
    lv = res.levels[0]
    assert lv.window.start_ns < gap["start"] < gap["end"] < lv.window.end_ns, (gap, lv.window)
    assert any("sensor meter failed" in r for r in lv.validity.reasons), lv.validity.reasons
    assert lv.validity.verdict in ("warn", "invalid")
    e = lv.energy["accelerator"]
    # the counter spans the gap: a constant 200 W, so the delta across it and the edges are exact
    assert e.energy_j == pytest.approx(200.0 * lv.window.duration_s, rel=0.01)
    # the largest gap between readings is the failure's: at least its length less one poll each side
    assert e.largest_gap_s is not None and e.largest_gap_s >= (gap["end"] - gap["start"]) / 1e9 - 2 * 0.02
    assert result.status == "complete"


# ---------------------------------------------------------------- disk full


def test_disk_full_seam_keeps_previous_result(tmp_path, monkeypatch):
    """ENOSPC while writing the second level's result: one-line UserError (exit 2 at the CLI),
    result.json loads, requests.jsonl has every record written."""
    import wattbench.results.rundir as rundir
    from wattbench.config.run import RunConfig
    from wattbench.core.errors import UserError
    from wattbench.run import run_benchmark

    real_fsync = os.fsync

    def fsync(fd):
        # the disk fills as the first result.json holding two levels is written: chosen by what
        # the file holds, not by counting writes (how often the run rewrites result.json before
        # and between levels is its own business)
        name = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
        if ".result.json." in name and len(json.loads(Path(name).read_text(encoding="utf-8"))["levels"]) >= 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(rundir.os, "fsync", fsync)
    out = tmp_path / "run"
    with server(*FAST) as s:
        cfg = RunConfig(target=s.base, concurrency=[2, 4], num_requests=10, input_tokens="16", output_tokens="16",
                        no_sensors=True, idle_s=0, register_run=False, html=False, out=str(out),
                        prime=False, history_check=False, calibrate_prompts=False)
        with pytest.raises(UserError) as ei:
            run_benchmark(cfg)
        stats = s.stats()
    msg = str(ei.value)
    assert "\n" not in msg and "No space left on device" in msg and "result.json" in msg
    assert ei.value.exit_code == 2
    monkeypatch.setattr(rundir.os, "fsync", real_fsync)
    res = load_result(out)
    # the atomic write failed; the closing write, in place once its space was reserved, holds both
    # levels (the second's records were in requests.jsonl already) and says why the run stopped
    assert [lv.index for lv in res.levels] == [0, 1]
    assert res.status == "failed" and res.validity.findings[0].kind == "run_stopped"
    recs = load_requests(out)
    assert sum(r.ok for r in recs) == stats["streams_completed"] == 20  # level 2's records were appended first
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary left behind


def _can_mount_tmpfs(path: Path, size: str = "96k") -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


def _report_text(out: Path, cwd: Path) -> str:
    p = subprocess.run([sys.executable, "-m", "wattbench", "report", str(out)], capture_output=True, text=True,
                       timeout=120, env=child_env(HOME=str(cwd)), cwd=str(cwd))
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    return " ".join(p.stdout.split())


def _kept(out: Path) -> int:
    """Completed requests on disk: in requests.jsonl, and in the spool of a level whose records
    could not be appended there (``wattbench report`` shows those as recovered)."""
    return sum(r.ok for r in load_requests(out)) + sum(r.completed for r in recover(out))


# Two ways the disk fills: on a level's append to requests.jsonl (60 requests a level fill 160 KiB
# on the third level: before the fix the level's spool was deleted as the record set was dropped,
# 60 finished records lost), and on result.json (12 a level fill 96 KiB while result.json grows: the
# closing write failed too and the run read as crashed).
@pytest.mark.parametrize("size, per_level", [("160k", "60"), ("96k", "12")], ids=["on_requests", "on_result"])
def test_disk_full_real_tmpfs(tmp_path, size, per_level):
    """A real full filesystem (a small tmpfs; needs root, else skipped — the seam test above covers
    the write path): exit 2, one line on stderr, every request the server completed is on disk
    (requests.jsonl, or the spool of the level whose append hit the wall), the result is closed as
    stopped and ``report`` says the run stopped on a failed write, with the reason."""
    mnt = tmp_path / "small"
    if not _can_mount_tmpfs(mnt, size):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        out = mnt / "run"
        with server(*FAST) as s:
            p = run_cli(s.base, out, "--concurrency", ",".join(["2"] * 40), "-n", per_level, "--no-sensors",
                        "--no-html", env=None, cwd=tmp_path)
            stats = s.stats()
        assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("wattbench: error: cannot write"), p.stderr
        assert "No space left on device" in lines[0]
        res = load_result(out)
        recs = load_requests(out)  # no torn line
        assert 1 <= len(res.levels) < 40
        for lv in res.levels:
            assert lv.requests.completed == sum(1 for r in recs if r.level == lv.index and r.ok)
        assert _kept(out) == stats["streams_completed"]  # every finished record kept
        assert res.status == "failed" and res.validity.verdict != "valid"
        assert res.validity.findings[0].kind == "run_stopped"
        text = _report_text(out, tmp_path)
        assert "the run stopped on a failed write (No space left on device)" in text, text
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def _chattr(path: Path, *flags: str) -> bool:
    return subprocess.run(["chattr", *flags, str(path)], capture_output=True).returncode == 0


@pytest.mark.parametrize("recursive", [False, True], ids=["dir", "recursive"])
def test_run_directory_made_immutable_mid_level(tmp_path, recursive):
    """``chattr +i`` on the run directory while a level streams (before: a 76-line traceback from
    the spool write in the load worker, the result left ``running``): one line naming the file,
    exit 2. With the directory alone immutable the result is closed in place as stopped and
    ``report`` says why; with every file immutable nothing can be written, and what was spooled
    before stays (at most the two requests in flight at the failed write are lost)."""
    out = tmp_path / "run"
    out.mkdir()
    if not _chattr(out, "+i") or not _chattr(out, "-i"):
        pytest.skip("chattr +i is not possible here (needs root and a filesystem that supports it)")
    flags = ("-R", "+i") if recursive else ("+i",)
    with server(*FAST) as s:
        proc = start_cli(s.base, out, "--concurrency", ",".join(["2"] * 40), "-n", "30", "--no-sensors",
                         "--no-html")
        try:
            def streaming() -> bool:
                spooled = list((out / "spool").glob("level-*/records-*/lines"))
                return (out / REQUESTS_FILE).exists() and any(f.stat().st_size > 0 for f in spooled)

            wait_for(streaming, 60, 0.005)
            assert _chattr(out, *flags)
            _, err = proc.communicate(timeout=120)
        finally:
            _chattr(out, "-R", "-i")
            stop_pid(proc)
        stats = s.stats()
    assert proc.returncode == 2, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("wattbench: error: cannot write"), err[-3000:]
    assert "Operation not permitted; make it writable or choose another --out" in lines[0]
    if recursive:
        assert 0 <= stats["streams_completed"] - _kept(out) <= 2
        return
    assert _kept(out) == stats["streams_completed"]
    res = load_result(out)
    assert res.status == "failed" and res.validity.findings[0].kind == "run_stopped"
    assert "the run stopped on a failed write (Operation not permitted)" in _report_text(out, tmp_path)


# ---------------------------------------------------------------- signals


def _levels_on_disk(out: Path) -> int:
    try:
        return len(load_result(out).levels)
    except Exception:
        return 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("workers", ["1", pytest.param("2", marks=pytest.mark.slow)])  # 2: spawned workers, ~20 s here
def test_signal_mid_level(tmp_path, sig, workers):
    """SIGINT/SIGTERM in the middle of the second level: exit 130, status "interrupted", the first
    level and the completed requests of the interrupted one kept."""
    out = tmp_path / "run"
    with server("--ttft-ms", "5", "--itl-ms", "5") as s:
        proc = start_cli(s.base, out, "--concurrency", "2,4", "--duration", "1.5", "--output-tokens", "20",
                         "--workers", workers, "--no-sensors", "--no-html")
        try:
            wait_for(lambda: _levels_on_disk(out) == 1, timeout_s=60)  # level 1 written, level 2 running
            base = s.stats()["streams_completed"]
            wait_for(lambda: s.stats()["streams_completed"] >= base + 6, timeout_s=30)
            os.kill(proc.pid, sig)
            out_text, err = proc.communicate(timeout=30)
        finally:
            stop_pid(proc, signal.SIGKILL)
        stats = s.stats()
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err
    assert "Traceback" not in err
    # the summary of what was measured is on stdout, as a complete run's is (a past defect: stderr only)
    assert "c=2" in out_text and "verdict:" in out_text and f"results:{out}" in "".join(out_text.split()), out_text
    res = load_result(out)
    recs = load_requests(out)
    assert res.status == "interrupted"
    assert [lv.index for lv in res.levels] == [0, 1]
    assert res.levels[1].stopped_early == "interrupted"
    assert res.levels[1].validity.verdict != "valid"  # a window shorter than asked says so
    assert "warn: level interrupted (SIGINT/SIGTERM): its figures are the requests completed before the signal, over a window shorter than asked" in res.levels[1].validity.reasons
    assert res.levels[0].requests.completed == sum(1 for r in recs if r.level == 0 and r.ok and not r.warmup) > 0
    ok1 = sum(1 for r in recs if r.level == 1 and r.ok)
    assert ok1 >= 6 and res.levels[1].requests.completed == ok1
    # a stream the server finished in the instant the client was cancelled may be lost (at most
    # the streams in flight); every one the client completed is kept
    ok = sum(r.ok for r in recs)
    assert stats["streams_completed"] - 4 <= ok <= stats["streams_completed"]


def test_worker_killed_mid_level_keeps_what_it_measured(tmp_path):
    """A load worker process killed mid-level (SIGKILL, no goodbye): the run stops with exit 1 and the
    worker's error, and nothing measured is lost — the records the workers streamed before are in
    requests.jsonl and the level is recorded, ``stopped_early: worker_failed``, ``invalid``."""
    import psutil

    out = tmp_path / "run"
    with server("--ttft-ms", "2", "--itl-ms", "2") as s:
        proc = start_cli(s.base, out, "--concurrency", "4", "--num-requests", "100000", "--workers", "2",
                         "--no-sensors", "--no-html")
        try:
            wait_for(lambda: s.stats()["streams_completed"] >= 40, timeout_s=120)
            workers = [c for c in psutil.Process(proc.pid).children()
                       if "spawn_main" in " ".join(c.cmdline())]
            assert len(workers) == 2, [c.cmdline() for c in psutil.Process(proc.pid).children()]
            workers[1].kill()
            _, err = proc.communicate(timeout=120)
        finally:
            stop_pid(proc, signal.SIGKILL)
    assert proc.returncode == 1, err[-3000:]
    assert "load worker failed: load worker 1 exited unexpectedly" in err and "requests it finished before are kept" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    res = load_result(out)
    recs = load_requests(out)
    assert res.status == "failed"
    [lv] = res.levels
    assert lv.stopped_early == "worker_failed" and lv.validity.verdict == "invalid"
    assert any("a load worker failed mid-level" in r for r in lv.validity.reasons)
    # every record the parent holds is written and counted (that the dead worker's streamed batches
    # are among them is tests/integration/test_client_level.py's, which waits for them)
    assert len(recs) == lv.requests.completed + lv.requests.failed + lv.requests.warmup >= 1
    assert len({r.id for r in recs}) == len(recs)
