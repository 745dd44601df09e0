"""The compare / regress / history / agree commands end to end (in-process CliRunner, plus one
real `python -m wattbench` subprocess)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes.agree_servers import FakeOpenAIServer
from tests.fakes.results_factory import make_level, make_result
from wattbench.cli.main import build_app
from wattbench.results.rundir import write_result

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def app():
    return build_app()


@pytest.fixture
def db(tmp_path, monkeypatch):
    p = tmp_path / "hist.sqlite3"
    monkeypatch.setenv("WATTBENCH_DB", str(p))
    return p


def _platform_dirs(tmp_path):
    big = make_result("run-1400w", power_limit_w=1400.0,
                      levels=[make_level(0, value=8, output_tokens_per_s=2000.0, power_w=1400.0)])
    small = make_result("run-700w", power_limit_w=700.0,
                        levels=[make_level(0, value=8, output_tokens_per_s=1900.0, power_w=700.0)])
    write_result(tmp_path / "big", big)
    write_result(tmp_path / "small", small)
    return tmp_path / "big", tmp_path / "small"


def test_compare_platform_claim_from_files(runner, app, tmp_path, db):
    big, small = _platform_dirs(tmp_path)
    r = runner.invoke(app, ["compare", str(big), str(small)])
    assert r.exit_code == 0, r.output
    assert "per kW: 1.90× = throughput 0.95× ÷ power 0.50×" in r.output
    r = runner.invoke(app, ["compare", str(big), str(small), "--json"])
    data = json.loads(r.stdout)
    d = data["levels"][0]["decompositions"][0]
    assert d["per_kw_ratio"] == pytest.approx(1.9)
    assert d["throughput_ratio"] == pytest.approx(0.95) and d["power_ratio"] == pytest.approx(0.5)
    assert not db.exists()  # comparing paths needs no history


def test_compare_refusal_and_force(runner, app, tmp_path, db):
    a = make_result("a")
    b = make_result("b", model="other-model", engine_version="0.12.0")
    write_result(tmp_path / "a", a)
    write_result(tmp_path / "b", b)
    r = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert r.exit_code == 2
    assert "not comparable: model differs" in r.stderr and "engine version differs" in r.stderr
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--force"])
    assert r.exit_code == 0, r.output
    assert "compared with --force despite" in r.output
    assert "model differs: Qwen/Qwen2.5-0.5B-Instruct vs other-model" in r.output
    assert "engine_changed" in r.output
    out = tmp_path / "cmp.json"
    r = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--force", "--json",
                            "--out", str(out)])
    data = json.loads(r.stdout)
    assert data["forced"] is True and {p["field"] for p in data["incomparable"]} == {"model", "engine_version"}
    assert json.loads(out.read_text())["findings"][0]["id"] == "engine_changed"


def test_compare_missing_and_corrupt_files_named(runner, app, tmp_path, db):
    big, _ = _platform_dirs(tmp_path)
    r = runner.invoke(app, ["compare", str(big), str(tmp_path / "run-x")])
    assert r.exit_code == 2
    assert f"{tmp_path / 'run-x'}: no such run directory" in r.stderr
    (tmp_path / "run-y").mkdir()
    r = runner.invoke(app, ["compare", str(big), str(tmp_path / "run-y")])
    assert r.exit_code == 2 and f"{tmp_path / 'run-y' / 'result.json'}: missing" in r.stderr
    bad = tmp_path / "run-z"
    bad.mkdir()
    text = (big / "result.json").read_text().splitlines()
    text[2] = text[2] + ","  # a stray comma on line 3
    (bad / "result.json").write_text("\n".join(text))
    r = runner.invoke(app, ["compare", str(big), str(bad)])
    assert r.exit_code == 2
    assert f"{bad / 'result.json'}: not valid JSON at line" in r.stderr
    data = json.loads((big / "result.json").read_text())
    del data["clock"]
    (bad / "result.json").write_text(json.dumps(data))
    r = runner.invoke(app, ["compare", str(big), str(bad)])
    assert r.exit_code == 2 and f"{bad / 'result.json'}: missing field clock" in r.stderr


def test_regress_exit_codes(runner, app, tmp_path, db):
    """0 pass, 1 fail, 6 inconclusive, 2 bad input (README, "Exit codes"). Six runs of the
    configuration in the history (tokens/s 998-1,003: sd about 0.2%, 5 df) give each run a noise of
    about ±0.5%: a candidate with no change passes, a 10% drop fails; without the history, the same
    pair is inconclusive (no noise known), and --strict judges the change itself."""
    def run(name, tput, power=600.0):
        return make_result(name, levels=[make_level(0, value=8, output_tokens_per_s=tput, power_w=power)])

    for r in (run(f"h{i}", t) for i, t in enumerate((1000.0, 1003.0, 998.0, 1002.0, 999.0, 1001.0))):
        write_result(tmp_path / "runs" / r.run_id, r)
    for r in (run("ok", 997.0), run("bad", 900.0)):  # the candidates: not in the history
        write_result(tmp_path / r.run_id, r)
    ok, bad = str(tmp_path / "ok"), str(tmp_path / "bad")
    r = runner.invoke(app, ["history", "import", str(tmp_path / "runs")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["history", "baseline", "main", "h0"])
    assert r.exit_code == 0 and "main -> h0" in r.output
    checks = "j_per_output_token:+5%,output_tokens_per_s:-3%"
    r = runner.invoke(app, ["regress", ok, "--baseline", "main", "--fail-on", checks])
    assert r.exit_code == 0, r.output
    assert "all checks hold" in r.output and "excludes a change beyond -3%" in r.output
    r = runner.invoke(app, ["regress", bad, "--baseline", "main", "--fail-on", checks])
    assert r.exit_code == 1, r.output
    assert "FAIL output_tokens_per_s:-3% at concurrency=8" in r.output and "beyond noise" in r.output
    r = runner.invoke(app, ["regress", bad, "--baseline", "main", "--fail-on", checks, "--json"])
    assert r.exit_code == 1
    data = json.loads(r.stdout)
    assert data["passed"] is False and data["verdict"] == "fail"
    assert len([o for o in data["outcomes"] if o["status"] == "fail"]) == 2
    # the same pair without a history: no noise known, so no pass and no fail
    paths = [ok, str(tmp_path / "runs" / "h0")]
    r = runner.invoke(app, ["regress", paths[0], "--baseline", paths[1], "--fail-on", checks, "--db",
                            str(tmp_path / "none.sqlite3")])
    assert r.exit_code == 6, r.output
    assert "2 inconclusive: none failed" in r.output and r.output.count("inconclusive: noise unknown") == 2
    r = runner.invoke(app, ["regress", paths[0], "--baseline", paths[1], "--fail-on", checks, "--db",
                            str(tmp_path / "none.sqlite3"), "--strict"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["regress", bad, "--baseline", "main", "--fail-on", "nonsense:+5%"])
    assert r.exit_code == 2 and "unknown metric 'nonsense'" in r.stderr
    r = runner.invoke(app, ["regress", bad, "--baseline", "nobaseline", "--fail-on", checks])
    assert r.exit_code == 2 and "'nobaseline': no such run directory, run id, tag or baseline" in r.stderr


def test_regress_with_noise_wider_than_its_limit_is_inconclusive_exit_6(runner, app, tmp_path, db):
    """Both runs' trials give ±11.7% a side (the ratio's bound e^(√2·ln(1.18)/√2) − 1 = ±18%), the
    figure moved -1%, the limit is 3%: compare says "within noise"; regress cannot tell a 3% drop
    from none — inconclusive (exit 6), naming the noise and the limit and what would settle it."""
    from tests.fakes.results_factory import trials_block

    h = math.log(1.18) / math.sqrt(2)

    def run(name, tput):
        per_kw = tput / 0.6
        trials = trials_block({"output_tokens_per_s_per_kw@accelerator": (per_kw, per_kw * h)})
        return make_result(name, levels=[make_level(0, value=8, output_tokens_per_s=tput, power_w=600.0, trials=trials)])
    for r in (run("a", 1000.0), run("b", 990.0)):
        write_result(tmp_path / r.run_id, r)
    cmp = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert cmp.exit_code == 0 and "within noise" in cmp.output, cmp.output
    r = runner.invoke(app, ["regress", str(tmp_path / "b"), "--baseline", str(tmp_path / "a"), "--fail-on",
                            "output_tokens_per_s_per_kw:-3%"])
    assert r.exit_code == 6, r.output
    text = " ".join(r.output.split())
    assert "c=8: run/baseline per kW 0.99× (0.84–1.17), within noise" in text  # compare's word, unchanged
    line = next(x for x in r.output.splitlines() if x.startswith("inconclusive output_tokens_per_s_per_kw:-3%"))
    assert "noise ±18.0% (within-run trials (5 trials, 4 df)) is wider than the 3% limit" in line
    assert "the current noise resolves only effects beyond ±18.0%; to resolve ±3%:" in line
    assert "more trials of the baseline" in line and "more trials of the run" in line
    assert "pass" not in line and "within noise" not in line
    assert "0 held, 1 inconclusive: none failed" in text
    data = json.loads(runner.invoke(app, ["regress", str(tmp_path / "b"), "--baseline", str(tmp_path / "a"),
                                          "--fail-on", "output_tokens_per_s_per_kw:-3%", "--json"]).stdout)
    assert data["verdict"] == "inconclusive" and data["passed"] is False
    assert data["outcomes"][0]["status"] == "inconclusive" and data["outcomes"][0]["word"] == "within noise"


def test_regress_shows_passing_checks_diagnoses_power_and_refuses_itself(runner, app, tmp_path, db):
    """Every check is a line (the passing ones too); J/token that moved with power while throughput
    held gets its diagnosis; a baseline that is the run itself is refused in one line, exit 2."""
    base = make_result("base", levels=[make_level(0, value=8, output_tokens_per_s=1000, power_w=600)])
    hot = make_result("hot", levels=[make_level(0, value=8, output_tokens_per_s=1001, power_w=660)])
    for r in (base, hot):
        write_result(tmp_path / r.run_id, r)
    r = runner.invoke(app, ["regress", str(tmp_path / "hot"), "--baseline", str(tmp_path / "base"),
                            "--fail-on", "j_per_output_token:+5%,output_tokens_per_s:-3%", "--strict"])
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert any(x.startswith("FAIL j_per_output_token:+5% at concurrency=8") for x in lines), r.output
    assert any(x.startswith("ok   output_tokens_per_s:-3% holds at concurrency=8") for x in lines), r.output
    assert "j_per_token_follows_power" in r.output and "moved with power +10.0%" in r.output
    r = runner.invoke(app, ["regress", str(tmp_path / "hot"), "--baseline", str(tmp_path / "hot")])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "the baseline is the run itself (hot)" in r.stderr
    assert "Traceback" not in r.output


def test_compare_shows_one_verdict_line_per_run_not_its_findings(runner, app, tmp_path, db):
    """compare once pasted each run's whole verdict (~1,500 characters); now one line per run."""
    from wattbench.accounting.findings import verdicts
    from wattbench.core.schema import Finding

    a = make_result("a", levels=[make_level(0, value=8), make_level(1, value=1)])
    b = make_result("b", levels=[make_level(0, value=8), make_level(1, value=1)])
    long = "input tokens asked 256, the server counted 400 on average (+56%): " + "x" * 300
    for r in (a, b):
        for lv in r.levels:
            lv.validity = verdicts([Finding(kind="prompt_lengths", severity="warn", figures=("prompt_lengths",),
                                            effect_pct=56.0, text=long, summary="prompt lengths {effect:+}"),
                                    Finding(kind="small_sample", severity="note", figures=("ttft",),
                                            text="p99 from 32 requests", summary="p99 from few requests")])
        r.validity = verdicts([]).model_copy(update={"verdict": "warn", "latency": "warn"})
        write_result(tmp_path / r.run_id, r)
    r = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert "x" * 50 not in r.output  # no finding's text pasted
    verdict_lines = [x for x in r.output.splitlines() if x.startswith(("baseline a:", "run b:"))]
    # the run's notes counted as its summary counts them: one per distinct finding (two levels share each)
    assert verdict_lines == ["baseline a: warn (efficiency) · latency warn · 2 notes (1 warn, 1 note) (wattbench "
                             "report --notes)", "run b: warn (efficiency) · latency warn · 2 notes (1 warn, 1 note) "
                             "(wattbench report --notes)"], r.output
    data = json.loads(runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]).stdout)
    assert [(v["run_id"], v["verdict"], v["latency"], v["warnings"], v["notes"]) for v in data["verdicts"]] == [
        ("a", "warn", "warn", 1, 1), ("b", "warn", "warn", 1, 1)]
    assert not any(long[:40] in w for w in data["warnings"])


