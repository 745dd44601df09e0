"""Length distributions for prompts and outputs: ``N``, ``uniform:A:B``, ``normal:MU:SIGMA``,
``lognormal:MU:SIGMA``, ``choice:A,B,C``.

Every sample is an integer token count >= 1 (or >= ``low`` when given), clipped to ``high`` (e.g.
the model's context length), drawn from a seeded ``numpy.random.Generator``.

- ``N``: always N.
- ``uniform:A:B``: integers A..B inclusive, equally likely.
- ``normal:MU:SIGMA``: a normal with mean MU and standard deviation SIGMA (tokens), rounded.
- ``lognormal:MU:SIGMA``: **MU and SIGMA are the mean and standard deviation of the underlying
  normal**, i.e. of ``ln(length)`` — numpy's convention. The median length is ``exp(MU)`` and the
  mean ``exp(MU + SIGMA**2 / 2)``. Example: ``lognormal:6.2:0.5`` has a median of ~493 tokens.
- ``choice:A,B,C``: one of the listed lengths, equally likely.

Samples are rounded to the nearest integer and then clipped into ``[low, high]``; the clipping
is recorded in ``describe()`` so a result says what was really asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from wattbench.core.errors import UserError

ACCEPTED_FORMS = "N, uniform:A:B, normal:MU:SIGMA, lognormal:MU:SIGMA (of ln length) or choice:A,B,C"


@dataclass(frozen=True)
class LengthDistribution:
    """A parsed length distribution. Use :func:`parse_distribution` to build one from a string."""

    kind: str  # fixed | uniform | normal | lognormal | choice
    params: tuple[float, ...]
    spec: str
    low: int = 1
    high: int | None = None

    def with_bounds(self, low: int | None = None, high: int | None = None) -> "LengthDistribution":
        """The same distribution clipped to ``[low, high]`` (``None`` keeps the current bound)."""
        lo = self.low if low is None else max(1, int(low))
        hi = self.high if high is None else int(high)
        if hi is not None and hi < lo:
            raise UserError(f"length bounds are empty: low {lo} > high {hi} for {self.spec!r}")
        return LengthDistribution(self.kind, self.params, self.spec, lo, hi)

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray | int:
        """Draw ``n`` lengths (an int64 array), or one int when ``n`` is None."""
        size = 1 if n is None else int(n)
        k, p = self.kind, self.params
        if k == "fixed":
            x = np.full(size, p[0], dtype=float)
        elif k == "uniform":
            x = rng.integers(int(p[0]), int(p[1]) + 1, size=size).astype(float)
        elif k == "normal":
            x = rng.normal(p[0], p[1], size=size)
        elif k == "lognormal":
            x = rng.lognormal(p[0], p[1], size=size)
        elif k == "choice":
            x = rng.choice(np.asarray(p, dtype=float), size=size)
        else:  # parse_distribution only builds the kinds above
            raise UserError(f"unknown length distribution kind {k!r}; accepted: {ACCEPTED_FORMS}")
        out = np.rint(x)
        out = np.maximum(out, self.low)
        out = np.minimum(out, self.high if self.high is not None else MAX_LENGTH_TOKENS)
        out = np.minimum(out, MAX_LENGTH_TOKENS)  # huge sigmas or means must not overflow int64
        out = out.astype(np.int64)
        return int(out[0]) if n is None else out

    def mean(self) -> float:
        """The mean of the unclipped distribution (tokens)."""
        k, p = self.kind, self.params
        if k == "fixed":
            return float(p[0])
        if k == "uniform":
            return (p[0] + p[1]) / 2.0
        if k == "normal":
            return float(p[0])
        if k == "lognormal":
            return math.exp(p[0] + p[1] ** 2 / 2.0)
        return float(np.mean(p))

    def max_value(self) -> float:
        """The largest length this distribution can produce (``inf`` for unbounded kinds)."""
        k, p = self.kind, self.params
        if k == "fixed":
            hi = p[0]
        elif k == "uniform":
            hi = p[1]
        elif k == "choice":
            hi = max(p)
        else:
            hi = math.inf
        return float(min(hi, self.high)) if self.high is not None else float(hi)

    def describe(self) -> dict[str, Any]:
        d = {"spec": self.spec, "kind": self.kind, "params": list(self.params),
             "mean_unclipped": self.mean(), "low": self.low, "high": self.high}
        if self.kind == "lognormal":
            d["median"] = math.exp(self.params[0])
            d["params_meaning"] = "mu, sigma of ln(length)"
        return d


def fixed(n: int) -> LengthDistribution:
    return parse_distribution(str(int(n)))


def _num(text: str, spec: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UserError(f"invalid length distribution {spec!r}: {what} {text!r} is not a number; "
                        f"accepted forms: {ACCEPTED_FORMS}") from None
    if not math.isfinite(v):
        raise UserError(f"invalid length distribution {spec!r}: {what} must be finite; accepted forms: {ACCEPTED_FORMS}")
    return v


MAX_LENGTH_TOKENS = 10_000_000  # far above any model's context; guards int64 overflow in sampling


def _int(text: str, spec: str, what: str) -> int:
    v = _num(text, spec, what)
    if v != int(v) or v < 1:
        raise UserError(f"invalid length distribution {spec!r}: {what} must be a whole number >= 1, got {text!r}; "
                        f"accepted forms: {ACCEPTED_FORMS}")
    if v > MAX_LENGTH_TOKENS:
        raise UserError(f"invalid length distribution {spec!r}: {what} {text} is above {MAX_LENGTH_TOKENS:,} tokens; "
                        f"accepted forms: {ACCEPTED_FORMS}")
    return int(v)


def parse_distribution(spec: str | int, *, low: int = 1, high: int | None = None) -> LengthDistribution:
    """Parse a length distribution string (see the module docstring). Bad strings raise UserError."""
    if isinstance(spec, (int, np.integer)):
        spec = str(int(spec))
    if not isinstance(spec, str) or not spec.strip():
        raise UserError(f"invalid length distribution {spec!r}: empty; accepted forms: {ACCEPTED_FORMS}")
    s = spec.strip()
    head, _, rest = s.partition(":")
    kind = head.strip().lower()
    bad = f"invalid length distribution {s!r}"
    if not rest and kind not in ("uniform", "normal", "lognormal", "choice"):
        d = LengthDistribution("fixed", (float(_int(s, s, "length")),), s)
    elif kind == "uniform":
        parts = rest.split(":")
        if len(parts) != 2:
            raise UserError(f"{bad}: uniform needs two bounds, uniform:A:B; accepted forms: {ACCEPTED_FORMS}")
        a, b = _int(parts[0], s, "A"), _int(parts[1], s, "B")
        if b < a:
            raise UserError(f"{bad}: uniform:A:B needs A <= B; accepted forms: {ACCEPTED_FORMS}")
        d = LengthDistribution("uniform", (float(a), float(b)), s)
    elif kind in ("normal", "lognormal"):
        parts = rest.split(":")
        if len(parts) != 2:
            raise UserError(f"{bad}: {kind} needs {kind}:MU:SIGMA; accepted forms: {ACCEPTED_FORMS}")
        mu, sigma = _num(parts[0], s, "MU"), _num(parts[1], s, "SIGMA")
        if sigma < 0:
            raise UserError(f"{bad}: SIGMA must be >= 0; accepted forms: {ACCEPTED_FORMS}")
        if kind == "normal" and mu < 1:
            raise UserError(f"{bad}: MU must be >= 1 token; accepted forms: {ACCEPTED_FORMS}")
        if kind == "lognormal" and mu > 20:
            raise UserError(f"{bad}: lognormal MU is ln(length) (median exp(MU) tokens); {mu:g} is far too large "
                            f"— did you mean lognormal:{math.log(max(mu, 1.0)):.2f}:{sigma:g}?")
        if kind == "lognormal" and sigma > 5:
            raise UserError(f"{bad}: lognormal SIGMA {sigma:g} is the spread of ln(length); above 5 the lengths span "
                            f"more than e^±10 of the median; accepted forms: {ACCEPTED_FORMS}")
        if kind == "normal" and (mu > MAX_LENGTH_TOKENS or sigma > MAX_LENGTH_TOKENS):
            raise UserError(f"{bad}: MU and SIGMA must be at most {MAX_LENGTH_TOKENS:,} tokens; "
                            f"accepted forms: {ACCEPTED_FORMS}")
        d = LengthDistribution(kind, (mu, sigma), s)
    elif kind == "choice":
        items = [x for x in rest.split(",")]
        if not items or any(not x.strip() for x in items):
            raise UserError(f"{bad}: choice needs a comma list, choice:A,B,C; accepted forms: {ACCEPTED_FORMS}")
        d = LengthDistribution("choice", tuple(float(_int(x.strip(), s, "choice")) for x in items), s)
    else:
        raise UserError(f"{bad}: unknown form {kind!r}; accepted forms: {ACCEPTED_FORMS}")
    return d.with_bounds(low, high)
