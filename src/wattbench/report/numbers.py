"""How a number is written for people — the one home, used by every report, table and command.

``fmt(x, unit="")``: thousands separators and about three significant digits (``1,234``, ``123``,
``12.3``, ``1.23``), two below 1 with the trailing zero kept (``0.40`` beside ``0.41``, never
``0.4``), ``–`` for a missing or NaN value. ``fmt_pct`` / ``fmt_fraction_pct``: a percentage with
one decimal. ``fmt_change``: ``1,457 -> 1,316 (-9.7%)`` for a value that moved.

Pure and stdlib only, so it sits in the foundation layer (``tests/unit/test_layering.py``): the
library's messages (``analysis/regress.py``, ``planning/tco.py``) and the reports write numbers the
same way. ``report/format.py`` re-exports it.
"""

from __future__ import annotations

MISSING = "–"


def fmt(x: float | int | None, unit: str = "") -> str:
    """A number for people: thousands separators, about three significant digits (two below 1, with
    the trailing zero: ``0.40``)."""
    if x is None or isinstance(x, bool):
        return MISSING
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return MISSING
    if xf != xf:  # NaN
        return MISSING
    a = abs(xf)
    if a == float("inf"):
        s = "inf" if xf > 0 else "-inf"
    elif a >= 1000:
        s = f"{xf:,.0f}"
    elif a >= 100:
        s = f"{xf:.0f}"
    elif a >= 10:
        s = f"{xf:.1f}"
    elif a >= 1:
        s = f"{xf:.2f}"
    elif a == 0:
        s = "0"
    else:  # two significant digits, trailing zero kept
        s = f"{xf:#.2g}"
    return f"{s} {unit}" if unit else s


def fmt_pct(x: float | None) -> str:
    """A percentage given in percent: ``12.5%``."""
    return MISSING if x is None else f"{x:.1f}%"


def fmt_fraction_pct(x: float | None) -> str:
    """A 0..1 fraction shown as a percentage: ``0.125`` -> ``12.5%``."""
    return MISSING if x is None else f"{x * 100:.1f}%"


def fmt_change(before: float | None, after: float | None, unit: str = "") -> str:
    """``1,457 -> 1,316 (-9.7%)``: a value that moved, in the one number format, with its relative
    change when the first value is not zero."""
    s = f"{fmt(before)} -> {fmt(after)}" + (f" {unit}" if unit else "")
    if before not in (None, 0) and after is not None:
        s += f" ({100.0 * (after - before) / abs(before):+.1f}%)"
    return s
