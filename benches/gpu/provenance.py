"""PROVENANCE.json: where a committed data directory came from.

Every data directory under docs/validation-data/ and benches/data/ holds one (tests/unit/
test_provenance.py checks it). A bench run writes it itself (benches/gpu/preamble.sh calls
``write``); a directory made before the preamble existed holds one reconstructed from its logs and
git history, marked ``"reconstructed": true`` with what is not known listed under ``unknown``.

Fields (format ``wattbench-provenance/1``):
  script        the entry script, relative to the repository root (as run: the version at
                ``commit``; ``script_blob`` is its git blob id, so a script edited after the run
                is visible: ``git log --find-object=<blob>`` finds the version that ran)
  args          the script's arguments, a list of strings
  command       "script args…", as typed
  commit        WATTBENCH_COMMIT when set, else ``git rev-parse HEAD`` of the checkout that ran
                (``commit_source`` says which). The device tool's copy of ``.git`` has been seen to
                keep a stale HEAD while the files are current: the launcher passes
                ``WATTBENCH_COMMIT=$(git rev-parse HEAD)`` in the command it sends, and where that
                is not the checkout's HEAD, ``commit_subject`` and ``dirty`` (tracked files that
                differ from HEAD) are ``null``: they would describe the stale commit
  device        ``name``, ``driver``, ``count`` from nvidia-smi (``null`` on a machine without one:
                ``cpu`` then says what ran it)
  env           the settings the script read from the environment: RUN_*, WATTBENCH_* and each
                ${NAME:-default} of the script that was set (credential-named ones left out)
  date          UTC start, ISO 8601
  reconstructed false when written by the run; true when rebuilt after the fact (then ``unknown``
                names what could not be recovered and ``sources`` the evidence used)

Standard library only: the preamble runs it before the carried wheels are on the path.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

FORMAT = "wattbench-provenance/1"
REQUIRED = ("format", "script", "args", "commit", "device", "date", "reconstructed")


def _run(cmd: list[str], cwd: str | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _device() -> dict | None:
    out = _run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    if not out:
        return None
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    names = sorted({r[0] for r in rows})
    return {"name": ", ".join(names), "driver": rows[0][1] if len(rows[0]) > 1 else None, "count": len(rows)}


def _blob(repo: str, script: str) -> str | None:
    path = Path(repo, script)
    if not path.is_file():
        return None
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def build(script: str, args: list[str], repo: str) -> dict:
    """The provenance of a run of ``script args`` started now from the checkout at ``repo``."""
    rel = os.path.relpath(os.path.abspath(script), os.path.abspath(repo))
    dirty = _run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"])
    head = _run(["git", "-C", repo, "rev-parse", "HEAD"])
    commit = os.environ.get("WATTBENCH_COMMIT") or head
    # a stale .git (WATTBENCH_COMMIT names another commit): its subject and its dirty list describe
    # that other commit, not the files that ran, so neither is recorded
    same = bool(commit and head and (head.startswith(commit) or commit.startswith(head)))
    device = _device()
    return {
        "format": FORMAT,
        "script": rel,
        "args": list(args),
        "command": shlex.join([rel, *args]),
        "script_blob": _blob(repo, rel),
        "commit": commit,
        "commit_source": "WATTBENCH_COMMIT" if os.environ.get("WATTBENCH_COMMIT") else "git HEAD of the checkout that ran",
        "commit_subject": _run(["git", "-C", repo, "log", "-1", "--format=%s"]) if same else None,
        "dirty": ([line[3:] for line in dirty.splitlines()] if dirty else []) if same else None,
        "device": device,
        "cpu": None if device else f"{platform.machine()} x{os.cpu_count()} ({platform.node()})",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "env": _knobs(Path(repo, rel)),
        "reconstructed": False,
    }


def _knobs(script: Path) -> dict[str, str]:
    """The settings a scenario script reads besides its arguments: the RUN_* and WATTBENCH_*
    variables, and every variable the script defaults with ``${NAME:-…}``, that are set (never a
    variable whose name says it holds a credential)."""
    try:
        named = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):-", script.read_text(errors="replace")))
    except OSError:
        named = set()
    secret = ("KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH", "CREDENTIAL")
    return {
        k: v
        for k, v in sorted(os.environ.items())
        if (k in named or k.startswith(("RUN_", "WATTBENCH_"))) and not any(w in k.upper() for w in secret)
    }


def problems(doc: object) -> list[str]:
    """What is missing or malformed in one PROVENANCE.json document (empty when it is sound)."""
    if not isinstance(doc, dict):
        return ["not a JSON object"]
    out = [f"no '{k}'" for k in REQUIRED if k not in doc]
    if doc.get("format") != FORMAT:
        out.append(f"format is not {FORMAT}")
    if not isinstance(doc.get("args", []), list):
        out.append("'args' is not a list")
    if doc.get("reconstructed") is True:
        if not doc.get("unknown") and doc.get("unknown") != []:
            out.append("reconstructed without 'unknown' (say what could not be recovered, [] if nothing)")
        if not doc.get("sources"):
            out.append("reconstructed without 'sources' (the logs/commits it was rebuilt from)")
    elif doc.get("reconstructed") is not False:
        out.append("'reconstructed' is not true/false")
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "write":
        print("usage: provenance.py write OUT_FILE SCRIPT [ARG...]", file=sys.stderr)
        return 2
    out, script, args = argv[1], argv[2], argv[3:]
    doc = build(script, args, os.getcwd())
    Path(out).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
