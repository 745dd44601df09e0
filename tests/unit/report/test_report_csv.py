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


@pytest.fixture(scope="module")
def trials_run_dir(tmp_path_factory):
    """A real run of two levels, three trials each, against the scripted streaming server at a
    declared 300 W."""
    from tests.fakes.stream_server_proc import stream_server
    from wattbench.config.run import RunConfig
    from wattbench.run import run_benchmark

    out = tmp_path_factory.mktemp("trials")
    with stream_server("--ttft-ms", "10", "--itl-ms", "10", "--max-concurrent", "8") as (base, _):
        run_benchmark(RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False, html=False,
                                out=str(out), input_tokens="16", output_tokens="8", history_check=False,
                                concurrency=[2, 4], num_requests=12, trials=3))
    return next(p.parent for p in out.rglob("result.json")), base


@pytest.mark.slow
def test_levels_csv_has_every_trial_and_the_mean_with_its_interval(trials_run_dir, tmp_path):
    path, _ = trials_run_dir
    run = RunData(path)
    levels_csv, _ = write_csvs([run], tmp_path)
    df = pd.read_csv(levels_csv)
    for lv in run.result.levels:
        block = lv.trials
        assert block is not None and block.n == 3
        rows = df[(df.level == lv.index) & (df.window == "full") & (df.boundary == "node")]
        assert list(rows.row) == ["trial", "trial", "trial", "mean"]  # which row is which, in order
        assert list(rows.trial[:3]) == [1, 2, 3] and pd.isna(rows.trial.iloc[3])
        assert (rows.trials == 3).all()
        per_kw = block.figures["output_tokens_per_s_per_kw@node"]
        tok = block.figures["output_tokens_per_s"]
        for k in range(3):  # each trial's own figure, not the last trial's copied
            assert rows.output_tokens_per_s_per_kw.iloc[k] == pytest.approx(per_kw.values[k], rel=1e-12)
            assert rows.output_tokens_per_s.iloc[k] == pytest.approx(tok.values[k], rel=1e-12)
            assert rows.ttft_ms_p99.iloc[k] == pytest.approx(block.figures["ttft_p99_ms"].values[k], rel=1e-12)
        assert len(set(rows.output_tokens_per_s.iloc[:3])) == 3
        mean = rows.iloc[3]  # the answer's figure: the trials' mean, its interval beside it
        assert mean.output_tokens_per_s_per_kw == pytest.approx(per_kw.mean, rel=1e-12)
        assert mean.output_tokens_per_s_per_kw_ci95_low == pytest.approx(per_kw.ci_low, rel=1e-12)
        assert mean.output_tokens_per_s_per_kw_ci95_high == pytest.approx(per_kw.ci_high, rel=1e-12)
        assert mean.output_tokens_per_s_ci95_low < mean.output_tokens_per_s < mean.output_tokens_per_s_ci95_high
        assert mean.verdict == lv.validity.verdict
        assert rows.output_tokens_per_s_ci95_low.iloc[:3].isna().all()
        # the level's own (last) trial row holds its own measurement
        assert rows.completed.iloc[2] == lv.requests.completed
        assert rows.output_tokens_per_s_per_kw.iloc[2] == pytest.approx(lv.energy["node"].output_tokens_per_s_per_kw)
        assert rows.completed.iloc[:2].isna().all()  # a count no trial record holds is not copied
        steady = df[(df.level == lv.index) & (df.window == "steady") & (df.boundary == "node")]
        s_kw = block.figures_steady["output_tokens_per_s_per_kw@node"]
        assert list(steady.output_tokens_per_s_per_kw) == pytest.approx([*s_kw.values, s_kw.mean], rel=1e-12)


@pytest.mark.slow
def test_requests_csv_says_each_requests_trial_and_server(trials_run_dir, tmp_path):
    path, base = trials_run_dir
    run = RunData(path)
    _, requests_csv = write_csvs([run], tmp_path)
    df = pd.read_csv(requests_csv)
    assert list(df.columns) == REQUEST_COLUMNS
    counts = df.groupby(["level", "trial"]).size()
    assert set(counts.index) == {(i, k) for i in (0, 1) for k in (1, 2, 3)}
    assert len(set(counts)) == 1  # every trial sent the same requests
    for lv in run.result.levels:
        last = df[(df.level == lv.index) & (df.trial == 3) & ~df.warmup]
        assert int(last.ok.sum()) == lv.requests.completed
    assert set(df.target) == {base}


@pytest.mark.slow
def test_report_json_figures_are_the_answers_means_and_list_every_trial(trials_run_dir):
    import json

    from typer.testing import CliRunner

    from wattbench.cli.main import build_app

    path, _ = trials_run_dir
    out = CliRunner().invoke(build_app(), ["report", str(path), "--json"], terminal_width=80)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    run = RunData(path)
    for lv, got in zip(run.result.levels, doc["runs"][0]["levels"]):
        tok, p99 = lv.trials.figures["output_tokens_per_s"], lv.trials.figures["ttft_p99_ms"]
        # one basis: the figures are the trials' means the answer quotes, not the last trial's
        assert got["figures"]["output_tokens_per_s"] == pytest.approx(tok.mean, rel=1e-12)
        assert got["figures"]["ttft_p99_ms"] == pytest.approx(p99.mean, rel=1e-12)
        assert got["figures"]["output_tokens_per_s"] != pytest.approx(lv.throughput.output_tokens_per_s, rel=1e-9)
        assert got["ci95"]["output_tokens_per_s"] == pytest.approx([tok.ci_low, tok.ci_high], rel=1e-12)
        assert "mean_in_flight" not in got["figures"]  # no trial mean of it: it is under its trial only
        assert [t["trial"] for t in got["trials"]] == [1, 2, 3] and all(t["measured"] for t in got["trials"])
        assert [t["figures"]["output_tokens_per_s"] for t in got["trials"]] == pytest.approx(tok.values, rel=1e-12)
        assert got["trials"][2]["figures"]["mean_in_flight"] == pytest.approx(lv.load.mean_in_flight)


