"""``wattbench doctor`` end to end against real local server processes (started here, stopped by PID)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes.stream_server_proc import start_script, stop_process

FAKES = Path(__file__).resolve().parents[1] / "fakes"


def doctor(*args):
    from wattbench.cli.main import build_app

    r = CliRunner().invoke(build_app(), ["doctor", "--no-env", "--json", *args])
    return r.exit_code, json.loads(r.output)


def test_doctor_against_doctor_server_process(tmp_path):
    proc, url = start_script(FAKES / "doctor_server.py", "--max-model-len", "4096", "--limit-per-s", "4")
    try:
        f = tmp_path / "release.json"
        f.write_text(json.dumps({"rollback": {"previous": "v1", "procedure": "kubectl rollout undo deploy/llm",
                                              "tested": "2026-11-20"},
                                 "telemetry": {"power": True, "temperature": True, "memory": True,
                                               "utilization": True}}))
        code, rep = doctor("--target", url, "--checklist", str(f))
    finally:
        stop_process(proc)
    c = {x["id"]: x for x in rep["checks"]}
    assert code == 0 and rep["ok"]
    assert c["server.reachable"]["data"]["engine"] == "vllm"
    assert c["server.max_context"]["data"]["max_model_len"] == 4096
    assert c["server.stream_usage"]["status"] == "pass"
    assert c["server.rate_limit"]["status"] == "warn" and c["server.rate_limit"]["data"]["http_429"] >= 4
    assert c["checklist.request_logging"]["status"] == "pass"
    assert c["checklist.rate_limiting"]["status"] == "pass"
    assert c["checklist.telemetry"]["status"] == "pass" and "declared" in c["checklist.telemetry"]["message"]
    assert c["checklist.rollback"]["status"] in ("pass", "warn")  # depends on today's date


def test_doctor_against_doctor_server_without_usage_fails(tmp_path):
    proc, url = start_script(FAKES / "doctor_server.py", "--no-usage", "--no-metrics")
    try:
        code, rep = doctor("--target", url, "--burst", "0")
    finally:
        stop_process(proc)
    c = {x["id"]: x for x in rep["checks"]}
    assert code == 1
    assert c["server.stream_usage"]["status"] == "fail" and c["server.metrics"]["status"] == "warn"


@pytest.mark.skipif(not (FAKES / "stream_server.py").exists(), reason="the client's scripted stream server is absent")
def test_doctor_against_the_scripted_stream_server():
    proc, url = start_script(FAKES / "stream_server.py", "--model", "m1,m2", "--ttft-ms", "5", "--itl-ms", "1")
    try:
        code, rep = doctor("--target", url, "--burst", "4")
    finally:
        stop_process(proc)
    c = {x["id"]: x for x in rep["checks"]}
    assert c["server.models"]["data"]["models"] == ["m1", "m2"]
    assert c["server.stream_usage"]["status"] == "pass"
    assert c["server.stream_usage"]["data"]["usage"]["completion_tokens"] == 4
    assert c["server.metrics"]["status"] == "warn"
    assert c["server.rate_limit"]["data"]["burst"] == 4 and c["server.rate_limit"]["data"]["http_429"] == 0
    assert code == 0


def test_monitor_against_doctor_server_process(tmp_path):
    """The monitor counts exactly the tokens a real server process generated, at a declared power."""
    import time
    import urllib.request

    from wattbench.core.clock import now_ns
    from wattbench.monitor.service import Monitor

    proc, url = start_script(FAKES / "doctor_server.py")
    try:
        def complete(n):
            body = json.dumps({"model": "tiny", "prompt": "a b c", "max_tokens": n, "stream": True,
                               "stream_options": {"include_usage": True}}).encode()
            req = urllib.request.Request(url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as r:
                r.read()

        m = Monitor(url, ["const:node=400"], interval_s=0.2, listen=None, history_path=tmp_path / "h.jsonl",
                    sample_interval_s=0.05)
        m.scraper.timeout_s = 60.0  # ends a hang only: a slow scrape on a loaded host is no error here
        with m:
            m.tick()
            for n in (5, 7, 11):
                complete(n)
                time.sleep(0.2)  # lets time pass between marks (no claim rests on how much)
                m.tick()
            # the meter has read past the last mark before it is accounted (waited for, not slept)
            last = m.tracker._points[-1][0]
            deadline = time.monotonic() + 60  # ends a hang only
            while (m.tracker.horizon_ns(now_ns()) or 0) < last:
                assert time.monotonic() < deadline, "the sampler never read past the last mark"
                time.sleep(0.01)
            m.flush()
            snap = m.latest()
    finally:
        stop_process(proc)
    tot = snap.windows["total"]
    assert tot["output_tokens"] == 23 and tot["prompt_tokens"] == 9
    assert tot["j_per_output_token"]["node"] == pytest.approx(400 * tot["duration_s"] / 23, rel=1e-6)
    assert snap.sources["server"]["engine"] == "vllm" and snap.sources["server"]["errors"] == 0
