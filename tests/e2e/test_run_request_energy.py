"""Energy per request, per tenant and carbon through the installed CLI against the scripted
streaming server, with a declared node sensor as ground truth."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_run_cli import wb
from tests.fakes.stream_server_proc import stream_server
from wattbench.results.rundir import load_requests, load_result


def test_run_energy_per_request_tenant_and_carbon(tmp_path):
    data = tmp_path / "prompts.jsonl"
    rows = [{"prompt": "word " * (8 + 4 * i), "output_tokens": 8 + 4 * (i % 3), "tenant": ["acme", "globex"][i % 2],
             "tags": ["batch"] if i % 3 == 0 else []} for i in range(12)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run"
    with stream_server("--ttft-ms", "20", "--itl-ms", "4") as (base, _):
        p = wb("run", "--target", base, "--workload", str(data), "--concurrency", "3", "--num-requests", "12",
               "--sensor", "const:node=700", "--idle", "0", "--carbon-intensity", "400", "--no-register",
               "--out", str(out), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    result = load_result(out)
    lv = result.levels[0]
    node = lv.energy["node"]
    # carbon: 700 W declared, 400 g/kWh, PUE 1
    assert node.carbon_intensity_g_per_kwh == pytest.approx(400.0, rel=1e-9)
    assert node.carbon_g == pytest.approx(node.energy_j / 3.6e6 * 400.0, rel=1e-12)
    assert node.carbon_g_per_million_output_tokens == pytest.approx(
        node.carbon_g / lv.throughput.output_tokens * 1e6, rel=1e-12)
    assert node.carbon_g_per_request == pytest.approx(node.carbon_g / 12, rel=1e-12)
    assert result.carbon.source == "constant" and result.carbon.g_per_kwh == pytest.approx(400.0, rel=1e-9)
    # energy per request: no idle measured, so the node's gross energy is split, and adds up
    att = lv.attribution["node"]
    assert att.label == "estimate" and att.basis == "gross"
    assert att.weighting == "tokens" and att.weighting_reason  # a flat meter cannot fit the split
    recs = [r for r in load_requests(out) if not r.warmup]
    assert all("node" in r.energy_j for r in recs)
    assert sum(r.energy_j["node"] for r in recs) == pytest.approx(node.energy_j, rel=1e-9)
    assert all(r.carbon_g["node"] == pytest.approx(r.energy_j["node"] / 3.6e6 * 400) for r in recs)
    assert {r.tenant for r in recs} == {"acme", "globex"}
    assert set(att.by_tenant) == {"acme", "globex"}
    for t, share in att.by_tenant.items():
        assert share.energy_j == pytest.approx(sum(r.energy_j["node"] for r in recs if r.tenant == t), rel=1e-9)
        assert share.requests == 6
    assert att.by_tag["batch"].requests == 4
    assert set(att.by_model) == {result.server.model}
    printed = json.loads(p.stdout)
    assert printed["levels"][0]["attribution"]["node"]["by_tenant"]["acme"]["requests"] == 6
    # the reports show the tenants' table and bar chart, and the carbon table; the terminal a line each
    html = (out / "report.html").read_text()
    assert 'id="energy-per-request"' in html and 'class="attribution"' in html and "tenant globex" in html
    assert 'id="carbon"' in html and "400.0 gCO2e/kWh" in html
    from rich.console import Console

    from wattbench.report.terminal import run_summary

    con = Console(record=True, width=200)
    con.print(run_summary(result))
    text = con.export_text()
    assert "gCO2e per million output tokens at node (400 g/kWh)" in text
    assert "total energy (" in text and "by tenant (estimate, node): " in text
    # requests.csv carries the tenant and the estimate
    import csv

    from wattbench.report.csv import write_csvs
    from wattbench.report.data import load_runs

    _, req_csv = write_csvs(load_runs([out]), tmp_path / "csv")
    with open(req_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["energy_boundary"] for r in rows} == {"node"}
    assert sum(float(r["energy_j_estimate"]) for r in rows) == pytest.approx(node.energy_j, rel=1e-9)
    assert sum(1 for r in rows if r["tenant"] == "acme" and r["tags"] == "batch") == 2


@pytest.mark.parametrize("offset_h,expect", [(0, 100.0), (-48, None)])
def test_run_with_an_intensity_series_on_the_wall_clock(tmp_path, offset_h, expect):
    """A series around now: the run falls in the first point's hour (100 g/kWh, not the next hour's
    500); a series two days old does not cover the run: no carbon figure, the reason in the notes."""
    import time

    now = time.time() + offset_h * 3600  # wall-clock seconds only to write the fixture's series
    series = tmp_path / "ci.json"
    series.write_text(json.dumps({"history": [{"datetime": now - 1800, "carbonIntensity": 100},
                                              {"datetime": now + 1800, "carbonIntensity": 500}]}))
    out = tmp_path / "run"
    with stream_server("--ttft-ms", "5", "--itl-ms", "1") as (base, _):
        p = wb("run", "--target", base, "--concurrency", "2", "--num-requests", "6", "--input-tokens", "16",
               "--output-tokens", "8", "--sensor", "const:node=500", "--idle", "0", "--carbon-intensity",
               str(series), "--no-register", "--no-html", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    result = load_result(out)
    node = result.levels[0].energy["node"]
    assert result.carbon.source == "file:ci.json" and result.carbon.points == 2
    if expect is None:
        assert node.carbon_g is None
        assert any(n.startswith("no carbon figure: the carbon-intensity series covers") for n in node.notes)
    else:
        assert node.carbon_intensity_g_per_kwh == pytest.approx(expect, rel=1e-9)
        assert node.carbon_g == pytest.approx(node.energy_j / 3.6e6 * expect, rel=1e-12)


def test_bad_carbon_file_exits_2_before_writing(tmp_path):
    bad = tmp_path / "ci.csv"
    bad.write_text("time,carbon_intensity\n2026-12-01T00:00:00Z,lots\n")
    out = tmp_path / "run"
    p = wb("run", "--target", "http://127.0.0.1:9", "--carbon-intensity", str(bad), "--no-register",
           "--out", str(out), cwd=tmp_path)
    assert p.returncode == 2
    assert "the intensity 'lots' is not a number" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not out.exists()
