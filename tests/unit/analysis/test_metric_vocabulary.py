"""One set of metric names: --optimize's objectives, compare's side-by-side figures and
regress's checks all come from analysis.figures; goodput per kW is read from the level's goodput."""

import pytest

from wattbench.analysis.compare import SIDE_BY_SIDE
from wattbench.analysis.figures import METRIC_NAMES, reported_figures, metric_suggestions
from wattbench.analysis.regress import parse_checks
from wattbench.core.errors import UserError
from wattbench.core.schema import BoundaryEnergy, LevelResult
from wattbench.run.plan import OBJECTIVES


def test_every_command_speaks_the_same_names():
    assert set(OBJECTIVES) <= METRIC_NAMES
    assert set(SIDE_BY_SIDE) <= METRIC_NAMES
    for name in ("goodput_per_kw", "goodput_fraction", "tpot_p99_ms"):
        assert parse_checks(f"{name}:-5%")


def test_goodput_per_kw_is_read_at_the_boundary():
    lv = LevelResult(index=0, label="concurrency=8",
                     energy={"node": BoundaryEnergy(boundary="node", method="declared", avg_power_w=500.0)},
                     goodput={"fraction": 0.75, "per_kw": {"node": {"output_tokens_per_s_per_kw": 1234.0}}})
    h = reported_figures(lv, "node")
    assert h["goodput_per_kw"] == pytest.approx(1234.0, rel=1e-9) and h["goodput_fraction"] == pytest.approx(0.75, rel=1e-9)
    assert reported_figures(lv, "accelerator")["goodput_per_kw"] is None


def test_unknown_metric_hint_lists_every_close_name():
    with pytest.raises(UserError) as e:
        parse_checks("tpot_p99:+5%")
    assert "tpot_p99_ms" in str(e.value)
    assert metric_suggestions("goodput_per_kwh")[0] == "goodput_per_kw"
