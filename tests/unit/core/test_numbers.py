"""The one number format (``core/numbers.py``): digits chosen after rounding, ranges written
alike, ratios that never round to 0, and no ad-hoc number format left in ``report/`` or ``cli/``."""

import ast
import re
from pathlib import Path

import pytest

from wattbench.core.numbers import fmt, fmt_change, fmt_range, fmt_ratio

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
