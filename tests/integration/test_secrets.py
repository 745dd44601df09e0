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
    assert {c["sensor"] for c in flag.sensors} >= {"redfish", "ipmi"}, flag.sensors
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
        p = run_cli(s.base, out, "--concurrency", "2", "-n", "6", "--sensor",
                    f"redfish:{bmc.url},ca={cert[0]}", "--sensor", "ipmi:lan=127.0.0.1,user=admin",
                    env=env, cwd=tmp_path)
        bad_flag = runs / "bad"
        p2 = run_cli(s.base, bad_flag, "--api-key", API_KEY, "--sensor", "ipmi:lan=127.0.0.1,user=admin,bogus=1",
                     env=env, cwd=tmp_path)
    from wattbench.results.rundir import load_requests, load_result

    res = load_result(out)
    recs = load_requests(out)
    assert p.returncode == 0, p.stderr[-2000:]
    assert res.levels[0].requests.errors == {"http_401": 6}
    assert all(r.error == "http_401" and r.error_detail for r in recs)
    assert "Incorrect API key provided" in recs[0].error_detail  # the message is kept, the key is not
    assert len(res.sensor_problems) >= 2  # both meters refused, said why
    assert p2.returncode == 2 and p2.stderr.startswith("wattbench: error:")
    blobs = {"stdout": p.stdout.encode(), "stderr": p.stderr.encode(), "bad stdout": p2.stdout.encode(),
             "bad stderr": p2.stderr.encode(), **_artifacts(runs)}
    assert not _scan(blobs), _scan(blobs)
