"""A key planted in every input a user or a server controls, found in no encoding anywhere.

Inputs: credentials in a target URL (``user:password@``) and its query (``?sig=``, ``?code=``),
``--api-key``, the environment (``OPENAI_API_KEY``), ``--header``, ``--extra-body``, the argv and
environment of the command ``measure`` runs; echoed back by the hostile server
(``tests/fakes/hostile_server.py`` ``echo_encoded``) in a 401 body (the first secret at character
290, across the 300-character cut), an SSE error event, the generated text (kept), ``/metrics``
labels (``model_name``) and the model id ``/v1/models`` serves — each time in every encoding of
``hostile_server.encodings`` (raw, URL-encoded, JSON ``\\u``-escaped, HTML entities, base64 at each
byte alignment), written in the fake, not taken from wattbench's scrubber.

Commands, run as real subprocesses: ``run`` (three ways to give the credential), ``report``,
``history list``, ``compare``, ``monitor`` (``--history`` and ``--json``, URL credentials and
``--api-key``), ``measure`` (a child that prints every secret of its argv and environment in every
encoding). Searched: every file left under the test's directory (run directories, ``command.log``,
the history SQLite file and its WAL, the monitor's history), every stdout and stderr.
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from pathlib import Path

import pytest

from tests.fakes.hostile_server import base64_cores, encodings
from tests.fakes.reliability_procs import HOSTILE, child_env, run_cli, server

pytestmark = pytest.mark.slow

URL_USER = "wbuser"
URL_PW = "pw-SECRET/url+7c1e"  # '/' and '+': its URL, JSON and base64 forms all differ from the raw one
SIG = "sig-SECRET-q/9a+"  # a query secret (Azure SAS signature)
CODE = "code-SECRET-fn-31"  # an Azure Functions key
KEY = "sk-SECRET-flag/key+5b"
ENV_KEY = "sk-SECRET-env/key+8d"
HDR = "hdr-SECRET-gw/4e+tok"
BODY = "body-SECRET-api/2f+k"
MON_KEY = "sk-SECRET-monitor/6a"
ARGV = {
    "vllm header": "sk-SECRET-argv-hdr/1",
    "header=": "SECRET-argv-eq/2xyz",
    "x-api-key": "SECRET-argv-xak/3xyz",
    "backend-args": "SECRET-argv-json/4xy",
    "env assign": "sk-SECRET-argv-env/5x",
    "shell string": "SECRET-argv-sh/6xyzw",
    "token": "SECRET-argv-tok/7xyz",
    "url sig": "SECRET-argv-sig/8xyz",
    "inherited env": "SECRET-inherited/9xy",
}
SECRETS = [f"{URL_USER}:{URL_PW}", URL_PW, SIG, CODE, KEY, ENV_KEY, HDR, BODY, MON_KEY, *ARGV.values()]


def _needles() -> dict[str, list[bytes]]:
    out = {}
    for s in SECRETS:
        forms = {k: v for k, v in encodings(s).items() if not k.startswith("b64 in blob")}
        out[s] = sorted({f.encode() for f in [*forms.values(), *base64_cores(s)] if len(f) >= 6})
    return out


NEEDLES = _needles()


def _leaks(blobs: dict[str, bytes]) -> list[str]:
    return [f"{secret!r} in {where}" for where, data in blobs.items() for secret, needles in NEEDLES.items()
            if any(n in data for n in needles)]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def _wb(*args: str, env: dict, cwd: Path, timeout_s: float = 120):
    import subprocess

    return subprocess.run([sys.executable, "-m", "wattbench", *args], capture_output=True, text=True,
                          timeout=timeout_s, env=env, cwd=str(cwd))


CHILD = r'''
import os, sys
from tests.fakes.hostile_server import encodings
secrets = [a for a in sys.argv[1:] if "SECRET" in a]
secrets.append(os.environ.get("INHERITED_API_TOKEN", ""))
secrets.append(os.environ.get("OPENAI_API_KEY", ""))
for s in secrets:
    for form, text in encodings(s).items():
        print(f"child {form}: {text}", flush=True)
'''


def test_no_secret_in_any_encoding_anywhere(tmp_path):
    runs, home = tmp_path / "runs", tmp_path / "home"
    runs.mkdir()
    home.mkdir()
    db = tmp_path / "history.sqlite3"
    blobs: dict[str, bytes] = {}
    procs = {}

    def keep(name, p):
        procs[name] = p
        blobs[f"{name} stdout"] = p.stdout.encode()
        blobs[f"{name} stderr"] = p.stderr.encode()
        return p

    load = ("--concurrency", "1", "-n", "6", "--sensor", "const:node=100", "--keep-output-text", "--db", str(db))
    with server("--behaviour", "echo_encoded", script=HOSTILE) as s:
        host = s.base.removeprefix("http://")
        url_target = (f"http://{URL_USER}:{urllib.parse.quote(URL_PW, safe='')}@{host}/v1"
                      f"?sig={urllib.parse.quote(SIG, safe='')}&api-version=2024-06-01")
        env = child_env(HOME=str(home))
        keep("run url", run_cli(url_target, runs / "url", *load, "--header", f"X-Api-Key: {HDR}",
                                "--extra-body", json.dumps({"api_key": BODY}), "--json", env=env, cwd=tmp_path))
        keep("run flag", run_cli(f"{s.base}/v1?code={CODE}", runs / "flag", *load, "--api-key", KEY, env=env,
                                 cwd=tmp_path))
        keep("run env", run_cli(s.base, runs / "env", *load, env=child_env(HOME=str(home), OPENAI_API_KEY=ENV_KEY),
                                cwd=tmp_path))
        # the monitor: URL credentials and query, then a key whose echo is a /metrics label
        mon = ("--sensor", "const:node=100", "--duration", "1.2", "--interval", "0.2", "--listen", "off")
        keep("monitor url", _wb("monitor", "-t", url_target, *mon, "--history", str(tmp_path / "mon-url.jsonl"),
                                "--json", env=env, cwd=tmp_path))
        keep("monitor key", _wb("monitor", "-t", s.base, "--api-key", MON_KEY, *mon,
                                "--history", str(tmp_path / "mon-key.jsonl"), "--json", env=env, cwd=tmp_path))
        stats = s.stats()
    # measure: a child that prints every secret of its argv and environment in every encoding
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    py = sys.executable
    menv = child_env(HOME=str(home), INHERITED_API_TOKEN=ARGV["inherited env"])
    keep("measure", _wb(
        "measure", "-s", "const:node=100", "--idle", "0", "--db", str(db), "-o", str(runs / "measure"), "--",
        "env", f"OPENAI_API_KEY={ARGV['env assign']}", py, str(child),
        "--header", f"Authorization=Bearer {ARGV['vllm header']}", f"--header=X-Auth={ARGV['header=']}",
        "--header", f"x-api-key={ARGV['x-api-key']}", "--backend-args", json.dumps({"api_key": ARGV["backend-args"]}),
        "--token", ARGV["token"], "--url", f"http://127.0.0.1:9/v1?sig={ARGV['url sig']}",
        env=menv, cwd=tmp_path))
    keep("measure sh", _wb(
        "measure", "-s", "const:node=100", "--idle", "0", "--no-register", "-o", str(runs / "measure-sh"), "--",
        "sh", "-c", f": curl -H 'Authorization: Bearer {ARGV['shell string']}' http://127.0.0.1:9/v1/models; "
                    f"exec {py} {child} 'Authorization: Bearer {ARGV['shell string']}'",
        env=menv, cwd=tmp_path))
    # readers of what was written
    keep("report", _wb("report", str(runs / "url"), env=env, cwd=tmp_path))
    keep("history list", _wb("history", "list", "--db", str(db), env=env, cwd=tmp_path))
    keep("compare", _wb("compare", str(runs / "url"), str(runs / "flag"), env=env, cwd=tmp_path))

    # the commands ran and the secrets were really used and echoed
    for name, p in procs.items():
        assert "Traceback" not in p.stderr, (name, p.stderr[-3000:])
        assert p.returncode == 0, (name, p.returncode, p.stderr[-3000:])
    assert stats["completed"] >= 6 and stats["faults"] >= 6, stats
    from wattbench.results.rundir import load_requests, load_result

    for name in ("url", "flag", "env"):
        recs = load_requests(runs / name)
        kinds = {r.error for r in recs}
        assert kinds == {None, "http_401", "bad_stream"}, (name, kinds)
        detail = next(r.error_detail for r in recs if r.error == "http_401")
        # the secret at character 290 scrubbed before the cut, not its prefix left
        assert detail[:290] == "e" * 290 and "***" in detail[290:] and len(detail) <= 300, detail[280:]
        kept = [r.output_text for r in recs if r.ok]
        assert kept and all("***" in t for t in kept)
    res = load_result(runs / "url")
    assert res.config.target == f"http://***@{host}/v1?sig=***&api-version=2024-06-01"
    assert res.config.extra_body == {"api_key": "<redacted>"}
    summary = json.loads(procs["monitor key"].stdout)
    assert "***" in (summary.get("by_model") or {}).get("models", {}), summary.get("by_model")
    meta = json.loads((tmp_path / "mon-url.jsonl").read_text().splitlines()[0])
    assert meta["target"] == f"http://***@{host}/v1?sig=***&api-version=2024-06-01"
    assert summary["sources"]["server"]["scrapes"] >= 2
    cmd = load_result(runs / "measure").measure.command
    assert cmd[:2] == ["env", "OPENAI_API_KEY=***"] and "--token" in cmd
    log = (runs / "measure" / "command.log").read_text()
    assert log.count("child ") >= 8 * 18 and "***" in log  # the child printed, its secrets scrubbed

    blobs.update(_files(tmp_path))
    leaks = _leaks(blobs)
    assert not leaks, leaks[:40]
