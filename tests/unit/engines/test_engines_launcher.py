"""The common launcher against a fake engine process: ready, log, stop by process group, failures."""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from pathlib import Path

import pytest

from wattbench.core.argv import flag_value, has_flag
from wattbench.engines.base import Engine, LaunchPlan, log_tail, start
from wattbench.core.errors import EngineError

FAKE = Path(__file__).resolve().parents[2] / "fakes" / "engines_fake_engine.py"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Engine scratch folders go to the wattbench cache dir: keep them per test."""
    monkeypatch.setenv("WATTBENCH_CACHE_DIR", str(tmp_path / "cache"))


class FakeEngine(Engine):
    name = "fake"
    install_hint = "pip install fake-engine"

    def __init__(self, mode="ok", exe=sys.executable):
        self.mode, self.exe = mode, exe

    def check_installed(self):
        pass

    def plan(self, model, device, engine_args, host, port, scratch):
        extra = [str(scratch / "marker")] if self.mode == "lose_port" else []
        return LaunchPlan(argv=[self.exe, str(FAKE), str(port), self.mode, *extra, *engine_args], model_path="x",
                          info={"device": device})

    def version(self):
        return "1.2.3"


def gone(pid: int, timeout_s: float = 60.0) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``timeout_s``: returns as soon as it is, so the
    default only ends a hang (a stop that works is never judged by how long it took)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie of ours counts as gone once reaped; check its state
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_an_engines_output_and_command_line_reach_server_log_scrubbed(tmp_path, monkeypatch):
    """An engine started with a key among its arguments (``--engine-args '--api-key …'``) and a
    token in its environment prints both, and a terminal escape: ``server.log`` holds its lines
    with both masked and the escape gone, its command line written there and recorded
    (``launch_command``) with the key masked."""
    key, token = "sk-ENGINEkey9Q7w3Zp9Lm2X", "hf_TOKENvalue8Hq2Lm3Nx"
    monkeypatch.setenv("HF_TOKEN", token)
    h = start(FakeEngine("loud"), None, "cpu", ["--api-key", key], tmp_path, timeout_s=120)
    try:
        assert h.server_info.launch_command[-2:] == ["--api-key", "***"]
    finally:
        h.stop()
    log = (tmp_path / "server.log").read_text()
    assert log.startswith("$ ") and log.splitlines()[0].endswith("--api-key ***"), log[:300]
    assert "non-default args: ['--api-key', '***']" in log and "token from the environment: ***" in log, log
    assert key[3:11] not in log and token[3:11] not in log and "\x1b" not in log and "request /health" in log


def test_start_ready_info_and_stop_takes_the_group_down(tmp_path):
    h = start(FakeEngine("child"), None, "cpu", [], tmp_path, timeout_s=120)
    try:
        assert h.alive()
        assert h.base_url == f"http://127.0.0.1:{h.port}/v1"
        si = h.server_info
        assert si.launched and si.engine == "fake" and si.version == "1.2.3"
        assert si.model == "fake-model" and si.max_model_len == 128 and si.pid == h.pid
        assert si.start_duration_s is not None and si.start_duration_s > 0
        assert si.launch_command[1] == str(FAKE)
        m = None
        deadline = time.monotonic() + 60  # ends a hang only: the line is waited for
        while m is None and time.monotonic() < deadline:
            m = re.search(r"CHILD_PID=(\d+)", h.log_path.read_text())
            if m is None:
                time.sleep(0.1)
        assert m, "the fake engine never logged its child's pid"
        child = int(m.group(1))
    finally:
        h.stop()
    assert gone(h.pid) and gone(child)
    log = (tmp_path / "server.log").read_text()
    assert log.startswith("$ ") and "fake engine starting" in log and "request /health" in log
    assert h.stop() == h.returncode  # idempotent


def test_crash_during_start_gives_log_tail(tmp_path):
    with pytest.raises(EngineError) as ei:
        start(FakeEngine("crash"), None, "cpu", [], tmp_path, timeout_s=120)
    e = ei.value
    assert "exited with code 3" in str(e)
    assert "no such model directory" in e.log_tail
    assert len(e.log_tail.splitlines()) == 30


def test_unhealthy_start_times_out_and_leaves_no_process(tmp_path):
    with pytest.raises(EngineError, match="did not become healthy within 1 s") as ei:
        start(FakeEngine("hang"), None, "cpu", [], tmp_path, timeout_s=1)
    assert "mode=hang" in ei.value.log_tail
    # the hung process was killed: nothing of ours listens or runs with that argv
    import psutil

    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] and str(FAKE) in p.info["cmdline"]
                and "hang" in p.info["cmdline"]]


def test_a_lost_auto_port_is_retried_on_a_new_port(tmp_path):
    with start(FakeEngine("lose_port"), None, "cpu", [], tmp_path, timeout_s=120) as h:
        assert h.alive()
    log = (tmp_path / "server.log").read_text()
    assert log.count("$ ") == 2 and "address already in use" in log


def test_port_taken_is_refused_before_starting(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(EngineError, match=f"port {port} on 127.0.0.1 is already in use"):
            start(FakeEngine("ok"), None, "cpu", [], tmp_path, timeout_s=5, port=port)
    assert not (tmp_path / "server.log").exists()


def test_engine_binary_missing(tmp_path):
    with pytest.raises(EngineError, match="cannot run '/nonexistent/python'.*pip install fake-engine"):
        start(FakeEngine("ok", exe="/nonexistent/python"), None, "cpu", [], tmp_path, timeout_s=5)


def test_sigterm_unwinds_while_an_engine_runs_and_is_the_callers_again_after(tmp_path):
    """SIGTERM's handler is the whole process's: the launcher's (``SystemExit``, so every handle's
    exit and ``atexit`` stop the engines) only from the first start to the last stop, also where a
    start fails; a handler the caller installed is never replaced."""
    import signal

    from wattbench.engines import base

    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # as pytest leaves it (tests/conftest.py)
    a = start(FakeEngine("ok"), None, "cpu", [], tmp_path / "a", timeout_s=120)
    try:
        b = start(FakeEngine("ok"), None, "cpu", [], tmp_path / "b", timeout_s=120)
        assert signal.getsignal(signal.SIGTERM) is base._on_sigterm
        b.stop()
        assert signal.getsignal(signal.SIGTERM) is base._on_sigterm  # engine a still runs
    finally:
        a.stop()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with pytest.raises(EngineError, match="exited with code 3"):
        start(FakeEngine("crash"), None, "cpu", [], tmp_path / "c", timeout_s=120)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with pytest.raises(EngineError, match="cannot run"):
        start(FakeEngine("ok", exe="/nonexistent/python"), None, "cpu", [], tmp_path / "d", timeout_s=5)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    def theirs(signum, frame):
        raise AssertionError("not called: no SIGTERM is sent")

    signal.signal(signal.SIGTERM, theirs)
    try:
        with start(FakeEngine("ok"), None, "cpu", [], tmp_path / "e", timeout_s=120):
            assert signal.getsignal(signal.SIGTERM) is theirs
        assert signal.getsignal(signal.SIGTERM) is theirs
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_flag_helpers():
    args = ["--max-num-seqs", "8", "--dtype=half", "--enforce-eager", "--max-num-seqs", "16"]
    assert flag_value(args, "--max-num-seqs") == "16"
    assert flag_value(args, "--dtype") == "half"
    assert flag_value(args, "--nope") is None
    assert has_flag(args, "--enforce-eager") and has_flag(args, "--dtype") and not has_flag(args, "--x")


def test_log_tail_keeps_last_lines_and_progress_state(tmp_path):
    p = tmp_path / "l.log"
    p.write_text("".join(f"line {i}\n" for i in range(100)) + "bar 10%\rbar 100%\n")
    tail = log_tail(p, lines=3)
    assert tail.splitlines() == ["line 98", "line 99", "bar 100%"]


HOLDER = """
import sys, time
sys.path[:0] = [{src!r}, {root!r}]
from pathlib import Path
from wattbench.engines.base import start
from tests.unit.engines.test_engines_launcher import FakeEngine
h = start(FakeEngine("ok"), None, "cpu", [], Path({run!r}), timeout_s=120)
print("ENGINE_PID", h.pid, flush=True)
time.sleep(600)  # until the test signals it (its finally kills it)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_engine_dies_with_its_parent(tmp_path, sig):
    """SIGTERM to the parent unwinds (atexit stops the engine); SIGKILL: PR_SET_PDEATHSIG does."""
    import signal
    import subprocess

    src = str(Path(__file__).resolve().parents[3] / "src")
    root = str(Path(__file__).resolve().parents[3])
    code = HOLDER.format(src=src, root=root, run=str(tmp_path))
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline()
        assert line.startswith("ENGINE_PID"), line
        engine_pid = int(line.split()[1])
        assert not gone(engine_pid, timeout_s=0.2)
        parent.send_signal(getattr(signal, sig))
        parent.wait(timeout=60)
        assert gone(engine_pid)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
