"""No piece of a secret anywhere: a server that echoes part of a key, a key cut through by a
200-character cut, a target's query string sent to the target only.

The hostile server (``tests/fakes/hostile_server.py``, ``echo_pieces_llamacpp`` and
``echo_pieces_vllm``) echoes the key it receives: its first 27 characters in the 401s ("Incorrect
API key provided: sk-…", as providers do), 8-to-20-character pieces upper- and lower-cased, as hex
and partly ``\\u``/``%XX``/``&#x…;``-escaped in SSE errors and generated text (kept), and the whole
key after 171 filler characters as the served model id and as llama.cpp's ``/props``
``model_alias`` or a ``vllm:cache_config_info`` label (cut to 200 characters, the key straddles the
cut). The target URL carries ``?sig=…&api-version=…``; a DCGM sensor on another origin (the same
fake, ``dcgm``) logs what it receives. Every command runs as a subprocess under ``RLIMIT_AS``.

Searched, for every 8-character piece of the key and of the signature: every file under the
test's directory (result.json, requests.jsonl, report.html, telemetry, the history DB and its WAL,
the HTML report written by ``report``), every stdout and stderr — raw, upper/lower case, URL-, HTML-,
``\\u``- and ``\\x``-decoded, as hex, as base64 (each alignment).
"""

from __future__ import annotations

import base64
import html
import json
import re
import resource
import shutil
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest

from tests.fakes.hostile_server import FILLER
from tests.fakes.reliability_procs import BASE_ARGS, HOSTILE, child_env, server

pytestmark = pytest.mark.slow

KEY = "sk-AUDITkeyQ7w3Zp9Lm2Xc8VbN4tR6yU1"
SIG = "SIG-q/9a+Zt81secret"
QUERY = f"sig={urllib.parse.quote(SIG, safe='')}&api-version=2024-06-01"
SECRETS = [KEY, SIG]
MEMORY_LIMIT = 3 << 30  # RLIMIT_AS: a blow-up fails the test, not the machine


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _wb(*args: str, cwd: Path, timeout_s: float = 180) -> subprocess.CompletedProcess:
    env = child_env(HOME=str(cwd), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "wattbench", *args], capture_output=True, text=True, env=env,
                          cwd=str(cwd), timeout=timeout_s, preexec_fn=_limited)


