"""Secrets never leave memory: API keys (--api-key, WATTBENCH_API_KEY, OPENAI_API_KEY), the IPMI
password (IPMI_PASSWORD) and Redfish credentials (REDFISH_PASSWORD, creds=FILE) do not appear in
any artifact of real runs that used them — every file of the run directory (result.json,
requests.jsonl, telemetry.jsonl, report.html …), stdout and stderr, the history SQLite file —
including runs where they were refused (a 401 that quotes the key back, as OpenAI does; a BMC
that refuses the password).

The scan looks for each secret as raw bytes and in the encodings it could travel in (HTTP basic
auth base64, JSON-escaped, URL-quoted).
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path

import pytest

from tests.fakes.reliability_procs import child_env, run_cli, server
from tests.fakes.telemetry_bin import FAKE_IPMITOOL, write_script
from tests.fakes.telemetry_http import JsonServer, self_signed_cert

API_KEY = "sk-wattbench-SECRET-api-7f3a9c1e"
IPMI_PW = "ipmi-SECRET-pw-51d0"
REDFISH_PW = "redfish-SECRET-pw-9b2e"
REDFISH_USER = "rfadmin"


def _needles(secret: str, user: str | None = None) -> list[bytes]:
    out = [secret.encode(), json.dumps(secret)[1:-1].encode(), urllib.parse.quote(secret).encode()]
    if user:
        out.append(base64.b64encode(f"{user}:{secret}".encode()))
    return out


NEEDLES = {"api key": _needles(API_KEY), "ipmi password": _needles(IPMI_PW),
           "redfish password": _needles(REDFISH_PW, REDFISH_USER)}


def _scan(blobs: dict[str, bytes]) -> list[str]:
    leaks = []
    for where, data in blobs.items():
        for what, needles in NEEDLES.items():
            if any(n in data for n in needles):
                leaks.append(f"{what} in {where}")
    return leaks


def _artifacts(*dirs: Path) -> dict[str, bytes]:
    out = {}
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.is_file():
                out[str(p)] = p.read_bytes()
    return out


def _redfish_routes():
    return {
        "/redfish/v1/Chassis": {"Members": [{"@odata.id": "/redfish/v1/Chassis/1"}]},
        "/redfish/v1/Chassis/1": {"Id": "1", "Power": {"@odata.id": "/redfish/v1/Chassis/1/Power"}},
        "/redfish/v1/Chassis/1/Power": {"PowerControl": [{"PowerConsumedWatts": 640}]},
    }


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("cert"))


def _env(tmp: Path, bin_dir: Path, **extra: str) -> dict:
    env = child_env(HOME=str(tmp), PATH=f"{bin_dir}:{child_env()['PATH']}", FAKE_IPMI_EXPECT_PW=IPMI_PW,
                    FAKE_IPMI_WATTS="512")
    env.update(extra)
    return env


def test_no_secret_in_any_artifact(tmp_path, cert):
    bin_dir = tmp_path / "bin"
    write_script(bin_dir, "ipmitool", FAKE_IPMITOOL)
    creds = tmp_path / "redfish.creds"
    creds.write_text(f"{REDFISH_USER}:{REDFISH_PW}\n")
    db = tmp_path / "history.sqlite"
    runs = tmp_path / "runs"
    runs.mkdir()
    outputs: dict[str, bytes] = {}
    common = ("--concurrency", "2", "-n", "8", "--sample-interval", "0.2", "--db", str(db))
    with JsonServer(_redfish_routes(), auth=(REDFISH_USER, REDFISH_PW), tls=cert) as bmc, \
            server("--ttft-ms", "5", "--itl-ms", "2", "--expect-key", API_KEY, "--echo-key") as s:
        redfish_env = f"redfish:{bmc.url},ca={cert[0]}"
        redfish_file = f"redfish:{bmc.url},ca={cert[0]},creds={creds}"
        ipmi = "ipmi:lan=127.0.0.1,user=admin"
        cases = {
            # accepted key on the command line, every credentialed meter, history + report
            "flag": (("--api-key", API_KEY, "--sensor", redfish_env, "--sensor", ipmi, "--json"),
                     {"REDFISH_USER": REDFISH_USER, "REDFISH_PASSWORD": REDFISH_PW, "IPMI_PASSWORD": IPMI_PW}),
            # key from each environment variable; creds from a file
            "env_wattbench": (("--sensor", redfish_file),
                              {"WATTBENCH_API_KEY": API_KEY}),
            "env_openai": (("--sensor", ipmi), {"OPENAI_API_KEY": API_KEY, "IPMI_PASSWORD": IPMI_PW}),
        }
        results = {}
        for name, (args, extra) in cases.items():
            out = runs / name
            p = run_cli(s.base, out, *common, *args, env=_env(tmp_path, bin_dir, **extra), cwd=tmp_path)
            outputs[f"{name} stdout"] = p.stdout.encode()
            outputs[f"{name} stderr"] = p.stderr.encode()
            results[name] = p
        stats = s.stats()
    # the runs really used the secrets: the server accepted the key, both meters answered
    for name, p in results.items():
        assert p.returncode == 0, (name, p.stderr[-2000:])
    assert stats["streams_completed"] == 3 * 8
    from wattbench.results.rundir import load_result

    flag = load_result(runs / "flag")
    assert {c.sensor for c in flag.sensors} >= {"redfish", "ipmi"}, flag.sensors
    assert (runs / "flag" / "report.html").exists()
    assert db.exists()
    assert any(bmc_hit.startswith("/redfish/v1/Chassis/1/Power") for bmc_hit in bmc.hits)

    leaks = _scan({**outputs, **_artifacts(runs), str(db): db.read_bytes()})
    assert not leaks, leaks


def test_no_secret_when_refused(tmp_path, cert):
    """The server answers 401 quoting the key it got; the BMC refuses the password; IPMI refuses
    its password. The key and passwords appear nowhere, the errors are still classified."""
    bin_dir = tmp_path / "bin"
    write_script(bin_dir, "ipmitool", FAKE_IPMITOOL)
    runs = tmp_path / "runs"
    runs.mkdir()
    with JsonServer(_redfish_routes(), auth=(REDFISH_USER, "the-right-one"), tls=cert) as bmc, \
            server("--ttft-ms", "5", "--itl-ms", "2", "--expect-key", "another-key", "--echo-key") as s:
        env = _env(tmp_path, bin_dir, WATTBENCH_API_KEY=API_KEY, REDFISH_USER=REDFISH_USER,
                   REDFISH_PASSWORD=REDFISH_PW, IPMI_PASSWORD=IPMI_PW, FAKE_IPMI_EXPECT_PW="not-this")
        out = runs / "refused"
        p = run_cli(s.base, out, "--concurrency", "2", "-n", "6", "--no-sensors", env=env, cwd=tmp_path)
        # meters named with --sensor that refuse their credentials: one line, exit 2, before any load
        meters = run_cli(s.base, runs / "meters", "--concurrency", "2", "-n", "6", "--sensor",
                         f"redfish:{bmc.url},ca={cert[0]}", "--sensor", "ipmi:lan=127.0.0.1,user=admin",
                         env=env, cwd=tmp_path)
        bad_flag = runs / "bad"
        p2 = run_cli(s.base, bad_flag, "--api-key", API_KEY, "--sensor", "ipmi:lan=127.0.0.1,user=admin,bogus=1",
                     env=env, cwd=tmp_path)
    from wattbench.results.rundir import load_requests, load_result

    res = load_result(out)
    recs = load_requests(out)
    assert p.returncode == 3, p.stderr[-2000:]  # every request refused: no measured request completed
    assert res.levels[0].requests.errors == {"http_401": 6}
    assert all(r.error == "http_401" and r.error_detail for r in recs)
    assert "Incorrect API key provided" in recs[0].error_detail  # the message is kept, the key is not
    assert meters.returncode == 2 and len(meters.stderr.strip().splitlines()) == 1, meters.stderr
    assert "--sensor redfish, --sensor ipmi cannot be read" in meters.stderr  # both meters refused, said why
    assert not (runs / "meters").exists()
    assert p2.returncode == 2 and p2.stderr.startswith("wattbench: error:")
    blobs = {"stdout": p.stdout.encode(), "stderr": p.stderr.encode(), "bad stdout": p2.stdout.encode(),
             "meters stdout": meters.stdout.encode(), "meters stderr": meters.stderr.encode(),
             "bad stderr": p2.stderr.encode(), **_artifacts(runs)}
    assert not _scan(blobs), _scan(blobs)


# ---------------------------------------------------------------- URLs and headers

URL_USER = "wbuser"
URL_PW = "url-SECRET-pw-c4f1"
HEADER_SECRET = "hdr-SECRET-token-88a2"


def test_no_url_credential_in_any_artifact(tmp_path):
    """``--target http://user:password@host:port``: the credentials are sent (the server requires
    them as HTTP basic auth) and appear in no file, report, history row, stdout or stderr; the URL
    is shown as ``http://***@host:port``. With an API key as well: one clear line, exit 2."""
    NEEDLES["url password"] = _needles(URL_PW, URL_USER)
    NEEDLES["header token"] = _needles(HEADER_SECRET)
    db = tmp_path / "history.sqlite3"
    runs = tmp_path / "runs"
    runs.mkdir()
    try:
        with server("--ttft-ms", "5", "--itl-ms", "2", "--expect-basic", f"{URL_USER}:{URL_PW}", "--echo-key") as s:
            url = s.base.replace("http://", f"http://{URL_USER}:{URL_PW}@")
            ok = run_cli(url, runs / "ok", "--concurrency", "2", "-n", "6", "--sensor", "const:node=100",
                         "--header", f"X-Gateway-Token: {HEADER_SECRET}", "--db", str(db), "--json",
                         env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
            both = run_cli(url, runs / "both", "--api-key", API_KEY, "-n", "2", "--db", str(db),
                           env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
            wrong = run_cli(s.base.replace("http://", f"http://{URL_USER}:wrong-{URL_PW}@"), runs / "wrong",
                            "-n", "2", "--sensor", "const:node=100", "--no-register",
                            env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
            stats = s.stats()
        assert ok.returncode == 0, ok.stderr[-2000:]
        assert stats["streams_completed"] == 6  # the server required the credentials and got them
        from wattbench.results.rundir import load_requests, load_result
        from wattbench.results.store import HistoryStore

        res = load_result(runs / "ok")
        host = s.base.removeprefix("http://")
        assert res.config.target == f"http://***@{host}"
        assert res.config.headers == {"X-Gateway-Token": "<redacted>"}  # the name kept, the value not
        assert res.server.base_url == f"{s.base}/v1"
        with HistoryStore(db) as h:
            assert [r.run_id for r in h.list_runs()] == [res.run_id]
        # an API key as well: one line, exit 2, no traceback, nothing written
        assert both.returncode == 2, both.stderr
        lines = [ln for ln in both.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "carries credentials" in lines[0] and "Traceback" not in both.stderr
        assert f"http://***@{host}" in lines[0]
        assert not (runs / "both").exists()
        # refused credentials quoted back by the server: the error is kept, the password is not
        assert wrong.returncode == 3, wrong.stderr  # nothing completed
        recs = load_requests(runs / "wrong")
        assert recs and all(r.error == "http_401" and "Incorrect API key provided" in r.error_detail for r in recs)
        blobs = {"ok stdout": ok.stdout.encode(), "ok stderr": ok.stderr.encode(), "both stderr": both.stderr.encode(),
                 "wrong stdout": wrong.stdout.encode(), "wrong stderr": wrong.stderr.encode(),
                 **_artifacts(runs), str(db): db.read_bytes()}
        for wal in tmp_path.glob("history.sqlite3*"):
            blobs[str(wal)] = wal.read_bytes()
        assert (runs / "ok" / "report.html").exists()
        leaks = _scan(blobs)
        assert not leaks, leaks
    finally:
        NEEDLES.pop("url password", None)
        NEEDLES.pop("header token", None)


def test_redaction_helpers_cover_urls_headers_and_texts():
    from wattbench.core.redact import (BasicCredential, authorization, combine_credentials, redact_headers, redact_url,
                                       split_url_credentials)
    from wattbench.core.scrubber import redact_text

    clean, cred = split_url_credentials("http://u%40x:p%2Fw@127.0.0.1:8000/v1?api_key=k1")
    assert clean == "http://127.0.0.1:8000/v1?api_key=k1" and cred == "u@x:p/w" and "p/w" not in repr(cred)
    assert authorization(cred) == "Basic " + base64.b64encode(b"u@x:p/w").decode()
    assert authorization("sk-1") == "Bearer sk-1" and authorization(None) is None
    # every query value is secret unless known harmless (api-version)
    assert redact_url("http://u:p@h:1/v1?api_key=k1&x=2&api-version=3") == "http://***@h:1/v1?api_key=***&x=***&api-version=3"
    assert redact_url("http://h:1/v1") == "http://h:1/v1"
    assert redact_headers({"Authorization": "Bearer sk-1", "X-Api-Key": "k2", "X-Trace": "7", "Cookie": "a=b",
                           "X-Upstream": "Basic dTpw"}) == {
        "Authorization": "<redacted>", "X-Api-Key": "<redacted>", "X-Trace": "7", "Cookie": "<redacted>",
        "X-Upstream": "<redacted>"}  # by name, and by value (a Basic/Bearer credential under any name)
    token = BasicCredential("user:pa ss")
    text = f"got {token.token} / pa%20ss / user:pa ss"
    assert redact_text(text, [token]) == "got *** / *** / ***"
    with pytest.raises(Exception, match="carries credentials"):
        combine_credentials("http://u:p@h:1", "sk-1")
    assert combine_credentials("http://h:1", "sk-1") == ("http://h:1", "sk-1")
