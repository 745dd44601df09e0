import pytest

from tests.fakes.planning_results import make_level, make_result
from wattbench.core.schema import Goodput
from wattbench.core.errors import UserError
from wattbench.planning.rack import (
    CoolingThresholds,
    MeasuredNodeRef,
    NodeSpec,
    cooling_class,
    nodes_per_rack,
    parse_node_spec,
    plan_rack,
)


@pytest.mark.parametrize("node_w,expected", [(1400, 10), (1800, 8), (1100, 13), (900, 16), (1000, 15)])
def test_worked_examples_15kw_rack(node_w, expected):
    assert nodes_per_rack(15, node_w) == expected


def test_side_by_side_15kw():
    plan = plan_rack(15, [NodeSpec("a", power_w=1400), NodeSpec("b", power_w=1800),
                          NodeSpec("c", power_w=1100), NodeSpec("d", power_w=900)])
    assert [r.nodes_per_rack for r in plan.rows] == [10, 8, 13, 16]
    assert [r.rack_power_w for r in plan.rows] == [14000, 14400, 14300, 14400]
    assert all(r.cooling == "air" for r in plan.rows)


def test_four_servers_of_four_1400w_cards_is_liquid():
    plan = plan_rack(22.4, [parse_node_spec("name=x,accelerator_w=1400,gpus=4")])
    row = plan.rows[0]
    assert row.node_power_w == 5600 and row.nodes_per_rack == 4 and row.rack_power_w == 22400
    assert row.gpus_per_rack == 16
    assert row.cooling == "liquid"
    assert any("22.4 kW" in r for r in row.cooling_reasons)


def test_cooling_thresholds_each_trigger_and_are_configurable():
    assert cooling_class(20000, 1000)[0] == "air"  # limits are inclusive
    assert cooling_class(20001, 700)[0] == "liquid"
    assert cooling_class(8000, 1001)[0] == "liquid"
    assert cooling_class(22400, 700, CoolingThresholds(air_max_rack_kw=30))[0] == "air"
    assert cooling_class(22400, 1400, CoolingThresholds(30, 1500))[0] == "air"
    with pytest.raises(UserError):
        CoolingThresholds(air_max_rack_kw=0)


def test_nameplate_from_hardware_table():
    row = plan_rack(15, [parse_node_spec("name=h200x8,gpu=H200,gpus=8,host_overhead_w=1500")]).rows[0]
    assert row.node_power_w == 700 * 8 + 1500 and row.nodes_per_rack == 2
    assert "nameplate" in row.power_source and row.accelerator_w == 700


def test_headroom():
    assert nodes_per_rack(15, 1400, headroom_pct=10) == 9  # 13.5 kW usable
    assert plan_rack(15, [NodeSpec("a", power_w=1400)], headroom_pct=10).rows[0].nodes_per_rack == 9


def test_errors():
    with pytest.raises(UserError, match="smaller than one node"):
        nodes_per_rack(1, 1400)
    with pytest.raises(UserError, match="negative"):
        plan_rack(15, [NodeSpec("a", power_w=-100)])
    with pytest.raises(UserError, match="not positive"):
        nodes_per_rack(15, 0)
    with pytest.raises(UserError, match="must be positive"):
        nodes_per_rack(-5, 1000)
    with pytest.raises(UserError, match="no power"):
        plan_rack(15, [NodeSpec("a")])
    with pytest.raises(UserError, match="unknown key"):
        parse_node_spec("name=a,watts=5")
    with pytest.raises(UserError, match="not a valid float"):
        parse_node_spec("name=a,power_w=lots")
    with pytest.raises(UserError, match="unknown GPU"):
        plan_rack(15, [NodeSpec("a", gpu="H300", gpus=4)])


def _run():
    # 2 GPUs measured; level 1 is the busiest
    return make_result("run-a", [
        make_level(0, out_tps=500, acc_p95_w=700, acc_p99_w=760, devices=2, goodput_tps=450, host_p95_w=350),
        make_level(1, out_tps=2000, acc_p95_w=1300, acc_p99_w=1380, devices=2, goodput_tps=1500, host_p95_w=400,
                   node_p95_w=1800, node_p99_w=1900),
    ], gpus=2)


def test_measured_node_accelerator_boundary_with_declared_host():
    row = plan_rack(15, [_run()], boundary="accelerator", percentile="p95", host_overhead_w=500).rows[0]
    # busiest level: 1300 W over 2 GPUs + 500 W declared host
    assert row.level_index == 1
    assert row.node_power_w == 1300 + 500
    assert row.accelerator_w == 650
    assert row.nodes_per_rack == 8
    assert row.rack_output_tokens_per_s == 8 * 2000
    assert row.rack_goodput_output_tokens_per_s == 8 * 1500
    assert row.output_tokens_per_s_per_kw == pytest.approx(16000 / 14.4)


def test_measured_node_uses_measured_host_then_p99():
    row = plan_rack(15, [_run()], percentile="p99").rows[0]
    assert row.node_power_w == 1380 + 400  # host measured at p95 only in the fake; p99 equals it
    assert "measured host" in row.power_source


def test_measured_node_scaled_to_eight_gpus_and_level_choice():
    ref = MeasuredNodeRef(result=_run(), level=0, gpus_per_node=8)
    row = plan_rack(15, [ref], host_overhead_w=1000).rows[0]
    assert row.node_power_w == 350 * 8 + 1000
    assert row.nodes_per_rack == 3
    assert row.rack_output_tokens_per_s == 3 * 500 * 4
    assert any("scaled to 8" in w for w in row.warnings)


def test_measured_node_boundary():
    row = plan_rack(15, [_run()], boundary="node").rows[0]
    assert row.node_power_w == 1800 and row.nodes_per_rack == 8 and row.accelerator_w is None


def test_no_host_warns_and_missing_boundary_errors():
    res = make_result("run-b", [make_level(0, out_tps=100, acc_p95_w=500)])
    row = plan_rack(15, [res]).rows[0]
    assert row.node_power_w == 500 and any("accelerators only" in w for w in row.warnings)
    with pytest.raises(UserError, match="no p95 power at the wall boundary"):
        plan_rack(15, [res], boundary="wall")
    with pytest.raises(UserError, match="cannot size a node"):
        plan_rack(15, [res], boundary="cpu")


def test_rack_takes_the_busiest_level_meeting_the_slo_and_names_it():
    """A past defect: plan rack took the busiest level even when it missed the SLO, and never named it."""
    res = _run()
    for lv, ok in zip(res.levels, (True, False)):
        lv.goodput = Goodput.model_validate({"all_met": ok, "fraction": 1.0 if ok else 0.125, "output_tokens_per_s": 400.0,
                                             "slos": [{"metric": "ttft", "stat": "p99", "threshold_ms": 500.0}]})
    row = plan_rack(15, [res], boundary="accelerator", host_overhead_w=500).rows[0]
    assert row.level_index == 0 and row.node_power_w == 700 + 500
    assert row.notes[0] == "run run-a: level c=1 (highest throughput among the levels meeting ttft_p99=500ms)"
    res.levels[0].goodput.all_met = False
    row = plan_rack(15, [res], boundary="accelerator", host_overhead_w=500).rows[0]
    assert row.level_index == 1
    assert row.warnings[0].startswith("run run-a: no level meets ttft_p99=500ms; using level c=1 (highest throughput)")