@pytest.mark.slow
def test_aiperf_named_twins_in_csv_and_json_match_the_declared_power(trials_run_dir, tmp_path):
    """At a declared 300 W, AIPerf's tokens per joule is the window's output tokens/s over 300 W, its
    energy per total token 1000 · 300 W / total tokens/s (mJ), and its requests/s per W the
    measurement's requests/s over 300 W."""
    import json

    from typer.testing import CliRunner

    from wattbench.cli.main import build_app

    path, _ = trials_run_dir
    run = RunData(path)
    levels_csv, _ = write_csvs([run], tmp_path)
    df = pd.read_csv(levels_csv)
    for lv in run.result.levels:
        be = lv.energy["node"]
        tok_s = be.output_tokens_per_s_per_kw * 0.3  # the window's output tokens/s (declared 0.3 kW)
        total_s = 300.0 / be.j_per_token
        own = df[(df.level == lv.index) & (df.trial == 3) & (df.window == "full")].iloc[0]
        assert own.output_tokens_per_joule == pytest.approx(tok_s / 300.0, rel=1e-9)
        assert own.output_tps_per_watt == pytest.approx(tok_s / 300.0, rel=1e-9)
        assert own.energy_per_total_token == pytest.approx(1000 * 300.0 / total_s, rel=1e-9)
        assert own.energy_per_output_token == pytest.approx(1000 * be.j_per_output_token, rel=1e-12)
        assert own.performance_per_watt == pytest.approx(lv.throughput.requests_per_s / 300.0, rel=1e-9)
        assert pd.isna(own.goodput_per_watt)  # the run has no SLO
        mean = df[(df.level == lv.index) & (df.row == "mean") & (df.window == "full")].iloc[0]
        per_kw = lv.trials.figures["output_tokens_per_s_per_kw@node"]
        assert mean.output_tokens_per_joule == pytest.approx(per_kw.mean / 1000, rel=1e-12)
        assert pd.isna(mean.performance_per_watt)  # a mean rate over a mean power is no mean
    out = CliRunner().invoke(build_app(), ["report", str(path), "--json"], terminal_width=160)
    got = json.loads(out.output)["runs"][0]["levels"][0]["aiperf"]
    lv = run.result.levels[0]
    assert got["boundary"] == "node"
    assert got["output_tokens_per_joule"] == pytest.approx(
        lv.trials.figures["output_tokens_per_s_per_kw@node"].mean / 1000, rel=1e-12)
    assert got["energy_per_total_token"] == pytest.approx(1000 * lv.trials.figures["j_per_token@node"].mean, rel=1e-12)


def test_every_cost_names_its_currency(report_run_dir, tmp_path):
    import json
    import shutil

    from wattbench.report.html import render_html
    from wattbench.report.markdown import write_markdown

    run_dir = tmp_path / "run"
    shutil.copytree(report_run_dir, run_dir)
    doc = json.loads((run_dir / "result.json").read_text())
    doc["config"]["currency"] = "EUR"
    (run_dir / "result.json").write_text(json.dumps(doc))
    run = RunData(run_dir)
    df = pd.read_csv(write_csvs([run], tmp_path / "csv")[0])
    assert (df.cost_currency == "EUR").all() and df.cost_per_million_output_tokens.notna().any()
    html = render_html([run], tmp_path / "r.html").read_text()
    assert "cost/M out tok (EUR)" in html and "cost/M out tok<" not in html
    md = write_markdown([run], tmp_path / "r.md").read_text()
    cost_lines = [ln for ln in md.splitlines() if ln.startswith("| cost per M output tokens")]
    assert cost_lines and all(c.strip().endswith("EUR") or c.strip() == "–" for ln in cost_lines
                              for c in ln.strip("|").split("|")[1:])


@pytest.mark.slow
def test_html_timeline_of_a_trials_level_draws_every_trials_power(trials_run_dir):
    """A past defect: the timeline of a ``--trials`` level drew power over the last trial only."""
    import json
    import re

    from wattbench.report.html import build_html

    path, _ = trials_run_dir
    run = RunData(path)
    page = build_html([run])
    lv = run.result.levels[0]
    first_sent = min(r.sent_ns for r in run.level_requests(lv.index))
    assert first_sent < lv.window.start_ns  # the earlier trials ran before the last trial's window
    payloads = [json.loads(m) for m in re.findall(r'class="plot-data" data-target="[^"]+">(.*?)</script>', page)]
    timeline = next(p for p in payloads if p["layout"].get("title", {}).get("text", "").startswith(f"{lv.label}:"))
    power = [t for t in timeline["data"] if t.get("legendgroup") == "power"]
    assert power
    first_s = (first_sent - run.t0_ns) / 1e9
    assert min(min(t["x"]) for t in power) <= first_s + 0.5  # drawn from the first trial on
    assert f"All {lv.trials.n} trials are drawn" in page
