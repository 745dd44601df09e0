"""The one headline rule (results/headline.py) that run, compare, regress, tune, plan, the reports and
the history store share: a whole boundary that contains the devices doing the work, measured before
declared before estimate, whole before part, outer before inner; a boundary equal to another shown
once; parts shown with their share; with trials, the trials' mean."""

from __future__ import annotations

import pytest

from tests.fakes.results_factory import make_level
from wattbench.report.format import headline_energy as report_headline
from wattbench.results.headline import (
    common_headline_boundary,
    headline_boundary,
    measured_boundaries,
    parts,
    point,
    same_as,
    server_lower_bound,
    shown_boundaries,
)
from wattbench.core.schema import TrialsBlock


def _level(labels: dict[str, str], watts: dict[str, float] | None = None):
    watts = watts or {b: 100.0 + i for i, b in enumerate(labels)}
    lv = make_level(0, power_w={b: watts[b] for b in labels})
    for b, label in labels.items():
        lv.energy[b].label = label
    return lv


def test_measured_outer_before_inner():
    lv = _level({"node": "measured", "accelerator": "measured", "wall": "measured"})
    assert headline_boundary(lv) == "wall"


def test_measured_before_a_declared_outer_boundary():
    assert headline_boundary(_level({"accelerator": "measured", "node": "declared"})) == "accelerator"
    assert headline_boundary(_level({"accelerator": "declared", "node": "measured"})) == "node"


def test_the_hbm_rail_is_never_the_headline():
    """The H200 case: the board, its HBM rail (measured) and a CPU estimate. The rail and the host
    (which leaves the GPU out) are parts; the board is the headline."""
    lv = _level({"accelerator": "measured", "accelerator_memory": "measured", "host": "estimate"},
                {"accelerator": 270.0, "accelerator_memory": 59.5, "host": 45.0})
    assert headline_boundary(lv) == "accelerator"
    lv = _level({"accelerator_memory": "measured"})  # a rail alone: no boundary holds the work
    assert headline_boundary(lv) is None


def test_a_host_estimate_is_not_the_headline_of_a_gpu_server():
    lv = _level({"accelerator": "estimate", "host": "declared"})
    assert headline_boundary(lv) == "accelerator"


def test_cpu_machine_whole_host_before_the_cpu_part_of_the_same_label():
    lv = _level({"cpu": "measured", "dram": "measured", "host": "measured"}, {"cpu": 60.0, "dram": 9.0, "host": 69.0})
    assert headline_boundary(lv) == "host"
    # a measured RAPL package beats an estimated host (label first); dram never holds the work
    lv = _level({"cpu": "measured", "host": "estimate"})
    assert headline_boundary(lv) == "cpu"
    assert headline_boundary(_level({"dram": "measured"})) is None


def _twins(lv, a: str, b: str, channel: str = "estimate.cpu"):
    lv.energy[b] = lv.energy[a].model_copy(update={"boundary": b})
    lv.energy[a].channels = [channel]
    lv.energy[b].channels = [channel]


def test_host_equal_to_the_cpu_estimate_is_shown_once_as_host():
    lv = _level({"cpu": "estimate"}, {"cpu": 45.0})
    _twins(lv, "cpu", "host")
    assert same_as(lv.energy) == {"cpu": "host"}
    assert shown_boundaries(lv.energy) == ["host"]
    assert headline_boundary(lv) == "host"
    # a host with dram metered too is a different figure: both shown
    lv.energy["host"].channels = ["estimate.cpu", "rapl.dram"]
    lv.energy["host"].energy_j += 100.0
    assert shown_boundaries(lv.energy) == ["cpu", "host"]


def test_two_equal_wholes_keep_the_inner_name():
    """A cluster of GPU-only nodes is their accelerators' sum: one figure, named accelerator."""
    lv = _level({"accelerator": "measured"}, {"accelerator": 1400.0})
    _twins(lv, "accelerator", "cluster", "gpu")
    assert shown_boundaries(lv.energy) == ["accelerator"]
    assert headline_boundary(lv) == "accelerator"


def test_no_energy_no_boundary_and_the_report_agrees():
    lv = make_level(0)
    lv.energy = {}
    assert headline_boundary(lv) is None and report_headline(lv) is None
    lv = _level({"node": "measured", "accelerator": "estimate"})
    name, e = report_headline(lv)
    assert name == headline_boundary(lv) == "node" and e is lv.energy["node"]


def test_measured_boundaries_inner_to_outer():
    assert measured_boundaries(_level({"wall": "measured", "accelerator": "measured", "node": "measured"})) == [
        "accelerator", "node", "wall"]


def test_common_boundary_over_runs_uses_the_least_trustworthy_label():
    a = _level({"accelerator": "measured", "node": "measured", "accelerator_memory": "measured"})
    b = _level({"accelerator": "measured", "node": "declared", "accelerator_memory": "measured"})
    assert common_headline_boundary([a, a]) == "node"
    assert common_headline_boundary([a, b]) == "accelerator"  # node is declared in one run
    c = _level({"accelerator_memory": "measured", "host": "measured"})
    assert common_headline_boundary([a, c]) is None  # the rail is never compared
    assert common_headline_boundary([a], among=("accelerator", "node", "wall")) == "node"
    assert common_headline_boundary([a], among=("accelerator",)) == "accelerator"


def test_parts_show_power_and_share_of_their_whole():
    """"memory 59.5 W, 22% of the board"; a host without a meter around it has no share."""
    lv = _level({"accelerator": "measured", "accelerator_memory": "measured", "host": "measured"},
                {"accelerator": 270.0, "accelerator_memory": 59.5, "host": 45.0})
    got = {p.boundary: p for p in parts(lv)}
    assert set(got) == {"accelerator_memory", "host"}
    assert got["accelerator_memory"].of == "accelerator"
    assert got["accelerator_memory"].share == pytest.approx(59.5 / 270.0)
    assert got["host"].of is None and got["host"].share is None
    assert server_lower_bound(lv) == (pytest.approx(315.0), ["accelerator", "host"])
    lv.energy["host"].label = "estimate"  # an estimate is not metered: no lower bound from it
    assert server_lower_bound(lv) is None
    lv = _level({"accelerator": "measured", "host": "measured", "node": "measured"},
                {"accelerator": 270.0, "host": 45.0, "node": 450.0})
    assert {p.boundary: (p.of, p.share) for p in parts(lv)} == {"host": ("node", pytest.approx(0.1))}
    assert server_lower_bound(lv) is None  # the node meter is the server's draw


def test_point_is_the_trial_mean():
    lv = _level({"accelerator": "measured"}, {"accelerator": 700.0})
    assert point(lv, "output_tokens_per_s_per_kw", "accelerator", 5456.0) == pytest.approx(5456.0, rel=1e-12)
    lv.trials = TrialsBlock.model_validate({"n": 5, "figures": {
        "output_tokens_per_s_per_kw@accelerator": {"mean": 5378.0, "ci_low": 5300.0, "ci_high": 5456.0}}})
    assert point(lv, "output_tokens_per_s_per_kw", "accelerator", 5456.0) == pytest.approx(5378.0, rel=1e-12)
    assert point(lv, "output_tokens_per_s_per_kw", "node", 1.0) == pytest.approx(1.0, rel=1e-12)  # no trial figure there: the level's
