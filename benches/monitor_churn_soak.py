"""Soak: ``wattbench monitor`` (the real command, its exporter and history) against a ``/metrics``
whose ``model_name`` label churns — ``--churn`` model names never seen before on every scrape
(``tests/fakes/churn_metrics.py``) — for ``--minutes`` of real time. Does its memory stay flat?

Every ``--every`` seconds it records the monitor's RSS (psutil), the exporter page's size (one
scrape of ``/metrics``), the history file's size and its longest line, and the number of model names
the server has served so far. The verdict compares the RSS after the first minute with the last.

    PYTHONPATH=src python benches/monitor_churn_soak.py --minutes 10 --churn 2000 \\
        --json benches/data/monitor_churn/soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.fakes.churn_metrics import ChurnServer  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--churn", type=int, default=2000, help="new model names per scrape")
    p.add_argument("--label-bytes", type=int, default=1 << 20, help="one model name this long (0: none)")
    p.add_argument("--interval", type=float, default=1.0, help="the monitor's --interval")
    p.add_argument("--every", type=float, default=10.0, help="seconds between records")
    p.add_argument("--json", help="write the records and verdict here")
    a = p.parse_args(argv)

    srv = ChurnServer(a.churn, label_bytes=a.label_bytes).start()
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="wattbench-churn-soak-")
    hist = os.path.join(tmp, "history.jsonl")
    cmd = [sys.executable, "-m", "wattbench", "monitor", "-t", srv.url, "-s", "const:node=500",
           "--interval", str(a.interval), "--duration", str(a.minutes * 60 + 5), "--history", hist,
           "--listen", f"127.0.0.1:{port}", "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mon = psutil.Process(proc.pid)
    records = []
    t0 = time.monotonic()
    try:
        while proc.poll() is None and time.monotonic() - t0 < a.minutes * 60:
            time.sleep(a.every)
            page = None
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                    page = len(r.read())
            except OSError:
                pass
            longest = 0
            if os.path.exists(hist):
                with open(hist, "rb") as f:
                    longest = max((len(ln) for ln in f), default=0)
            rec = {"t_s": round(time.monotonic() - t0, 1), "rss_mb": round(mon.memory_info().rss / 2**20, 1),
                   "exporter_page_bytes": page, "history_bytes": os.path.getsize(hist) if os.path.exists(hist) else 0,
                   "history_longest_line_bytes": longest, "scrapes": srv.scrapes,
                   "model_names_served": srv.scrapes * (a.churn + 1 + (1 if a.label_bytes else 0)),
                   "load_avg_1m": round(os.getloadavg()[0], 2)}
            records.append(rec)
            print(json.dumps(rec), flush=True)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        srv.stop()
    summary = json.loads(out) if proc.returncode == 0 and out.strip() else None
    after_1m = [r["rss_mb"] for r in records if r["t_s"] >= 60]
    result = {
        "meta": {"script": "benches/monitor_churn_soak.py", "args": sys.argv[1:], "command": cmd[2:6] + ["…"],
                 "python": platform.python_version(), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs"},
        "records": records,
        "rc": proc.returncode,
        "stderr_tail": err[-2000:],
        "models_in_summary": len((summary or {}).get("by_model", {}).get("models", {})),
        "models_kept": (summary or {}).get("by_model", {}).get("models_kept"),
        "rss_after_1m_first_mb": after_1m[0] if after_1m else None,
        "rss_last_mb": records[-1]["rss_mb"] if records else None,
        "rss_growth_after_1m_mb": round(max(after_1m) - after_1m[0], 1) if after_1m else None,
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k not in ("records", "stderr_tail")}))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
