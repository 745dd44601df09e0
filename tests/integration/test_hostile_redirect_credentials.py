"""A redirect that names credentials (``Location: http://user:password@same-host/…``) costs one
request, never the run: refused as a cross-credential redirect before anything is sent there.

Before, aiohttp raised "Cannot combine AUTHORIZATION header with AUTH argument or credentials
encoded in URL": a traceback in the pre-flight, and a whole run killed (0 records kept) when it
came on a load request. The hostile server (``tests/fakes/hostile_server.py``) sends it on
``/v1/models`` (``redirect_userinfo_models``) or on completion requests 1, 4, 7 …
(``redirect_userinfo_load``), and logs every request it gets: nothing is sent to the redirected URL.
"""

from __future__ import annotations

from collections import Counter

from tests.fakes.reliability_procs import HOSTILE, child_env, run_cli, server

API_KEY = "sk-redirect-SECRET-31ab"


def _run(tmp_path, behaviour: str):
    with server("--behaviour", behaviour, script=HOSTILE) as s:
        out = tmp_path / "run"
        p = run_cli(s.base, out, "--concurrency", "1", "-n", "9", "--no-sensors", "--api-key", API_KEY,
                    env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
        return p, out, s.stats(), s.get("/log")


def test_credentials_in_a_load_redirect_cost_that_request(tmp_path):
    p, out, stats, log = _run(tmp_path, "redirect_userinfo_load")
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    assert p.returncode == 0, (p.returncode, p.stderr[-3000:])
    from wattbench.results.rundir import load_requests

    recs = load_requests(out)
    errors = Counter(r.error for r in recs if not r.ok)
    assert errors == {"http_307": 3}, errors  # requests 1, 4, 7 of 9
    assert sum(r.ok for r in recs) == stats["completed"] == 6
    assert all("credentials" in r.error_detail for r in recs if not r.ok)
    assert not [e for e in log if "/moved" in e["path"]]  # nothing was sent to the redirected URL
    assert "pw-in-redirect" not in (out / "requests.jsonl").read_text()


def test_credentials_in_a_models_redirect_stop_the_preflight_in_one_line(tmp_path):
    p, out, stats, log = _run(tmp_path, "redirect_userinfo_models")
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "credentials" in lines[0] and "pw-in-redirect" not in lines[0], lines
    assert not out.exists()
    assert [e["path"] for e in log].count("/v1/models") == 1  # the refused request, not followed
