import itertools

import pytest

from tests.fakes.planning_results import make_level, make_result
from wattbench.core.errors import UserError
from wattbench.planning.power_first import (
    LatencyLimits,
    Candidate,
    collect_options,
    knapsack_max_value,
    parse_slo,
    power_first,
)


def _cands():
    a = make_result("A", [
        make_level(0, out_tps=900, acc_p95_w=1150, goodput_tps=800, ttft_p95_ms=200, tpot_p95_ms=20),
        make_level(1, out_tps=1500, acc_p95_w=1420, goodput_tps=1300, ttft_p95_ms=900, tpot_p95_ms=45),
    ])
    b = make_result("B", [
        make_level(0, out_tps=500, acc_p95_w=640, goodput_tps=470, ttft_p95_ms=150, tpot_p95_ms=15),
        make_level(1, out_tps=700, acc_p95_w=830, goodput_tps=610, ttft_p95_ms=400, tpot_p95_ms=30),
        make_level(2, out_tps=800, acc_p95_w=900, goodput_tps=900, verdict="invalid"),
    ])
    return [Candidate(a, "accelerator", host_overhead_w=0), Candidate(b, "accelerator", host_overhead_w=0)]


def _brute(options, budget):
    best = 0.0
    ranges = [range(int(budget // o.node_power_w) + 1) for o in options]
    for counts in itertools.product(*ranges):
        p = sum(c * o.node_power_w for c, o in zip(counts, options))
        if p <= budget:
            best = max(best, sum(c * o.value_output_tokens_per_s for c, o in zip(counts, options)))
    return best


@pytest.mark.parametrize("site_kw", [3.0, 5.0, 7.3, 10.0])
def test_optimal_against_brute_force(site_kw):
    plan = power_first(site_kw, _cands(), headroom_pct=10)
    budget = site_kw * 1000 * 0.9
    assert plan.budget_w == pytest.approx(budget)
    assert plan.total_power_w <= budget + 1e-6
    assert plan.total_value_output_tokens_per_s == pytest.approx(_brute(plan.options, budget))
    assert plan.unallocated_w == pytest.approx(site_kw * 1000 - plan.total_power_w)
    assert sum(a.power_w for a in plan.allocations) == pytest.approx(plan.total_power_w)


def test_invalid_levels_left_out():
    plan = power_first(10, _cands())
    assert len(plan.options) == 4
    assert any("(B) level 2" in e and "invalid" in e for e in plan.excluded)


def test_slo_filters_levels():
    plan = power_first(10, _cands(), slo=parse_slo("ttft_p95=500ms,tpot_p95=40ms"))
    kept = {(o.run_id, o.level_index) for o in plan.options}
    assert kept == {("A", 0), ("B", 0), ("B", 1)}
    assert any("(A) level 1" in e and "ttft p95 900.0 ms > 500 ms" in e for e in plan.excluded)
    assert plan.total_value_output_tokens_per_s == pytest.approx(_brute(plan.options, 9000))


def test_throughput_used_without_goodput_and_unmeasured_slo_metric_excludes():
    r = make_result("C", [make_level(0, out_tps=300, acc_p95_w=400, ttft_p95_ms=100)])
    plan = power_first(1, [(r, "accelerator")], headroom_pct=0, host_overhead_w=0)
    assert plan.allocations[0].nodes == 2 and plan.allocations[0].option.value_kind == "throughput"
    assert plan.total_value_output_tokens_per_s == 600
    with pytest.raises(UserError, match="no candidate level fits"):
        power_first(1, [(r, "accelerator")], slo={"tpot_p95_ms": 50}, host_overhead_w=0)


def test_coarse_resolution_stays_feasible():
    plan = power_first(9.99, _cands(), headroom_pct=0, resolution_w=100)
    assert plan.total_power_w <= 9990
    exact = power_first(9.99, _cands(), headroom_pct=0, resolution_w=1)
    assert plan.total_value_output_tokens_per_s <= exact.total_value_output_tokens_per_s + 1e-9


def test_large_site_runs_fast_and_fills_budget():
    plan = power_first(10_000, _cands(), headroom_pct=10)  # 10 MW -> DP resolution 45 W
    assert plan.resolution_w == 45
    assert plan.total_power_w <= 9_000_000
    assert 9_000_000 - plan.total_power_w < 640  # the greedy top-up leaves less than the smallest node


def test_knapsack_random_against_brute_force():
    import random

    rng = random.Random(7)
    for _ in range(150):
        n = rng.randint(1, 3)
        w = [rng.randint(1, 25) for _ in range(n)]
        v = [rng.uniform(0.1, 9) for _ in range(n)]
        cap = rng.randint(0, 60)
        counts = knapsack_max_value(w, v, cap, 1.0)
        assert sum(c * x for c, x in zip(counts, w)) <= cap
        best = max(
            sum(c * y for c, y in zip(cs, v))
            for cs in itertools.product(*[range(cap // x + 1) for x in w])
            if sum(c * x for c, x in zip(cs, w)) <= cap
        )
        assert sum(c * y for c, y in zip(counts, v)) == pytest.approx(best)


def test_errors():
    with pytest.raises(UserError, match="site power"):
        power_first(0, _cands())
    with pytest.raises(UserError, match="headroom"):
        power_first(10, _cands(), headroom_pct=100)
    with pytest.raises(UserError, match="no candidates"):
        power_first(10, [])
    with pytest.raises(UserError, match="invalid SLO 'latency=5'"):
        parse_slo("latency=5")
    with pytest.raises(UserError, match=r"write ttft_p95=500ms"):  # the old plan-only grammar names the new one
        parse_slo("ttft_p95_ms=500")
    with pytest.raises(UserError, match="positive"):
        LatencyLimits({"ttft_p95_ms": -1})
    with pytest.raises(UserError, match="exceeds the budget|no candidate level fits"):
        power_first(0.5, _cands(), headroom_pct=0)


def test_collect_options_reports_node_power_with_host():
    opts, _, _ = collect_options(_cands()[:1], host_overhead_w=None)
    assert [o.node_power_w for o in opts] == [1150, 1420]


def test_every_level_the_plan_gives_no_node_is_named_with_why():
    """A past defect: a candidate that fit the budget but got no node was never named."""
    plan = power_first(10, _cands(), headroom_pct=10)
    chosen = {(a.option.name, a.option.level_index) for a in plan.allocations}
    unused = [o for o in plan.options if (o.name, o.level_index) not in chosen]
    assert unused  # the fixture's 9 kW budget leaves some fitting level without a node
    for o in unused:
        line = next(e for e in plan.excluded if e.startswith(f"{o.name} level {o.level_index} ({o.level_label})"))
        assert "fits, but not chosen" in line
    for name, index in chosen:
        assert not any(e.startswith(f"{name} level {index} (") and "not chosen" in e for e in plan.excluded)


@pytest.mark.parametrize("width", [80, 160])
def test_cli_power_first_prints_what_it_left_out(tmp_path, width):
    from typer.testing import CliRunner

    from tests.fakes.planning_results import write_run
    from wattbench.cli.main import build_app

    a = make_result("A", [make_level(0, out_tps=900, acc_p95_w=1000), make_level(1, out_tps=910, acc_p95_w=1000)])
    d = write_run(tmp_path / "a", a)
    r = CliRunner().invoke(build_app(), ["plan", "power-first", "--site-kw", "10", "--candidates", str(d),
                                         "--host-overhead-w", "0"], terminal_width=width)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "left out:" in text and "level 0 (" in text and "fits, but not chosen" in text
