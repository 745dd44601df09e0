"""``report/summary.py``: what a run answers. Without any energy there is no efficiency answer:
the answer line says so with the ``--sensor`` fix, and no level is named "the most output tokens
per kW" (every level ties at nothing); the HTML's first screen says the same."""

from __future__ import annotations

from tests.fakes.results_factory import make_level, make_result
from wattbench.accounting.level_findings import run_validity
from wattbench.report.html_overview import hero
from wattbench.report.summary import answer_line, answer_lines


def _no_energy_run():
    lvs = [make_level(i, value=c, output_tokens_per_s=100.0 * c) for i, c in enumerate((1, 2, 4))]
    for lv in lvs:
        lv.energy = {}
        lv.energy_unavailable_reason = "no power meter (see the run's verdict)"
    r = make_result(levels=lvs)
    r.validity = run_validity(r, "no power meter produced readings")
    return r


def test_without_energy_there_is_no_efficiency_answer_and_the_fix_is_given():
    r = _no_energy_run()
    line = answer_line(r)
    assert line.startswith("answer: no efficiency answer (energy unavailable); give a power meter with --sensor")
    assert "--sensor const:node=WATTS" in line and "nvml" in line and line.endswith("· warn")
    assert "c=1" not in line  # no level is the answer
    assert not [x for x in answer_lines(r) if "the most output tokens per kW" in x]


def test_the_html_first_screen_says_the_same():
    page = hero(_no_energy_run())
    assert "no efficiency answer" in page and "const:node=WATTS" in page
    assert "c=1" not in page


def test_with_energy_the_most_efficient_level_is_still_named():
    r = make_result(levels=[make_level(i, value=c, output_tokens_per_s=100.0 * c, power_w=500.0)
                            for i, c in enumerate((1, 2, 4))])
    r.validity = run_validity(r)
    assert answer_line(r).startswith("answer: c=4 — ")
    assert "c=4: the most output tokens per kW of the 3 levels" in answer_lines(r)
