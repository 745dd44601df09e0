"""A planted link in an existing ``--out`` and a ``history import`` that reuses a run id: one line
on stderr, exit 2, nothing followed, nothing re-pointed (real CLI subprocesses)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.fakes.reliability_procs import child_env, run_cli, server


def _wb(*args, cwd, timeout_s=120):
    return subprocess.run([sys.executable, "-m", "wattbench", *args], capture_output=True, text=True,
                          env=child_env(HOME=str(cwd)), cwd=str(cwd), timeout=timeout_s)


def _one_line(p) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    return lines[0]


def test_run_into_an_out_holding_a_link_is_refused_and_the_victim_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "requests.jsonl").symlink_to(victim)
    with server("--ttft-ms", "2", "--itl-ms", "1") as s:
        p = run_cli(s.base, out, "-n", "2", "--no-sensors", env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
    assert "symbolic link (requests.jsonl)" in _one_line(p)
    assert victim.read_text() == "precious\n" and sorted(x.name for x in out.iterdir()) == ["requests.jsonl"]


def test_history_import_of_a_copy_reusing_a_run_id_is_refused(tmp_path):
    db = tmp_path / "h.sqlite3"
    runs = tmp_path / "runs"
    with server("--ttft-ms", "2", "--itl-ms", "1") as s:
        p = run_cli(s.base, runs / "a", "-n", "2", "--sensor", "const:node=100", "--db", str(db),
                    env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert _wb("history", "baseline", "main", str(runs / "a"), "--db", str(db), cwd=tmp_path).returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(runs / "a", copy)
    p = _wb("history", "import", str(copy), "--db", str(db), cwd=tmp_path)
    line = _one_line(p)
    assert "already names the run in" in line and str((runs / "a").resolve()) in line
    show = _wb("history", "show", "main", "--db", str(db), "--json", cwd=tmp_path)
    assert show.returncode == 0 and str((runs / "a").resolve()) in show.stdout and str(copy) not in show.stdout
