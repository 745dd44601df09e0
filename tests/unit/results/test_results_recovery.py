"""The one rule for a result still marked ``running`` (results/recovery.py): in progress while a
live process holds the run's lock, crashed otherwise — ``invalid`` either way, the reason first —
and what a crashed run's spool gives back."""

from __future__ import annotations

import json

import pytest

from tests.fakes.results_factory import make_result
from wattbench.results import rundir
from wattbench.results.recovery import LEVEL_META_FILE, RUN_LOCK_FILE, SPOOL_DIR
from wattbench.core.recordset import RecordSet, spooling_into
from wattbench.results.recovery import CRASHED, IN_PROGRESS, recover, settle_unfinished
from wattbench.core.schema import build_record

MS = 1_000_000


def _rec(i: int, level: int = 1, **kw):
    base = dict(id=i, level=level, sent_ns=i * 100 * MS, first_token_ns=i * 100 * MS + 20 * MS,
                last_token_ns=i * 100 * MS + 50 * MS, end_ns=i * 100 * MS + 51 * MS, output_tokens=8)
    base.update(kw)
    return build_record(**base)


def _running(tmp_path):
    res = make_result("r1")
    res.status = "running"
    rundir.write_result(tmp_path, res)
    return res


def test_running_with_its_lock_held_reads_in_progress_then_crashed_once_released(tmp_path):
    _running(tmp_path)
    lock = rundir.RunLock(tmp_path)
    got = rundir.load_result(tmp_path)
    assert got.validity.verdict == "invalid" and got.validity.findings[0].text.startswith(IN_PROGRESS)
    lock.release()
    assert not (tmp_path / RUN_LOCK_FILE).exists()
    got = rundir.load_result(tmp_path)
    assert got.validity.verdict == "invalid" and got.validity.findings[0].text.startswith(CRASHED)
    assert got.status == "running"  # the file is read as it is; the verdict says what that means


def test_a_lock_left_by_a_dead_process_reads_crashed(tmp_path):
    _running(tmp_path)
    (tmp_path / RUN_LOCK_FILE).write_text("12345\n")  # what a SIGKILL leaves: the file, no holder
    assert rundir.load_result(tmp_path).validity.findings[0].text.startswith(CRASHED)


def test_a_second_writer_of_the_same_directory_is_refused(tmp_path):
    from wattbench.core.errors import UserError

    lock = rundir.RunLock(tmp_path)
    with pytest.raises(UserError, match="another wattbench process is writing this run directory"):
        rundir.RunLock(tmp_path)
    lock.release()


def test_a_finished_result_is_left_as_it_is(tmp_path):
    res = make_result("done")
    rundir.write_result(tmp_path, res)
    (tmp_path / RUN_LOCK_FILE).write_text("1\n")
    got = rundir.load_result(tmp_path)
    assert got.status == "complete" and got.validity.verdict == res.validity.verdict
    assert settle_unfinished(got, tmp_path) is got and got.validity.reasons == res.validity.reasons


def test_recover_reads_the_spool_by_hand_and_skips_what_requests_jsonl_already_holds(tmp_path):
    _running(tmp_path)
    d = rundir.begin_level_spool(tmp_path, 1, 0, "concurrency=4")
    with spooling_into(d):
        rs = RecordSet()
    for i in range(1, 6):
        rs.append(_rec(i))
    rs.append(_rec(6, ok=False, error="stall", first_token_ns=None, last_token_ns=None, end_ns=None,
                   output_tokens=None))
    rs.append(_rec(7, warmup=True))
    # a crash between writing records 1-2 to requests.jsonl and removing the spool: not counted twice
    rundir.append_requests(tmp_path, [_rec(1), _rec(2), _rec(1, level=0)])
    [lv] = recover(tmp_path)
    assert (lv.index, lv.trial, lv.label, lv.records) == (1, 0, "concurrency=4", 5)
    assert (lv.completed, lv.failed, lv.warmup, lv.errors) == (3, 1, 1, {"stall": 1})
    assert lv.output_tokens == 24
    assert lv.ttft_ms.count == 3 and lv.e2e_ms.count == 3  # the completed, measured ones
    assert [lv.ttft_ms.min, lv.ttft_ms.max] == pytest.approx([20.0, 20.0], rel=1e-9)
    assert [lv.e2e_ms.min, lv.e2e_ms.max] == pytest.approx([50.0, 50.0], rel=1e-9)
    # first send (record 3) to the last end (warm-up record 7's last token): 300 ms to 750 ms
    assert lv.span_s == pytest.approx(0.45, rel=1e-9)
    assert lv.path == "spool/level-1-trial-0"
    text = lv.text()
    assert text.startswith("recovered from a crashed run: level 1 (concurrency=4): 5 finished request(s): "
                           "3 completed, 1 failed (stall 1), 1 warm-up")
    assert "not accounted" in text
    res = rundir.load_result(tmp_path)
    assert "5 finished request(s) of it were recovered" in res.validity.findings[0].text
    assert json.loads((d / LEVEL_META_FILE).read_text())["label"] == "concurrency=4"
    rundir.end_level_spool(tmp_path, 1, 0)
    assert recover(tmp_path) == [] and not (tmp_path / SPOOL_DIR).exists()


def test_the_history_lists_a_running_run_as_running_while_its_lock_is_held_then_crashed(tmp_path):
    from wattbench.results.store import HistoryStore

    run = tmp_path / "run"
    run.mkdir()
    res = _running(run)
    lock = rundir.RunLock(run)
    with HistoryStore(tmp_path / "h.sqlite3") as store:
        store.register(rundir.load_result(run), run)
        assert [r.status for r in store.list_runs()] == ["running"]
        assert [r.run_id for r in store.list_runs(status="running")] == [res.run_id]
        lock.release()  # the process is gone: what it left is a crashed run
        assert [r.status for r in store.list_runs()] == ["crashed"]
        assert store.get(res.run_id).status == "crashed" and store.list_runs(status="running") == []
        assert [r.run_id for r in store.list_runs(status="crashed")] == [res.run_id]


def test_a_run_that_could_not_close_after_a_failed_write_reads_stopped_not_crashed(tmp_path):
    """``rundir.close_result`` leaves ``.stopped-<ERRNO>`` when not even result.json could be
    rewritten: every reader then reads the run as stopped on that write error (``warn``, the
    reason first), not as a crash."""
    from wattbench.results.recovery import STOPPED_MARKER_PREFIX

    res = _running(tmp_path)
    for lv in res.levels:
        lv.validity.findings, lv.validity.verdict = [], "valid"
    res.validity.findings, res.validity.verdict = [], "valid"
    rundir.write_result(tmp_path, res)
    (tmp_path / (STOPPED_MARKER_PREFIX + "ENOSPC")).touch()
    got = rundir.load_result(tmp_path)
    assert got.status == "failed" and got.validity.verdict == "warn"
    first = got.validity.findings[0]
    assert first.kind == "run_stopped" and "No space left on device" in first.text and CRASHED not in first.text
