"""Terminal escapes and rich markup from a server or a result file never reach the terminal raw.

The hostile server (``escape_model``) serves a model id holding OSC (window title, hyperlink), CSI
(clear screen, colours), BEL, CR, BS, a C1 CSI, a bidi override and ``[/x]`` markup, and quotes the
same in its 401 bodies, SSE errors and texts. A crafted ``result.json`` holds them in its
model. ``run``, its error line, ``report``, ``history list``/``show`` and ``compare`` run as
real subprocesses: none fails (``[/x]`` ended ``history list`` with a MarkupError for the whole
database) and none writes a control character but newline and tab.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.fakes.reliability_procs import HOSTILE, child_env, run_cli, server

pytestmark = pytest.mark.slow  # seven real commands, ~40 s on a loaded 2-core box

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")


def _wb(*args, cwd):
    return subprocess.run([sys.executable, "-m", "wattbench", *args], capture_output=True, text=True,
                          env=child_env(HOME=str(cwd), COLUMNS="160"), cwd=str(cwd), timeout=120)


def _clean(name, p, code=0):
    assert "Traceback" not in p.stderr, (name, p.stderr[-3000:])
    assert p.returncode == code, (name, p.returncode, p.stderr[-2000:])
    for stream in (p.stdout, p.stderr):
        bad = CONTROL.findall(stream)
        assert not bad, (name, sorted(set(bad)), stream[:2000])


def test_escapes_from_a_server_and_a_result_file_never_reach_the_terminal(tmp_path):
    db = tmp_path / "h.sqlite3"
    runs = tmp_path / "runs"
    with server("--behaviour", "escape_model", script=HOSTILE) as s:
        ok = run_cli(s.base, runs / "esc", "--concurrency", "1", "-n", "6", "--sensor", "const:node=100",
                     "--keep-output-text", "--db", str(db), env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
        wrong = run_cli(s.base, runs / "wrong", "-m", "no-such-model", "-n", "1", "--no-sensors",
                        env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
    _clean("run", ok)
    _clean("run error line", wrong, 2)
    assert len([ln for ln in wrong.stderr.splitlines() if ln.strip()]) == 1
    # a crafted result file: escapes and markup in its model
    from tests.fakes.results_factory import make_level, make_result
    from wattbench.results.rundir import write_result

    # (a run id is refused on load unless it is letters, digits and . _ : + -: the model carries them)
    crafted = make_result("crafted-1", model="m[/x]\x1b]0;t\x07\x1b[2J\x1b[31m\u202e[bold]",
                          levels=[make_level(0, value=1, output_tokens_per_s=100, power_w={"node": 500})])
    write_result(runs / "crafted", crafted)
    _clean("history import", _wb("history", "import", str(runs / "crafted"), "--db", str(db), cwd=tmp_path))
    listed = _wb("history", "list", "--db", str(db), cwd=tmp_path)
    _clean("history list", listed)
    assert "[/x]" in listed.stdout and "hostile-model" in listed.stdout  # shown as typed, every run listed
    rid = json.loads(_wb("history", "list", "--db", str(db), "--json", cwd=tmp_path).stdout)
    assert len(rid) == 2
    _clean("history show", _wb("history", "show", str(runs / "crafted"), "--db", str(db), cwd=tmp_path))
    _clean("report", _wb("report", str(runs / "esc"), cwd=tmp_path))
    _clean("report crafted", _wb("report", str(runs / "crafted"), cwd=tmp_path))
    _clean("compare", _wb("compare", str(runs / "esc"), str(runs / "crafted"), "--force", cwd=tmp_path))
    _clean("compare refused", _wb("compare", str(runs / "esc"), str(runs / "crafted"), cwd=tmp_path), 2)
