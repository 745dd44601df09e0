"""The one number format (``core/numbers.py``): digits chosen after rounding, ranges written
alike, ratios that never round to 0, and no ad-hoc number format left in ``report/`` or ``cli/``."""

import ast
import re
from pathlib import Path

import pytest

from wattbench.core.numbers import (fmt, fmt_change, fmt_estimate, fmt_fraction_pct, fmt_range, fmt_ratio,
                                    fmt_ratio_estimate, fmt_uncertain)

SRC = Path(__file__).resolve().parents[3] / "src" / "wattbench"


@pytest.mark.parametrize("x, want", [
    (9.996, "10.0"),  # was 10.00 beside 10.0 in the same column
    (0.9996, "1.00"),  # was 1.0 beside 2.00 (an achieved load)
    (99.96, "100"), (999.6, "1,000"), (1234.5, "1,234"), (12.34, "12.3"), (1.234, "1.23"),
    (0.41, "0.41"), (0.4, "0.40"), (0.0404, "0.040"), (0, "0"), (-3.456, "-3.46"), (None, "–"),
    (float("nan"), "–"),
])
def test_fmt_digits_follow_the_rounded_value(x, want):
    assert fmt(x) == want


def test_kinds():
    assert fmt(4333.4, "W") == "4,333 W" and fmt(700.0) == "700"  # plan rack and monitor wrote 4,333.4, 700.0
    assert fmt(21.0, kind="count") == "21" and fmt(1024, kind="count") == "1,024"
    assert fmt(87600, kind="money") == "87,600" and fmt(12.3, kind="money") == "12.30"
    assert fmt(0.012345, kind="precise") == "0.01235"
    assert [fmt(x, kind="load") for x in (0.9996, 2.0, 7.2, 63.7)] == ["1.00", "2.00", "7.20", "63.7"]  # one column


def test_range_ends_alike():
    assert fmt_range(9.996, 10.04) == "10.00–10.04"  # was 10.00–10.0
    assert fmt_range(9.95, 10.05) == "9.95–10.05"
    assert fmt_range(980, 1020) == "980–1,020"
    assert fmt_range(0.41, 1.2) == "0.41–1.20"
    assert fmt_range(None, 3) == "–"


def test_ratio_never_rounds_to_zero():
    assert fmt_ratio(54.2 / 4009) == "0.0135×"  # a TTFT 4,009 -> 54.2 ms read (0.01×)
    assert fmt_ratio(1.9) == "1.90×" and fmt_ratio(0.5) == "0.50×" and fmt_ratio(12.34) == "12.3×"
    assert fmt_change(4009, 54.2, "ms") == "4,009 -> 54.2 ms (-98.6%)"


def _ad_hoc_formats(path: Path) -> list[str]:
    """Python format specs that write a number's digits or separators (``:.1f``, ``:,``, ``:.0%``)
    in f-strings and ``format()`` calls, outside numbers.py."""
    tree = ast.parse(path.read_text())
    out = []

    def bad(spec: str) -> bool:
        return any(ch in spec for ch in ".,%") or spec.rstrip("<>^=").endswith(("f", "e"))

    for node in ast.walk(tree):
        if isinstance(node, ast.FormattedValue) and isinstance(node.format_spec, ast.JoinedStr):
            spec = "".join(v.value for v in node.format_spec.values if isinstance(v, ast.Constant))
            if bad(spec):
                out.append(f"{path.name}:{node.lineno}: {{…:{spec}}}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "format" \
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant) and bad(str(node.args[1].value)):
            out.append(f"{path.name}:{node.lineno}: format(…, {node.args[1].value!r})")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str) and re.search(r"%[-+ #0]*\d*\.\d*[fgde%]", node.left.value):
            out.append(f"{path.name}:{node.lineno}: '%…' % …")
    return out


def test_no_ad_hoc_number_formats_in_reports_and_commands():
    """Every number people read in report/ and cli/ goes through core/numbers.py."""
    found = []
    for folder in ("report", "cli"):
        for p in sorted((SRC / folder).rglob("*.py")):
            if p.name != "numbers.py":
                found += _ad_hoc_formats(p)
    assert not found, "\n".join(found)


