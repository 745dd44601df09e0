import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from wattbench.cli.main import build_app


def run(*args):
    return CliRunner().invoke(build_app(), list(args))


def test_report_writes_everything(report_run_dir, report_noenergy_dir, tmp_path):
    res = run("report", str(report_run_dir), str(report_noenergy_dir), "--html", str(tmp_path / "r.html"),
              "--csv", str(tmp_path / "csv"), "--md", str(tmp_path / "r.md"), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["written"]["html"] == [str(tmp_path / "r.html")]
    assert [r["run_id"] for r in doc["runs"]] == ["run-report-fake", "run-noenergy"]
    assert "energy unavailable" in doc["runs"][1]["levels"][0]["headline"]
    # the figures users of vllm bench serve / AIPerf / GuideLLM look for, per level
    from wattbench.report.data import RunData

    lv = RunData(report_run_dir).result.levels[1]
    f = doc["runs"][0]["levels"][1]["figures"]
    assert f["e2e_p95_ms"] == pytest.approx(lv.latency.e2e_ms.p95, rel=1e-12)
    assert f["itl_p90_ms"] == pytest.approx(lv.latency.itl_ms.p90, rel=1e-12)
    assert f["ttft_mean_ms"] == pytest.approx(lv.latency.ttft_ms.mean, rel=1e-12)
    assert f["requests_per_s"] == pytest.approx(lv.throughput.requests_per_s, rel=1e-12)
    assert f["mean_in_flight"] == pytest.approx(lv.load.mean_in_flight, rel=1e-12)
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "plotly.js (basic - minified) v" in page  # the partial bundle, inlined (no CDN)
    assert "<script src=" not in page
    assert len(page.encode()) < 1_600_000  # two runs' data and the 1.19 MB bundle (the full one was 4.8 MB)
    assert len(pd.read_csv(tmp_path / "csv" / "levels.csv")) == 12 + 3
    assert "run-noenergy" in (tmp_path / "r.md").read_text()


def test_report_prints_summary(report_run_dir):
    res = run("report", str(report_run_dir))
    assert res.exit_code == 0, res.output
    assert "verdict: invalid" in res.stdout and "tok/s/kW" in res.stdout


def test_missing_and_corrupt_runs_are_one_line_exit_2(tmp_path):
    res = run("report", str(tmp_path / "nope"))
    assert res.exit_code == 2
    assert res.stderr.strip().count("\n") == 0 and "is not a directory" in res.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "result.json").write_text("{")
    res = run("report", str(tmp_path / "bad"))
    assert res.exit_code == 2 and "not valid JSON" in res.stderr and "Traceback" not in res.output
