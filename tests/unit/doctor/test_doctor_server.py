"""Server and checklist checks against real aiohttp servers on 127.0.0.1, one per failure mode."""

import datetime as dt
import json

import pytest
from tests.fakes.doctor_server import OpsServerConfig, serve

from tests.fakes.ports import refused_port
from wattbench.doctor import checklist as cl
from wattbench.doctor.service import run_doctor
from wattbench.doctor.server import probe_server, server_checks
from wattbench.core.errors import UserError


def by_id(checks):
    return {c.id: c for c in checks}


def test_healthy_vllm_like_server():
    with serve(OpsServerConfig(max_model_len=4096)) as (url, srv):
        pr = probe_server(url, burst=8)
        c = by_id(server_checks(pr))
    assert pr.info.engine == "vllm"
    assert c["server.reachable"].status == "pass" and "vllm" in c["server.reachable"].message
    assert c["server.models"].data["models"] == ["tiny"]
    assert c["server.max_context"].data["max_model_len"] == 4096
    assert c["server.metrics"].status == "pass"
    u = c["server.stream_usage"]
    assert u.status == "pass" and u.data["usage"]["completion_tokens"] == 4 and u.data["usage"]["prompt_tokens"] == 1
    cfg = c["server.effective_config"]
    assert cfg.status == "pass" and cfg.data["gpu_memory_utilization"] == "0.9"
    assert cfg.data["kv_cache_max_concurrency"] == "12.5"
    assert c["server.rate_limit"].status == "pass" and c["server.rate_limit"].data["burst"] == 8
    assert srv.requests == 1 + 8  # one usage probe, a burst of 8, nothing else


def test_no_metrics_endpoint_warns():
    with serve(OpsServerConfig(metrics=False)) as (url, _):
        c = by_id(server_checks(probe_server(url, burst=0)))
    assert c["server.metrics"].status == "warn" and "404" in c["server.metrics"].message
    assert c["server.rate_limit"].status == "skip"


def test_missing_usage_chunk_fails():
    with serve(OpsServerConfig(usage=False)) as (url, _):
        c = by_id(server_checks(probe_server(url, burst=0)))
    u = c["server.stream_usage"]
    assert u.status == "fail" and "without a usage chunk" in u.message and u.data["chunks"] == 4


def test_chat_only_server_is_probed_through_chat():
    with serve(OpsServerConfig(chat_only=True, max_model_len=3)) as (url, _):
        pr = probe_server(url, burst=2)
    u = by_id(server_checks(pr))["server.stream_usage"]
    # completions answers 404 so chat is tried; chat refuses the probe for its length: that is shown
    assert pr.stream.api == "chat" and u.status == "fail" and "maximum context length is 3" in u.message
    with serve(OpsServerConfig(chat_only=True)) as (url, srv):
        pr = probe_server(url, burst=2)
    u = by_id(server_checks(pr))["server.stream_usage"]
    assert u.status == "pass" and u.data["api"] == "chat" and srv.requests == 1 + 2


def test_rate_limiting_429_detected():
    with serve(OpsServerConfig(limit_per_s=3)) as (url, srv):
        pr = probe_server(url, burst=8)
        c = by_id(server_checks(pr))
    r = c["server.rate_limit"]
    assert r.status == "warn" and r.data["http_429"] == srv.rejected_429 >= 4
    assert "retry-after" in pr.rate_limit_headers


def test_small_max_model_len_rejects_the_probe():
    with serve(OpsServerConfig(max_model_len=3)) as (url, _):
        c = by_id(server_checks(probe_server(url, burst=0)))
    assert c["server.max_context"].data["max_model_len"] == 3
    u = c["server.stream_usage"]
    assert u.status == "fail" and "HTTP 400" in u.message and "maximum context length is 3" in u.message


def test_unknown_max_len_and_high_memory_fraction_warn():
    with serve(OpsServerConfig(max_model_len=None, gpu_memory_utilization="0.97")) as (url, _):
        c = by_id(server_checks(probe_server(url, burst=0)))
    assert c["server.max_context"].status == "warn"
    e = c["server.effective_config"]
    assert e.status == "warn" and "0.97" in e.message and "3%" in e.message


def test_unreachable_server_fails_and_stops_there():
    with refused_port() as port:
        checks = server_checks(probe_server(f"http://127.0.0.1:{port}", burst=0))
    assert [c.id for c in checks] == ["server.reachable"] and checks[0].status == "fail"


def test_bad_url_is_user_error():
    with pytest.raises(UserError):
        run_doctor("ftp://x", environment=False)


# ------------------------------------------------------------------------------ checklist


def test_request_logging_seen_from_outside():
    with serve(OpsServerConfig()) as (url, _):
        pr = probe_server(url, burst=0)
    c = by_id(cl.checklist_checks(pr))
    lg = c["checklist.request_logging"]
    assert lg.status == "pass" and "x-request-id" in lg.message and "cannot be verified from outside" in lg.message
    with serve(OpsServerConfig(request_id=False, latency_histogram=False)) as (url, _):
        pr = probe_server(url, burst=0)
    lg = by_id(cl.checklist_checks(pr))["checklist.request_logging"]
    assert lg.status == "warn" and set(lg.data["missing"]) == {"request_id", "latency"}
    # declaring them turns the warning into a pass that says "declared"
    lg = by_id(cl.checklist_checks(pr, {"logging": {"request_id": True, "latency": True, "where": "loki"}}))[
        "checklist.request_logging"]
    assert lg.status == "pass" and "declared" in lg.message


