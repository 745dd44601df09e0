"""The one headline-boundary rule (results/headline.py) the runner, the reports and the history
store share: measured before declared before estimate, then inner before outer."""

from __future__ import annotations

from tests.fakes.results_factory import make_level
from wattbench.report.format import headline_boundary as report_headline
from wattbench.results.headline import headline_boundary, measured_boundaries


def _level(labels: dict[str, str]):
    lv = make_level(0, power_w={b: 100.0 + i for i, b in enumerate(labels)})
    for b, label in labels.items():
        lv.energy[b].label = label
    return lv


def test_measured_inner_before_outer():
    assert headline_boundary(_level({"node": "measured", "accelerator": "measured", "wall": "measured"})) == "accelerator"


def test_measured_before_a_declared_inner_boundary():
    assert headline_boundary(_level({"accelerator": "declared", "node": "measured"})) == "node"
    assert headline_boundary(_level({"accelerator": "estimate", "host": "declared"})) == "host"


def test_no_energy_no_boundary_and_the_report_agrees():
    lv = make_level(0)
    lv.energy = {}
    assert headline_boundary(lv) is None and report_headline(lv) is None
    lv = _level({"host": "measured", "accelerator": "estimate"})
    name, e = report_headline(lv)
    assert name == headline_boundary(lv) == "host" and e is lv.energy["host"]


def test_measured_boundaries_inner_to_outer():
    assert measured_boundaries(_level({"wall": "measured", "accelerator": "measured", "node": "measured"})) == [
        "accelerator", "node", "wall"]
