"""How a number is written for people — the one home, used by every report, table and command.

``fmt(x, unit="", kind="figure")``: thousands separators and significant digits by the kind of
figure (``KIND_DIGITS``): a measured figure has about three (``1,234``, ``123``, ``12.3``, ``1.23``,
two below 1 with the trailing zero kept: ``0.40`` beside ``0.41``, never ``0.4``); a count is a whole
number (``1,024``); money has cents below 1,000 (``12.30``). The digits follow the *rounded* value,
so 9.996 reads ``10.0`` (not ``10.00``) and 0.9996 reads ``1.00`` (not ``1.0``): one column never
mixes ``1.0`` and ``2.00``. ``–`` for a missing or NaN value.

``fmt_range(low, high)``: a range or CI with both ends at the same decimals (``9.95–10.05``, never
``10.00–10.0``; a decimal more where two ends that differ would read alike). ``fmt_ratio``: ``1.90×``, ``0.50×``, ``0.0135×`` (two decimals, three significant digits
below 0.1: never rounded to ``0.01×``). ``fmt_pct`` / ``fmt_fraction_pct`` / ``fmt_signed_pct``: a percentage with one decimal.
``fmt_change``: ``1,457 -> 1,316 (-9.7%)`` for a value that moved.

A figure with its uncertainty is written at the uncertainty's precision, the figure and its
interval alike (``fmt_estimate`` → ``("6,132", "6,127–6,136")``, ``fmt_ratio_estimate`` for a
ratio, ``fmt_uncertain(x, ±%)`` for a figure with a stated relative uncertainty): the half-width's
significant digits decide the decimals — never more than one digit past the figure's kind,
never so few that two ends that differ read alike — so a mean is never written outside its own
interval (``10.0 [10.02–10.03]``), never with fewer digits than its ends (``0.65 [0.6508–0.6513]``),
and a ±60% estimate reads ``44,000,000``, not ``43,825,484``.

Pure and stdlib only, so it sits in the foundation layer (``tests/unit/test_layering.py``): the
library's messages (``analysis/regress.py``, ``planning/tco.py``) and the reports write numbers the
same way, each importing it from here. ``tests/unit/report/test_numbers.py`` keeps ad-hoc
number formats (``f"{x:.1f}"``) out of ``report/`` and ``cli/``.
"""

from __future__ import annotations

import math

MISSING = "–"

# significant digits of a figure of each kind, and the fewest digits below 1
KIND_DIGITS = {"figure": 3, "precise": 4, "ratio": 3, "effect": 2, "load": 3}
KINDS = ("figure", "precise", "ratio", "effect", "load", "count", "money")


def _number(x: float | int | None) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return None
    return None if xf != xf else xf


def _decimals(a: float, kind: str) -> int:
    """Decimals that give ``a`` (> 0, finite) the significant digits of its kind."""
    if kind == "count":
        return 0
    if kind == "money":
        return 0 if a >= 1000 else 2 if a >= 0.01 else _decimals(a, "figure")
    if kind == "ratio" and 0.1 <= a < 10:
        return 2  # 0.50×, 1.90×: two decimals, as ratios are read; 0.0135× below 0.1, never 0.01×
    sig = KIND_DIGITS.get(kind, 3)
    if kind in ("figure", "load") and a < 1:
        sig = 2  # 0.41, 0.040: two digits below 1
    if a >= 10 ** sig:
        return 0
    return max(0, sig - 1 - math.floor(math.log10(a)))


def _digits(xf: float, kind: str) -> int:
    """The decimals of ``xf`` as written: chosen for the value *after* rounding, so a value that
    rounds up into the next decade takes that decade's digits (9.996 -> 10.0)."""
    a = abs(xf)
    if a == 0 or a == float("inf"):
        return 0
    d = _decimals(a, kind)
    r = abs(round(xf, d))
    if r > 0 and r != a and _decimals(r, kind) < d:
        d = _decimals(r, kind)
    return d


def _write(xf: float, d: int) -> str:
    """``xf`` with ``d`` decimals; a negative ``d`` rounds to tens, hundreds … (``-2``: 43,800)."""
    if abs(xf) == float("inf"):
        return "inf" if xf > 0 else "-inf"
    if d < 0:
        xf, d = round(xf, d), 0
    s = f"{xf:,.{d}f}"
    return "0" if s.lstrip("-").replace(".", "").replace(",", "").strip("0") == "" else s


def fmt(x: float | int | None, unit: str = "", kind: str = "figure") -> str:
    """A number for people (``KIND_DIGITS``): thousands separators, about three significant digits
    for a figure (two below 1, with the trailing zero: ``0.40``), a whole number for a ``count``,
    cents for ``money``, four digits for a ``precise`` figure (a J/token in a live table), two for the
    ``effect`` of a finding (``+56%``, ``5.6%``); an achieved ``load`` is a figure (``7.20`` in
    flight, ``1.00`` beside ``2.00``)."""
    xf = _number(x)
    if xf is None:
        return MISSING
    s = _write(xf, _digits(xf, kind))
    return f"{s} {unit}" if unit else s


def fmt_range(low: float | None, high: float | None, unit: str = "", kind: str = "figure") -> str:
    """``9.95–10.05``: a range or confidence interval, both ends at the same decimals (the finer
    end's), so ``10.00–10.0`` cannot happen."""
    lo, hi = _number(low), _number(high)
    if lo is None or hi is None:
        return MISSING
    d = max(_digits(lo, kind), _digits(hi, kind))
    for _ in range(2):  # two ends that differ are not written alike (9.996–10.04: 10.00–10.04)
        if lo == hi or _write(lo, d) != _write(hi, d) or kind == "count":
            break
        d += 1
    s = f"{_write(lo, d)}–{_write(hi, d)}"
    return f"{s} {unit}" if unit else s


