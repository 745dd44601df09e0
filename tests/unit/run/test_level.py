"""``run/level.py``: one level and its trials. The bookkeeping (one level recorded however many
trials it has, each trial's requests written once with its trial number, fresh requests for every
trial, the level's spool gone once its records are written, ``level_done`` once), the load that
measures nothing (priming) or is recorded nowhere (the history check), and the pure rules (drain
findings, abandoned requests, the priming's E2E, forced lengths). Ground truth: the scripted
stream server's own count of what it served, and the run directory's files."""

from __future__ import annotations

import contextlib
import copy
import json

import pytest

from tests.fakes.results_factory import make_level, make_result
from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.core.clock import ClockAnchor
from wattbench.core.errors import TargetStopped
from wattbench.core.load_types import LevelSpec
from wattbench.core.schema import NoiseInfo, RequestRecord
from wattbench.core.target import TargetSpec
from wattbench.load.level import Drain
from wattbench.results.rundir import load_requests, load_result, write_result
from wattbench.run.level import LevelRunner, abandoned_count, add_drain_finding, priming_e2e_s
from wattbench.run.level_requests import SpecList, override_lengths, requests_needed
from wattbench.run.events import LevelDone, LevelProgress, LevelStarted, Load, Measured, Priming, ProgressEvent, Unrecorded
from wattbench.run.session import RunSession
from wattbench.run.targets import resolve_targets
from wattbench.workload.base import RequestSpec
from wattbench.workload.presets import load_workload
from wattbench.workload.tokenizer import open_token_source

MS = 1_000_000


def _session(progress=None, **cfg) -> RunSession:
    return RunSession(config=RunConfig(**cfg), progress=progress or (lambda event: None),
                      anchor=ClockAnchor.take(), run_id="20261202-000000-abcd", stack=contextlib.ExitStack())


@pytest.fixture(scope="module")
def server():
    """The scripted server and its checked target spec (resolved once: detection takes a while)."""
    with stream_server("--ttft-ms", "2", "--itl-ms", "1", "--loop", "asyncio") as (base, stats):
        specs = resolve_targets(_session(target=base, register_run=False), None).specs
        yield base, stats, specs


def _runner(tmp_path, server, **cfg):
    """A session over the scripted server, its result started on disk, and a ``LevelRunner``."""
    base, _, specs = server
    for k, v in dict(target=base, input_tokens="8", output_tokens="4", num_requests=4, idle_s=0,
                     register_run=False, html=False, no_sensors=True, out=str(tmp_path / "run")).items():
        cfg.setdefault(k, v)
    events: list[ProgressEvent] = []
    s = _session(events.append, **cfg)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    s.run_dir, s.result = run_dir, make_result(levels=[])
    s.result.noise = NoiseInfo()
    write_result(run_dir, s.result)
    wl = load_workload(None, open_token_source(None), s.config.seed, input_tokens="8", output_tokens="4")
    return LevelRunner(s, copy.deepcopy(specs), wl), events


def _done(events: list[ProgressEvent]) -> list[Load]:
    """The loads of the run's ``LevelDone`` events, in order."""
    return [e.load for e in events if isinstance(e, LevelDone)]


def _lines(run_dir) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines() if x.strip()]


def _spools(run_dir):
    return sorted(p.name for p in run_dir.iterdir() if "spool" in p.name)


def test_a_levels_trials_are_one_level_with_every_trials_requests_written_once(tmp_path, server):
    _, stats, _ = server
    stats(reset=True)
    lr, events = _runner(tmp_path, server, trials=3)
    lv = lr.measure("concurrency", 2)
    res = lr.session.result
    assert [x.index for x in res.levels] == [0] and res.levels[0] is lv
    assert lv.trial == 2 and lv.trials is not None and lv.trials.n == 3  # the last trial, with all three's CI
    assert lv.trials.figures["output_tokens_per_s"].n == 3
    recs = _lines(lr.session.run_dir)
    assert sorted((r["level"], r["trial"]) for r in recs) == sorted((0, k) for k in range(3) for _ in range(4))
    assert stats()["requests"] == 12  # what the server served is what was written, once each
    assert lr.used == 12 and len(load_requests(lr.session.run_dir)) == 12
    assert _spools(lr.session.run_dir) == []  # every trial's spool went once its records were written
    starts = [e for e in events if isinstance(e, LevelStarted)]
    assert [(e.load, e.trial, e.trials) for e in starts] == [(Measured(0), 1, 3), (Measured(0), 2, 3),
                                                              (Measured(0), 3, 3)]
    assert _done(events) == [Measured(0)]  # once, after its last trial
    on_disk = load_result(lr.session.run_dir)
    assert len(on_disk.levels) == 1 and on_disk.levels[0].trials.n == 3


