"""Start ``tests/fakes/stream_server.py`` (or another fake server script that prints
``LISTENING <port>``) as a real process and stop it by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path

SERVER = Path(__file__).with_name("stream_server.py")


def start_script(script: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """Start a fake server script on a free port; ``(process, base_url)`` once it prints ``LISTENING``."""
    proc = subprocess.Popen([sys.executable, str(script), "--port", "0", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("LISTENING"):
        proc.kill()
        proc.wait()
        err = proc.stderr.read()[:2000]
        proc.stdout.close()
        proc.stderr.close()
        raise RuntimeError(f"{script.name} did not start: {line!r} {err}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM by PID, SIGKILL after 10 s, then close its pipes."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    proc.stdout.close()
    proc.stderr.close()


@contextmanager
def stream_server(*args: str):
    """Yield ``(base_url, stats)``; ``stats(reset=False)`` reads the server's /stats."""
    proc, base = start_script(SERVER, *args)
    try:

        def stats(reset: bool = False) -> dict:
            with urllib.request.urlopen(base + ("/stats/reset" if reset else "/stats"), timeout=10) as r:
                return json.loads(r.read())

        def per_request() -> dict:
            with urllib.request.urlopen(base + "/stats/requests", timeout=10) as r:
                return json.loads(r.read())

        def writes() -> dict:
            with urllib.request.urlopen(base + "/stats/writes", timeout=30) as r:
                return json.loads(r.read())

        def emissions() -> tuple[int, list[int]]:
            """(tokens per chunk, perf_counter_ns of every content chunk written)."""
            with urllib.request.urlopen(base + "/stats/emissions", timeout=30) as r:
                d = json.loads(r.read())
            return d["tokens_per_chunk"], d["emit_ns"]

        def last() -> dict:
            with urllib.request.urlopen(base + "/stats/last", timeout=10) as r:
                return json.loads(r.read())

        stats.per_request = per_request
        stats.last = last
        stats.emissions = emissions
        stats.writes = writes
        yield base, stats
    finally:
        stop_process(proc)