# significant digits of a half-width that set a figure's and its interval's decimals: two where the
# half-width's leading digit is 1 or 2 (±1.4, ±27), one from 3 up (±4.5 -> ±5, ±42 -> ±40), as the
# particle physicists' convention has it: the second digit of ±14 says more than the second of ±42
UNCERTAINTY_DIGITS = 2
SAME = 1e-9  # ends closer than this (relative) are one value written alike, never widened to tell them apart


def estimate_decimals(x: float, low: float, high: float, kind: str = "figure") -> int:
    """The decimals at which ``x`` and its interval ``[low, high]`` are written together: the
    half-width's significant digits (``UNCERTAINTY_DIGITS``), at most one decimal past what
    ``x``'s kind gives alone, and — where the two ends differ — enough (up to two more) that they
    read apart. One decimals for all three, so rounding keeps ``low ≤ x ≤ high`` as written."""
    hw = max(abs(high - x), abs(x - low))
    d = _digits(x, kind)
    if hw <= SAME * max(abs(x), 1.0):  # the trials agree to float noise: a zero-width interval
        return d
    if hw > 0 and math.isfinite(hw) and kind != "count":
        e = math.floor(math.log10(hw))
        sig = UNCERTAINTY_DIGITS if hw / 10.0 ** e < 3 else 1
        # a ratio keeps the two decimals it is read at (whether an interval crosses 1.00 shows)
        d = min(max(sig - 1 - e, d if kind == "ratio" else -99), d + 1)
    elif kind == "count":
        d = 0
    for _ in range(2):
        if low == high or _write(low, d) != _write(high, d) or kind == "count":
            break
        d += 1
    return d


def fmt_estimate(x: float | None, low: float | None, high: float | None, unit: str = "",
                 kind: str = "figure") -> tuple[str, str]:
    """A figure and its interval at one precision (``estimate_decimals``): ``("6,132",
    "6,127–6,136")``; ``(fmt(x), "–")`` without an interval."""
    xf, lo, hi = _number(x), _number(low), _number(high)
    if xf is None:
        return MISSING, MISSING
    if lo is None or hi is None or not all(map(math.isfinite, (xf, lo, hi))):
        return fmt(xf, unit, kind), MISSING
    d = estimate_decimals(xf, lo, hi, kind)
    u = f" {unit}" if unit else ""
    return _write(xf, d) + u, f"{_write(lo, d)}–{_write(hi, d)}" + u


def fmt_ratio_estimate(r: float | None, low: float | None, high: float | None) -> tuple[str, str]:
    """A ratio and its interval at one precision: ``("0.5120×", "0.5117–0.5122")``."""
    x, iv = fmt_estimate(r, low, high, kind="ratio")
    return (x if x == MISSING else x + "×"), iv


def fmt_uncertain(x: float | None, rel_pct: float | None, unit: str = "", kind: str = "figure") -> str:
    """A figure with a stated relative uncertainty (± ``rel_pct`` %) at that precision: 43,825,484
    at ±60% reads ``44,000,000``; without one, ``fmt``."""
    xf = _number(x)
    if xf is None or rel_pct is None or not rel_pct > 0 or not math.isfinite(xf):
        return fmt(x, unit, kind)
    hw = abs(xf) * rel_pct / 100.0
    return fmt_estimate(xf, xf - hw, xf + hw, unit, kind)[0]


def fmt_ratio(r: float | None) -> str:
    """``1.90×``, ``0.50×``, ``0.0135×``, ``74.0×``: two decimals from 0.1 to 10, else three
    significant digits, never rounded to 0."""
    return MISSING if _number(r) is None else fmt(r, kind="ratio") + "×"


def fmt_pct(x: float | None) -> str:
    """A percentage given in percent: ``12.5%``, ``0.0%`` (one decimal always: ``0.0%`` beside ``100.0%``)."""
    xf = _number(x)
    if xf is None:
        return MISSING
    s = _write(xf, 1)
    return ("0.0" if s == "0" else s) + "%"


def fmt_pct_against(x: float | None, limit: float | None) -> str:
    """A percentage read against a limit it is judged by (a precision reached against the one
    asked): an effect's two significant digits (``±9.6%``, ``±0.69%``), and more (up to three
    decimals more) where those would write a value past the limit as the limit itself or under it:
    ``±2.05%`` short of ``±2%``, never ``±2.0%`` short of it."""
    xf = _number(x)
    if xf is None:
        return MISSING
    d = _digits(xf, "effect")
    lf = _number(limit)
    if lf is not None and xf > lf:
        for _ in range(3):
            if float(_write(xf, d).replace(",", "")) > lf:
                break
            d += 1
    return _write(xf, d) + "%"


def fmt_signed_pct(x: float | None) -> str:
    """A signed percentage given in percent: ``+12.5%``, ``-0.2%``."""
    xf = _number(x)
    return MISSING if xf is None else ("+" if xf >= 0 else "") + f"{_write(xf, 1)}%"


def fmt_fraction_pct(x: float | None) -> str:
    """A 0..1 fraction shown as a percentage: ``0.125`` -> ``12.5%``."""
    xf = _number(x)
    return MISSING if xf is None else fmt_pct(xf * 100)


def fmt_change(before: float | None, after: float | None, unit: str = "") -> str:
    """``1,457 -> 1,316 (-9.7%)``: a value that moved, in the one number format, with its relative
    change when the first value is not zero."""
    s = f"{fmt(before)} -> {fmt(after)}" + (f" {unit}" if unit else "")
    if before not in (None, 0) and after is not None:
        s += f" ({fmt_signed_pct(100.0 * (after - before) / abs(before))})"
    return s