def test_levels_follow_each_other_and_a_single_trial_has_no_trials_block(tmp_path, server):
    lr, events = _runner(tmp_path, server)
    a = lr.measure("concurrency", 1)
    b = lr.measure("concurrency", 2, label_suffix=" (again)")
    assert [lv.index for lv in lr.session.result.levels] == [0, 1]
    assert a.trials is None and a.trial == 0 and a.requests.completed == 4
    assert b.label == "concurrency=2 (again)"
    recs = _lines(lr.session.run_dir)
    assert sorted(r["level"] for r in recs) == [0] * 4 + [1] * 4
    assert not any("trial" in r for r in recs)  # one trial: no trial field
    assert _done(events) == [Measured(0), Measured(1)]


def test_the_history_checks_measurement_is_recorded_nowhere(tmp_path, server):
    _, stats, _ = server
    lr, events = _runner(tmp_path, server)
    lr.measure("concurrency", 1)
    before = (lr.session.run_dir / "requests.jsonl").read_bytes()
    stats(reset=True)
    again = lr.unrecorded("concurrency", 1, 0, " (history check)", num_requests=3)
    assert again.requests.completed == 3 and stats()["requests"] == 3 and again.trial is None
    assert [lv.index for lv in lr.session.result.levels] == [0]  # not a level of the run
    assert (lr.session.run_dir / "requests.jsonl").read_bytes() == before  # its requests not written
    assert _spools(lr.session.run_dir) == []
    assert _done(events) == [Measured(0), Unrecorded(0)]  # a re-measure of level 0, named so


def test_priming_sends_its_requests_and_keeps_only_its_summary(tmp_path, server):
    _, stats, _ = server
    lr, events = _runner(tmp_path, server)
    stats(reset=True)
    lr.prime_at = ("concurrency", 2.0, 6, "the run's largest concurrency")
    lr.prime_now()
    p = lr.session.result.noise.priming
    assert (p.requests, p.completed, p.failed) == (6, 6, 0) and stats()["requests"] == 6
    assert p.reason == "the run's largest concurrency" and p.e2e_p50_s is not None and p.e2e_p50_s > 0
    assert not (lr.session.run_dir / "requests.jsonl").exists()  # nothing of the priming is kept
    assert lr.used == 0  # the measured levels still start from the workload's first request
    assert json.loads((lr.session.run_dir / "result.json").read_text())["noise"]["priming"]["completed"] == 6
    lr.prime_now()  # after a restart: a second priming is a repriming
    assert len(lr.session.result.noise.repriming) == 1
    # the priming's events say it is the priming (its own load, no level index), never a level of the run
    assert [e.load for e in events if isinstance(e, (LevelStarted, LevelDone))] == [Priming()] * 4
    assert {e.load for e in events if isinstance(e, LevelProgress)} <= {Priming()}


def _drain(drained, in_flight=None, abandoned=0, baseline=0.0, waited_s=30.0) -> Drain:
    return Drain(drained=drained, waited_s=waited_s, in_flight=in_flight, baseline=baseline, limit_s=120.0,
                 abandoned=abandoned)


def test_a_level_started_before_the_server_drained_carries_a_warning():
    lv = make_level(0, value=8)
    add_drain_finding(lv, None)
    add_drain_finding(lv, _drain(True, 0.0))
    add_drain_finding(lv, _drain(None, abandoned=0))  # no count, nothing given up on: nothing known
    assert lv.validity.verdict == "valid" and not lv.validity.findings
    add_drain_finding(lv, _drain(False, in_flight=5.0, baseline=2.0), "trial 2")
    (f,) = lv.validity.findings
    assert f.kind == "not_drained" and lv.validity.verdict == "warn"
    assert f.text.startswith("trial 2 started while the server still had 5 requests")
    assert "after 30 s (it served 2 before the run)" in f.text
    lv = make_level(0, value=8)
    add_drain_finding(lv, _drain(None, abandoned=3))
    assert "after the client gave up on 3 requests" in lv.validity.findings[0].text


