"""The command ``wattbench measure`` runs, as a process (``run_command``): started in its own session
(process group = its PID) with this process made a child subreaper first (``adopt_orphans``), so what
it starts and leaves behind stays findable; its output read on a thread into ``command.log`` and the
progress callback (``_CommandOutput``: a line and the log capped, every secret scrubbed); power in
the progress every second; on Ctrl-C the whole group stopped — SIGINT, then SIGTERM, then SIGKILL —
and each process that left the group for a session of its own (``_stop``). ``run/measure.py`` runs
the sensors and accounting around it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

import psutil  # type: ignore[import-untyped]  # psutil ships no stubs (types-psutil is not a dependency)

from wattbench.config.run_commands import MeasureConfig
from wattbench.core.clock import ClockAnchor, now_ns
from wattbench.core.errors import UserError
from wattbench.core.interrupt import interrupts_deferred
from wattbench.core.secret_scope import clip, registered
from wattbench.core.schema import MeasureInfo
from wattbench.run.events import CommandOutput, LevelProgress, Measured, Phase, ProgressFn
from wattbench.run.session import RunSession

PROGRESS_PERIOD_S = 1.0  # how often the progress gets the power while the command runs

# The command's output: a line longer than this is kept up to here and marked cut (a child writing
# 1.5 GB without a newline once raised MemoryError in the reader and wrote a 1.5 GB log); the log
# stops at LOG_MAX_BYTES, saying so in its last line; the rest is read and dropped.
LINE_MAX_BYTES = 64 << 10
LOG_MAX_BYTES = 64 << 20
PROGRESS_LINE_CHARS = 4000  # of a line, given to the progress callback
# Stopping the command: its whole process group (the command runs in its own session, so a shell's
# children are reached too) gets SIGINT, as a Ctrl-C in a terminal would, then SIGTERM, then SIGKILL,
# each after this long without the group ending.
STOP_GRACE_S = 5.0
# After the command ended, its output is read this much longer: a process it left running (detached,
# or in the background) may hold the pipe open for as long as it runs.
OUTPUT_DRAIN_S = 2.0


class _CommandOutput:
    """Reads the command's output into ``command.log`` (line and size caps above) and the progress
    callback, on a thread; ``close`` stops writing at once, even while a process the command left
    behind still holds the pipe."""

    def __init__(self, stream: IO[bytes], log_path: Path, emit: ProgressFn) -> None:
        self.stream, self.emit = stream, emit
        self.log = open(log_path, "wb")
        self.lock = threading.Lock()
        self.closed = False
        self.written = 0
        self.thread = threading.Thread(target=self._pump, name="measure-command-output", daemon=True)
        self.thread.start()

    def _write(self, data: bytes) -> None:
        with self.lock:
            if self.closed or self.written > LOG_MAX_BYTES:
                return
            if self.written + len(data) > LOG_MAX_BYTES:
                data = (f"\n[wattbench: command.log stops here, at its cap of {LOG_MAX_BYTES >> 20} MiB; the "
                        "command's later output is not kept]\n").encode()
                self.written = LOG_MAX_BYTES + 1
            else:
                data = registered().bytes(data)  # no secret of the run or the command's own
                self.written += len(data)
            self.log.write(data)

    def _pump(self) -> None:
        cutting = False  # inside a line longer than LINE_MAX_BYTES: its rest is dropped
        try:
            while not self.closed:
                chunk = self.stream.readline(LINE_MAX_BYTES)
                if not chunk:
                    break
                ended = chunk.endswith(b"\n")
                if cutting:
                    cutting = not ended
                    continue
                if not ended and len(chunk) >= LINE_MAX_BYTES:
                    cutting = True
                    chunk += (f"\n[wattbench: line cut at {LINE_MAX_BYTES >> 10} KiB; the rest of it is not "
                              "kept]\n").encode()
                self._write(chunk)
                if not self.closed:
                    self.emit(CommandOutput(clip(chunk[:4 * PROGRESS_LINE_CHARS].decode(errors="replace"),
                                                 PROGRESS_LINE_CHARS).rstrip("\n")))
        except (OSError, ValueError):  # the pipe closed under the reader
            pass

    def close(self, wait_s: float) -> bool:
        """Wait up to ``wait_s`` for the output to end, then stop writing; whether it ended."""
        self.thread.join(timeout=wait_s)
        ended = not self.thread.is_alive()
        with self.lock:
            self.closed = True
            self.log.close()
        if ended:
            with contextlib.suppress(OSError):
                self.stream.close()
        return ended


def _start_command(mcfg: MeasureConfig, cwd: Path) -> subprocess.Popen[bytes]:
    """The command in its own session (process group = its PID), output piped; one line when it
    cannot be started. This process becomes a child subreaper first (``adopt_orphans``), so what
    the command starts and leaves behind stays findable by ``_stop``."""
    adopt_orphans()
    try:
        return subprocess.Popen(mcfg.command, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        raise UserError(f"cannot run {mcfg.command[0]!r}: {e.strerror or e}") from None


PR_SET_CHILD_SUBREAPER = 36  # prctl(2)


def adopt_orphans() -> bool:
    """Make this process a child subreaper (Linux): a process the command starts and orphans — a
    daemon that forks and exits, a ``setsid`` grandchild whose parent ended — is re-parented here
    instead of to init, so ``_stop`` still finds it after it left the command's process group and
    its parent is gone. False where the system has no such call."""
    try:
        import ctypes

        rc: int = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        return rc == 0
    except (OSError, AttributeError):
        return False


def _escaped(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    """The command's processes that left its process group for a session of their own (``setsid``,
    a daemon): its descendants while the command runs, and the orphans this process adopted
    (``adopt_orphans``) that were started after the command, outside this process's session."""
    out: dict[int, psutil.Process] = {}
    pgid = proc.pid
    try:
        since = psutil.Process(proc.pid).create_time()
        for c in psutil.Process(proc.pid).children(recursive=True):
            out[c.pid] = c
    except psutil.Error:
        since = None
    own_sid = os.getsid(0)
    try:
        for c in psutil.Process().children(recursive=True):
            if c.pid == proc.pid or c.pid in out:
                continue
            with contextlib.suppress(psutil.Error, OSError):
                if (os.getsid(c.pid) != own_sid and (since is None or c.create_time() >= since)
                        and c.ppid() == os.getpid()):  # adopted: its parent is gone
                    out[c.pid] = c
                    out.update((g.pid, g) for g in c.children(recursive=True))
    except psutil.Error:
        pass
    return [c for c in out.values() if _pgid(c.pid) != pgid]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def run_command(session: RunSession, mcfg: MeasureConfig, cwd: Path, info: MeasureInfo
                 ) -> tuple[ClockAnchor, int]:
    """Run the command to its end, its output into ``command.log`` (and the progress callback,
    line by line); power in the progress every second. Ctrl-C stops it (its process group: SIGINT,
    then SIGTERM and SIGKILL) and raises."""
    assert session.run_dir is not None  # start_result made it
    log_path = session.run_dir / "command.log"
    session.emit(Phase("command", "running: " + " ".join(info.command)))
    started = info.started_ns = now_ns()
    proc: subprocess.Popen[bytes] | None = None
    output: _CommandOutput | None = None
    try:
        # A Ctrl-C or SIGTERM while the command starts waits until `proc` names it, then is raised
        # here, where the stop below reaches it: one that cut in between (Popen returned, its
        # handle not yet kept) left the command and its children running.
        with interrupts_deferred():
            proc = _start_command(mcfg, cwd)
            assert proc.stdout is not None  # stdout=PIPE
            output = _CommandOutput(proc.stdout, log_path, session.emit)
        while True:
            try:
                rc = proc.wait(timeout=PROGRESS_PERIOD_S)
                break
            except subprocess.TimeoutExpired:
                power = session.sampler.latest_power_w() if session.sampler is not None else None
                session.emit(LevelProgress(Measured(0), elapsed_s=(now_ns() - started) / 1e9, power_w=power))
    except BaseException:
        info.ended_ns = now_ns()
        if proc is not None:
            _stop(proc)
        if output is not None:
            output.close(OUTPUT_DRAIN_S)
        raise
    info.ended_ns = now_ns()
    end_anchor = ClockAnchor.take()
    if not output.close(OUTPUT_DRAIN_S):
        info.notes.append("a process the command left running still held its output when it ended; what it "
                          "wrote after that is not in command.log")
    info.exit_code = rc
    return end_anchor, rc


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (zombies, which only wait to be reaped,
    do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return True
    for d in proc_dir.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def _stop(proc: subprocess.Popen[bytes], grace_s: float | None = None) -> None:
    """Stop the command and every process it started: SIGINT (as a Ctrl-C would), SIGTERM after
    ``STOP_GRACE_S``, SIGKILL after as long again — to its process group and to each of its
    processes that left the group for a session of its own (``_escaped``: a ``setsid`` grandchild, a
    daemon), found before the first signal, while the tree still shows them."""
    grace = STOP_GRACE_S if grace_s is None else grace_s
    pgid = proc.pid  # start_new_session: the command leads its own group
    escaped = _escaped(proc)

    def alive() -> bool:
        return _group_alive(pgid) or any(_running(p) for p in escaped)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        proc.poll()  # reap the command itself once it ended
        if not alive():
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        for p in escaped:
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)  # psutil checks the PID still names the process it found
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()
            if not alive():
                break
            time.sleep(0.05)
    for p in escaped:  # adopted orphans are this process's children now: reap them
        with contextlib.suppress(psutil.Error):
            p.wait(timeout=0)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def _running(p: psutil.Process) -> bool:
    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


# ---------------------------------------------------------------------------------- levels