def test_history_round_trip(runner, app, tmp_path, db):
    big, small = _platform_dirs(tmp_path)
    r = runner.invoke(app, ["history", "import", str(tmp_path)])
    assert "2 run(s) imported" in r.output
    r = runner.invoke(app, ["history", "tag", "run-700w", "candidate"])
    assert r.exit_code == 0 and "candidate -> run-700w" in r.output
    r = runner.invoke(app, ["history", "tag", "run-1400w", "candidate"])
    assert r.exit_code == 2 and "pass --force" in r.stderr
    r = runner.invoke(app, ["history", "list", "--json"])
    runs = json.loads(r.stdout)
    assert {x["run_id"] for x in runs} == {"run-1400w", "run-700w"}
    r = runner.invoke(app, ["history", "show", "candidate", "--json"])
    rec = json.loads(r.stdout)
    assert rec["run_id"] == "run-700w" and rec["levels"][0]["avg_power_w"] == 700
    assert rec["path"] == str(small.resolve())
    r = runner.invoke(app, ["history", "show", "run-7"])
    assert r.exit_code == 0 and "run-700w" in r.output
    r = runner.invoke(app, ["history", "list"])
    assert r.exit_code == 0 and "run-700w" in r.output
    # compare by tag and id through the history
    r = runner.invoke(app, ["compare", "run-1400w", "candidate", "--json"])
    assert json.loads(r.stdout)["levels"][0]["decompositions"][0]["per_kw_ratio"] == pytest.approx(1.9)


