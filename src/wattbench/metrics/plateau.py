"""The plateau: the load levels (or configurations) whose score is within noise of the best, and the
one recommended from them — the ``--optimize`` plateau and ``tune``'s margins (pure functions;
docs/workloads.md "Sweeps and adaptive search").

``plateau`` places each point by ``metrics/noise.judge`` on the best one's score over its own: within
noise, it is on the plateau; inconclusive (unknown noise, fewer than 2 degrees of freedom, a bound
over ±25%, a drifting figure), it never is, and the plateau says which points the noise could not
place. The recommended value is the lowest load on the plateau (the same efficiency within noise
with the most latency headroom). ``measured_plateau`` is that rule for a search whose levels were
measured once or more (``--optimize`` re-measures its best two, ``tune`` its best two
configurations): a value's noise is the widest of its trials' CI, the spread of the repeated
measurements pooled over every re-measured value (``pooled_repeat_sd``) and the single-level bound
(``metrics/figure_noise.single_level_noise``). ``margin`` is one value's score over another's with
``judge``'s word.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from wattbench.metrics.figure_noise import H200_TRIAL_DF, FigureNoise, pooled_sd, single_level_noise, t_975
from wattbench.metrics.noise import INCONCLUSIVE, WITHIN, Judgement, RatioNoise, judge, ratio_noise

@dataclass
class Plateau:
    """The levels whose score is within noise of the best, and the one recommended. A level whose
    judgement against the best is inconclusive is never on the plateau (``inconclusive`` lists it)."""

    best: float  # the value (load level) with the highest mean score
    values: list[float]  # every value on the plateau, ascending (the best among them)
    recommended: float
    reason: str
    scores: dict[float, float] | None = None  # value -> its (mean) score
    noise: dict[float, FigureNoise] | None = None  # value -> the noise of its (mean) score
    inconclusive: list[float] = field(default_factory=list)  # values the noise cannot place
    judgements: dict[float, Judgement] = field(default_factory=dict)  # value -> judge(best ÷ its score)


def plateau(points: Iterable[tuple[float, float, FigureNoise | None]], *, higher_is_better: bool = True,
            prefer: str = "lowest") -> Plateau | None:
    """Every point ``(value, score, noise)`` that ``judge`` calls within noise of the best one's
    (best ÷ score), and the recommended value: the lowest load on the plateau
    (``prefer="lowest"``: the same efficiency within noise with the most latency headroom). A point
    the judgement calls inconclusive (unknown noise, < 2 df, a bound over ±25%) is never on it."""
    pts = [(float(v), float(s), n) for v, s, n in points if s is not None and math.isfinite(s) and s > 0]
    if not pts:
        return None
    sign = 1.0 if higher_is_better else -1.0
    bv, bs, bn = max(pts, key=lambda p: (sign * p[1], -p[0]))
    on, unsure, jds = [], [], {}
    for v, s, n in pts:
        if v == bv:
            on.append(v)
            continue
        jd = judge(bs / s if higher_is_better else s / bs, n, bn)
        jds[v] = jd
        if jd.word == WITHIN:
            on.append(v)
        elif jd.word == INCONCLUSIVE:
            unsure.append(v)
    on.sort()
    unsure.sort()
    rec = on[0] if prefer == "lowest" else bv
    if rec == bv:
        reason = "the best score" + ("; no other level is within noise of it" if len(on) == 1 else "")
        if unsure:
            jd = jds[unsure[0]]
            reason += (f"; {', '.join(f'{u:g}' for u in unsure)} inconclusive against it ({jd.why}: "
                       f"{jd.todo})")
    else:
        reason = (f"the lowest load within noise of the best ({bv:g}): the same efficiency with the most "
                  "latency headroom")
    return Plateau(best=bv, values=on, recommended=rec, reason=reason, scores={v: s for v, s, _ in pts},
                   noise={v: n for v, _, n in pts if n is not None}, inconclusive=unsure, judgements=jds)


def margin(pl: Plateau, a: float, b: float, *, higher_is_better: bool = True) -> RatioNoise | None:
    """``a``'s score over ``b``'s (for a lower-is-better score, ``b`` over ``a``: above 1 means ``a``
    is better) with ``judge``'s word on the plateau's per-value noise (``within`` None: inconclusive)."""
    sc, nz = pl.scores or {}, pl.noise or {}
    if a not in sc or b not in sc or not sc[a] or not sc[b]:
        return None
    r = sc[a] / sc[b] if higher_is_better else sc[b] / sc[a]
    return ratio_noise(r, nz.get(b), nz.get(a))


def pooled_repeat_sd(groups: Iterable[Sequence[float]]) -> tuple[float | None, int]:
    """The relative sd of one measurement pooled over groups of repeated measurements of the same
    thing (on the log scale: ``sqrt(Σ (ln x - mean ln x)² / Σ (m - 1))``), and its degrees of
    freedom; (None, 0) when no group has two values."""
    return pooled_sd([[math.log(v) for v in g if v is not None and v > 0 and math.isfinite(v)] for g in groups])


def measured_plateau(measurements: Sequence[tuple[float, float, float | None, FigureNoise | None]], *,
                     higher_is_better: bool = True, prefer: str = "lowest") -> tuple[Plateau | None, str]:
    """The plateau of a search whose levels were measured once or more (``--optimize`` re-measures
    its best two; ``tune`` its best two configurations): ``measurements`` are ``(value, score,
    window_s, trials_noise)``, several per value when measured again. A value's score is the mean
    of its measurements; its noise the widest of (a) its trials' CI (``trials_noise``), (b) the
    spread of the repeated measurements pooled over every re-measured value
    (``t(0.975, df) · s / sqrt(m)`` for m measurements), (c) the single-level bound for its window
    over ``sqrt(m)``. Returns the plateau and a phrase naming the basis."""
    by: dict[float, list[tuple[float, float | None, FigureNoise | None]]] = {}
    for v, s, w, tn in measurements:
        if s is None or not math.isfinite(s) or s <= 0:
            continue
        by.setdefault(float(v), []).append((float(s), w, tn))
    if not by:
        return None, ""
    sd, df = pooled_repeat_sd([[s for s, _, _ in ms] for ms in by.values()])
    points = []
    bases: list[str] = []
    for v, ms in by.items():
        m = len(ms)
        mean = sum(s for s, _, _ in ms) / m
        windows = [w for _, w, _ in ms if w]
        bound = single_level_noise(min(windows) if windows else None)
        cands = [FigureNoise(bound.rel_half_width / math.sqrt(m), "bound", m, bound.detail, H200_TRIAL_DF, m,
                             "measurements")]
        if sd is not None:
            cands.append(FigureNoise(t_975(df) * sd / math.sqrt(m), "repeats", m,
                                     f"repeat spread sd {sd * 100:.1f}% ({df} df)", df, m, "measurements"))
        given = [tn for _, _, tn in ms if tn is not None]
        cands += [tn for tn in given if tn.basis != "drift"]
        drift = next(((tn.drift, tn.drift_todo) for tn in given if tn.drift), None)
        widest = max(cands, key=lambda c: c.rel_half_width)
        if drift is not None:
            widest = replace(widest, drift=drift[0], drift_todo=drift[1])
        if widest.basis not in bases:
            bases.append(widest.basis)
        points.append((v, mean, widest))
    pl = plateau(points, higher_is_better=higher_is_better, prefer=prefer)
    names = {"bound": "the single-level bound", "repeats": "the spread of the re-measured levels",
             "trials": "the trials' CIs"}
    basis = ", ".join(names.get(b, b) for b in bases)
    if sd is not None:
        basis += f" (re-measured spread: sd {sd * 100:.1f}%, {df} df)"
    return pl, basis
