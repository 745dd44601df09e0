"""One verdict for one pair (``analysis/compare.py``, ``analysis/regress.py``): the answer line
leads with the table's ratio, a 1-df noise basis is inconclusive, a partial run compares every
level it measured, and ``regress`` fails an empty level by name — every figure below by hand."""

from __future__ import annotations


import pytest
from typer.testing import CliRunner

from tests.fakes.results_factory import make_level, make_result, trials_block
from wattbench.core.schema import Goodput, TrialsBlock
from wattbench.analysis.compare import compare
from wattbench.analysis.regress import regress
from wattbench.cli.main import build_app
from wattbench.core.errors import UserError
from wattbench.results.rundir import write_result


def _empty(lv, keep_energy: bool):
    """A level that measured nothing, as the H200's engine defaults did at c=64 (every request
    was a warm-up one): no completed measured request, no tokens, no per-kW figure."""
    lv.requests.completed = 0
    lv.throughput.output_tokens_per_s = 0.0
    lv.throughput.output_tokens = 0
    if keep_energy:
        for e in lv.energy.values():
            e.output_tokens_per_s_per_kw = None
            e.j_per_output_token = None
    else:
        lv.energy = {}
    return lv


def _partial(keep_energy: bool):
    a = make_result("tuned", levels=[make_level(0, value=16, output_tokens_per_s=3417.0 * 0.6, power_w=600.0),
                                     make_level(1, value=64, output_tokens_per_s=5000.0, power_w=650.0)])
    b = make_result("defaults", levels=[make_level(0, value=16, output_tokens_per_s=1408.0 * 0.6, power_w=600.0),
                                        _empty(make_level(1, value=64, output_tokens_per_s=10.0, power_w=640.0),
                                               keep_energy)])
    return a, b


@pytest.mark.parametrize("keep_energy", [False, True])
def test_one_empty_level_leaves_every_other_level_its_per_kw_ratio(keep_energy):
    a, b = _partial(keep_energy)
    cmp = compare([a, b])
    assert cmp.boundary == "accelerator" and not cmp.warnings  # the old rule: no boundary, no energy anywhere
    c16, c64 = cmp.levels
    d = c16.decompositions[0]
    assert d.per_kw_ratio == pytest.approx(1408.0 / 3417.0)  # 0.41x, what the user ran for
    assert c16.answers[0].startswith("c=16: B/A per kW 0.41×")
    assert c64.left_out and "run defaults measured nothing at c=64" in c64.left_out
    assert c64.answers == [f"c=64: left out — {c64.left_out}"] and not c64.decompositions


def _counter_level(value_tok_s: float, power_w: float):
    """A ``measure`` level around a command: no request records, its tokens the server's counters'."""
    lv = make_level(0, value=1, output_tokens_per_s=value_tok_s, power_w=power_w)
    lv.requests.completed = 0
    lv.throughput.token_basis = "server_counters"
    return lv


def test_measure_levels_counted_by_the_servers_counters_are_compared():
    a = make_result("a", levels=[_counter_level(1000.0, 500.0)])
    b = make_result("b", levels=[_counter_level(1500.0, 500.0)])
    cmp = compare([a, b])
    (lv,) = cmp.levels
    assert cmp.boundary == "accelerator" and not lv.left_out
    assert lv.decompositions[0].per_kw_ratio == pytest.approx(1.5)
    empty = make_result("empty", levels=[_empty(_counter_level(1500.0, 500.0), keep_energy=True)])
    with pytest.raises(UserError, match="run empty measured nothing"):  # no tokens counted: still nothing
        compare([a, empty])