def test_agree_cli_stores_and_registers(runner, app, tmp_path, db):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "bye"}\n')
    with FakeOpenAIServer("m", {"hi": "hello there", "bye": "see you soon"}) as a, \
            FakeOpenAIServer("m-q", {"hi": "hello there", "bye": "see ya"}) as b:
        out = tmp_path / "agree-run"
        r = runner.invoke(app, ["agree", a.url, b.url, "--prompts", str(prompts), "--out", str(out),
                                "--max-tokens", "16", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["metrics"]["exact_match_rate"] == pytest.approx(0.5, rel=1e-9)
    assert (out / "agreement.json").exists()
    r = runner.invoke(app, ["history", "list", "--kind", "agree", "--json"])
    runs = json.loads(r.stdout)
    assert len(runs) == 1 and runs[0]["summary"]["exact_match_rate"] == pytest.approx(0.5, rel=1e-9) and runs[0]["model"] == "m vs m-q"
    # shown next to an energy comparison
    big, small = _platform_dirs(tmp_path / "runs")
    r = runner.invoke(app, ["compare", str(big), str(small), "--agreement", data["run_id"]])
    assert r.exit_code == 0, r.output
    assert "output agreement" in r.output and "exact match 50.0%" in r.output


def test_subprocess_python_m(tmp_path):
    big, small = _platform_dirs(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), WATTBENCH_DB=str(tmp_path / "h.sqlite3"))
    p = subprocess.run([sys.executable, "-m", "wattbench", "compare", str(big), str(small), "--json"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["levels"][0]["decompositions"][0]["per_kw_ratio"] == pytest.approx(1.9)
    p = subprocess.run([sys.executable, "-m", "wattbench", "compare", str(big), str(tmp_path / "nope")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().startswith("wattbench: error:") and "nope: no such run directory" in p.stderr
    assert "Traceback" not in p.stderr


def test_compare_one_ratio_direction_on_screen(runner, app, tmp_path, db):
    """The table's power cell and the summary line read the same direction (candidate ÷ baseline),
    numbers in the report's format (thousands separators)."""
    big, small = _platform_dirs(tmp_path)
    r = runner.invoke(app, ["compare", str(big), str(small)])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "A = baseline run-1400w · B = run-700w" in flat  # every ratio: B ÷ A
    # the answer line leads, before any table: the table's ratios, and what the noise can say
    assert "c=8: B/A per kW 1.90×, inconclusive (noise unknown) = throughput 0.95× ÷ power 0.50×" in flat
    assert flat.index("c=8: B/A per kW") < flat.index("tok/s per kW")
    assert "700 (0.50×)" in flat and "power 0.50×" in flat
    assert "(2.00×)" not in flat and "power 2.00×" not in flat
    assert "1,900 (0.95×)" in flat and "2,000" in flat


@pytest.mark.parametrize("args, needle", [
    (["--since", "yesterday"], "--since 'yesterday'"),
    (["--kind", "bogus"], "--kind 'bogus'"),
])
def test_history_list_refuses_nonsense(runner, app, db, args, needle):
    r = runner.invoke(app, ["history", "list", *args])
    assert r.exit_code == 2, r.output
    assert needle in r.output and len([x for x in r.output.splitlines() if x.strip()]) == 1


def test_history_list_and_show_at_80_columns(runner, app, tmp_path, db, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _platform_dirs(tmp_path)
    assert runner.invoke(app, ["history", "import", str(tmp_path)]).exit_code == 0
    r = runner.invoke(app, ["history", "list", "--since", "2000-01-01"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(len(x) for x in lines) <= 80
    head = next(x for x in lines if "run id" in x)
    # one line of headers, not letters; one line per run: its id (shortened as git shortens a
    # commit), the headline and verdict first, then where the load went and the configuration
    assert head.split()[:6] == ["run", "id", "tok/s/kW", "verdict", "target", "config"]
    assert len(lines) == 2 + len([x for x in lines[2:] if x.startswith("run-")])
    row = next(x for x in lines if x.startswith("run-700w "))
    # results written before server identities say so; the headline figure is the answer line's
    assert "identity unknown" in row and "c=8 2,714 accelerator" in row, r.output  # 1,900 tok/s / 0.7 kW
    r = runner.invoke(app, ["history", "show", "run-700w"])
    assert r.exit_code == 0, r.output
    assert "1,900" in r.output  # the report's number format (thousands separators)


def _docs_prompts_file(tmp_path) -> Path:
    """The prompts example of docs/compare.md, exactly as written there."""
    text = (REPO / "docs" / "compare.md").read_text()
    block = text.split("## `wattbench agree", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    p = tmp_path / "prompts.jsonl"
    p.write_text(block)
    return p


@pytest.mark.parametrize("how", ["flag", "env"])
def test_agree_docs_example_with_api_key(runner, app, tmp_path, db, monkeypatch, how):
    """docs/compare.md's prompts file (prompt and messages rows together) works as written, without
    --api chat; the key comes from --api-key or WATTBENCH_API_KEY; the id has the run-id format."""
    prompts = _docs_prompts_file(tmp_path)
    key = "sk-agree-test-123"
    answers = {"What is the capital of France?": "Paris",
               "Reply in JSON with name and age": '{"name": "Ada", "age": 36}'}
    args = ["--api-key", key] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("WATTBENCH_API_KEY", key)
    with FakeOpenAIServer("m", answers, api_key=key) as a, FakeOpenAIServer("m", answers, api_key=key) as b:
        r = runner.invoke(app, ["agree", a.url, b.url, "--prompts", str(prompts), "--out", str(tmp_path / "o"),
                                "--json", *args])
        paths = sorted({q["_path"] for q in a.requests})
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["metrics"]["prompts"] == 3 and data["metrics"]["compared"] == 3
    assert data["metrics"]["structured_valid_rate_a"] == pytest.approx(0.5, rel=1e-9)  # q2 answers its JSON; q3 gets the default text
    assert paths == ["/v1/chat/completions", "/v1/completions"]  # each row to its own API
    import re

    assert re.fullmatch(r"agree-\d{8}-\d{6}-[0-9a-f]{6}", data["run_id"]), data["run_id"]
    assert key not in (tmp_path / "o" / "agreement.json").read_text()


def test_run_ids_are_never_cut_at_80_columns(runner, app, tmp_path, db, monkeypatch):
    """A past defect: at 80 columns history list and compare cut run ids to ``20261201-121821-2a2a…``, so
    two runs of the same minute looked identical. Each id is shown whole (compare folds it)."""
    monkeypatch.setenv("COLUMNS", "80")
    ids = [f"20261201-121821-2a2a5{c}" for c in "abc"]
    for rid in ids:
        write_result(tmp_path / rid, make_result(rid, levels=[make_level(0, value=8, power_w=500.0)]))
        assert runner.invoke(app, ["history", "import", str(tmp_path / rid)]).exit_code == 0
    runner.invoke(app, ["history", "tag", ids[2], "a-long-tag-name-here"])
    r = runner.invoke(app, ["history", "list", "--since", "2000-01-01"])
    assert r.exit_code == 0, r.output
    assert max(len(x) for x in r.output.splitlines()) <= 80
    for rid in ids:
        assert any(x.startswith(rid + " ") for x in r.output.splitlines()), r.output
    r = runner.invoke(app, ["compare", *ids])
    assert r.exit_code == 0, r.output
    head = [x for x in r.output.splitlines() if x.startswith("┃")][:2]
    cells = [[c.strip() for c in x.strip("┃").split("┃")] for x in head]
    assert [a + b.split(" ")[0] for a, b in zip(cells[0][1:], cells[1][1:])] == ids
