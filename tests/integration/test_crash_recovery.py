"""A run killed outright mid-level (SIGKILL: nothing in the process can catch it) loses at most the
requests in flight and never reads ``valid``.

A real ``wattbench run`` subprocess against the scripted server, whose every request after the
16th stalls half-way (``--hang-after-requests``; the run sends no priming load, so the server's count
is the levels' requests): level 0 (c=1) finishes its 10 requests, level 1
(c=2) finishes requests 11–16 and then holds two stalled streams that can never end. The test waits
for exactly that state (the server saw both stalls, and every stream it completed is either in
``requests.jsonl`` or spooled in the run directory), not for a time, then SIGKILLs the run. Then:
the finished records are on disk, ``report`` says ``invalid`` (crashed) and shows them as
recovered, ``history import`` indexes the run ``invalid``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.fakes.stream_server_proc import stream_server
from wattbench.core.recordset import read_spooled_lines
from wattbench.results.recovery import CRASHED, recover
from wattbench.results.rundir import load_result
from wattbench.results.recovery import SPOOL_DIR
from wattbench.results.store import HistoryStore

ROOT = Path(__file__).resolve().parents[2]
HANG_AFTER = 16
LEVEL0 = 10  # -n 10 at c=1


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _wb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=180)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _spooled(out: Path) -> list[dict]:
    return [r for f in sorted((out / SPOOL_DIR).glob("level-*/records-*/lines")) for r in read_spooled_lines(f)]


def test_sigkill_mid_level_keeps_every_finished_record_and_reads_invalid(tmp_path):
    out, db = tmp_path / "run", tmp_path / "history.sqlite3"
    with stream_server("--ttft-ms", "1", "--itl-ms", "1", "--hang-after-requests", str(HANG_AFTER)) as (base, stats):
        proc = subprocess.Popen(
            [sys.executable, "-m", "wattbench", "run", "-t", base, "-c", "1,2", "-n", str(LEVEL0), "--input-tokens", "8",
             "--output-tokens", "4", "--idle", "0", "--sensor", "const:node=100", "--no-html", "--stall-timeout", "600",
             "--request-timeout", "600", "--db", str(db), "--out", str(out),
             # the server counts requests (the 16th then stalls): no priming load, history check or calibration probe among them
             "--no-prime", "--no-history-check", "--no-calibrate-prompts"],
            cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 300  # only ends a hang; the test waits for a state, not a time
            while True:
                assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
                s = stats()
                written = _lines(out / "requests.jsonl")
                if (s["faults"].get("stall", 0) >= 2 and written == LEVEL0
                        and len(_spooled(out)) == s["streams_completed"] - written):
                    break
                assert time.monotonic() < deadline, (s, written, len(_spooled(out)))
                time.sleep(0.02)
            served = stats()
            assert (out / ".running").exists()
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    # on disk: level 0 in requests.jsonl, every stream level 1 finished in its spool; lost: the 2 in flight
    finished_in_level1 = served["streams_completed"] - LEVEL0
    assert finished_in_level1 == HANG_AFTER - LEVEL0
    spooled = _spooled(out)
    assert len(spooled) == finished_in_level1 and all(r["level"] == 1 and r["ok"] for r in spooled)
    assert served["requests"] - served["streams_completed"] == 2  # the two stalled streams: all that is lost
    raw = json.loads((out / "result.json").read_text())
    assert raw["status"] == "running" and [lv["index"] for lv in raw["levels"]] == [0]

    # every reader: invalid, crashed, reason first
    res = load_result(out)
    assert res.validity.verdict == "invalid" and res.validity.findings[0].text.startswith(CRASHED)
    assert f"{finished_in_level1} finished request(s) of it were recovered" in res.validity.findings[0].text
    [rec] = recover(out)
    assert (rec.index, rec.records, rec.completed, rec.failed, rec.label) == (
        1, finished_in_level1, finished_in_level1, 0, "concurrency=2")
    assert rec.output_tokens == 4 * finished_in_level1

    p = _wb("report", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "verdict: invalid" in text and CRASHED in text
    assert (f"recovered from a crashed run: level 1 (concurrency=2): {finished_in_level1} finished request(s): "
            f"{finished_in_level1} completed, 0 failed") in text
    assert "not accounted" in text
    p = _wb("report", str(out), "--json", cwd=tmp_path)
    doc = json.loads(p.stdout)["runs"][0]
    assert doc["verdict"] == "invalid" and doc["status"] == "running"
    assert doc["recovered"][0]["records"] == finished_in_level1 and doc["recovered"][0]["how"] == "from a crashed run"

    p = _wb("history", "import", str(out), "--db", str(db), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    with HistoryStore(db) as store:
        [row] = store.list_runs()
        # indexed as it was left ("running"), listed as what it is: no process holds its lock
        assert [r.run_id for r in store.list_runs(status="crashed")] == [row.run_id]
        assert store.list_runs(status="running") == []
    assert (row.status, row.verdict) == ("crashed", "invalid")
