"""``run/session.py``: what a ``RunSession`` writes after every level and at its close, the closing
reads it awaits before a window is accounted, and the run directory it chooses. Ground truth: a
real ``Sampler`` over a ``ScriptedSensor``, a real ``MetricsScraper`` over the scripted stream
server's ``/metrics``, and the files on disk."""

from __future__ import annotations

import contextlib
import errno
import json
from pathlib import Path

import pytest

from tests.fakes.results_factory import make_level, make_result
from tests.fakes.scripted_sensor import ScriptedSensor
from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.core.clock import ClockAnchor, now_ns
from wattbench.core.errors import StorageError, UserError
from wattbench.results.rundir import load_result, storage_error
from wattbench.run.events import LevelDone, Measured, Phase
from wattbench.run.session import RunSession, resolve_run_dir, run_dir_path
from wattbench.server.metrics import MetricsScraper
from wattbench.telemetry.jsonl import TelemetryWriter, read_telemetry
from wattbench.telemetry.sampler import Sampler


def _session(tmp_path: Path, progress=None, **cfg) -> RunSession:
    cfg.setdefault("target", "http://127.0.0.1:9")
    cfg.setdefault("register_run", False)
    cfg.setdefault("html", False)
    return RunSession(config=RunConfig(**cfg), progress=progress or (lambda event: None),
                      anchor=ClockAnchor.take(), run_id="20261202-000000-abcd", stack=contextlib.ExitStack())


def _with_result(s: RunSession, run_dir: Path) -> RunSession:
    run_dir.mkdir(parents=True, exist_ok=True)
    s.run_dir, s.result = run_dir, make_result(levels=[])
    s.result.status = "running"
    return s


def _with_sampler(s: RunSession, sensor: ScriptedSensor) -> Sampler:
    sampler = Sampler([sensor], interval_s=sensor.poll_interval_s)
    sampler.start()
    s.stack.callback(sampler.stop)
    s.sampler = sampler
    s.telemetry_writer = TelemetryWriter(s.run_dir / "telemetry.jsonl", sampler.channels, s.anchor)
    return sampler


@pytest.fixture(scope="module")
def metrics_server():
    """One scripted server with vLLM's /metrics for the whole module (a process start is ~1 s)."""
    with stream_server("--ttft-ms", "2", "--itl-ms", "1", "--vllm-metrics", "--loop", "asyncio") as (base, _):
        yield base


def test_a_broken_progress_display_never_stops_the_run(tmp_path):
    seen = []

    def progress(event):
        seen.append(event)
        raise RuntimeError("the terminal went away")

    s = _session(tmp_path, progress)
    s.emit(Phase("idle", "measuring idle power"))  # does not raise
    s.emit(LevelDone(Measured(0), None))
    assert seen == [Phase("idle", "measuring idle power"), LevelDone(Measured(0), None)]


def test_each_level_write_is_on_disk_and_survives_the_run_failing(tmp_path):
    s = _with_result(_session(tmp_path), tmp_path / "run")
    sensor = ScriptedSensor(200.0, poll_interval_s=0.01)
    with s.stack:
        sampler = _with_sampler(s, sensor)
        s.result.levels.append(make_level(0, value=1))
        s.await_closing_reads(now_ns())
        s.write_level_artifacts()
        on_disk = load_result(s.run_dir)
        assert on_disk.status == "running" and [lv.label for lv in on_disk.levels] == ["concurrency=1"]
        written = read_telemetry(s.run_dir / "telemetry.jsonl")
        assert written.t_ns["scripted.power"] and written.values["scripted.power"] == pytest.approx([200.0] * len(written.values["scripted.power"]), rel=1e-12)

        s.result.levels.append(make_level(1, value=8))
        s.write_level_artifacts()
        # the run fails during its third level: the two written are what it keeps, closed "failed"
        n_read = len(sampler.log.t_ns["scripted.power"])
        s.finish("failed", "ConnectionError: the target went away", RuntimeError("gone"))
    closed = load_result(s.run_dir)
    assert closed.status == "failed" and closed.status_detail == "ConnectionError: the target went away"
    assert [lv.label for lv in closed.levels] == ["concurrency=1", "concurrency=8"]
    assert closed.validity.verdict == "valid" and not closed.validity.findings  # a failure is its status
    # the closing flush wrote every reading the sampler had taken by then
    assert len(read_telemetry(s.run_dir / "telemetry.jsonl").t_ns["scripted.power"]) >= n_read
    assert sensor.closed  # the stack stopped the sampler, which closed its sensor


