"""A figure from a modelled power reads as an estimate: every figure derived from a ±60% power
estimate (no meter: ``estimate:cpu``) is written with the significant digits its uncertainty
allows (``core.numbers.fmt_uncertain``), in the terminal summary's table and progress line, the
answer line, the Markdown and HTML reports — never ``out tok/kWh 101,992,500`` as if measured to
the token. A measured boundary beside it keeps its digits.

The level (hand-checked): 453.3 out tok/s for 60 s (27,198 output tokens) on a 16 W host estimate:
per kW 453.3 / 0.016 = 28,331 (±60%: ±17,000, two digits → 28,000); output tokens per kWh
27,198 / (960 J / 3.6e6) = 101,992,500 (±61,000,000, one digit → 100,000,000); J per output token
960 / 27,198 = 0.0353 (±0.021 → 0.035); energy 960 J (±576, one digit → 1,000); and the 700 W measured
accelerator: per kW 647.57…, written 648 as every measured figure is.
"""

from __future__ import annotations

import re

from rich.console import Console

from tests.fakes.results_factory import make_level, make_result
from wattbench.report import format as F
from wattbench.report.tables import level_columns
from wattbench.report.terminal import run_summary


def _result(power_w: dict[str, float] | None = None):
    lv = make_level(0, value=2, output_tokens_per_s=453.3, power_w=power_w or {"host": 16.0})
    if "host" in lv.energy:
        est = lv.energy["host"]
        est.label, est.method, est.uncertainty_pct = "estimate", "estimate", 60.0
    return make_result("est", levels=[lv])


def test_the_figures_of_an_estimate_carry_the_digits_of_its_uncertainty():
    r = _result()
    be = r.levels[0].energy["host"]
    acc = _result({"accelerator": 700.0}).levels[0].energy["accelerator"]
    assert round(be.output_tokens_per_kwh) == 101_992_500  # the hand-checked figure the summary must not print
    assert F.energy_fmt(be, be.output_tokens_per_s_per_kw) == "28,000"
    assert F.energy_fmt(be, be.output_tokens_per_kwh) == "100,000,000"
    assert F.energy_fmt(be, be.j_per_output_token) == "0.035"
    assert F.energy_fmt(be, be.energy_j) == "1,000"
    assert F.energy_fmt(acc, acc.output_tokens_per_s_per_kw) == "648"  # measured: its own digits
    assert F.energy_where("host", be) == "host, estimate ±60%"
    cols = {c.header: c.cells for c in level_columns(r)}
    assert cols["tok/s/kW\nhost\nestimate"] == ["28,000"] and cols["J/tok\nhost\nestimate"] == ["0.035"]
    assert cols["W\nhost\nestimate"] == ["16"]
    measured = {c.header: c.cells for c in level_columns(_result({"accelerator": 700.0}))}
    assert measured["tok/s/kW\naccel\nmeasured"] == ["648"] and measured["J/tok\naccel\nmeasured"] == ["1.54"]


def test_the_terminal_markdown_and_html_write_an_estimate_as_one(tmp_path):
    from wattbench.report.data import RunData
    from wattbench.report.html import _energy_table as html_energy
    from wattbench.report.markdown import _energy_table as md_energy
    from wattbench.results.rundir import write_result

    r = _result()
    lv = r.levels[0]
    line = F.headline_line(lv)  # the progress line of the level
    assert "0.016 kW (host, estimate ±60%) · 28,000 tok/s/kW · 0.035 J/tok" in line, line
    md = "\n".join(md_energy(lv.energy, "USD"))
    assert "| output tokens per kWh | 100,000,000 |" in md and "101,992,500" not in md
    assert "| output tok/s per kW | 28,000 |" in md and "| uncertainty | 60.0 % |" in md, md
    html = html_energy(lv.energy, "USD")
    assert "<td>100,000,000</td>" in html and "101,992,500" not in html
    write_result(tmp_path / "est", r)
    c = Console(record=True, width=80, color_system=None, file=open("/dev/null", "w"))
    c.print(run_summary(RunData(tmp_path / "est").result))
    text = c.export_text()
    assert re.search(r"^c=2 .* 28,000 .*0\.035", text, flags=re.M), text
    assert "28,331" not in text and "101,992,500" not in text
