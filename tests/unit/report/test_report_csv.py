import pandas as pd
import pytest

from wattbench.metrics.request_latency import per_request_latencies
from wattbench.report.csv import REQUEST_COLUMNS, SUMMARY_COLUMNS, write_csvs
from wattbench.report.data import RunData
from wattbench.core.errors import UserError


def test_summary_csv_long_form_matches_result(report_run_dir, tmp_path):
    run = RunData(report_run_dir)
    levels_csv, requests_csv = write_csvs([run], tmp_path / "csv")
    df = pd.read_csv(levels_csv)
    assert list(df.columns) == SUMMARY_COLUMNS
    # 3 levels x 2 windows x 2 boundaries
    assert len(df) == 12
    assert set(df["window"]) == {"full", "steady"} and set(df["boundary"]) == {"accelerator", "node"}
    for lv in run.result.levels:
        for window, energy in (("full", lv.energy), ("steady", lv.energy_steady)):
            for b, be in energy.items():
                row = df[(df.level == lv.index) & (df.window == window) & (df.boundary == b)].iloc[0]
                assert row.energy_j == pytest.approx(be.energy_j)
                assert row.output_tokens_per_s_per_kw == pytest.approx(be.output_tokens_per_s_per_kw)
                assert row.j_per_output_token == pytest.approx(be.j_per_output_token)
                assert row.energy_label == be.label
                assert row.output_tokens_per_s == pytest.approx(lv.throughput.output_tokens_per_s)
                assert row.ttft_ms_p99 == pytest.approx(lv.latency.ttft_ms.p99)
                # the figures of vllm bench serve / AIPerf / GuideLLM: mean, p90, p95 of E2E and ITL
                for kind in ("ttft", "tpot", "itl", "e2e"):
                    for stat in ("mean", "p50", "p90", "p95", "p99"):
                        want = getattr(getattr(lv.latency, f"{kind}_ms"), stat)
                        assert row[f"{kind}_ms_{stat}"] == pytest.approx(want, rel=1e-12), (kind, stat)
                assert row.requests_per_s == pytest.approx(lv.throughput.requests_per_s, rel=1e-12)
                assert row.mean_in_flight == pytest.approx(lv.load.mean_in_flight, rel=1e-12)
                assert row.label == lv.label
                assert row.target == lv.load.target_concurrency


def test_requests_csv_columns_and_latencies(report_run_dir, tmp_path):
    run = RunData(report_run_dir)
    _, requests_csv = write_csvs([run], tmp_path)
    df = pd.read_csv(requests_csv)
    assert list(df.columns) == REQUEST_COLUMNS
    assert len(df) == len(run.requests)
    r = run.requests[10]
    row = df[df.id == r.id].iloc[0]
    lat = per_request_latencies(r)
    assert row.ttft_ms == pytest.approx(lat["ttft_ms"])
    assert row.tpot_ms == pytest.approx(lat["tpot_ms"])
    assert row.e2e_ms == pytest.approx(lat["e2e_ms"])
    assert row.sent_s == pytest.approx((r.sent_ns - run.t0_ns) / 1e9)
    assert row.output_tokens == r.output_tokens
    failed = df[~df.ok]
    assert len(failed) == sum(not x.ok for x in run.requests) > 0
    assert failed.ttft_ms.isna().all()
    assert (failed.error == "timeout").all()


def test_no_energy_run_has_reason_row(report_noenergy_dir, tmp_path):
    levels_csv, _ = write_csvs([RunData(report_noenergy_dir)], tmp_path)
    df = pd.read_csv(levels_csv)
    assert len(df) == 3
    assert df.boundary.isna().all() and df.energy_j.isna().all()
    assert (df.energy_unavailable_reason == "no sensors: --no-sensors was given").all()


def test_formula_like_text_is_quoted(report_run_dir, tmp_path):
    from wattbench.report.csv import _cell

    assert _cell("=HYPERLINK(1)") == "'=HYPERLINK(1)"
    assert _cell("-1") == "'-1" and _cell(-1.5) == pytest.approx(-1.5, rel=1e-9) and _cell("concurrency=4") == "concurrency=4"


def test_csv_dir_that_is_a_file(report_run_dir, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UserError, match="give a directory"):
        write_csvs([RunData(report_run_dir)], f)


def test_a_boundary_equal_to_another_is_one_row(report_run_dir, tmp_path):
    """``host`` built from the ``cpu`` estimate alone is the same figure (results/headline.py rule 5):
    levels.csv writes it once, as ``host``, and says the ``cpu`` row is the same energy."""
    from tests.fakes.results_factory import make_energy

    from wattbench.results import rundir

    import shutil

    run_dir = tmp_path / "run"  # a copy: the fixture's run directory is shared with other tests
    shutil.copytree(report_run_dir, run_dir)
    res = rundir.load_result(run_dir)
    for lv in res.levels:
        d = lv.window.duration_s
        cpu = make_energy("cpu", 60.0, d, 1000, 500, method="estimate", label="estimate").model_copy(
            update={"channels": ["estimate.cpu"]})
        host = cpu.model_copy(update={"boundary": "host", "method": "sum(cpu)"})
        lv.energy = {**lv.energy, "cpu": cpu, "host": host}
    rundir.write_result(run_dir, res)
    df = pd.read_csv(write_csvs([RunData(run_dir)], tmp_path / "csv")[0], keep_default_na=False)
    full = df[df.window == "full"]
    assert sorted(set(full.boundary)) == ["accelerator", "host", "node"]  # no cpu row
    assert set(full[full.boundary == "host"].same_energy_as) == {"cpu"}
    assert set(full[full.boundary != "host"].same_energy_as) == {""}
    h = full[full.boundary == "host"]
    assert list(h.energy_j) == pytest.approx(list(60.0 * h.duration_s), rel=1e-12)