def _views(data: bytes) -> list[str]:
    """``data`` read back every way a reader could, lower-cased: raw, URL-, HTML-, ``\\u``- and
    ``\\x``-decoded (written here, not taken from wattbench's scrubber)."""
    t = data.decode("utf-8", "replace")
    views = [t, urllib.parse.unquote(t), html.unescape(t),
             re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), t),
             re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), t),
             re.sub(r"\\\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), t)]
    return [v.lower() for v in views]


def _b64_cores(p: str) -> list[str]:
    b, out = p.encode(), []
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        for o in range(3):
            text = enc(b"\0" * o + b).decode()
            out.append(text[4 * (1 if o else 0):4 * ((o + len(b)) // 3)])
    return [c for c in out if len(c) >= 8]


def _leaks(blobs: dict[str, bytes]) -> list[str]:
    pieces = {s[i:i + 8] for s in SECRETS for i in range(len(s) - 7)}
    out = []
    for where, data in blobs.items():
        views = _views(data)
        low = data.decode("utf-8", "replace").lower()
        raw = data.decode("utf-8", "replace")
        for p in sorted(pieces):
            if any(p.lower() in v for v in views) or p.encode().hex() in low or any(c in raw for c in _b64_cores(p)):
                out.append(f"{p!r} in {where}")
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("engine", ["llamacpp", "vllm"])
def test_no_piece_of_a_key_in_any_file_or_output_and_the_query_goes_to_the_target_only(tmp_path, engine):
    db = tmp_path / "history.sqlite3"
    run_dir = tmp_path / "run"
    blobs: dict[str, bytes] = {}

    def keep(name: str, p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
        blobs[f"{name} stdout"] = p.stdout.encode()
        blobs[f"{name} stderr"] = p.stderr.encode()
        assert p.returncode == 0 and "Traceback" not in p.stderr, (name, p.returncode, p.stderr[-3000:])
        return p

    with server("--behaviour", f"echo_pieces_{engine}", script=HOSTILE) as s, \
            server("--behaviour", "dcgm", script=HOSTILE) as meter:
        keep("run", _wb("run", "--target", f"{s.base}/v1?{QUERY}", "--api-key", KEY, "--out", str(run_dir),
                        *BASE_ARGS, "--concurrency", "1", "-n", "6", "--keep-output-text", "--db", str(db),
                        "--sensor", f"dcgm:{meter.base}/metrics", cwd=tmp_path))
        log, meter_log, stats = s.get("/log"), meter.get("/log"), s.stats()
    keep("report notes", _wb("report", str(run_dir), "--notes", cwd=tmp_path))
    keep("report html", _wb("report", str(run_dir), "--html", str(tmp_path / "again.html"), cwd=tmp_path))
    keep("history list", _wb("history", "list", "--db", str(db), cwd=tmp_path))

    # the server echoed: 401s quoting the key's start, SSE errors and texts quoting its pieces
    assert stats["faults"] >= 4 and stats["completed"] >= 2, stats
    # the query string went with every request to the target (probes, models, completions, scrapes) …
    paths = {e["path"] for e in log}
    assert {"/v1/models", "/v1/completions"} <= paths and len(log) >= 10, paths
    assert all(e["query"] == QUERY for e in log), [(e["path"], e["query"]) for e in log if e["query"] != QUERY]
    # … and to nothing else: the meter on another origin was read, never with it
    assert meter_log and all(e["query"] == "" for e in meter_log), meter_log[:3]

    from wattbench.results.rundir import load_requests, load_result

    res = load_result(run_dir)
    exposed = res.server.identity.exposed if res.server and res.server.identity else {}
    if engine == "llamacpp":
        assert exposed["/props"]["model_alias"] == FILLER + "***", exposed
    else:
        assert exposed["/metrics vllm:cache_config_info"]["swap_space_label"] == FILLER + "***", exposed
    assert res.server.models == [FILLER + "***"], res.server.models
    recs = load_requests(run_dir)
    details = [r.error_detail for r in recs if r.error == "http_401"]
    assert details and all("Incorrect API key provided: ***" in d for d in details), details[:2]
    assert res.config.target.endswith("/v1?sig=***&api-version=2024-06-01"), res.config.target

    blobs.update(_files(tmp_path))
    assert any(name.endswith("report.html") for name in blobs) and any(".sqlite3" in n for n in blobs)
    leaks = _leaks(blobs)
    assert not leaks, leaks[:40]
    # finding summaries are text, never a template
    assert not [n for n, b in blobs.items() if b"{effect" in b]


def test_report_notes_bounds_a_crafted_megabyte_finding(tmp_path):
    """A crafted result.json whose finding holds 1 MiB of text (the key inside): ``report --notes``
    prints each line bounded (2,000 characters), no piece of the key, under a memory limit."""
    src = Path(__file__).resolve().parents[1] / "fixtures" / "results_v1" / "sweep"
    run = tmp_path / "crafted"
    shutil.copytree(src, run)
    doc = json.loads((run / "result.json").read_text())
    big = "x" * (1 << 20) + " " + KEY + " " + "y" * 1000
    doc["levels"][0]["validity"] = {"verdict": "warn", "findings": [
        {"kind": "prompt_lengths", "severity": "warn", "figures": ["prompt_lengths"], "effect_pct": 56.0,
         "text": big, "basis": big, "summary": "prompt lengths {effect:+} " + big}]}
    doc.setdefault("warnings", []).append(big)
    (run / "result.json").write_text(json.dumps(doc))
    p = _wb("report", str(run), "--notes", cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    lines = p.stdout.splitlines()
    assert any("prompt lengths +56% xxx" in ln for ln in lines), lines[:5]
    assert max(len(ln) for ln in lines) <= 2000 and len(p.stdout) < 64 << 10, (len(p.stdout), len(lines))
    # the key sits past the cut: nothing of it is shown (and it is no registered secret of this process)
    assert KEY[:8] not in p.stdout
