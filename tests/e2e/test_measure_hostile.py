"""``wattbench measure -- COMMAND`` against commands that misbehave: a shell whose children outlive
it, a detached grandchild holding the output pipe, output without newlines, a directory as the
command, a load generator's result file that is malformed.

Before: stopping measure reached only its direct child (the shell's background children ran on);
a detached grandchild holding stdout delayed the end by 60 s; a child writing without newlines
was read into one line in memory (MemoryError at 1.5 GB) and a log as large; ``measure -- DIR``
raised PermissionError as a traceback; a malformed tool file raised from the reader."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.test_run_cli import ROOT, wb
from wattbench.results.rundir import load_result


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent to reap it has ended
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen, deadline_s: float = 120) -> list[int]:
    deadline = time.monotonic() + deadline_s  # only ends a hang
    while True:
        if path.exists():
            lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
            if len(lines) >= n:
                return [int(x) for x in lines[:n]]
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)


def test_stopping_measure_stops_the_commands_whole_process_group(tmp_path):
    out, pids_file = tmp_path / "run", tmp_path / "pids"
    # two background children of a shell (a non-interactive shell starts them with SIGINT ignored)
    script = f"sleep 300 & echo $! >> {pids_file}; sleep 300 & echo $! >> {pids_file}; wait"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "wattbench", "measure", "-s", "const:node=200", "--idle", "0",
                             "--no-register", "-o", str(out), "-q", "--", "sh", "-c", script],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        pids = _wait_for_lines(pids_file, 2, proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err[-2000:]
        assert "Traceback" not in err
        deadline = time.monotonic() + 10  # the group was stopped before measure exited; reaping may lag
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if _alive(p)], "the shell's children outlived the stop"
    finally:
        _kill(pids)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    res = load_result(out)
    assert res.status == "interrupted" and len(res.levels) == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_while_the_command_starts_still_stops_it(tmp_path, monkeypatch, sig):
    """A Ctrl-C or SIGTERM that lands after the command started and before measure kept its handle
    (in one statement of the main thread: a loaded host can stretch that gap to the time a shell
    takes to start two children) still stops the command's whole group. Before, the interrupt
    unwound from between the two, past the stop: the shell's children ran on (the process-group
    test above saw it twice beside another worker's test). The signal is raised right where
    ``Popen`` has returned, in-process, as ``wattbench measure`` handles it (``sigterm_as_ctrl_c``)."""
    import wattbench.run.command as command
    from wattbench.config.run import RunConfig
    from wattbench.config.run_commands import MeasureConfig
    from wattbench.core.errors import Interrupted
    from wattbench.core.interrupt import sigterm_as_ctrl_c
    from wattbench.run.measure import measure

    pids_file = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {pids_file}; sleep 300 & echo $! >> {pids_file}; wait"
    real_start = command._start_command
    pids: list[int] = []

    def start_then_interrupt(mcfg, cwd):
        proc = real_start(mcfg, cwd)
        pids.extend(_wait_for_lines(pids_file, 2, proc))  # the children exist
        signal.raise_signal(sig)  # the interrupt, before run_command has the handle
        return proc

    monkeypatch.setattr(command, "_start_command", start_then_interrupt)
    monkeypatch.setattr(command, "STOP_GRACE_S", 0.5)  # the children ignore SIGINT: SIGTERM after the grace
    cfg = RunConfig(sensors=["const:node=200"], idle_s=0, register_run=False, html=False, out=str(tmp_path / "run"))
    try:
        with sigterm_as_ctrl_c(), pytest.raises(Interrupted):
            measure(MeasureConfig(command=["sh", "-c", script], run=cfg, cwd=str(tmp_path)))
        assert len(pids) == 2
        deadline = time.monotonic() + 10  # reaping may lag the stop
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if _alive(p)], "the shell's children outlived the stop"
    finally:
        _kill(pids)
        for p in pids:  # orphaned, they were this process's to reap (measure made it their subreaper)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(p, os.WNOHANG)
    res = load_result(tmp_path / "run")
    assert res.status == "interrupted" and len(res.levels) == 1


GRANDCHILD = r'''
import subprocess, sys
g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
open(sys.argv[1], "w").write(f"{g.pid}\n")
print("parent done", flush=True)
'''


def test_a_detached_grandchild_holding_the_output_does_not_hold_the_end(tmp_path):
    out, pid_file = tmp_path / "run", tmp_path / "gpid"
    (tmp_path / "child.py").write_text(GRANDCHILD)
    t0 = time.monotonic()
    try:
        p = wb("measure", "-s", "const:node=100", "--idle", "0", "--no-register", "-o", str(out), "-q", "--",
               sys.executable, str(tmp_path / "child.py"), str(pid_file), cwd=tmp_path, timeout=170)
        took = time.monotonic() - t0
        gpid = int(pid_file.read_text())
        assert _alive(gpid)  # still running, still holding the pipe: measure did not wait for it
    finally:
        if pid_file.exists():
            _kill([int(pid_file.read_text())])
    assert p.returncode == 0, p.stderr
    assert took < 50, took  # before: at least 60 s (the reader's join), on a machine of any load
    res = load_result(out)
    assert "parent done" in (out / "command.log").read_text()
    assert any("still held its output" in n for n in res.measure.notes), res.measure.notes


def test_output_without_newlines_is_cut_and_the_log_stays_small(tmp_path):
    from wattbench.run.command import LINE_MAX_BYTES

    out = tmp_path / "run"
    code = ("import sys; w = sys.stdout.buffer.write; w(b'x' * (8 << 20)); w(b'\\nafter\\n'); "
            "w((b'y' * 100 + b'\\n') * 1000); sys.stdout.flush()")
    p = wb("measure", "-s", "const:node=100", "--idle", "0", "--no-register", "-o", str(out), "-q", "--",
           sys.executable, "-c", code, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    log = (out / "command.log").read_bytes()
    assert len(log) < LINE_MAX_BYTES + 200_000, len(log)  # before: the 8 MiB line whole
    assert b"[wattbench: line cut at 64 KiB" in log
    assert b"\nafter\n" in log and log.count(b"y" * 100 + b"\n") == 1000  # the lines after it are kept


def test_the_log_stops_at_its_cap_and_says_so(tmp_path, monkeypatch):
    """The reader itself, on a pipe: a log cap of 1 MiB against 3 MiB of lines."""
    import wattbench.run.command as m

    monkeypatch.setattr(m, "LOG_MAX_BYTES", 1 << 20)
    r, w = os.pipe()
    lines = []

    def feed():
        with os.fdopen(w, "wb") as f:
            for i in range(30_000):
                f.write(b"%06d " % i + b"z" * 93 + b"\n")

    t = threading.Thread(target=feed)
    t.start()
    with os.fdopen(r, "rb") as stream:
        output = m._CommandOutput(stream, tmp_path / "command.log", lambda ev: lines.append(ev.line))
        assert output.close(60)
    t.join()
    log = (tmp_path / "command.log").read_bytes()
    assert (1 << 20) - 200 < len(log) < (1 << 20) + 300, len(log)
    assert log.rstrip().endswith(b"later output is not kept]")
    assert len(lines) == 30_000  # every line still reached the progress callback


def test_the_stop_reaches_a_grandchild_that_ignores_sigint_and_sigterm(tmp_path):
    """``_stop`` itself, with a short grace: SIGINT, SIGTERM, then SIGKILL to the group."""
    from wattbench.run.command import _stop

    pid_file = tmp_path / "pid"
    code = ("import os, signal, subprocess, sys, time\n"
            "g = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "time.sleep(300)'])\n"
            f"open({str(pid_file)!r}, 'w').write(str(g.pid) + '\\n')\n"
            "time.sleep(300)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.DEVNULL)
    gpid = None
    try:
        gpid = _wait_for_lines(pid_file, 1, proc)[0]
        time.sleep(0.3)  # the grandchild has set its signal handlers
        _stop(proc, grace_s=1.0)
        assert proc.poll() is not None
        deadline = time.monotonic() + 10
        while _alive(gpid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(gpid)
    finally:
        _kill([proc.pid] + ([gpid] if gpid else []))
        proc.wait()


def test_a_directory_as_the_command_is_one_line(tmp_path):
    out = tmp_path / "run"
    (tmp_path / "adir").mkdir()
    p = wb("measure", "-s", "const:node=100", "--no-register", "-o", str(out), "--", str(tmp_path / "adir"),
           cwd=tmp_path)
    assert p.returncode == 2 and "is a directory" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "Traceback" not in p.stderr and not out.exists()


@pytest.mark.parametrize("content", [
    '{"start_times": [1.0, null], "ttfts": [0.1, 0.1], "latencies": [0.2, 0.2]}',
    '{"start_times": [1.0], "ttfts": [0.1], "latencies": [0.2], "output_lens": [-5]}',
    "[" * 100_000 + "]" * 100_000,
])
def test_a_malformed_tool_file_is_one_line_and_keeps_the_lifetime_level(tmp_path, content):
    out = tmp_path / "run"
    (tmp_path / "bad.json").write_text(content)
    code = "import os, sys, time; time.sleep(0.3); os.utime('bad.json')"
    p = wb("measure", "-s", "const:node=100", "--idle", "0", "--no-register", "-o", str(out), "-q", "--tool",
           "vllm-bench-serve", "--result", "bad.json", "--", sys.executable, "-c", code, "--save-result",
           "--save-detailed", cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 1 and len(lines) == 1 and "bad.json" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    res = load_result(out)
    assert res.status == "failed" and res.measure.window_source == "command lifetime"
    (lv,) = res.levels
    assert lv.energy["node"].energy_j == pytest.approx(100 * lv.window.duration_s, rel=1e-6)
    assert json.loads((out / "result.json").read_text())["status_detail"].startswith("vllm bench serve")


@pytest.mark.parametrize("parent_stays", [True, False], ids=["parent-running", "parent-gone"])
def test_ctrl_c_stops_a_setsid_grandchild(tmp_path, parent_stays):
    """The command starts a grandchild in a session of its own (``setsid``: out of the command's
    process group, which the stop signals) that ignores SIGINT and SIGTERM — its parent still
    running, or gone (the grandchild orphaned: out of the command's tree too, adopted by wattbench
    as a subreaper). Ctrl-C on ``measure`` ends it, with no traceback."""
    pid_file = tmp_path / "pid"
    grandchild = ("import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                  "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)")
    middle = ("import os, subprocess, sys, time\n"
              f"g = subprocess.Popen([sys.executable, '-c', {grandchild!r}], start_new_session=True)\n"
              f"open({str(pid_file)!r}, 'w').write(str(g.pid) + '\\n')\n"
              + ("time.sleep(300)\n" if parent_stays else "os._exit(0)\n"))
    command = ("import subprocess, sys, time\n"
               f"subprocess.Popen([sys.executable, '-c', {middle!r}])\n"
               "time.sleep(300)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "wattbench", "measure", "-s", "const:node=100", "--idle", "0",
                             "--no-register", "-q", "-o", str(tmp_path / "run"), "--", sys.executable, "-c", command],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # SIGINT at its default, as in a terminal's foreground job, whatever the runner's: a
                            # process started with SIGINT ignored (`measure &` in a script, a worker that
                            # inherited it) keeps ignoring it, as every Unix program does
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    gpid = None
    try:
        gpid = _wait_for_lines(pid_file, 1, proc)[0]
        time.sleep(1.0)  # its signal handlers are set; without its parent, it has been adopted
        assert _alive(gpid)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        deadline = time.monotonic() + 10
        while _alive(gpid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(gpid), err
        assert "Traceback" not in err
    finally:
        _kill([proc.pid] + ([gpid] if gpid else []))
        proc.wait()
