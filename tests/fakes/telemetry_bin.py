"""Fake command-line tools (``ipmitool``, ``nvidia-smi``, a wall-meter program) written as
Python scripts into a directory that tests put first on PATH."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

FAKE_IPMITOOL = r'''
import os, sys, json
log = os.environ.get("FAKE_IPMI_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"argv": sys.argv[1:], "has_env_pw": bool(os.environ.get("IPMI_PASSWORD"))}) + "\n")
mode = os.environ.get("FAKE_IPMI_MODE", "ok")
if mode == "nodev":
    sys.stderr.write("Could not open device at /dev/ipmi0 or /dev/ipmi/0 or /dev/ipmidev/0: No such file or directory\n")
    sys.exit(1)
pw = open(sys.argv[sys.argv.index("-f") + 1]).read().strip() if "-f" in sys.argv else (os.environ.get("IPMI_PASSWORD") or "")
if mode == "auth" or ("-H" in sys.argv and pw != os.environ.get("FAKE_IPMI_EXPECT_PW", "")):
    sys.stderr.write("Error: Unable to establish IPMI v2 / RMCP+ session\n")
    sys.exit(1)
if mode == "nodcmi":
    sys.stderr.write("DCMI request failed because: Invalid command (c1)\n")
    sys.exit(1)
counter = os.environ.get("FAKE_IPMI_COUNTER")
w = float(os.environ.get("FAKE_IPMI_WATTS", "512"))
if counter:
    n = int(open(counter).read() or 0) if os.path.exists(counter) else 0
    open(counter, "w").write(str(n + 1))
    w += n
print("")
print(f"    Instantaneous power reading:                   {w:g} Watts")
print("    Minimum during sampling period:                 88 Watts")
print("    Maximum during sampling period:                 900 Watts")
print("    Average power reading over sample period:       501 Watts")
print("    IPMI timestamp:                           Sun Nov 29 15:00:00 2026")
print("    Sampling period:                          00000001 Seconds.")
print("    Power reading state is:                   activated")
'''

FAKE_NVIDIA_SMI = r'''
import os, sys, time, datetime
args = sys.argv[1:]
q = next(a for a in args if a.startswith("--query-gpu="))[len("--query-gpu="):].split(",")
bad = [f for f in q if f in os.environ.get("FAKE_SMI_UNKNOWN", "").split(",") if f]
if bad:
    print(f'Field "{bad[0]}" is not a valid field to query.')
    sys.exit(2)
ids = [0, 1]
for a in args:
    if a.startswith("--id="):
        ids = [int(x) for x in a[5:].split(",")]
loop_ms = int(args[args.index("-lms") + 1]) if "-lms" in args else None
values = {"power.draw": "250.50", "power.draw.instant": "301.25", "power.draw.average": "[N/A]",
          "temperature.gpu": "45", "clocks.sm": "1980", "clocks.mem": "3201", "utilization.gpu": "90",
          "utilization.memory": "40", "memory.used": "1024", "clocks_event_reasons.active": "0x0000000000000004",
          "power.limit": "700.00", "pstate": "P0"}
n = 0
while True:
    ts = datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    for i in ids:
        row = [str(i), ts]
        for f in q[2:]:
            v = values.get(f, "[N/A]")
            if f == "power.draw.instant":
                v = f"{301.25 + n + 100 * i:.2f}"
            row.append(v)
        print(", ".join(row), flush=True)
    n += 1
    if loop_ms is None:
        break
    time.sleep(loop_ms / 1000)
'''


def write_script(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    p = directory / name
    p.write_text(f"#!{sys.executable}\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return p


def install(monkeypatch, directory: Path, **scripts: str) -> Path:
    """Write scripts (name -> body) into ``directory`` and put it first on PATH."""
    for name, body in scripts.items():
        write_script(directory, name.replace("_", "-") if name == "nvidia_smi" else name, body)
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")
    return directory
