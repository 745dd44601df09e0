"""Every ratio wattbench stores reads one way, candidate ÷ baseline (B/A), as its answer line prints
it, with ``per_kw_ratio = throughput_ratio / power_ratio`` the one identity: ``compare --json``'s
decompositions and their intervals, ``--at-slo``'s ratios and ``ab``'s paired decomposition, against
two runs whose truth is known — A serves 1,000 tok/s at 500 W, B 950 tok/s at 250 W, so B/A is per kW
1.90×, throughput 0.95×, power 0.50×, J/token 1/1.90. And a file written when ``power_ratio`` was
baseline ÷ candidate (one committed ``compare --json``) reads in this direction through the models."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.fakes.results_factory import make_level, make_result, trials_block
from wattbench.analysis.ab import PairedComparison, paired_compare
from wattbench.analysis.compare import Comparison
from wattbench.cli.main import build_app
from wattbench.core.numbers import fmt_ratio
from wattbench.core.schema import Goodput, NoiseInfo, PairedLevel, PairedRun, Result
from wattbench.results.rundir import write_result

REPO = Path(__file__).resolve().parents[2]
OLD_FILE = REPO / "docs" / "validation-data" / "h100-ladder-2026-12-07b" / "compare-at-slo.json"
SLO = "ttft_p99=500ms"
A_TOK, A_W, B_TOK, B_W = 1000.0, 500.0, 950.0, 250.0
TRUTH = {"per_kw_ratio": (B_TOK / B_W) / (A_TOK / A_W), "throughput_ratio": B_TOK / A_TOK, "power_ratio": B_W / A_W,
         "j_per_output_token_ratio": (B_W / B_TOK) / (A_W / A_TOK)}


def _run(run_id: str, tok: float, watts: float, half_width: float) -> Result:
    """One level at c=8 with 5 trials (so every ratio has an interval) and its goodput under ``SLO``."""
    blk = trials_block({"output_tokens_per_s": (tok, half_width * tok), "avg_power_w": (watts, half_width * watts)})
    lv = make_level(0, value=8, output_tokens_per_s=tok, power_w=watts, ttft_p99_ms=300.0, trials=blk)
    lv.goodput = Goodput.model_validate({
        "slos": [{"metric": "ttft", "stat": "p99", "threshold_ms": 500.0}], "output_tokens_per_s": tok,
        "per_kw": {"accelerator": {"output_tokens_per_s_per_kw": tok / (watts / 1000.0)}}})
    r = make_result(run_id, levels=[lv])
    r.config.slo = SLO
    return r


def _log_symmetric_around(ci: dict[str, Any], value: float) -> bool:
    return ci["low"] < value < ci["high"] and ci["low"] * ci["high"] == pytest.approx(value ** 2, rel=1e-9)


def test_compare_json_and_at_slo_store_every_ratio_as_printed_b_over_a(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBENCH_DB", str(tmp_path / "hist.sqlite3"))
    write_result(tmp_path / "a", _run("run-a", A_TOK, A_W, 0.02))
    write_result(tmp_path / "b", _run("run-b", B_TOK, B_W, 0.03))
    r = CliRunner().invoke(build_app(), ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["ratio_direction"] == "candidate/baseline"
    row = data["levels"][0]
    d = row["decompositions"][0]
    for k, want in TRUTH.items():
        assert d[k] == pytest.approx(want, rel=1e-9), k
    assert d["per_kw_ratio"] == pytest.approx(d["throughput_ratio"] / d["power_ratio"], rel=1e-12)
    assert d["j_per_output_token_ratio"] == pytest.approx(1.0 / d["per_kw_ratio"], rel=1e-12)
    # each interval is of its ratio in the same direction: around it, log-symmetric; per kW's from both
    for k in ("per_kw", "throughput", "power"):
        assert _log_symmetric_around(d[f"{k}_ci"], d[f"{k}_ratio"]), k
    w = {k: math.log(d[f"{k}_ci"]["high"] / d[f"{k}_ci"]["low"]) / 2 for k in ("per_kw", "throughput", "power")}
    assert w["per_kw"] == pytest.approx(math.hypot(w["throughput"], w["power"]), rel=1e-9)
    assert w["power"] == pytest.approx(math.hypot(0.02, 0.03), rel=1e-9)
    # the side-by-side figures' ratios are the stored ones
    fa, fb = row["figures"]
    assert d["power_ratio"] == pytest.approx(fb["avg_power_w"] / fa["avg_power_w"], rel=1e-12)
    # the answer line prints the stored fields in their order, the power term as stored
    assert f" = throughput {fmt_ratio(d['throughput_ratio'])} ÷ power {fmt_ratio(d['power_ratio'])}" in row["answers"][0]
    assert "throughput 0.95× ÷ power 0.50×" in row["answers"][0]

    at = data["at_slo"]
    assert at["levels"] == ["c=8", "c=8"]
    assert at["ratio"][0] == pytest.approx(TRUTH["per_kw_ratio"], rel=1e-9)
    assert at["throughput_ratio"][0] == pytest.approx(TRUTH["throughput_ratio"], rel=1e-9)
    assert at["power_ratio"][0] == pytest.approx(TRUTH["power_ratio"], rel=1e-9)
    assert at["ratio"][0] == pytest.approx(at["throughput_ratio"][0] / at["power_ratio"][0], rel=1e-12)
    assert f": throughput {fmt_ratio(at['throughput_ratio'][0])} ÷ power {fmt_ratio(at['power_ratio'][0])} " \
        in at["lines"][0]
    # what a terminal shows: the same three figures
    r = CliRunner().invoke(build_app(), ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert "= throughput 0.95× ÷ power 0.50×" in r.output and "throughput 0.95× ÷ power 0.50× (A at c=8" in r.output


def _paired_runs() -> tuple[Result, Result]:
    """Scripted pairs: B's throughput 0.95× A's with ±1–2% per pair (geometric mean exactly 0.95),
    A at 500 W and B at 250 W throughout."""
    n = 4
    jitter = [1.01, 1 / 1.01, 1.02, 1 / 1.02]
    tb = [B_TOK * j for j in jitter]
    lv = PairedLevel(key="c=8", label="concurrency=8", index=0, boundary="accelerator",
                     a_tokens_per_s=[A_TOK] * n, b_tokens_per_s=tb, a_power_w=[A_W] * n, b_power_w=[B_W] * n,
                     a_per_kw=[A_TOK / (A_W / 1000.0)] * n, b_per_kw=[t / (B_W / 1000.0) for t in tb])
    a, b = make_result(run_id="run-a"), make_result(run_id="run-b")
    a.noise = NoiseInfo(paired=PairedRun(role="A", other_run_id="run-b", levels=[lv],
                                         sequence=["A c=8", "B c=8", "B c=8", "A c=8"] * 2))
    b.noise = NoiseInfo(paired=PairedRun(role="B", other_run_id="run-a", levels=[lv]))
    return a, b


def test_ab_json_stores_the_paired_ratios_b_over_a():
    cmp = paired_compare(*_paired_runs())
    data = cmp.model_dump(mode="json")  # what ``ab --json`` writes as "comparison"
    assert data["ratio_direction"] == "candidate/baseline"
    lv = data["levels"][0]
    d = lv["decomposition"]
    for k in ("per_kw_ratio", "throughput_ratio", "power_ratio"):
        assert d[k] == pytest.approx(TRUTH[k], rel=1e-12), k
    assert d["per_kw_ratio"] == pytest.approx(d["throughput_ratio"] / d["power_ratio"], rel=1e-12)
    # the power is constant over the pairs: its interval is the point; the others are around theirs
    assert d["power_ci"]["low"] == pytest.approx(0.5, rel=1e-12) and d["power_ci"]["high"] == pytest.approx(0.5, rel=1e-12)
    for k in ("per_kw", "throughput"):
        assert _log_symmetric_around(d[f"{k}_ci"], d[f"{k}_ratio"]), k
    assert "= throughput 0.95× ÷ power 0.50×" in lv["answer"]
    # written and read back, nothing turns over
    again = PairedComparison.model_validate(json.loads(json.dumps(data)))
    assert again.levels[0].decomposition.power_ratio == pytest.approx(0.5, rel=1e-12)


def test_an_ab_json_written_before_the_direction_field_reads_b_over_a():
    """Before ``ratio_direction``, ``ab``'s decomposition stored power A ÷ B (2.0 here) and its
    interval the same way; read through the model it is B ÷ A, the interval turned end for end."""
    data = paired_compare(*_paired_runs()).model_dump(mode="json")
    old = json.loads(json.dumps(data))
    del old["ratio_direction"]
    old["levels"][0]["decomposition"].update(power_ratio=2.0, power_ci={"low": 1.9, "high": 2.1, "confidence": 0.95,
                                                                        "method": "paired"})
    d = PairedComparison.model_validate(old).levels[0].decomposition
    assert d.power_ratio == pytest.approx(0.5, rel=1e-12)
    assert (d.power_ci.low, d.power_ci.high) == pytest.approx((1 / 2.1, 1 / 1.9), rel=1e-12)
    assert d.per_kw_ratio == pytest.approx(d.throughput_ratio / d.power_ratio, rel=1e-12)


def test_a_committed_compare_json_of_the_old_direction_reads_right():
    raw = json.loads(OLD_FILE.read_text())
    assert "ratio_direction" not in raw  # written when power_ratio was baseline ÷ candidate
    cmp = Comparison.model_validate(raw)
    assert cmp.ratio_direction == "candidate/baseline"
    checked = 0
    for row_raw, row in zip(raw["levels"], cmp.levels):
        for d_raw, d in zip(row_raw["decompositions"], row.decompositions):
            fa, fb = row_raw["figures"][0], row_raw["figures"][1]
            # the file's own figures: its power_ratio was A ÷ B; read, it is B ÷ A
            assert d_raw["power_ratio"] == pytest.approx(fa["avg_power_w"] / fb["avg_power_w"], rel=1e-9)
            assert d.power_ratio == pytest.approx(fb["avg_power_w"] / fa["avg_power_w"], rel=1e-9)
            assert d.per_kw_ratio == pytest.approx(d.throughput_ratio / d.power_ratio, rel=1e-6)
            assert d.per_kw_ratio == d_raw["per_kw_ratio"] and d.throughput_ratio == d_raw["throughput_ratio"]
            if d_raw.get("power_ci"):
                assert d.power_ci.low == pytest.approx(1 / d_raw["power_ci"]["high"], rel=1e-12)
                assert d.power_ci.high == pytest.approx(1 / d_raw["power_ci"]["low"], rel=1e-12)
            # the line the old code printed reads the power term as the model now holds it
            assert f"÷ power {fmt_ratio(d.power_ratio)}" in row_raw["answers"][0]
            checked += 1
    assert checked >= 2
    # --at-slo's ratios were B ÷ A already: read as written
    assert cmp.at_slo is not None and cmp.at_slo.power_ratio == raw["at_slo"]["power_ratio"]
    # dumped and read again (now with the field), nothing turns over twice
    again = Comparison.model_validate(json.loads(cmp.model_dump_json()))
    assert [d.power_ratio for row in again.levels for d in row.decompositions] == \
        [d.power_ratio for row in cmp.levels for d in row.decompositions]
