"""A command's SIGTERM handler is the command's only (``core.interrupt.sigterm_as_ctrl_c``): while
``run`` or ``measure`` works, SIGTERM stops it as Ctrl-C does; once the command has ended, however it
ended, the process's handler is the one it had before: a program (or a test runner) that called the
command in-process goes on with its own."""

from __future__ import annotations

import signal
import sys

import pytest

import wattbench.run as run_pkg
import wattbench.run.measure as measure_mod
from wattbench.cli.main import main
from wattbench.core.interrupt import on_sigterm


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "data"))
    monkeypatch.setenv("WATTBENCH_DB", str(tmp_path / "home" / "history.sqlite3"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _watch(monkeypatch, module, name: str) -> list[object]:
    """Wrap ``module.name`` (the library call a command makes): the SIGTERM handler while it runs."""
    seen: list[object] = []
    real = getattr(module, name)

    def watched(*args, **kwargs):
        seen.append(signal.getsignal(signal.SIGTERM))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, watched)
    return seen


def _theirs(signum, frame):  # the caller's own SIGTERM handler
    raise AssertionError("not called: no SIGTERM is sent")


@pytest.mark.parametrize("callers", [signal.SIG_DFL, _theirs], ids=["default", "a-handler"])
def test_a_failing_run_puts_the_callers_sigterm_handler_back(isolated, monkeypatch, capsys, callers):
    seen = _watch(monkeypatch, run_pkg, "run_benchmark")
    before = signal.signal(signal.SIGTERM, callers)
    try:
        with pytest.raises(SystemExit) as e:  # nothing listens on port 9: the run fails
            main(["run", "-t", "http://127.0.0.1:9/v1", "--model", "m", "--no-sensors", "--no-html",
                  "--concurrency", "1", "--duration", "1", "-o", str(isolated / "runs")])
        after = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert e.value.code not in (0, None), capsys.readouterr().err
    assert seen == [on_sigterm]  # SIGTERM stopped the run as Ctrl-C does while it ran
    assert after is callers


@pytest.mark.parametrize("exit_code", [0, 3])
def test_measure_puts_the_callers_sigterm_handler_back(isolated, monkeypatch, capsys, exit_code):
    seen = _watch(monkeypatch, measure_mod, "measure")
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit):
        main(["measure", "-s", "const:node=100", "--idle", "0", "--no-register", "-q", "-o", str(isolated / "run"),
              "--", sys.executable, "-c", f"raise SystemExit({exit_code})"])
    assert seen == [on_sigterm]
    assert signal.getsignal(signal.SIGTERM) == before