def test_a_run_stopped_by_a_failed_write_says_so_in_its_verdict(tmp_path):
    s = _with_result(_session(tmp_path), tmp_path / "run")
    s.result.levels.append(make_level(0, value=1))
    err = storage_error(s.run_dir / "requests.jsonl", OSError(errno.ENOSPC, "No space left on device"))
    s.finish("failed", str(err), err)
    closed = load_result(s.run_dir)
    assert closed.status == "failed" and len(closed.levels) == 1
    assert closed.validity.verdict == "warn"  # the best level of a partial plan, at best warn
    assert closed.validity.findings[0].kind == "run_stopped"
    assert "the 1 level(s) listed are complete" in closed.validity.findings[0].text
    assert "requests.jsonl" in closed.validity.findings[0].text


def test_a_write_that_fails_mid_run_is_one_storage_error_and_the_levels_before_stay(tmp_path):
    s = _with_result(_session(tmp_path), tmp_path / "run")
    s.scraper = MetricsScraper("http://127.0.0.1:9")  # never started: its timeline is what gets written
    s.result.levels.append(make_level(0, value=1))
    s.write_level_artifacts()
    assert json.loads((s.run_dir / "server_timeline.jsonl").read_text().splitlines()[0])["type"] == "meta"
    (s.run_dir / "server_timeline.jsonl").unlink()
    (s.run_dir / "server_timeline.jsonl").mkdir()  # the next write of it fails (an OSError)
    s.result.levels.append(make_level(1, value=8))
    with pytest.raises(StorageError) as ei:
        s.write_level_artifacts()
    assert str(s.run_dir) in str(ei.value)
    assert [lv.label for lv in load_result(s.run_dir).levels] == ["concurrency=1"]  # not torn, not lost


def test_the_closing_reads_are_awaited_past_the_windows_end(tmp_path, metrics_server):
    """A slow meter (one read per 0.3 s) and a scraper whose thread is not running: after
    ``await_closing_reads(end)`` both have a reading taken after ``end``, so the window's edge is
    bracketed on both sides."""
    s = _with_result(_session(tmp_path), tmp_path / "run")
    sensor = ScriptedSensor(150.0, poll_interval_s=0.3)
    scraper = MetricsScraper(metrics_server, interval_s=0.05, engine="vllm")
    assert scraper.scrape_once() and scraper.timeline.available
    s.scraper = scraper
    with s.stack:
        _with_sampler(s, sensor)
        end = now_ns()
        assert not scraper.timeline.scrapes[-1][0] > end
        s.await_closing_reads(end)
        assert max(sensor.read_times) > end
        assert scraper.timeline.scrapes[-1][0] > end
        assert "generation_tokens" in scraper.timeline.scrapes[-1][1]


def test_the_level_context_is_the_sessions_telemetry_idle_prices_and_engine(tmp_path):
    s = _with_result(_session(tmp_path, price_per_kwh=0.31, pue=1.2), tmp_path / "run")
    ctx = s.level_context()
    assert ctx.log is None and ctx.timeline is None  # no meter, no /metrics
    assert (ctx.price_per_kwh, ctx.pue) == (pytest.approx(0.31, rel=1e-12), pytest.approx(1.2, rel=1e-12))
    assert (ctx.engine, ctx.slos) == ("vllm", [])
    with s.stack:
        sampler = _with_sampler(s, ScriptedSensor(100.0))
        s.scraper = MetricsScraper("http://127.0.0.1:9")
        s.idle_power = {"accelerator": "idle"}
        ctx = s.level_context()
        assert ctx.log is sampler.log and ctx.timeline is s.scraper.timeline and ctx.idle == {"accelerator": "idle"}


def test_a_report_that_cannot_be_written_is_one_warning_never_a_failure(tmp_path):
    s = _with_result(_session(tmp_path, html=True), tmp_path / "run")  # no result.json: the renderer fails
    s.write_report()
    s.write_report()
    warned = [w for w in s.result.warnings if w.startswith("report.html could not be written")]
    assert len(warned) == 1
    assert not (s.run_dir / "report.html").exists()


def test_the_run_directory_is_out_or_the_default_and_never_an_earlier_result(tmp_path, monkeypatch):
    run_id = "20261202-000000-abcd"
    assert run_dir_path(RunConfig(target="http://h:1"), run_id) == Path("wattbench-results") / run_id
    out = tmp_path / "mine"
    assert resolve_run_dir(RunConfig(target="http://h:1", out=str(out)), run_id) == out
    out.mkdir()
    (out / "result.json").write_text("{}")
    with pytest.raises(UserError, match="already holds a result.json"):
        resolve_run_dir(RunConfig(target="http://h:1", out=str(out)), run_id)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(UserError):
        resolve_run_dir(RunConfig(target="http://h:1", out=str(blocker / "run")), run_id)
