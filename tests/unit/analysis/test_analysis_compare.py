"""compare: level matching, the per-kW decomposition, CIs, comparability refusal and --force."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.results_factory import make_level, make_result, trials_block
from wattbench.analysis.compare import compare
from wattbench.analysis.ratios import log_ratio_ci
from wattbench.results.headline import TrialCI
from wattbench.core.errors import UserError
from wattbench.core.schema import TrialsBlock


def _platforms():
    big = make_result("gpu-1400w", power_limit_w=1400.0, gpu_name="BigGPU",
                      levels=[make_level(0, value=8, output_tokens_per_s=2000.0, power_w=1400.0),
                              make_level(1, value=32, output_tokens_per_s=5000.0, power_w=1400.0)])
    small = make_result("gpu-700w", power_limit_w=700.0, gpu_name="SmallGPU",
                        levels=[make_level(0, value=8, output_tokens_per_s=1900.0, power_w=700.0),
                                make_level(1, value=32, output_tokens_per_s=4750.0, power_w=700.0)])
    return big, small


def test_platform_claim_decomposition():
    big, small = _platforms()
    c = compare([big, small])
    assert c.boundary == "accelerator"
    assert [lv.key for lv in c.levels] == ["concurrency=8", "concurrency=32"]
    d = c.levels[0].decompositions[0]
    assert d.throughput_ratio == pytest.approx(0.95)
    assert d.power_ratio == pytest.approx(0.5)  # 700 W ÷ 1400 W: candidate ÷ baseline, as printed
    assert d.per_kw_ratio == pytest.approx(1.9)
    assert d.j_per_output_token_ratio == pytest.approx(1 / 1.9)
    assert d.text() == "per kW: 1.90× = throughput 0.95× ÷ power 0.50×"  # candidate ÷ baseline, as the table
    # the side-by-side per-kW figures agree with the ratio
    f = c.levels[0].figures
    assert f[1]["output_tokens_per_s_per_kw"] / f[0]["output_tokens_per_s_per_kw"] == pytest.approx(1.9)
    assert c.incomparable == [] and not c.forced
    # a platform that does 95% of the work at half the power is not diagnosed as throttled
    assert not [x for x in c.findings if x.id == "throughput_and_power_down"]


def test_match_by_key_ignores_order_and_reports_unmatched():
    a = make_result("a", levels=[make_level(0, value=1, output_tokens_per_s=100, power_w=300),
                                 make_level(1, value=8, output_tokens_per_s=800, power_w=600)])
    b = make_result("b", levels=[make_level(0, value=8, output_tokens_per_s=880, power_w=600),
                                 make_level(1, value=64, output_tokens_per_s=2000, power_w=690)])
    c = compare([a, b])
    assert [lv.key for lv in c.levels] == ["concurrency=8"]
    assert c.levels[0].indices == [1, 0]
    assert c.levels[0].decompositions[0].per_kw_ratio == pytest.approx(1.1)
    assert "a: concurrency=1 not in b" in c.unmatched
    assert "b: concurrency=64 not in a" in c.unmatched


def test_match_by_index_flags_level_difference():
    a = make_result("a", levels=[make_level(0, value=8, output_tokens_per_s=800, power_w=600)])
    b = make_result("b", levels=[make_level(0, value=16, output_tokens_per_s=1200, power_w=650)])
    with pytest.raises(UserError, match="no load level of b matches one of a"):
        compare([a, b])
    with pytest.raises(UserError, match="concurrency/rate differs: concurrency=8 vs concurrency=16"):
        compare([a, b], match="index")
    c = compare([a, b], match="index", force=True)
    assert [p.field for p in c.incomparable] == ["load_level"]
    assert c.levels[0].decompositions[0].per_kw_ratio == pytest.approx(1.5 * 600 / 650)


def test_refusal_lists_every_reason():
    a = make_result("a")
    b = make_result("b", model="meta-llama/Llama-3.1-8B", dtype="fp8", engine_version="0.12.0",
                    workload="summarize", output_tokens="512", slo="ttft_p99=500ms")
    with pytest.raises(UserError) as ei:
        compare([a, b])
    msg = str(ei.value)
    for part in ("model differs: Qwen/Qwen2.5-0.5B-Instruct vs meta-llama/Llama-3.1-8B",
                 "dtype/precision differs: bfloat16 vs fp8", "engine version differs: 0.11.0 vs 0.12.0",
                 "workload differs: chat vs summarize", "requested output length differs: 128 vs 512",
                 "SLO differs: None vs ttft_p99=500ms", "--force"):
        assert part in msg
    c = compare([a, b], force=True)
    assert c.forced
    assert {p.field for p in c.incomparable} == {"model", "precision", "engine_version", "workload",
                                                 "output_tokens", "slo"}


def test_sensor_method_and_achieved_length():
    a = make_result("a", levels=[make_level(0, value=8, method="counter")])
    b = make_result("b", levels=[make_level(0, value=8, method="power_integral")])
    with pytest.raises(UserError, match="sensor method at accelerator differs: counter/measured vs "
                                        "power_integral/measured at concurrency=8"):
        compare([a, b])
    c = make_result("c", levels=[make_level(0, value=8, output_len=100)])
    with pytest.raises(UserError, match=r"achieved mean output length differs by more than 10%: 128.2 vs 100.0 tokens"):
        compare([a, c])


def test_boundary_default_outermost_and_never_mixed():
    a = make_result("a", levels=[make_level(0, value=8, power_w={"accelerator": 600, "node": 1000, "wall": 1100})])
    b = make_result("b", levels=[make_level(0, value=8, power_w={"accelerator": 500, "node": 800})])
    assert compare([a, b]).boundary == "node"
    assert compare([a, b]).levels[0].decompositions[0].power_ratio == pytest.approx(800 / 1000)
    assert compare([a, b], boundary="accelerator").levels[0].decompositions[0].power_ratio == pytest.approx(500 / 600)
    with pytest.raises(UserError, match="run b has no wall power at c=8 .*never compared"):
        compare([a, b], boundary="wall", force=True)


def test_three_runs_each_against_first():
    a = make_result("a", levels=[make_level(0, value=8, output_tokens_per_s=1000, power_w=500)])
    b = make_result("b", levels=[make_level(0, value=8, output_tokens_per_s=1100, power_w=500)])
    c = make_result("c", levels=[make_level(0, value=8, output_tokens_per_s=1000, power_w=400)])
    cmp = compare([a, b, c])
    ds = cmp.levels[0].decompositions
    assert [d.candidate for d in ds] == ["b", "c"]
    assert [round(d.per_kw_ratio, 4) for d in ds] == pytest.approx([1.1, 1.25], rel=1e-9)
    assert len(cmp.levels[0].figures) == 3


def test_ci_propagation_log_delta():
    """The ratio CIs mean what they say, checked against the truth rather than the formula: runs
    drawn 1,000 times (seeded) with known means — throughput 1000 vs 950 (true ratio 0.95), power
    1400 vs 700 (2.0), tokens per kW 1.9 — five trials each (3% / 2% noise), each run's mean and
    t-based 95% half width from metrics.trials.ci95. Each ratio's 95% CI must cover its true
    value at least ~95% of the time (sampling error allowed) and not nearly always: adding the
    two sides' relative widths in quadrature is conservative with t(4) widths (~98.5% here),
    while a CI twice as wide covers ~100% and one that forgets a side ~88%."""
    import numpy as np

    from wattbench.metrics.trials import ci95

    rng = np.random.default_rng(20261201)
    n, hits = 1000, {"throughput": 0, "power": 0, "per_kw": 0}
    truth = {"throughput": 0.95, "power": 0.5, "per_kw": 1.9}  # each B ÷ A
    for _ in range(n):
        runs = []
        for name, tput, power in (("a", 1000.0, 1400.0), ("b", 950.0, 700.0)):
            ct, cp = ci95(rng.normal(tput, 0.03 * tput, 5)), ci95(rng.normal(power, 0.02 * power, 5))
            blk = trials_block({"output_tokens_per_s": (ct["mean"], ct["half_width"]),
                                "avg_power_w": (cp["mean"], cp["half_width"])})
            runs.append(make_result(name, levels=[make_level(0, value=8, output_tokens_per_s=ct["mean"],
                                                             power_w=cp["mean"], trials=blk)]))
        d = compare(runs).levels[0].decompositions[0]
        for k, ci in (("throughput", d.throughput_ci), ("power", d.power_ci), ("per_kw", d.per_kw_ci)):
            assert ci.low < ci.high and ci.low * ci.high == pytest.approx(getattr(d, k + "_ratio") ** 2, rel=1e-9)  # log-symmetric
            hits[k] += ci.low <= truth[k] <= ci.high
    for k, h in hits.items():
        assert 0.95 <= h / n <= 0.995, (k, h / n)
    assert d.per_kw_ci.confidence == pytest.approx(0.95, rel=1e-9)
    assert "95% CI" in d.text()


def test_per_kw_ci_prefers_trials_own_figure():
    blk = {"output_tokens_per_s": (1000, 50), "avg_power_w": (1000, 50), "output_tokens_per_s_per_kw": (1000, 10)}
    a = make_result("a", levels=[make_level(0, value=8, output_tokens_per_s=1000, power_w=1000,
                                            trials=trials_block(blk))])
    b = make_result("b", levels=[make_level(0, value=8, output_tokens_per_s=1000, power_w=1000,
                                            trials=trials_block(blk))])
    d = compare([a, b]).levels[0].decompositions[0]
    w = math.sqrt(2) * 0.01
    assert d.per_kw_ci.high == pytest.approx(math.exp(w))


def test_log_ratio_ci_symmetric_in_log():
    ci = log_ratio_ci(2.0, TrialCI(10, 9, 11), TrialCI(20, 18, 22))
    assert math.log(ci.high / 2.0) == pytest.approx(-math.log(ci.low / 2.0))
    # each side's noise is its interval's log half-width ln(11 / 9) / 2 (a Student-t interval read alike)
    assert ci.high == pytest.approx(2.0 * math.exp(math.sqrt(2) * math.log(11 / 9) / 2), rel=1e-12)


def test_invalid_levels_warned_and_need_two():
    a = make_result("a", levels=[make_level(0, value=8, verdict="invalid")])
    b = make_result("b", levels=[make_level(0, value=8)])
    c = compare([a, b])
    # said once, in the run's verdict (rendered one line per run), never pasted as warnings
    assert c.verdicts[0].levels == {"concurrency=8": ["invalid", None]} and c.warnings == []
    with pytest.raises(UserError, match="at least two runs"):
        compare([a])
    # serialisable
    assert "per_kw_ratio" in c.model_dump_json()



@settings(max_examples=40, deadline=None)
@given(ta=st.floats(10, 1e5), tb=st.floats(10, 1e5), pa=st.floats(50, 1e5), pb=st.floats(50, 1e5))
def test_decomposition_identity(ta, tb, pa, pb):
    a = make_result("a", levels=[make_level(0, value=8, output_tokens_per_s=ta, power_w=pa, duration_s=100)])
    b = make_result("b", levels=[make_level(0, value=8, output_tokens_per_s=tb, power_w=pb, duration_s=100)])
    # force: at tiny throughputs the factory's whole-request rounding changes the achieved lengths
    c = compare([a, b], force=True)
    d = c.levels[0].decompositions[0]
    assert d.per_kw_ratio == pytest.approx(d.throughput_ratio / d.power_ratio)
    fa, fb = c.levels[0].figures
    assert d.per_kw_ratio == pytest.approx(fb["output_tokens_per_s_per_kw"] / fa["output_tokens_per_s_per_kw"],
                                           rel=1e-9)
    assert d.j_per_output_token_ratio == pytest.approx(1 / d.per_kw_ratio, rel=1e-9)


def test_steady_window_and_saturation_warning():
    from tests.fakes.results_factory import make_energy

    a = make_result("a", levels=[make_level(0, value=8, output_tokens_per_s=1000, power_w=600)])
    b = make_result("b", levels=[make_level(0, value=8, output_tokens_per_s=1000, power_w=600, saturated=True)])
    tp = a.levels[0].throughput
    a.levels[0].energy_steady = {"accelerator": make_energy("accelerator", 650.0, 50.0, tp.output_tokens,
                                                            tp.input_tokens)}
    b.levels[0].energy_steady = {"accelerator": make_energy("accelerator", 520.0, 50.0, tp.output_tokens,
                                                            tp.input_tokens)}
    full = compare([a, b])
    assert full.levels[0].decompositions[0].power_ratio == pytest.approx(1.0)
    steady = compare([a, b], window="steady")
    assert steady.window == "steady"
    assert steady.levels[0].decompositions[0].power_ratio == pytest.approx(520 / 650)
    assert a.levels[0].energy["accelerator"].avg_power_w == pytest.approx(600.0, rel=1e-9)  # inputs untouched
    assert [v.run_id for v in full.verdicts] == ["a", "b"] and full.warnings == []
    c = make_result("c", levels=[make_level(0, value=8)])
    with pytest.raises(UserError, match="run c level concurrency=8 has no steady-state energy figures"):
        compare([a, c], window="steady")


def _h200_trials(run_id: str, last: float, mean: float, lo: float, hi: float):
    """An H200-like run with --trials 5: board, HBM rail and a CPU estimate; the level's own figures
    are its last trial's (``last`` tok/s/kW at the board), the trials block holds the mean and CI."""
    lv = make_level(0, value=64, output_tokens_per_s=last * 0.7, power_w={"accelerator": 700.0,
                                                                          "accelerator_memory": 151.0, "host": 113.0})
    lv.energy["host"].label = "estimate"
    lv.trials = TrialsBlock.model_validate(trials_block({"output_tokens_per_s_per_kw@accelerator": (mean, (hi - lo) / 2),
                              "output_tokens_per_s_per_kw@accelerator_memory": (mean * 4.6, 10.0),
                              "avg_power_w@accelerator": (700.0, 5.0),
                              "output_tokens_per_s": (mean * 0.7, 20.0)}))
    return make_result(run_id, levels=[lv])


def test_two_trial_runs_with_an_hbm_rail_compare_trial_means_at_the_board():
    """A past defect: compare picked the HBM rail (23,723 tok/s/kW) and the last trial's value, which lay
    outside its own CI (23,723 [22,259–23,551]). The board and the mean, inside its CI."""
    a = _h200_trials("a", last=5456.0, mean=5378.0, lo=5290.0, hi=5466.0)
    b = _h200_trials("b", last=5100.0, mean=5200.0, lo=5150.0, hi=5250.0)
    c = compare([a, b])
    assert c.boundary == "accelerator"
    row = c.levels[0]
    assert [f["output_tokens_per_s_per_kw"] for f in row.figures] == pytest.approx([5378.0, 5200.0], rel=1e-12)
    for f, (lo, hi) in zip(row.figures, [ci["output_tokens_per_s_per_kw"] for ci in row.cis]):
        assert lo <= f["output_tokens_per_s_per_kw"] <= hi
    assert row.decompositions[0].per_kw_ratio == pytest.approx(5200.0 / 5378.0)
    with pytest.raises(UserError, match="accelerator_memory has no tokens-per-kW figure .*part of the accelerator"):
        compare([a, b], boundary="accelerator_memory")
