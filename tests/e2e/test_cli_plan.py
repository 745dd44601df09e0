"""``wattbench plan …`` through the real CLI app (CliRunner) and once as a subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes.planning_results import make_level, make_result, write_run
from wattbench.cli.main import build_app

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def app():
    return build_app()


def invoke(app, *args):
    return CliRunner().invoke(app, ["plan", *args])


def _err(res) -> str:
    try:
        return res.stderr
    except ValueError:  # older click without separate stderr
        return res.output


def test_tco_worked_example_json(app):
    res = invoke(app, "tco", "--it-kw", "10000", "--load", "0.7", "--price-per-kwh", "0.6", "--pue", "1", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["electricity_cost_per_year"] == pytest.approx(36_792_000)


def test_tco_table_and_month(app):
    res = invoke(app, "tco", "--it-kw", "10000", "--load", "0.7", "--price-per-kwh", "0.6", "--period", "month")
    assert res.exit_code == 0, res.output
    assert "3,066,000" in res.stdout  # 36,792,000 / 12


def test_roofline_json_299(app):
    res = invoke(app, "roofline", "--model", "llama-8b", "--gpu", "H200", "--dtype", "bf16", "--batch", "1",
                 "--context", "0", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["bound_tokens_per_s"] == pytest.approx(298.87, abs=0.05)
    assert d["kv_bytes_per_token"] == 131072


def test_roofline_table(app):
    res = invoke(app, "roofline", "--model", "llama-8b", "--gpu", "h200-sxm")
    assert res.exit_code == 0, res.output
    assert "299" in res.stdout and "memory-bound" in res.stdout


def test_unknown_gpu_exit_2_one_line(app):
    res = invoke(app, "roofline", "--model", "llama-8b", "--gpu", "H300")
    assert res.exit_code == 2
    err = _err(res).strip()
    assert err.startswith("wattbench: error: unknown GPU 'H300'") and "H200 SXM" in err
    assert "Traceback" not in res.output and len(err.splitlines()) == 1


def test_rack_worked_examples_json(app):
    res = invoke(app, "rack", "--rack-kw", "15", "--node", "name=a,power_w=1400", "--node", "name=b,power_w=1800",
                 "name=c,power_w=1100", "name=d,power_w=900", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert [r["nodes_per_rack"] for r in d["rows"]] == [10, 8, 13, 16]


def test_rack_liquid(app):
    res = invoke(app, "rack", "--rack-kw", "22.4", "--node", "name=x,accelerator_w=1400,gpus=4", "--json")
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)["rows"][0]
    assert row["cooling"] == "liquid" and row["rack_power_w"] == 22400


@pytest.mark.parametrize("node,rack_kw,needle", [
    ("name=a,power_w=-1400", "15", "negative"),
    ("name=a,power_w=1400", "1", "smaller than one node"),
])
def test_rack_errors_exit_2(app, node, rack_kw, needle):
    res = invoke(app, "rack", "--rack-kw", rack_kw, "--node", node)
    assert res.exit_code == 2
    assert needle in _err(res) and "Traceback" not in res.output


def _runs(tmp_path):
    a = make_result("run-a", [
        make_level(0, out_tps=900, acc_p95_w=1150, goodput_tps=800, ttft_p95_ms=200, concurrency=8),
        make_level(1, out_tps=1500, acc_p95_w=1420, goodput_tps=1300, ttft_p95_ms=900, concurrency=32),
    ])
    b = make_result("run-b", [make_level(0, out_tps=500, acc_p95_w=640, goodput_tps=470, ttft_p95_ms=150)],
                    gpu="NVIDIA L40S")
    return write_run(tmp_path / "a", a), write_run(tmp_path / "b", b)


def test_rack_from_run_dirs(app, tmp_path):
    a, b = _runs(tmp_path)
    res = invoke(app, "rack", "--rack-kw", "15", "--node", str(a), str(b), "--host-overhead-w", "300", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert rows[0]["node_power_w"] == 1720 and rows[0]["nodes_per_rack"] == 8
    assert rows[0]["rack_goodput_output_tokens_per_s"] == 8 * 1300
    assert rows[1]["node_power_w"] == 940 and rows[1]["nodes_per_rack"] == 15


def test_roofline_with_result(app, tmp_path):
    a, _ = _runs(tmp_path)
    res = invoke(app, "roofline", "--model", "llama-8b", "--result", str(a), "--level", "1", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["gpu"] == "H200 SXM" and d["batch"] == 32 and d["context"] == 1100
    assert d["measured_pct_of_bound"] == pytest.approx(100 * 1500 / d["bound_tokens_per_s"])


def test_power_first_with_slo(app, tmp_path):
    a, b = _runs(tmp_path)
    res = invoke(app, "power-first", "--site-kw", "10", "--candidates", str(a), str(b),
                 "--slo", "ttft_p95=500ms", "--host-overhead-w", "0", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["budget_w"] == 9000
    assert {(x["option"]["run_id"], x["option"]["level_index"]) for x in d["allocations"]} <= {("run-a", 0), ("run-b", 0)}
    # best mix of 1150 W/800 and 640 W/470 under 9000 W: 14 × B = 8960 W, 6580 tok/s
    assert d["total_value_output_tokens_per_s"] == pytest.approx(6580)
    table = invoke(app, "power-first", "--site-kw", "10", "--candidates", str(a), str(b), "--slo", "ttft_p95=500ms")
    assert table.exit_code == 0 and "breaks the SLO" in " ".join(table.stdout.split())


def test_missing_result_dir_exit_2(app, tmp_path):
    res = invoke(app, "power-first", "--site-kw", "10", "--candidates", str(tmp_path / "nope"))
    assert res.exit_code == 2 and "nope: no such run directory" in _err(res)


def test_subprocess_tco_json():
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run(
        [sys.executable, "-m", "wattbench", "plan", "tco", "--it-kw", "10000", "--load", "0.7",
         "--price-per-kwh", "0.6", "--pue", "1", "--json"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["electricity_cost_per_year"] == pytest.approx(36_792_000)


def test_roofline_with_hardware_file(app, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"version": 1, "gpus": [
        {"name": "Lab GPU", "vendor": "X", "form_factor": "pcie", "tdp_w": 300, "memory_bytes": 96e9,
         "memory_bandwidth_bytes_per_s": 2e12, "bf16_dense_flops": 5e14,
         "source": {"title": "lab measurement sheet", "url": "https://example.org/lab"}}]}))
    res = invoke(app, "roofline", "--model", "llama-8b", "--gpu", "lab-gpu", "--hardware", str(f), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["bound_tokens_per_s"] == pytest.approx(2e12 / (8_030_261_248 * 2))
    # the user config dir is read without --hardware
    cfg = tmp_path / "cfg" / "wattbench"
    cfg.mkdir(parents=True)
    (cfg / "hardware.json").write_text(f.read_text())
    res = invoke(app, "roofline", "--model", "llama-8b", "--gpu", "Lab GPU", "--json")
    assert res.exit_code == 0, res.output


def test_tco_annual_carbon_beside_cost(app, tmp_path):
    # 100 kW IT at load 0.5, PUE 1.2: 525,600 facility kWh/year; at 400 g/kWh -> 210.24 t
    res = invoke(app, "tco", "--it-kw", "100", "--load", "0.5", "--pue", "1.2", "--price-per-kwh", "0.1",
                 "--tokens-per-kwh", "1000000", "--carbon-intensity", "400", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["carbon_tonnes_per_year"] == pytest.approx(210.24)
    # tokens = 1e6/kWh x 438,000 IT kWh; g per 1e6 tokens = 210.24e6 g / 4.38e11 * 1e6
    assert d["carbon_g_per_million_tokens"] == pytest.approx(210.24e6 / 4.38e11 * 1e6)
    # a series: hourly 300 then 500 (the last point holds one step) -> time-weighted mean 400
    series = tmp_path / "ci.csv"
    series.write_text("datetime,carbon_intensity\n2026-12-01 00:00:00,300\n2026-12-01 01:00:00,500\n")
    res = invoke(app, "tco", "--it-kw", "100", "--load", "0.5", "--pue", "1.2", "--price-per-kwh", "0.1",
                 "--carbon-intensity", str(series))
    assert res.exit_code == 0, res.output
    assert "carbon: 210 t CO2e/year at 400 g/kWh" in res.stdout  # the one number format (core/numbers.py)
    bad = invoke(app, "tco", "--it-kw", "100", "--price-per-kwh", "0.1", "--carbon-intensity", "dirty")
    assert bad.exit_code == 2 and "neither a number" in _err(bad)


def _node_and_acc(tmp_path, node_label="measured"):
    lv = make_level(0, out_tps=1000, acc_p95_w=650, node_p95_w=1100, node_tokens_per_kwh=3.0e6, concurrency=8)
    lv.energy["node"].label = node_label
    return write_run(tmp_path / "na", make_result("run-na", [lv]))


def test_one_default_boundary_for_rack_power_first_tco(app, tmp_path):
    """Without --boundary, rack, power-first and tco all read the run's headline boundary (results.headline:
    both measured, the outer one, node here)."""
    d = _node_and_acc(tmp_path)
    rack = json.loads(invoke(app, "rack", "--rack-kw", "10", "--node", str(d), "--json").stdout)
    assert rack["rows"][0]["node_power_w"] == 1100  # node p95, not accelerator + host
    pf = json.loads(invoke(app, "power-first", "--site-kw", "10", "--candidates", str(d), "--headroom-pct", "0",
                           "--json").stdout)
    assert pf["allocations"][0]["option"]["node_power_w"] == 1100
    res = invoke(app, "tco", "--it-kw", "100", "--price-per-kwh", "0.1", "--result", str(d))
    assert res.exit_code == 0, res.output
    assert "tokens per kWh from run run-na at the node boundary" in " ".join(res.output.split())


def test_tco_failure_names_the_flag(app, tmp_path):
    a, _ = _runs(tmp_path)  # accelerator (and host) only
    res = invoke(app, "tco", "--it-kw", "100", "--price-per-kwh", "0.1", "--result", str(a), "--boundary", "node")
    assert res.exit_code == 2
    assert "--boundary" in _err(res) and "accelerator" in _err(res)


def test_rack_labels_its_percentile_figure_and_declared_power(app, tmp_path):
    d = _node_and_acc(tmp_path, node_label="declared")
    # the headline rule: a measured accelerator before a declared node, by default
    rack = json.loads(invoke(app, "rack", "--rack-kw", "10", "--node", str(d), "--json").stdout)
    assert rack["rows"][0]["power_source"].startswith("measured p95 accelerator 650 W")
    res = invoke(app, "rack", "--rack-kw", "10", "--node", str(d), "--boundary", "node")
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "tok/s per p95 kW" in flat and "not the run's headline tok/s/kW" in flat
    assert "declared 1100 W at node (not a measured p95)" in flat
    assert "measured p95" not in flat.replace("not a measured p95", "")


def test_roofline_warns_when_the_run_served_another_model(app, tmp_path):
    d = write_run(tmp_path / "q", make_result("run-q", [make_level(0, out_tps=900, acc_p95_w=500, concurrency=4)],
                                              model="Qwen/Qwen2.5-0.5B-Instruct"))
    res = invoke(app, "roofline", "--model", "llama-8b", "--result", str(d), "--json")
    assert res.exit_code == 0, res.output
    warns = json.loads(res.stdout)["warnings"]
    assert any("served 'Qwen/Qwen2.5-0.5B-Instruct', not 'llama-8b'" in w for w in warns)
    a, _ = _runs(tmp_path)  # served llama-8b: no such warning
    res = invoke(app, "roofline", "--model", "llama-8b", "--result", str(a), "--json")
    assert not any("served" in w for w in json.loads(res.stdout)["warnings"])


@pytest.mark.parametrize("width", [80, 160])
def test_rack_readable_at_80_and_160_columns(app, tmp_path, monkeypatch, width):
    """Every rack figure whole at 80 columns (one block per platform) and one table at 160."""
    monkeypatch.setenv("COLUMNS", str(width))
    a, _ = _runs(tmp_path)
    res = invoke(app, "rack", "--rack-kw", "40", "--node", str(a), "--host-overhead-w", "300")
    assert res.exit_code == 0, res.output
    out = res.output
    assert "…" not in out and max(len(x) for x in out.splitlines()) <= width
    plan = json.loads(invoke(app, "rack", "--rack-kw", "40", "--node", str(a), "--host-overhead-w", "300",
                             "--json").stdout)["rows"][0]
    assert f"{plan['rack_output_tokens_per_s']:,.0f}" in out and f"{plan['node_power_w']:,.0f}" in out
    header_lines = [x for x in out.splitlines() if "node W" in x]
    assert len(header_lines) == 1
    if width == 160:
        assert "cooling" in header_lines[0] and "tok/s per p95 kW" in header_lines[0]  # one wide table


def test_roofline_with_result_at_80_columns_is_one_line_per_figure(app, tmp_path, monkeypatch):
    """A past defect: at 80 columns plan roofline --result printed ~60 lines of one-figure tables. It is a
    list: one line per figure, a long value wrapped, nothing cut."""
    monkeypatch.setenv("COLUMNS", "80")
    a = write_run(tmp_path / "long", make_result("20261201-121821-2a2a54-a-long-run-id", [
        make_level(0, out_tps=900, acc_p95_w=500, concurrency=4)]))
    res = invoke(app, "roofline", "--model", "llama-8b", "--result", str(a), "--level", "0")
    assert res.exit_code == 0, res.output
    lines = [x.strip() for x in res.output.splitlines() if x.strip()]
    assert "…" not in res.output and max(len(x) for x in res.output.splitlines()) <= 80
    d = json.loads(invoke(app, "roofline", "--model", "llama-8b", "--result", str(a), "--level", "0", "--json").stdout)
    assert any(x.startswith("parameters") and f"{d['params']:,}" in x for x in lines)
    assert any(x.startswith("measured / bound") and f"{d['measured_pct_of_bound']:.1f}%" in x for x in lines)
    assert len(lines) <= 20, res.output


def test_a_node_without_gpus_has_none_and_information_is_not_a_warning(app, tmp_path, monkeypatch):
    """plan rack read `GPUs 21` for a node measured on a machine with no GPU (one per node was
    assumed), and plan power-first / plan tco printed which level they read as `warning:` lines."""
    monkeypatch.setenv("COLUMNS", "160")
    run = write_run(tmp_path / "cpu", make_result("cpu-run", [
        make_level(0, out_tps=100, node_p95_w=300, concurrency=1, node_tokens_per_kwh=1.2e6),
        make_level(1, out_tps=300, node_p95_w=320, concurrency=4, node_tokens_per_kwh=3.4e6)], gpus=0))
    res = invoke(app, "rack", "--rack-kw", "20", "--node", str(run))
    assert res.exit_code == 0, res.output
    row = next(x for x in res.stdout.splitlines() if x.strip().startswith("llama-8b"))
    assert " none " in row and " 62 " in row.replace(",", "")  # 62 nodes of 320 W, no GPU among them
    plan = json.loads(invoke(app, "rack", "--rack-kw", "20", "--node", str(run), "--json").stdout)
    assert plan["rows"][0]["gpus_per_rack"] is None
    for args in (("power-first", "--site-kw", "10", str(run)),
                 ("tco", "--it-kw", "10", "--price-per-kwh", "0.1", "--result", str(run))):
        res = invoke(app, *args)
        assert res.exit_code == 0, res.output
        warns = [x for x in res.output.splitlines() if x.startswith("warning:")]
        assert not any("level c=" in w or "tokens per kWh from run" in w for w in warns), res.output
        assert "level c=" in res.output or "level" in res.stdout  # the level read is still said


@pytest.mark.parametrize("context,want", [
    (None, "compute-bound from batch "),
    ("100000", "compute-bound from no batch: memory-bound at any batch at this context"),
])
def test_roofline_says_where_compute_binds_in_a_sentence(app, context, want):
    ctx = ["--context", context] if context else []
    res = CliRunner().invoke(app, ["plan", "roofline", "--model", "llama-8b", "--gpu", "h200-sxm", *ctx],
                             terminal_width=80)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.stdout.splitlines() if "compute-bound from" in ln)
    assert want in " ".join(line.split())
    assert "batch  never" not in res.stdout and "from batch never" not in " ".join(res.stdout.split())
