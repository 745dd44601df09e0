"""The planners read a level's figures as its answer quotes them: with ``--trials``, the trials'
mean (``results.headline.point``), never the last trial's own figure."""

import pytest

from tests.fakes.planning_results import make_level, make_result
from wattbench.core.schema.level import TrialFigure, TrialsBlock
from wattbench.planning.measured import measured_node
from wattbench.planning.tco import tokens_per_kwh_from_result


def _with_trials(lv, figures):
    lv.trials = TrialsBlock(n=3, figures={name: TrialFigure(mean=sum(vs) / 3, ci_low=min(vs), ci_high=max(vs), n=3,
                                                            values=list(vs)) for name, vs in figures.items()})
    lv.trial = 2
    return lv


def test_plan_rack_reads_the_trials_mean_throughput_and_chooses_by_it():
    # the last trial of level 0 served 1,000 out tok/s, but its three trials average 800; level 1 serves 900
    lv0 = _with_trials(make_level(0, 1000.0, node_p95_w=500.0, concurrency=4),
                       {"output_tokens_per_s": (600.0, 800.0, 1000.0)})
    lv1 = make_level(1, 900.0, node_p95_w=500.0, concurrency=8)
    res = make_result("r1", [lv0, lv1])
    node = measured_node(res, boundary="node")
    assert node.level_index == 1 and node.output_tokens_per_s == pytest.approx(900.0)
    node0 = measured_node(res, level=0, boundary="node")
    assert node0.output_tokens_per_s == pytest.approx(800.0)
    assert any("mean of its 3 trials" in n for n in node0.notes)


def test_plan_tco_reads_the_trials_mean_tokens_per_kwh():
    lv = _with_trials(make_level(0, 1000.0, node_p95_w=500.0, node_tokens_per_kwh=5e6),
                      {"output_tokens_per_kwh@node": (3e6, 4e6, 5e6)})
    value, warnings = tokens_per_kwh_from_result(make_result("r1", [lv]), None, "node")
    assert value == pytest.approx(4e6)
    assert "mean of its 3 trials" in warnings[0]
