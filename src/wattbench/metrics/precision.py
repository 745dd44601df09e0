"""Precision: how many more measurements a figure or a ratio needs, what would settle an inconclusive
judgement, and ``--trials auto``'s stop rule (pure functions; docs/compare.md "Measuring until precise").

- ``measurements_needed``: how many measurements in all bring a mean's relative 95% half-width to a
  target, from the spread observed (the t-quantile at the new degrees of freedom);
- ``ratio_needs`` (each side's ``Need``), ``settle_text`` and ``settle_for``: what would settle a
  judgement of a ratio ``b / a`` (``metrics/noise.judge`` says it for every inconclusive judgement
  with a known noise; ``analysis/regress`` for a check whose interval reaches past its limit), and
  ``wider_text``, why a noise cannot resolve an effect;
- ``LevelPrecision``, ``level_precision`` and ``auto_stop``: a level's headline precision against
  the one asked, and when ``--trials auto`` stops adding rounds (``REACHED``, ``MAX_TRIALS``,
  ``MAX_TIME``, ``NOTHING``); ``DEFAULT_PRECISION`` is its aim and a comparison's default one.

Fewer than ``MIN_DF`` degrees of freedom never decide (``metrics/figure_noise``): a precision is
never reached on fewer than ``AUTO_MIN_TRIALS`` trials.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from wattbench.metrics.figure_noise import MIN_DF, MIN_HISTORY_RUNS, FigureNoise, t_975

DEFAULT_PRECISION = 0.02  # the 95% half-width ``--trials auto`` measures to, and a comparison's default aim
AUTO_MIN_TRIALS = MIN_DF + 1  # a half-width from fewer degrees of freedom never counts as reached
DEFAULT_MAX_TRIALS = 10  # ``--trials auto``'s budget of trials per level when no --max-trials is given
MAX_NEEDED = 100_000  # beyond this many measurements the answer is "more than is practical": None


def measurements_needed(n: int, rel_half_width: float, target: float, df: int | None = None) -> int | None:
    """How many measurements in all would bring the 95% relative half-width of their mean from
    ``rel_half_width`` (now, of the mean of ``n``) to ``target`` or less, from the spread observed.

    The spread of one measurement is ``s = h · sqrt(n) / t(0.975, df)`` (``df``: ``n − 1`` unless
    given — a history's spread is the noise of one run, ``n = 1``, with the history's degrees of
    freedom); ``m`` measurements have ``t(0.975, df + m − n) · s / sqrt(m)``. The answer is the
    smallest ``m >= n`` that reaches ``target``: about ``n · (h / target)²`` with the t-quantile at
    the new degrees of freedom. ``n`` itself when ``h`` is already within ``target``. None when
    the spread is unknown (``df < 1``, a half-width or target not positive and finite) or more than
    ``MAX_NEEDED`` would be needed."""
    dof = n - 1 if df is None else df
    if n < 1 or dof < 1 or not (math.isfinite(rel_half_width) and rel_half_width >= 0):
        return None
    if not (math.isfinite(target) and target > 0):
        return None
    if rel_half_width <= target:
        return n
    s = rel_half_width * math.sqrt(n) / t_975(dof)
    z = 1.959963984540054  # t(0.975, df) >= z for every df: (z·s/target)² is a lower bound on m
    # from that bound the answer is a few steps on: t(0.975, df) ≈ z + 2.4/df, so the (t/z)² the
    # bound leaves out adds about 2.4 measurements whatever the count
    m = max(n + 1, math.floor((z * s / target) ** 2))
    while m <= MAX_NEEDED:
        if t_975(dof + m - n) * s / math.sqrt(m) <= target:
            return m
        m += 1
    return None


@dataclass(frozen=True)
class Need:
    """What one side of a judgement needs to resolve a precision: ``now`` measurements of it (its
    ``unit``: trials, runs), ``needed`` in all (None: its spread is unknown, or past ``MAX_NEEDED``)."""

    side: str  # "A", "B", or "" where one noise stands for both
    unit: str
    now: int
    needed: int | None

    @property
    def more(self) -> int | None:
        return None if self.needed is None else max(0, self.needed - self.now)

    def text(self) -> str:
        """``4 more trials of B (7 in all)``; ``B: more than 100,000 runs``; ``B: its spread is unknown``."""
        of = f" of {self.side}" if self.side else " of each side"
        if self.needed is None:
            return f"{self.unit}{of}: an unknown number (its spread is unknown or past {MAX_NEEDED:,})"
        unit = self.unit[:-1] if self.more == 1 and self.unit.endswith("s") else self.unit
        return f"{self.more} more {unit}{of} ({self.needed} in all)"


def ratio_needs(a: FigureNoise | None, b: FigureNoise | None, precision: float,
                sides: tuple[str, str] = ("A", "B")) -> tuple[Need, ...]:
    """What each side of a ratio ``b / a`` (``sides``: what the caller calls them) needs for the
    ratio's bound ``e^w − 1`` to reach ``precision``: ``w = sqrt(h_a² + h_b²)``, so each side is
    asked for ``ln(1 + precision) / sqrt(2)`` (``measurements_needed``), and for the ``MIN_DF``
    degrees of freedom the noise rule needs at least; one side's noise standing for both asks the
    same of each. A side whose noise is the run-to-run floor (``repeat_noise``) needs at least
    ``MIN_HISTORY_RUNS`` runs: what replaces the floor is a history that measures the spread."""
    known = [(name, p) for name, p in zip(sides, (a, b)) if p is not None]
    per_side = math.log1p(precision) / math.sqrt(2)
    out = []
    for name, p in known:
        now, unit = p.count()
        df = p.dof()
        needed = measurements_needed(now, p.rel_half_width, per_side, df)
        if needed is not None and df is not None:
            needed = max(needed, now + max(0, MIN_DF - df))  # fewer than MIN_DF df never decide
        if needed is not None and "floor" in p.basis.split("+"):
            # the run-to-run floor stands in until a history measures the spread: that takes runs
            needed = max(needed, MIN_HISTORY_RUNS)
        out.append(Need(name if len(known) == 2 else "", unit, now, needed))
    return tuple(out)


def settle_text(bound: float | None, needs: Sequence[Need], precision: float) -> str:
    """What would settle an inconclusive judgement: the smallest effect the current noise resolves
    (the ratio's bound: a ratio further than it from 1 reads beyond noise) and what each side needs
    to resolve ``precision``. Empty without a bound."""
    if bound is None or not math.isfinite(bound):
        return ""
    lead = f"the current noise resolves only effects beyond ±{bound * 100:.1f}%"
    if not needs:
        return lead
    return f"{lead}; to resolve ±{precision * 100:g}%: " + ", ".join(n.text() for n in needs)


def settle_for(bound: float | None, a: FigureNoise | None, b: FigureNoise | None, precision: float,
               df: int | None, sides: tuple[str, str] = ("A", "B")) -> tuple[str, tuple[Need, ...]]:
    """What would settle a judgement of ``b / a`` whose ratio's bound is ``bound`` at ``precision``:
    ``settle_text``'s sentence (empty when the degrees of freedom are unknown: no count can be
    said) and each side's ``Need`` (``ratio_needs``). ``judge`` says it for every inconclusive
    judgement with a known noise; ``analysis/regress`` for a check whose interval reaches past its
    limit, at the precision that limit asks."""
    needs = ratio_needs(a, b, precision, sides)
    return (settle_text(bound, needs, precision) if df is not None else ""), needs


def wider_text(noise: float | str, basis_text: str, what: str) -> str:
    """Why a noise cannot resolve an effect: ``noise ±18.0% (history of key …) is wider than the 3%
    limit``. ``noise``: a relative 95% half-width (0.18), or the noise as the caller writes it
    (``±12.5``, an absolute check's half-width in its metric's unit); ``what``: ``3% limit``,
    ``2% it must resolve``, ``avg_power_w:+10 limit``."""
    text = noise if isinstance(noise, str) else f"±{noise * 100:.1f}%"
    return f"noise {text} ({basis_text}) is wider than the {what}"


@dataclass(frozen=True)
class LevelPrecision:
    """A level's headline precision against the one asked: the relative 95% half-width of its
    trials' mean (``reached``; None with fewer than two trials that measured), how many trials it
    rests on, and how many in all would reach ``target`` (``measurements_needed``)."""

    target: float
    reached: float | None
    trials: int
    needed: int | None
    drifting: bool = False  # a drifting series has no precision to reach: never ``met``

    @property
    def met(self) -> bool:
        """Reached: at least ``AUTO_MIN_TRIALS`` trials (2 degrees of freedom: the noise rule's
        least), a half-width at or within ``target``, and no drift."""
        return (not self.drifting and self.reached is not None and self.trials >= AUTO_MIN_TRIALS
                and self.reached <= self.target)

    @property
    def more(self) -> int | None:
        if self.met:
            return 0
        if self.needed is None:
            return None
        return max(self.needed, AUTO_MIN_TRIALS) - self.trials


def level_precision(trials: int, rel_half_width: float | None, target: float, *,
                    drifting: bool = False) -> LevelPrecision:
    """``LevelPrecision`` of a level whose ``trials`` trials that measured give a headline mean of
    relative 95% half-width ``rel_half_width`` (None: fewer than two)."""
    needed = (measurements_needed(trials, rel_half_width, target)
              if rel_half_width is not None and trials >= 2 else None)
    return LevelPrecision(target=target, reached=rel_half_width, trials=trials, needed=needed, drifting=drifting)


REACHED, MAX_TRIALS, MAX_TIME, NOTHING = "reached", "max trials", "max time", "nothing measured"


def auto_stop(levels: Sequence[LevelPrecision], rounds: int, *, max_trials: int,
              elapsed_s: float = 0.0, max_time_s: float | None = None,
              round_s: float | None = None) -> str | None:
    """``--trials auto``'s stop rule, asked after each round: ``REACHED`` when every level's
    precision is ``met``; ``MAX_TRIALS`` after ``max_trials`` rounds; ``MAX_TIME`` when another
    round (``round_s``: the last one's seconds) would end past ``max_time_s`` of measuring
    (``elapsed_s`` so far); else None: measure another round. ``NOTHING`` when no level measured
    anything (a server that fails every request gives no spread to measure to)."""
    if not levels:
        return NOTHING
    if all(lv.met for lv in levels):
        return REACHED
    if rounds >= max_trials:
        return MAX_TRIALS
    if max_time_s is not None and elapsed_s + (round_s or 0.0) > max_time_s:
        return MAX_TIME
    return None
