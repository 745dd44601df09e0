"""Mean and 95% confidence interval of every headline figure across repeated trials.

For a figure measured in ``n`` trials with values ``x``: ``mean``, sample standard deviation ``s``
(ddof=1), and the Student-t interval ``mean ± t(0.975, n-1) · s / sqrt(n)`` (``ci95``). With one
trial the interval is undefined (``ci95_low = ci95_high = None``).

A level's trials block uses ``trial_interval``: a figure every trial of which is positive (a
throughput, a latency, a power, an energy, tokens per kW, J/token) gets its interval on the log
scale — the mean of ``ln x`` ± ``t(0.975, n-1) · s_ln / sqrt(n)``, exponentiated:
``[G·e^-w, G·e^w]`` with ``G`` the geometric mean and ``w = t(0.975, n-1) · s_ln / sqrt(n)`` — so it
never crosses zero (three TTFT p99s of 160, 200 and 402 ms read 254 ms with a Student-t interval of
−68 to 576 ms; on the log scale 71–773 ms). ``mean`` stays the arithmetic mean of the values (the
figure quoted). A figure with a zero or negative value (a failed share, a waiting queue) keeps the
Student-t interval, its low end held at 0 when no value is negative (such a figure cannot be
below 0). ``rel_half_width(mean, low, high)`` reads any interval's noise the one way every noise
rule needs it: the log half-width ``ln(high / low) / 2`` (``w`` itself for a log interval; for a
symmetric one, its first-order equal), the relative half-width ``(high − low) / 2 / |mean|`` only
where the low end is not positive. The t quantile is computed here (regularised
incomplete beta + bisection) so scipy is not a runtime dependency; so is the gamma quantile
(``gamma_ppf``, regularised incomplete gamma + bisection) that judges an open loop's achieved rate.

``ci95(values)`` is that interval; which figures a level's trials block holds, and under which
names, is ``run/analyses.trials_block``'s (the headline's names, ``analysis/figures.reported_figures``).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Iterable, TypedDict


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-15:
            break
    return h


def betainc_reg(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student-t cumulative distribution function."""
    x = df / (df + t * t)
    tail = 0.5 * betainc_reg(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def _invert_cdf(cdf: Callable[[float], float], q: float, hi: float) -> float:
    """The x >= 0 where the increasing ``cdf(x)`` reaches ``q``: double ``hi`` until it brackets ``q``,
    then bisect to a relative width of 1e-12 (at most 200 steps)."""
    lo = 0.0
    while cdf(hi) < q:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if cdf(mid) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


@functools.lru_cache(maxsize=1024)
def t_ppf(q: float, df: float) -> float:
    """Student-t quantile (``0 < q < 1``), by bisection on :func:`t_cdf`."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    return _invert_cdf(lambda x: t_cdf(x, df), q, 1.0)


def gammainc_reg(a: float, x: float) -> float:
    """Regularised lower incomplete gamma P(a, x) (series below ``a + 1``, continued fraction above)."""
    if x <= 0.0:
        return 0.0
    lead = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(10000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return min(1.0, total * math.exp(lead))
    tiny = 1e-300
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return max(0.0, 1.0 - math.exp(lead) * h)


@functools.lru_cache(maxsize=1024)
def gamma_ppf(q: float, shape: float) -> float:
    """Quantile of Gamma(``shape``, scale 1) (``0 < q < 1``), by bisection on :func:`gammainc_reg`."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if not shape > 0:
        raise ValueError(f"gamma shape must be > 0, got {shape}")
    return _invert_cdf(lambda x: gammainc_reg(shape, x), q, max(1.0, shape))


class CI95(TypedDict):
    """``ci95``'s answer: the mean and Student-t 95% interval of the finite values (None where
    undefined: no value, or one value for the interval, ``std`` and ``half_width``)."""

    mean: float | None
    ci95_low: float | None
    ci95_high: float | None
    n: int
    values: list[float]
    std: float | None
    half_width: float | None


def ci95(values: Iterable[float | None]) -> CI95:
    """``{mean, ci95_low, ci95_high, n, values, std, half_width}`` of the finite values given."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(vals)
    if n == 0:
        return {"mean": None, "ci95_low": None, "ci95_high": None, "n": 0, "values": [], "std": None,
                "half_width": None}
    mean = sum(vals) / n
    if n == 1:
        return {"mean": mean, "ci95_low": None, "ci95_high": None, "n": 1, "values": vals, "std": None,
                "half_width": None}
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
    hw = t_ppf(0.975, n - 1) * std / math.sqrt(n)
    return {"mean": mean, "ci95_low": mean - hw, "ci95_high": mean + hw, "n": n, "values": vals, "std": std,
            "half_width": hw}


class TrialInterval(CI95):
    """``trial_interval``'s answer: ``ci95``'s, with the scale the interval was built on."""

    scale: str  # "log" | "linear"


def trial_interval(values: Iterable[float | None]) -> TrialInterval:
    """The 95% interval of a figure over trials (module docstring): on the log scale when every
    finite value is positive (``[G·e^-w, G·e^w]``, ``half_width`` = ``w``, the log half-width),
    else Student-t on the linear scale (``ci95``) with its low end at 0 or above when no value is
    negative. ``mean`` and ``std`` are the values' arithmetic ones either way."""
    c = ci95(values)
    vals = c["values"]
    if c["n"] < 2 or any(v <= 0 for v in vals):
        low = c["ci95_low"]
        if low is not None and low < 0 and all(v >= 0 for v in vals):
            low = 0.0
        return {**c, "ci95_low": low, "scale": "linear"}
    logs = [math.log(v) for v in vals]
    n = len(logs)
    m = sum(logs) / n
    s_ln = math.sqrt(sum((x - m) ** 2 for x in logs) / (n - 1))
    w = t_ppf(0.975, n - 1) * s_ln / math.sqrt(n)
    return {**c, "ci95_low": math.exp(m - w), "ci95_high": math.exp(m + w), "half_width": w, "scale": "log"}


def rel_half_width(mean: float | None, low: float | None, high: float | None) -> float | None:
    """The noise an interval stands for, as every noise rule reads it: the log half-width
    ``ln(high / low) / 2`` where ``low > 0``; else ``(high − low) / 2 / |mean|``; None where
    undefined (no interval, a reversed one, a zero mean with a non-positive low end)."""
    if low is None or high is None or high < low:
        return None
    if low > 0:
        return math.log(high / low) / 2.0
    if not mean:
        return None
    return (high - low) / 2.0 / abs(mean)