def test_regress_fails_an_empty_level_by_name_exit_1_never_a_schema_error(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBENCH_DB", str(tmp_path / "h.db"))
    a, b = _partial(keep_energy=False)
    write_result(tmp_path / "a", a)
    write_result(tmp_path / "b", b)
    rep = regress(b, a)
    assert not rep.passed and [lo.level for lo in rep.left_out] == ["c=64"]
    r = CliRunner().invoke(build_app(), ["regress", str(tmp_path / "b"), "--baseline", str(tmp_path / "a")])
    assert r.exit_code == 1, r.output
    assert "FAIL c=64: left out — run defaults measured nothing at c=64" in r.output
    assert "Input should be" not in r.output


def test_a_one_df_noise_basis_is_inconclusive_never_within_noise():
    # two trials each (1 df): the interval would contain 1 (1.01x, ±2% a side), but t(0.975, 1) = 12.7
    def tr(tput):
        return trials_block({"output_tokens_per_s_per_kw@accelerator": (tput / 0.6, tput / 0.6 * 0.02)}, n=2)
    a = make_result("a", levels=[make_level(0, value=8, output_tokens_per_s=1000.0, power_w=600.0,
                                            trials=tr(1000.0))])
    b = make_result("b", levels=[make_level(0, value=8, output_tokens_per_s=1010.0, power_w=600.0,
                                            trials=tr(1010.0))])
    nv = compare([a, b]).levels[0].decompositions[0].noise
    assert nv.word == "inconclusive" and nv.within is None and nv.df == 1
    assert "1 degree of freedom" in nv.why
    o = regress(b, a, "output_tokens_per_s_per_kw:-3%").outcomes[0]
    assert o.word == nv.word  # regress says the same word for the same pair and figure


def test_the_answer_line_ratio_is_the_table_ratio_with_trials_and_without_energy():
    # the last trial read 1,400 tok/s, the trials' mean 1,000: the table shows the mean, so must the line
    # (the old no-energy line read the last trial: 0.29x next to a table saying 0.22x)
    def lv(tput_mean, tput_last):
        x = make_level(0, value=16, output_tokens_per_s=tput_last, power_w=600.0,
                       trials=trials_block({"output_tokens_per_s": (tput_mean, tput_mean * 0.02)}, n=3))
        x.energy = {}
        return x
    a = make_result("a", levels=[lv(1000.0, 1400.0)])
    b = make_result("b", levels=[lv(220.0, 406.0)])
    cmp = compare([a, b])
    row = cmp.levels[0]
    table = row.figures[1]["output_tokens_per_s"] / row.figures[0]["output_tokens_per_s"]
    assert table == pytest.approx(0.22) and row.noise[0].ratio == pytest.approx(0.22)
    assert row.answers[0].startswith("c=16: B/A throughput 0.220×") or row.answers[0].startswith(
        "c=16: B/A throughput 0.22×")


def test_regress_says_what_to_do_about_an_unknown_noise_once(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBENCH_DB", str(tmp_path / "h.db"))
    levels = lambda t: [make_level(i, value=v, output_tokens_per_s=t * v, power_w=600.0)  # noqa: E731
                        for i, v in enumerate((1, 2, 4, 8))]
    write_result(tmp_path / "a", make_result("a", levels=levels(100.0)))
    write_result(tmp_path / "b", make_result("b", levels=levels(90.0)))
    r = CliRunner().invoke(build_app(), ["regress", str(tmp_path / "b"), "--baseline", str(tmp_path / "a"),
                                         "--fail-on", "j_per_output_token:+5%,output_tokens_per_s:-3%"])
    assert r.exit_code == 6, r.output  # none failed, none could be decided: inconclusive
    assert r.output.count("--trials") == 1, r.output  # 8 check lines, the hint once
    assert r.output.count("inconclusive: noise unknown") == 8


def test_a_noise_wider_than_the_limit_never_passes_within_noise():
    # +3% J/token with ±5% trial CIs each (5 trials, wider than the run-to-run floor): within noise,
    # bound e^(0.05·sqrt 2) − 1 = 7.3% > 2%: the run cannot tell a 2% rise from none — inconclusive,
    # naming the noise and the limit, and what would settle it at the limit
    def tr(tput):
        return trials_block({"output_tokens_per_s_per_kw@accelerator": (tput / 0.6, tput / 0.6 * 0.05),
                             "j_per_output_token@accelerator": (600.0 / tput, 600.0 / tput * 0.05)})
    a = make_result("a", levels=[make_level(0, value=8, output_tokens_per_s=1000.0, power_w=600.0, trials=tr(1000.0))])
    t = 1000.0 / 1.03
    b = make_result("b", levels=[make_level(0, value=8, output_tokens_per_s=t, power_w=600.0, trials=tr(t))])
    o = regress(b, a, "j_per_output_token:+2%").outcomes[0]
    assert o.status == "inconclusive" and o.word == "within noise"  # compare's word, the gate's verdict
    assert "noise ±7.3% (within-run trials (5 trials, 4 df)) is wider than the 2% limit" in o.message
    assert "the current noise resolves only effects beyond ±7.3%; to resolve ±2%: " in o.message
    assert "more trials of the baseline" in o.message and "more trials of the run" in o.message
    # +8%: the noise is narrower than the limit, but the interval (to +10.5%) still reaches past it
    o = regress(b, a, "j_per_output_token:+8%").outcomes[0]
    assert o.status == "inconclusive" and "is wider than the" not in o.message
    assert "the change lies within its noise (±7.3%) of the 8% limit" in o.message
    assert regress(b, a, "j_per_output_token:+11%").outcomes[0].status == "pass"  # [-4.0%, +10.5%]


def test_a_boundary_one_level_lacks_leaves_out_that_level_only():
    a = make_result("a", levels=[make_level(0, value=8, power_w={"accelerator": 500, "node": 800}),
                                 make_level(1, value=16, power_w={"accelerator": 600, "node": 900})])
    b = make_result("b", levels=[make_level(0, value=8, power_w={"accelerator": 400, "node": 700}),
                                 make_level(1, value=16, power_w={"accelerator": 500})])
    cmp = compare([a, b], boundary="node")
    c8, c16 = cmp.levels
    assert c8.decompositions[0].power_ratio == pytest.approx(700 / 800) and not c8.left_out
    assert c16.left_out == "run b has no node power at c=16 (it measured: accelerator)"


def test_at_slo_a_700_w_card_at_95_percent_throughput_reads_exactly_1_90x():
    slos = [{"metric": "ttft", "stat": "p99", "threshold_ms": 500.0}]

    def lv(i, c, tput, watts, ttft_p99):
        x = make_level(i, value=c, output_tokens_per_s=tput, power_w={"node": watts}, ttft_p99_ms=ttft_p99)
        x.goodput = Goodput.model_validate({"slos": slos, "output_tokens_per_s": tput,
                                            "per_kw": {"node": {"output_tokens_per_s_per_kw": tput / (watts / 1000.0)}}})
        return x
    # A (1400 W): c=32 meets the SLO at 2,000 tok/s, c=64 is faster but misses it; B (700 W): c=48 at 1,900
    a = make_result("big", levels=[lv(0, 32, 2000.0, 1400.0, 300.0), lv(1, 64, 2600.0, 1400.0, 900.0)])
    b = make_result("small", levels=[lv(0, 32, 1500.0, 700.0, 200.0), lv(1, 48, 1900.0, 700.0, 450.0)])
    a.config.slo = b.config.slo = "ttft_p99=500ms"
    at = compare([a, b], match="index", force=True).at_slo  # c=48 vs c=64 pair by index; the SLO pick is per run
    assert at.slo == "ttft_p99=500ms" and at.levels == ["c=32", "c=48"]
    assert at.ratio[0] == pytest.approx(1.90) and at.throughput_ratio[0] == pytest.approx(0.95)
    assert at.power_ratio[0] == pytest.approx(0.5)
    # the runs are taken at different levels, so the line says why A is not higher: its c=64 missed
    assert at.lines[0].startswith("B gives 1.90× the goodput per kW of A at ttft_p99=500ms: throughput 0.95× ÷ "
                                  "power 0.50× (A at c=32 — c=64 missed ttft_p99 900 ms > 500 ms, B at c=48)")
    assert at.misses_above == [["c=64 missed ttft_p99 900 ms > 500 ms"], []]
    with pytest.raises(Exception, match="no level of run big .* meets it"):
        compare([a, b], match="index", force=True, at_slo="ttft_p99=100ms")


def test_at_slo_names_why_a_run_is_taken_lower_only_where_the_levels_differ():
    """Two ladders of one platform, c=8 and c=32: A's c=32 misses the SLO by its p99 TTFT (599 ms),
    B's meets it (388 ms), so A is taken at c=8 and B at c=32 and the ratio spans a whole step of
    load; the line names the miss that put A lower. Where both are taken at one level the misses
    above it change nothing in the ratio and are not named; a miss below the chosen level is never
    named; more than two misses read as "and N more"."""
    slos = [{"metric": "ttft", "stat": "p99", "threshold_ms": 500.0}]

    def lv(i, c, tput, ttft_p99):
        x = make_level(i, value=c, output_tokens_per_s=tput, power_w={"accelerator": 300.0}, ttft_p99_ms=ttft_p99)
        x.goodput = Goodput.model_validate({"slos": slos, "output_tokens_per_s": tput, "per_kw": {
            "accelerator": {"output_tokens_per_s_per_kw": tput / 0.3}}})
        return x

    a = make_result("a", levels=[lv(0, 8, 585.0, 175.0), lv(1, 32, 1571.0, 599.0)])
    b = make_result("b", levels=[lv(0, 8, 647.0, 159.0), lv(1, 32, 1863.0, 388.0)])
    a.config.slo = b.config.slo = "ttft_p99=500ms"
    at = compare([a, b]).at_slo
    assert at.levels == ["c=8", "c=32"] and at.misses_above == [["c=32 missed ttft_p99 599 ms > 500 ms"], []]
    assert "(A at c=8 — c=32 missed ttft_p99 599 ms > 500 ms, B at c=32)" in at.lines[0]
    # both miss at c=32: both taken at c=8, nothing named
    b2 = make_result("b2", levels=[lv(0, 8, 647.0, 159.0), lv(1, 32, 1863.0, 650.0)])
    b2.config.slo = "ttft_p99=500ms"
    at = compare([a, b2]).at_slo
    assert at.levels == ["c=8", "c=8"] and "(A at c=8, B at c=8)" in at.lines[0] and "missed" not in at.lines[0]
    # a ladder whose lowest level misses (c=1) and three above the chosen one miss: two named, "and 1 more"
    c = make_result("c", levels=[lv(0, 1, 90.0, 700.0), lv(1, 4, 300.0, 200.0), lv(2, 16, 900.0, 510.0),
                                 lv(3, 32, 1500.0, 900.0), lv(4, 64, 1900.0, 2000.0)])
    c.config.slo = "ttft_p99=500ms"
    at = compare([b, c], force=True).at_slo
    assert at.levels == ["c=32", "c=4"]
    assert at.misses_above[1] == ["c=16 missed ttft_p99 510 ms > 500 ms", "c=32 missed ttft_p99 900 ms > 500 ms",
                                  "c=64 missed ttft_p99 2,000 ms > 500 ms"]
    assert at.lines[0].endswith("(A at c=32, B at c=4 — c=16 missed ttft_p99 510 ms > 500 ms; c=32 missed ttft_p99 "
                                "900 ms > 500 ms and 1 more); inconclusive (noise unknown)")


def test_at_slo_judges_a_level_with_trials_on_the_trials_mean_the_table_shows():
    """The last trial met the SLO (p99 TTFT 300 ms) but the trials' mean, the figure the table
    quotes, is 700 ms: the level does not meet ``ttft_p99=500ms``, and the lower level is taken."""
    slos = [{"metric": "ttft", "stat": "p99", "threshold_ms": 500.0}]

    def lv(i, c, tput, ttft_last, ttft_mean=None):
        x = make_level(i, value=c, output_tokens_per_s=tput, power_w={"node": 700.0}, ttft_p99_ms=ttft_last)
        x.goodput = Goodput.model_validate({"slos": slos, "output_tokens_per_s": tput,
                                            "per_kw": {"node": {"output_tokens_per_s_per_kw": tput / 0.7}}})
        if ttft_mean is not None:
            x.trials = TrialsBlock.model_validate(trials_block({"ttft_p99_ms": (ttft_mean, 50.0)}))
        return x
    a = make_result("a", levels=[lv(0, 8, 1000.0, 200.0), lv(1, 16, 1500.0, 300.0, ttft_mean=700.0)])
    b = make_result("b", levels=[lv(0, 8, 1000.0, 200.0), lv(1, 16, 1500.0, 300.0)])
    at = compare([a, b], at_slo="ttft_p99=500ms").at_slo
    assert at.levels == ["c=8", "c=16"]
    assert at.goodput_per_kw == pytest.approx([1000.0 / 0.7, 1500.0 / 0.7])


def test_at_slo_compares_a_closed_loop_run_with_an_open_loop_one():
    """A past defect: ``compare --at-slo`` refused a closed-loop vs open-loop pair ("no load level
    matches"), though at an SLO each run is read at its own best level and needs no pairing."""
    slos = [{"metric": "ttft", "stat": "p99", "threshold_ms": 500.0}]

    def lv(i, mode, v, tput, watts, ttft_p99):
        x = make_level(i, mode=mode, value=v, output_tokens_per_s=tput, power_w={"node": watts}, ttft_p99_ms=ttft_p99)
        x.goodput = Goodput.model_validate({"slos": slos, "output_tokens_per_s": tput,
                                            "per_kw": {"node": {"output_tokens_per_s_per_kw": tput / (watts / 1000.0)}}})
        return x
    a = make_result("closed", levels=[lv(0, "concurrency", 8, 1000.0, 500.0, 200.0),
                                      lv(1, "concurrency", 16, 1600.0, 500.0, 400.0)])
    b = make_result("open", levels=[lv(0, "rate", 4.0, 1200.0, 400.0, 300.0), lv(1, "rate", 8.0, 1800.0, 400.0, 900.0)])
    with pytest.raises(Exception, match="no load level of open matches"):
        compare([a, b])  # level by level they do not pair
    at = compare([a, b], at_slo="ttft_p99=500ms").at_slo
    assert at.levels[0] == "c=16" and at.levels[1].startswith("r=4")
    # goodput per kW: B 1,200 / 0.4 kW = 3,000 against A 1,600 / 0.5 kW = 3,200
    assert at.ratio[0] == pytest.approx(3000.0 / 3200.0)


@pytest.mark.parametrize("width", [80, 160])
def test_cli_compare_at_slo_reads_a_closed_and_an_open_loop_run(tmp_path, width):
    from typer.testing import CliRunner

    from tests.fakes.planning_results import write_run
    from wattbench.cli.main import build_app

    slos = [{"metric": "ttft", "stat": "p99", "threshold_ms": 500.0}]

    def lv(i, mode, v, tput, watts, ttft_p99):
        x = make_level(i, mode=mode, value=v, output_tokens_per_s=tput, power_w={"node": watts}, ttft_p99_ms=ttft_p99)
        x.goodput = Goodput.model_validate({"slos": slos, "output_tokens_per_s": tput,
                                            "per_kw": {"node": {"output_tokens_per_s_per_kw": tput / (watts / 1000.0)}}})
        return x
    a = write_run(tmp_path / "a", make_result("closed", levels=[lv(0, "concurrency", 16, 1600.0, 500.0, 400.0)]))
    b = write_run(tmp_path / "b", make_result("open", levels=[lv(0, "rate", 4.0, 1200.0, 400.0, 300.0)]))
    r = CliRunner().invoke(build_app(), ["compare", str(a), str(b), "--at-slo", "ttft_p99=500ms", "--db", str(tmp_path / "h.db")],
                           terminal_width=width)
    assert r.exit_code in (0, 1), r.output
    text = " ".join(r.output.split())
    assert "no load level" not in text
    assert "0.94× the goodput per kW of A at ttft_p99=500ms" in text
