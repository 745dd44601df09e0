"""A real Prometheus (Debian's package, installed by ``.ci/run``) against wattbench.

Started per test on loopback with a temporary data directory, stopped by PID
(``tests/fakes/prometheus_proc.py``), scraping every 0.5 s:

1. ``wattbench monitor``'s exporter and a scripted vLLM ``/metrics`` (``stream_server.py
   --vllm-metrics``), with the shipped recording rules (``deploy/prometheus/wattbench-rules.yml``)
   loaded. After a load, the rules' ``joules_per_output_token`` and ``tokens_per_second_per_kw``
   equal the monitor's own figure within 1%: each stored rule sample is compared with the monitor's
   gauge read at the rule's evaluation time, which is the same scrape (both are the latest sample at
   or before that instant, and one scrape stores every series of a target at one timestamp), so the
   tolerance covers float rounding, not timing. The vLLM counter Prometheus scraped itself equals
   the monitor's per-model token count and the server's own tally, exactly. Every query of the
   shipped Grafana dashboard parses and runs. ``promtool check rules`` passes.
2. The ``prometheus`` sensor (``prom:URL,query=EXPR``) against the real server scraping a scripted
   power exporter (two nodes at 250 W and 150 W): its channels and readings, its errors, and a
   ``wattbench run`` whose node energy is 400 W × the window within the sensor's stated uncertainty.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from tests.fakes.prometheus_proc import prometheus, prometheus_binary, promtool_binary
from tests.fakes.stream_server_proc import stream_server

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "wattbench-rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "wattbench-dashboard.json"
POWER_W = 300.0

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _need_prometheus():
    if not prometheus_binary() or not promtool_binary():
        pytest.skip("no Prometheus: apt-get install prometheus (.ci/run installs it)")


def _hostport(url: str) -> str:
    return url.split("://", 1)[1].split("/", 1)[0]


def _one(results: list[dict], **labels) -> tuple[float, float]:
    got = [r for r in results if all(r["metric"].get(k) == v for k, v in labels.items())]
    assert len(got) == 1, (labels, results)
    t, v = got[0]["value"]
    return float(t), float(v)


def _samples(prom, selector: str, span: str = "2m") -> list[tuple[float, float]]:
    """Every stored sample of one series (its own timestamps), oldest first."""
    r = prom.query(f"{selector}[{span}]")
    assert len(r) == 1, (selector, r)
    return [(float(t), float(v)) for t, v in r[0]["values"]]


def test_promtool_checks_the_shipped_rules():
    p = subprocess.run([promtool_binary(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "SUCCESS: 4 rules found" in p.stdout, p.stdout + p.stderr


def test_rules_over_the_monitors_exporter_match_the_monitor(tmp_path):
    from wattbench.load.level import run_level
    from wattbench.core.load_types import LevelSpec
    from wattbench.core.target import TargetSpec
    from wattbench.monitor.service import Monitor
    from wattbench.workload.base import RequestSpec

    with stream_server("--ttft-ms", "20", "--itl-ms", "10", "--vllm-metrics") as (base, stats):
        mon = Monitor(base, [f"const:node={POWER_W:g}"], interval_s=0.5, listen="127.0.0.1:0")
        mon.start()
        runner = threading.Thread(target=mon.run, name="monitor", daemon=True)
        runner.start()
        try:
            targets = {"wattbench": f"127.0.0.1:{mon.exporter.port}", "vllm": _hostport(base)}
            with prometheus(tmp_path / "prom", targets, [RULES]) as prom:
                prom.wait_for("both targets up", lambda: len(prom.query("up == 1")) == 2)
                spec = LevelSpec(index=0, mode="concurrency", value=4, num_requests=32, workers=1)
                run_level(spec, TargetSpec(base_url=base + "/v1", model="fake-model"),
                          lambda i: RequestSpec(prompt=f"r{i} hello", max_tokens=24, input_tokens=2))
                written = stats()["tokens"]
                assert written == 32 * 24

                def counted():  # the monitor counted every token, and Prometheus scraped it after
                    r = prom.query('wattbench_model_output_tokens_total{model="fake-model"}')
                    return r and float(r[0]["value"][1]) == written and prom.query("joules_per_output_token")

                prom.wait_for("the monitor's final token count and a rule evaluation after it", counted)
                # the server's counter, scraped by Prometheus itself: the same tokens
                assert _one(prom.query("vllm:generation_tokens_total"), model_name="fake-model")[1] == written
                # each stored rule sample against the monitor's own gauge from the scrape it was computed
                # from: the latest scrape at or before the evaluation, or the one before it when the
                # evaluation ran while that scrape was still being stored
                own = _samples(prom, 'wattbench_model_joules_per_output_token{model="fake-model",boundary="node"}')
                for rule, conv in (("joules_per_output_token", lambda v: v),
                                   ("tokens_per_second_per_kw", lambda v: 1000.0 / v)):
                    t_e, got = _samples(prom, f'{rule}{{model="fake-model",boundary="node"}}')[-1]
                    before = [v for t, v in own if t <= t_e][-2:]
                    assert before and any(got == pytest.approx(conv(v), rel=0.01) for v in before), (rule, got, before)
                jpt = _samples(prom, 'joules_per_output_token{model="fake-model",boundary="node"}')[-1][1]
                tpk = _samples(prom, 'tokens_per_second_per_kw{model="fake-model",boundary="node"}')[-1][1]
                assert 0 < jpt < float("inf")
                # the dashboard-range rules and every dashboard query run on this server
                assert _one(prom.query("tokens_per_second_per_kw:rate5m"), model="fake-model", boundary="node")[1] > 0
                dash = json.loads(DASHBOARD.read_text())
                exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
                assert exprs
                for e in exprs:
                    prom.query(e.replace("$instance", ".*"))  # asserts status success
                print(f"\nrule joules_per_output_token {jpt:.5f}, tokens_per_second_per_kw {tpk:.3f}, monitor's "
                      f"last {own[-1][1]:.5f} J/token; tokens {written}")
        finally:
            mon.stop()
            runner.join(timeout=60)
            mon.close()


def test_prometheus_sensor_against_the_real_server(tmp_path):
    from prometheus_client import CollectorRegistry, Gauge, start_http_server

    from wattbench.config.run import RunConfig
    from wattbench.core.errors import SensorError
    from wattbench.run import run_benchmark
    from wattbench.telemetry.prometheus import PromQuerySensor

    reg = CollectorRegistry()
    g = Gauge("node_power_watts", "Scripted node power.", ["node"], registry=reg)
    g.labels("n1").set(250.0)
    g.labels("n2").set(150.0)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=reg)
    try:
        with prometheus(tmp_path / "prom", {"power": f"127.0.0.1:{server.server_port}"}) as prom:
            prom.wait_for("the power series", lambda: len(prom.query("node_power_watts")) == 2)
            s = PromQuerySensor(prom.url, "sum by (node) (node_power_watts)")
            chans = {c.id: c for c in s.open()}
            assert set(chans) == {"prom.node_n1", "prom.node_n2"}
            assert all(c.boundary == "node" and c.kind == "power" for c in chans.values())
            assert {r.channel: r.value for r in s.read()} == pytest.approx({"prom.node_n1": 250.0, "prom.node_n2": 150.0}, rel=1e-9)
            with pytest.raises(SensorError, match="parse error"):
                PromQuerySensor(prom.url, "sum(").open()
            with pytest.raises(SensorError, match="no series"):
                PromQuerySensor(prom.url, "no_such_metric").open()
            with stream_server("--ttft-ms", "20", "--itl-ms", "10") as (base, _):
                res = run_benchmark(RunConfig(
                    target=base, concurrency=[4], num_requests=16, output_tokens="32", input_tokens="16",
                    sensors=[f"prom:{prom.url},query=sum(node_power_watts),boundary=node"], idle_s=0.5,
                    sample_interval_s=0.2, register_run=False, html=False, out=str(tmp_path / "run")))
    finally:
        server.shutdown()
        server.server_close()
    lv = res.levels[0]
    e = lv.energy["node"]
    truth = 400.0 * lv.window.duration_s
    assert e.uncertainty_pct is not None and e.uncertainty_pct > 0
    assert abs(e.energy_j - truth) <= e.uncertainty_pct / 100 * truth + 1e-9, (e.energy_j, truth, e.uncertainty_pct)
    assert res.idle["node"].power_w == pytest.approx(400.0)