def _rec(i, *, ok=True, error=None, sent_ms=0, end_ms=None):
    return RequestRecord(id=i, level=0, sent_ns=sent_ms * MS, end_ns=None if end_ms is None else end_ms * MS,
                         last_token_ns=None if end_ms is None else end_ms * MS, ok=ok, error=error)


def test_abandoned_requests_are_the_timeouts_and_stalls():
    recs = [_rec(0), _rec(1, ok=False, error="timeout"), _rec(2, ok=False, error="stall"),
            _rec(3, ok=False, error="http_500"), _rec(4, ok=False, error="timeout")]
    assert abandoned_count(recs) == 3
    assert abandoned_count([]) == 0 and abandoned_count([_rec(0), _rec(1, ok=False, error="connect")]) == 0


def test_the_primings_e2e_is_the_median_of_its_completed_requests():
    recs = [_rec(0, sent_ms=0, end_ms=100), _rec(1, sent_ms=10, end_ms=310), _rec(2, sent_ms=20, end_ms=220),
            _rec(3, ok=False, error="timeout", sent_ms=0, end_ms=9000)]
    assert priming_e2e_s(recs) == pytest.approx(0.2)
    assert priming_e2e_s([_rec(0, ok=False, error="stall", end_ms=5)]) is None


def test_a_distributed_level_draws_the_requests_it_can_use():
    spec = LevelSpec(index=0, mode="concurrency", value=4, num_requests=20, warmup_requests=3)
    assert requests_needed(spec) == 20 + 3 + 4
    rate = LevelSpec(index=0, mode="rate", value=10.0, duration_s=5.0, warmup_s=1.0)
    assert requests_needed(rate) == int(10 * 6 * 1.3) + 16
    f = SpecList(iter(range(100)), 5)
    assert [f(i) for i in (0, 4, 5, -1)] == [0, 4, None, None]


def test_forced_lengths_keep_the_prompts_and_force_the_output():
    specs = [RequestSpec(prompt=f"p{i}", max_tokens=64, input_tokens=10, min_tokens=None) for i in range(3)]
    out = list(override_lengths(specs, 1, None, workload=object()))
    assert [(s.prompt, s.max_tokens, s.min_tokens, s.input_tokens) for s in out] == [
        (f"p{i}", 1, 1, 10) for i in range(3)]


def test_a_target_that_stops_answering_keeps_its_trials_and_stops_the_run(tmp_path):
    """The server dies as its 10th request arrives: trial 1 (8 requests) is whole, trial 2 ends with
    the target down (5 connections refused: ``load/liveness.py``); the level is recorded with both
    trials' requests and the run stops. Trial 2 has six requests after the one the dying server
    drops, so one more lost to the exit's race (a connection reset, not refused, while the process
    goes) still leaves five refusals inside it (dying at the 11th left exactly five: CI once saw
    the target down only in trial 3)."""
    with stream_server("--ttft-ms", "2", "--itl-ms", "1", "--die-after-requests", "9", "--loop", "asyncio") as (
            base, _):
        spec = TargetSpec(base_url=base + "/v1", model="fake-model", request_timeout_s=10, stall_timeout_s=5)
        lr, events = _runner(tmp_path, (base, None, [spec]), trials=3, concurrency=[1],
                             num_requests=8)
        with pytest.raises(TargetStopped, match="the run stopped") as ei:
            lr.measure("concurrency", 1)
    assert str(lr.session.run_dir) in str(ei.value)
    (lv,) = lr.session.result.levels
    assert lv.trial == 1 and lv.target_down is not None and lv.trials.n == 2
    recs = _lines(lr.session.run_dir)
    assert sorted(r["trial"] for r in recs if r["ok"]) == [0] * 8 + [1] * 1  # the 9 the server answered
    assert all(r["trial"] == 1 for r in recs if not r["ok"])
    assert _spools(lr.session.run_dir) == []
    assert _done(events) == [Measured(0)]  # recorded as final
    assert [lv.index for lv in load_result(lr.session.run_dir).levels] == [0]
