"""Processes for the reliability tests: the scripted stream server with its process handle, and
``wattbench run`` as a real subprocess. Everything is stopped by PID; only 127.0.0.1 is used."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("stream_server.py")
HOSTILE = Path(__file__).with_name("hostile_server.py")


def child_env(**extra: str) -> dict:
    """The environment for a wattbench child: src on the path, no inherited API keys."""
    env = {k: v for k, v in os.environ.items() if k not in ("WATTBENCH_API_KEY", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env["PYTHONWARNINGS"] = "ignore"
    env.update(extra)
    return env


def stop_pid(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout_s: float = 10.0) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


@dataclass
class Server:
    proc: subprocess.Popen
    base: str
    final: dict | None = field(default=None)

    def stats(self, reset: bool = False) -> dict:
        """The server's /stats (or, once it died with --die-after-requests, the stats it printed)."""
        if self.proc.poll() is not None:
            return self.final_stats()
        with urllib.request.urlopen(self.base + ("/stats/reset" if reset else "/stats"), timeout=10) as r:
            return json.loads(r.read())

    def get(self, path: str):
        """A JSON answer of the server (``/log`` of the hostile server)."""
        with urllib.request.urlopen(self.base + path, timeout=10) as r:
            return json.loads(r.read())

    def final_stats(self) -> dict:
        if self.final is None:
            self.proc.wait(timeout=30)
            rest = self.proc.stdout.read()
            for line in rest.splitlines():
                if line.startswith("STATS "):
                    self.final = json.loads(line[6:])
            if self.final is None:
                raise AssertionError(f"server exited without printing STATS: {rest!r}")
        return self.final


class server:
    """``with server("--fail-rate", "0.3") as s:`` — the scripted server on a free port
    (``script=HOSTILE``: the hostile server, ``tests/fakes/hostile_server.py``)."""

    def __init__(self, *args: str, script: Path = SERVER):
        self.args = args
        self.script = script

    def __enter__(self) -> Server:
        proc = subprocess.Popen([sys.executable, str(self.script), "--port", "0", *self.args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        if not line.startswith("LISTENING"):
            stop_pid(proc)
            raise RuntimeError(f"stream server did not start: {line!r} {proc.stderr.read()[:2000]}")
        self.s = Server(proc, f"http://127.0.0.1:{int(line.split()[1])}")
        return self.s

    def __exit__(self, *exc) -> None:
        stop_pid(self.s.proc)
        self.s.proc.stdout.close()
        self.s.proc.stderr.close()


# no priming load, no history-check repeat and no prompt-calibration probes: what the scripted server
# served is exactly the levels' requests, the invariant the reliability tests check (the history study's own
# tests and the calibration's cover those phases; the 24 probes broke every count here)
BASE_ARGS = ("--idle", "0", "--input-tokens", "16", "--output-tokens", "16", "--quiet", "--no-prime",
             "--no-history-check", "--no-calibrate-prompts")


def run_argv(target: str, out: Path, *extra: str) -> list[str]:
    """``wattbench run`` on the target into ``out``; ``--no-register`` unless ``--db`` is given."""
    reg = () if "--db" in extra else ("--no-register",)
    return [sys.executable, "-m", "wattbench", "run", "--target", target, "--out", str(out), *BASE_ARGS, *reg, *extra]


def run_cli(target: str, out: Path, *extra: str, env: dict | None = None, timeout_s: float = 120,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(run_argv(target, out, *extra), capture_output=True, text=True, timeout=timeout_s,
                          env=env or child_env(HOME=str(out.parent)), cwd=str(cwd or out.parent))


MEMORY_LIMIT = 3 << 30  # RLIMIT_AS of a wattbench under hostile input: a blow-up fails the test, not the machine


def run_limited(argv: list[str], *, env: dict, cwd: Path, mem_bytes: int = MEMORY_LIMIT,
                timeout_s: float = 120) -> tuple[subprocess.CompletedProcess, int]:
    """Run ``argv`` under ``RLIMIT_AS = mem_bytes``: ``(the finished process, its peak RSS in bytes)``
    (its own ``ru_maxrss``, read by ``wait4``: not the test's, not the servers'). Killed, and an
    ``AssertionError``, past ``timeout_s``."""
    import resource
    import tempfile

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))

    env = dict(env, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")  # no per-thread arenas under the limit
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=str(cwd), preexec_fn=limit)
        deadline = time.monotonic() + timeout_s
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                p.returncode = -9
                raise AssertionError(f"{' '.join(argv[2:5])} … did not end within {timeout_s:g} s")
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(argv, p.returncode, out.read().decode(errors="replace"),
                                           err.read().decode(errors="replace"))
    return done, usage.ru_maxrss * 1024


def start_cli(target: str, out: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(run_argv(target, out, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env or child_env(HOME=str(out.parent)), cwd=str(out.parent))


def wait_for(cond, timeout_s: float = 30.0, step_s: float = 0.02):
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        v = cond()
        if v:
            return v
        time.sleep(step_s)
    raise AssertionError("condition not reached in time")


def error_counts(records) -> Counter:
    return Counter(r.error for r in records if not r.ok)