def test_rate_limiting_and_queueing_item():
    with serve(OpsServerConfig(limit_per_s=2)) as (url, _):
        pr = probe_server(url, burst=6)
    r = by_id(cl.checklist_checks(pr))["checklist.rate_limiting"]
    assert r.status == "pass" and "429" in r.message and "kv_cache_max_concurrency=12.5" in r.message
    with serve(OpsServerConfig(metrics=False)) as (url, _):
        pr = probe_server(url, burst=4)
    r = by_id(cl.checklist_checks(pr))["checklist.rate_limiting"]
    assert r.status == "warn" and "no rate limiter seen" in r.message and "no queue bound" in r.message


def test_one_rate_limit_fact_one_status():
    """A past defect: doctor said PASS "no rate limiting seen" (server) and WARN "no rate limiting seen"
    (checklist) for one burst. The server check speaks of the benchmark, the checklist of the limiter."""
    with serve(OpsServerConfig(metrics=False)) as (url, _):
        pr = probe_server(url, burst=4)
    s, c = by_id(server_checks(pr))["server.rate_limit"], by_id(cl.checklist_checks(pr))["checklist.rate_limiting"]
    assert s.status == "pass" and s.message == "4 concurrent tiny requests accepted: a benchmark is not throttled"
    assert c.status == "warn" and "no rate limiter seen in front of the server" in c.message
    assert "rate limit" not in s.message


def test_doctor_at_80_columns_breaks_no_word():
    """A past defect: at 80 columns the four-column table broke tokens mid-word (``request_lo gging``) and
    took 117 lines for 17 checks. Below 120 columns the checks are a list, wrapped at spaces."""
    from rich.console import Console

    from wattbench.cli.doctor import _render

    with serve(OpsServerConfig(metrics=False)) as (url, _):
        report = run_doctor(url, [], burst=4, environment=False)
    con = Console(record=True, width=80, color_system=None, file=open("/dev/null", "w"))
    _render(report, con)
    out = con.export_text()
    words = {w for c in report.checks for w in f"{c.id} {c.message} {c.fix}".split() if len(w) < 70}
    for line in out.splitlines()[:-1]:  # the last line counts the statuses
        assert len(line.rstrip()) <= 80
        for w in line.split():
            assert w in words or w in ("fix:", "PASS", "WARN", "SKIP", "FAIL", "wattbench", "doctor", "server",
                                       "checklist") or w.rstrip(",") in words or any(x.isdigit() for x in w), w
    assert len(out.splitlines()) <= 4 * len(report.checks)
    assert "checklist.request_logging" in out and "checklist.rate_limiting" in out


def test_rollback_declared_states(tmp_path):
    today = dt.date(2026, 11, 29)
    assert by_id(cl.checklist_checks(None, None, today=today))["checklist.rollback"].status == "skip"
    f = tmp_path / "c.yaml"
    f.write_text("rollback:\n  previous: vllm 0.31\n  procedure: helm rollback llm 1\n  tested: 2026-11-01\n")
    d = cl.load_checklist(f)
    rb = by_id(cl.checklist_checks(None, d, today=today))["checklist.rollback"]
    assert rb.status == "pass" and "helm rollback" in rb.message and "declared" in rb.message
    rb = by_id(cl.checklist_checks(None, d, today=dt.date(2027, 3, 1)))["checklist.rollback"]
    assert rb.status == "warn" and "120 days" in rb.message
    f.write_text('{"rollback": {"previous": "v1"}}')
    j = tmp_path / "c.json"
    j.write_text(f.read_text())
    rb = by_id(cl.checklist_checks(None, cl.load_checklist(j), today=today))["checklist.rollback"]
    assert rb.status == "warn" and "without procedure" in rb.message
    j.write_text('{"logging": {}}')
    rb = by_id(cl.checklist_checks(None, cl.load_checklist(j), today=today))["checklist.rollback"]
    assert rb.status == "warn" and "no rollback" in rb.message


@pytest.mark.parametrize("text,needle", [
    ("rolback: {}\n", "unknown section 'rolback'"),
    ("rollback: {previous: x, when: y}\n", "rollback.when is not a known key"),
    ("rollback: {tested: 'last week'}\n", "not a date"),
    ("- a\n- b\n", "top level must be a mapping"),
    ("rollback: [\n", "not valid YAML"),
])
def test_bad_checklist_files(tmp_path, text, needle):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(UserError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        cl.load_checklist(f)


def test_telemetry_item_against_a_real_exporter():
    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    reg = CollectorRegistry()
    for n in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED"):
        Gauge(n, n, ["gpu"], registry=reg).labels("0").set(1)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=reg)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        t = by_id(cl.checklist_checks(None, None, [url]))["checklist.telemetry"]
        assert t.status == "warn" and "missing utilization" in t.message
        Gauge("DCGM_FI_DEV_GPU_UTIL", "u", ["gpu"], registry=reg).labels("0").set(50)
        t = by_id(cl.checklist_checks(None, None, [url]))["checklist.telemetry"]
        assert t.status == "pass"
    finally:
        server.shutdown()
        server.server_close()
    t = by_id(cl.checklist_checks(None, None, [url]))["checklist.telemetry"]
    assert t.status == "fail" and "unreachable" in t.message
    assert by_id(cl.checklist_checks(None, None, None))["checklist.telemetry"].status == "skip"


def test_report_is_serialisable_and_exit_code():
    with serve(OpsServerConfig(usage=False)) as (url, _):
        rep = run_doctor(url, environment=False, burst=0)
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["ok"] is False and rep.exit_code == 1 and d["counts"]["fail"] >= 1
    assert [c["group"] for c in d["checks"]][:1] == ["server"]
    # each check's severity on the one scale, beside its status
    want = {"pass": None, "skip": "note", "warn": "warn", "fail": "invalid"}
    assert all(c["severity"] == want[c["status"]] for c in d["checks"]) and any(c["severity"] for c in d["checks"])
