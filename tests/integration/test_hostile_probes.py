"""A server's identity probes and the prompt calibration's answers, hostile: nothing a server answers
ends a run with a traceback, grows wattbench past a bounded memory, or gets into a file wattbench
then refuses to read.

Each case runs a real ``wattbench run`` (a subprocess under ``RLIMIT_AS``, its peak RSS read by
``wait4``: ``reliability_procs.run_limited``) against one behaviour of ``tests/fakes/hostile_server.py``
and asserts what a user needs: the exit code, no traceback, a bounded peak RSS, and every file the
run wrote — ``result.json``, ``requests.jsonl``, ``report.html``, the history database — read back
by wattbench's own reader (``every_file_loads``: a file of a kind it does not know fails the test,
so a new file comes with its reader)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.fakes.reliability_procs import HOSTILE, child_env, run_argv, run_limited, server
from wattbench.core.jsontext import MAX_DEPTH, json_depth, value_depth

PEAK_RSS = 400 << 20  # a run of the scripted server peaks at ~95-130 MB; a probe's answer may add little
LOAD = ("-c", "2", "-n", "4", "--no-sensors")


def every_file_loads(out: Path, db: Path | None = None) -> list[str]:
    """Read every file of a run directory (and its history database) with wattbench's own reader;
    the names read. A file no reader below knows fails the test."""
    from wattbench.results.rundir import load_requests, load_result
    from wattbench.results.store import HistoryStore

    res = load_result(out)  # what report, compare and history import read
    readers = {"result.json": lambda f: load_result(f.parent),
               "requests.jsonl": lambda f: load_requests(f.parent),
               "report.html": lambda f: f.read_text().rstrip().endswith("</html>") or pytest.fail(f"{f} cut")}
    seen = []
    for f in sorted(out.rglob("*")):
        if f.is_file():
            assert f.name in readers, f"{f}: wattbench wrote a file no test reads back"
            readers[f.name](f)
            seen.append(f.name)
    assert json_depth(out.joinpath("result.json").read_bytes()) <= MAX_DEPTH
    if db is not None:
        with HistoryStore(db) as store:
            rec = store.get(res.run_id)
            assert rec is not None and rec.status == res.status
        seen.append(db.name)
    return seen


def _run(tmp_path: Path, behaviour: str, *extra: str, timeout_s: float = 120):
    out, db = tmp_path / "run", tmp_path / "h.db"
    with server("--behaviour", behaviour, script=HOSTILE) as s:
        p, rss = run_limited(run_argv(s.base, out, *LOAD, "--db", str(db), *extra),
                             env=child_env(HOME=str(tmp_path)), cwd=tmp_path, timeout_s=timeout_s)
        stats = s.stats()
    assert "Traceback" not in p.stdout + p.stderr, p.stderr[-3000:]
    assert rss < PEAK_RSS, f"peak RSS {rss >> 20} MiB"
    return p, out, db, stats


@pytest.mark.parametrize("behaviour", ["props_deep", "server_info_deep", "info_deep_value", "props_bloat"])
def test_an_identity_probe_cannot_end_the_run_or_poison_its_files(tmp_path, behaviour):
    p, out, db, stats = _run(tmp_path, behaviour)
    assert p.returncode == 0, p.stderr[-3000:]
    assert every_file_loads(out, db) == ["report.html", "requests.jsonl", "result.json", "h.db"]
    res = json.loads((out / "result.json").read_text())
    server_info, ident = res["server"], res["server"]["identity"]
    assert stats["completed"] == 4 and res["status"] == "complete"
    if behaviour in ("props_deep", "server_info_deep"):
        # nested past the one reader's 64 levels: no answer (before: a RecursionError traceback, rc 1)
        assert server_info["engine"] == "openai" and ident["exposed"].keys() <= {"/v1/models"}
    elif behaviour == "info_deep_value":
        # 62 deep: parsed, recognised, and stored clipped (before: 65 deep in result.json, refused by report)
        assert server_info["engine"] == "tgi" and server_info["effective_config"]["max_total_tokens"] == 4096
        assert value_depth(server_info["effective_config"]["sha"]) <= 2
    else:
        # 3.3 MB of /props, 15,000 model ids: 3.35 MB of result.json before, now the 16 KiB identity
        assert server_info["engine"] == "llamacpp" and ident["capped"].startswith("16 KiB kept: ")
        assert len(server_info["models"]) == 64 and (out / "result.json").stat().st_size < 100_000
        assert len(json.dumps(ident["exposed"], separators=(",", ":"))) <= 16 << 10
        conn = sqlite3.connect(db)
        stored = conn.execute("SELECT length(config) FROM runs").fetchone()[0]
        assert stored < 20_000 and conn.execute("SELECT max(length(config)) FROM levels").fetchone()[0] < 200


def test_report_reads_the_run_a_deep_probe_answer_finished(tmp_path):
    """A value 62 deep in ``/info`` made a run whose own result ``report`` refused."""
    p, out, db, _ = _run(tmp_path, "info_deep_value", "--no-html")
    assert p.returncode == 0
    for cmd in (("report", str(out)), ("compare", str(out), str(out), "--db", str(db))):
        q, rss = run_limited([sys.executable, "-m", "wattbench", *cmd], env=child_env(HOME=str(tmp_path)),
                             cwd=tmp_path)
        assert q.returncode == 0 and "Traceback" not in q.stderr and "nested" not in q.stderr, q.stderr[-2000:]
        assert rss < PEAK_RSS


# ---------------------------------------------------------------- the prompt calibration's answers

CALIBRATING = ("--idle", "0", "--output-tokens", "4", "--quiet", "--no-prime", "--no-history-check", "--no-html",
               "-c", "2", "-n", "4", "--no-sensors")


def _calibrated_run(tmp_path: Path, behaviour: str, *extra: str):
    out, db = tmp_path / "run", tmp_path / "h.db"
    with server("--behaviour", behaviour, script=HOSTILE) as s:
        argv = [sys.executable, "-m", "wattbench", "run", "--target", s.base, "--out", str(out), "--db", str(db),
                *CALIBRATING, *extra]
        p, rss = run_limited(argv, env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
        stats = s.stats()
    assert "Traceback" not in p.stdout + p.stderr, p.stderr[-3000:]
    assert rss < PEAK_RSS, f"peak RSS {rss >> 20} MiB"
    return p, out, db, stats


@pytest.mark.parametrize("behaviour,says", [
    # before: a 50-line ValueError traceback, status failed, nothing measured
    ("prompt_tokens_0", "below one token a probe"),
    # before: 0.0069 tokens per word, 4.3-million-word prompts at --input-tokens 30000 (23 GB: the OOM killer)
    ("prompt_tokens_1", "the count does not grow with the words"),
    # before: prompts 20x the asked length, warned only afterwards
    ("prompt_tokens_7", "the count does not grow with the words"),
])
def test_prompt_counts_no_tokenizer_makes_are_refused_and_the_run_measures(tmp_path, behaviour, says):
    p, out, db, stats = _calibrated_run(tmp_path, behaviour, "--input-tokens", "30000")
    assert p.returncode == 0, p.stderr[-3000:]
    every_file_loads(out, db)
    res = json.loads((out / "result.json").read_text())
    cal = res["prompt_calibration"]
    assert res["status"] == "complete" and not cal["used"] and cal["refused"] and says in cal["reason"]
    assert cal["probes"] == 24 and cal["counted"] == 24  # the server answered every probe: it miscounted
    n = {"prompt_tokens_0": 0, "prompt_tokens_1": 1, "prompt_tokens_7": 7}[behaviour]
    assert f"counted {n} prompt tokens for the probes of {cal['words'][0]} words" in cal["reason"]
    assert any(w.startswith("prompt lengths not calibrated: the server's prompt counts are no tokenizer's")
               for w in res["warnings"])
    # the 0.75 guess: 30000 tokens asked, 22,500 words a prompt (not 4.3 million)
    recs = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and all(r["ok"] and r["requested_input_tokens"] == 30000 for r in recs)
    assert stats["completed"] == 4 + 24


def test_stalling_probes_cost_one_stall_timeout(tmp_path):
    """Every one-token request stalls: the first round of 4 probes stalls and no more are sent (before:
    6 rounds of 4, 6 × --stall-timeout before the first level)."""
    import time

    t0 = time.monotonic()
    p, out, db, stats = _calibrated_run(tmp_path, "calibration_stall", "--input-tokens", "64", "--stall-timeout", "5")
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    every_file_loads(out, db)
    cal = json.loads((out / "result.json").read_text())["prompt_calibration"]
    assert stats["faults"] == 4 and cal["probes"] == 4 and cal["refused"] and not cal["used"]
    assert "probes ended in stall in round 1 (4 at once), so no more were sent (4 of 24)" in cal["reason"]
    assert stats["completed"] == 4  # the level's requests, measured
    assert took < 30, took  # one 5 s stall timeout and the run (before: six of them, 30 s before the first level)
