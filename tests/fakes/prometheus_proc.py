"""Start a real Prometheus (Debian's ``prometheus`` package: ``/usr/bin/prometheus``, installed by
``.ci/run``) for a test: loopback only, a temporary data directory, the scrape targets and rule
files given, stopped by PID. Not a fake — the helper that runs the real server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

HANG_S = 90.0  # only ends a hang (a Prometheus that never becomes ready); never what a test judges


def prometheus_binary() -> str | None:
    return shutil.which("prometheus") or ("/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None)


def promtool_binary() -> str | None:
    return shutil.which("promtool") or ("/usr/bin/promtool" if os.access("/usr/bin/promtool", os.X_OK) else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prom:
    def __init__(self, url: str, proc: subprocess.Popen, log: Path):
        self.url, self.proc, self.log = url, proc, log

    def api(self, path: str, **params) -> dict:
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{q}", timeout=30) as r:
            d = json.loads(r.read())
        assert d.get("status") == "success", d
        return d["data"]

    def query(self, expr: str, t: float | None = None) -> list[dict]:
        params = {"query": expr}
        if t is not None:
            params["time"] = f"{t:.3f}"
        return self.api("query", **params)["result"]

    def wait_for(self, what: str, cond, timeout_s: float = HANG_S, poll_s: float = 0.2):
        """Poll ``cond()`` until it returns something truthy (a condition, not a sleep)."""
        end = time.monotonic() + timeout_s
        while True:
            got = cond()
            if got:
                return got
            if time.monotonic() > end:
                raise AssertionError(f"Prometheus never got {what} (log: {self.log.read_text()[-2000:]})")
            time.sleep(poll_s)


@contextmanager
def prometheus(tmp: Path, targets: dict[str, str], rule_files: list[Path] = (), interval: str = "500ms"):
    """Yield a ``Prom`` scraping ``targets`` (job -> ``host:port``) every ``interval``."""
    exe = prometheus_binary()
    assert exe, "no prometheus binary"
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = {"global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval},
           "rule_files": [str(p) for p in rule_files],
           "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [hp]}]} for job, hp in targets.items()]}
    (tmp / "prometheus.yml").write_text(json.dumps(cfg))  # JSON is YAML
    port = free_port()
    log = tmp / "prometheus.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([exe, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                                stdout=fh, stderr=subprocess.STDOUT)
    prom = Prom(f"http://127.0.0.1:{port}", proc, log)
    try:
        def ready():
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(prom.url + "/-/ready", timeout=5) as r:
                    return r.status == 200
            except OSError:
                return False
        prom.wait_for("ready", ready)
        yield prom
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