def test_the_scan_finds_an_ad_hoc_format(tmp_path):
    p = tmp_path / "x.py"
    p.write_text('a = 1.5\nb = f"{a:.1f} W"\nc = format(a, ",.0f")\nd = f"{a:g}"\n')
    assert len(_ad_hoc_formats(p)) == 2


@pytest.mark.parametrize("x, low, high, want", [
    (10.024, 10.02, 10.03, ("10.02", "10.02–10.03")),  # was 10.0 [10.02–10.03]: a mean outside its interval
    (0.391, 0.3909, 0.3911, ("0.3910", "0.3909–0.3911")),  # was 0.39 [0.3909–0.3911]
    (0.651, 0.6508, 0.6513, ("0.6510", "0.6508–0.6513")),  # was 0.65 [0.6508–0.6513]
    (6131.5, 6127.0, 6136.0, ("6,132", "6,127–6,136")),  # ±4.5: one significant digit of the half-width
    (1944.0, 1902.0, 1986.0, ("1,940", "1,900–1,990")),  # ±42: the units digit says nothing
    (2086.0, 2071.0, 2101.0, ("2,086", "2,071–2,101")),  # ±15: two significant digits (leading 1)
    (500.0, 500.0, 500.0, ("500", "500–500")),  # a zero-width interval: the figure's own digits
    (500.0, 500.0 - 1e-10, 500.0 + 2e-10, ("500", "500–500")),  # float noise: not widened to 500.000–500.000
])
def test_a_figure_and_its_interval_are_written_at_one_precision(x, low, high, want):
    got = fmt_estimate(x, low, high)
    assert got == want
    # as written, the mean never falls outside its own interval
    lo, hi = (float(v.replace(",", "")) for v in got[1].split("–"))
    assert lo <= float(got[0].replace(",", "")) <= hi


def test_the_precision_boundary_between_one_and_two_digits_of_the_half_width():
    """A half-width whose leading digit is 2 keeps two significant digits, one of 3 keeps one: the
    edge sits at 3 × 10^e (a 1% move of it changes the decimals)."""
    assert fmt_estimate(100.0, 100.0 - 2.97, 100.0 + 2.97) == ("100.0", "97.0–103.0")
    assert fmt_estimate(100.0, 100.0 - 3.03, 100.0 + 3.03) == ("100", "97–103")


def test_a_ratio_keeps_its_two_decimals_and_an_estimate_its_uncertainty():
    assert fmt_ratio_estimate(0.512, 0.5117, 0.5122) == ("0.5120×", "0.5117–0.5122")  # was 0.51× (0.5117–0.5122)
    assert fmt_ratio_estimate(1.22, 0.95, 1.57) == ("1.22×", "0.95–1.57")  # whether it crosses 1.00 shows
    assert fmt_uncertain(43_825_484, 60) == "44,000,000"  # out tok/kWh on a ±60% estimate
    assert fmt_uncertain(1533.0, None) == "1,533"


def test_a_percentage_keeps_its_decimal_at_zero():
    assert fmt_fraction_pct(0.0) == "0.0%" and fmt_fraction_pct(1.0) == "100.0%"  # was 0% beside 100.0%


def test_a_precision_short_of_the_one_asked_never_reads_as_the_one_asked():
    from wattbench.core.numbers import fmt_pct_against

    # 2.046% against ±2% would read "±2.0%" at an effect's two digits: one more decimal tells them apart
    assert fmt_pct_against(2.046422563545236, 2.0) == "2.05%"
    assert fmt_pct_against(2.0004, 2.0) == "2.0004%"  # up to three decimals more
    # met, or well past the limit: an effect's two significant digits, as before
    assert fmt_pct_against(1.996, 2.0) == "2.0%"
    assert fmt_pct_against(0.6931, 2.0) == "0.69%"
    assert fmt_pct_against(9.5726, 2.0) == "9.6%"
    assert fmt_pct_against(9.5726, None) == "9.6%"
    assert fmt_pct_against(None, 2.0) == "–"
