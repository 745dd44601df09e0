"""How a tune trial is scored, and what is concluded from the trials (pure functions).

**A trial's score.** The trial is one run of the engine in one configuration with ``--optimize``:
the load search (:func:`wattbench.load.search.optimize`) picks the load level with the best
goodput per kW that meets every SLO, refining to the SLO boundary. The trial's figures are that
level's, read at the tune's boundary (default: the level's headline boundary, ``results.headline``, as ``run``
and ``plan`` quote); its
score is the objective:

- ``goodput_per_kw``: output tokens/s of the requests that met every SLO per kW (default);
- ``output_tokens_per_s_per_kw``: all output tokens/s per kW at that level;
- ``j_per_output_token``: joules per output token (lower is better). It orders levels exactly as
  output tokens/s per kW does (J/token = 1000 / (tok/s per kW)), so the load search uses that.

A configuration whose lowest load level already misses the SLO is *pruned*: nothing above it
can meet it. One where no level meets the SLO scores nothing (``misses_slo``).

**Deciding between configurations.** The noise rule is ``metrics/noise.py``'s, the one
``--optimize`` and ``compare`` use: a configuration's noise is the widest of the single-level bound
for its level's window and the spread of the configurations measured more than once (pooled);
the *plateau* is every configuration whose score is within noise of the best (``plateau``).
Where the runner-up is on it (or, with one measurement each, closer than ``noise_pct``), both
are measured again at their chosen load and the decision is made on the means; the
recommendation's margin over the runner-up and over the engine defaults is quoted with its
interval (``conclude`` in ``tune/run.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from wattbench.core.schema import LevelResult, Result
from wattbench.results.tune import (LOWER_IS_BETTER, ParetoTrial, ScoreInterval, TrialFigures, TrialPareto,
                                    TrialRecord, TrialStatus, TuneResult)
from wattbench.analysis.figures import ranked_figures
from wattbench.analysis.pareto import pareto_frontier
from wattbench.metrics.drift import figure_drift
from wattbench.metrics.figure_noise import FigureNoise, with_drift
from wattbench.metrics.plateau import Plateau, measured_plateau
from wattbench.metrics.trials import trial_interval


OBJECTIVE_DRIFT = ("goodput_per_kw", "output_tokens_per_s_per_kw", "goodput_rps", "j_per_output_token")


def trial_figures(level: LevelResult, boundary: str | None, has_slo: bool) -> TrialFigures:
    """The figures a tune table shows for one level: ``analysis.figures.ranked_figures``, the rule
    ``--optimize`` ranks levels by (the trials' mean under ``--trials``, goodput per kW without an
    SLO = output tokens/s per kW)."""
    h = ranked_figures(level, boundary, has_slo)
    ld = level.load
    return TrialFigures(
        boundary=h.boundary, load_mode=ld.mode,
        load_value=ld.target_concurrency if ld.mode == "concurrency" else ld.target_rate_rps,
        level_index=level.index, goodput_per_kw=h.goodput_per_kw,
        goodput_output_tokens_per_s=h.goodput_output_tokens_per_s, output_tokens_per_s=h.output_tokens_per_s,
        output_tokens_per_s_per_kw=h.output_tokens_per_s_per_kw, j_per_output_token=h.j_per_output_token,
        avg_power_w=h.avg_power_w, ttft_p99_ms=h.ttft_p99_ms, tpot_p99_ms=h.tpot_p99_ms,
        verdict=level.validity.verdict, window_s=level.window.duration_s if level.window else None,
        # each objective's drift over the level's trials (metrics/drift.figure_drift): (words, what to
        # do); a drifting configuration is never placed on the plateau (metrics/noise.judge)
        drift={name: d for name in OBJECTIVE_DRIFT
               if (d := figure_drift(level.stationarity, name, h.boundary)) is not None},
    )


def result_figures(result: Result, boundary: str | None, has_slo: bool
                   ) -> tuple[TrialStatus, TrialFigures, str | None]:
    """(status, figures, detail) of a trial run made with ``--optimize``."""
    opt = result.optimize
    measured = list(opt.measured_values) if opt is not None else []
    best = opt.best_value if opt is not None else None
    if opt is not None and best is not None and opt.recommended_value is not None:
        best = opt.recommended_value  # the run's one recommendation, as its answer line reports it
    n = len(result.levels)
    if best is None:
        if n == 1 and measured:
            return "pruned", TrialFigures(), "the lowest load level already misses the SLO"
        return "misses_slo", TrialFigures(), (opt.reason if opt is not None else None) or "no level met the SLO"
    i = measured.index(best) if best in measured else None
    if i is None or i >= n:
        return "failed", TrialFigures(), "the chosen level is not in the run"
    return "done", trial_figures(result.levels[i], boundary, has_slo), None


def better(a: float | None, b: float | None, objective: str) -> bool:
    """Whether score ``a`` beats ``b`` (None never wins)."""
    if a is None:
        return False
    if b is None:
        return True
    return a < b if objective in LOWER_IS_BETTER else a > b


def gain_pct(new: float | None, base: float | None, objective: str) -> float | None:
    """Improvement of ``new`` over ``base`` in percent (positive = better)."""
    if new is None or base is None or base == 0 or new == 0:
        return None
    if objective in LOWER_IS_BETTER:
        return (base / new - 1.0) * 100.0  # J/token: the same work for less energy -> more work per J
    return (new / base - 1.0) * 100.0


def config_scores(t: TuneResult) -> dict[int, list[float]]:
    """Every measured score per original trial index (repeats folded into the trial they repeat)."""
    out: dict[int, list[float]] = {}
    for tr in t.trials:
        if tr.score is None or tr.status != "done":
            continue
        out.setdefault(tr.repeat_of if tr.repeat_of is not None else tr.index, []).append(tr.score)
    return out


def mean_ci(values: list[float]) -> ScoreInterval:
    """The mean of a configuration's scores and their 95% interval (``metrics.trials.trial_interval``:
    on the log scale for positive scores, so it never crosses zero)."""
    c = trial_interval(values)
    mean = c["mean"]
    if mean is None:  # config_scores lists measured scores only: one at least
        raise ValueError(f"no finite score among {values!r}")
    return ScoreInterval(mean=mean, low=c["ci95_low"], high=c["ci95_high"], n=c["n"])


def ranking(t: TuneResult) -> list[tuple[int, ScoreInterval]]:
    """Original trials ranked best first by their mean score."""
    scores = config_scores(t)
    ranked = [(i, mean_ci(v)) for i, v in scores.items()]
    sign = 1.0 if t.objective in LOWER_IS_BETTER else -1.0
    ranked.sort(key=lambda x: (sign * x[1].mean, x[0]))
    return ranked


def plateau(t: TuneResult) -> tuple[Plateau | None, str]:
    """The configurations whose (mean) score is within noise of the best one's
    (``metrics/plateau.measured_plateau``, the rule ``--optimize`` uses for load levels): each
    configuration's noise is the widest of the single-level bound for its level's window, and the
    spread of the configurations measured more than once, pooled. Returns (Plateau or None, basis)."""
    ms: list[tuple[float, float, float | None, FigureNoise | None]] = []
    for tr in t.trials:
        if tr.score is None or tr.status != "done":
            continue
        i = tr.repeat_of if tr.repeat_of is not None else tr.index
        drift = tr.figures.drift.get(t.objective)
        ms.append((float(i), float(tr.score), tr.figures.window_s, with_drift(None, drift)))
    return measured_plateau(ms, higher_is_better=t.objective not in LOWER_IS_BETTER, prefer="best")


def needs_repeat(a: ScoreInterval, b: ScoreInterval, objective: str, noise_pct: float, pl: Plateau | None = None,
                 ia: int | None = None,
                 ib: int | None = None) -> bool:
    """Whether the best (``a``) and runner-up (``b``) are within the noise: the runner-up on the
    plateau (``plateau(t)``, given as ``pl`` with their indices), or — single measurements — closer
    than ``noise_pct`` (a floor the user may raise)."""
    if pl is not None and ia is not None and ib is not None:
        if float(ib) in pl.values or float(ib) in pl.inconclusive:  # inconclusive: more data decides
            return True
    gap = abs(a.mean - b.mean) / max(abs(a.mean), abs(b.mean), 1e-12)
    return a.n < 2 and b.n < 2 and gap * 100.0 < noise_pct


def by_axis(t: TuneResult) -> dict[str, dict[str, float | None]]:
    """For each axis and value: the best mean score of the configurations with that value
    (the 'score by axis' plot)."""
    best: dict[str, dict[str, float | None]] = {}
    ranked = dict(ranking(t))
    trials = {tr.index: tr for tr in t.trials if tr.repeat_of is None}
    for name in t.space.axes:
        row: dict[str, float | None] = {}
        for i, stats in ranked.items():
            tr = trials.get(i)
            if tr is None:
                continue
            key = str(tr.config.get(name, "default"))
            cur = row.get(key)
            if cur is None or better(stats.mean, cur, t.objective):
                row[key] = stats.mean
        best[name] = row
    return best


def pareto(trials: Iterable[TrialRecord], latency: str = "tpot_p99_ms") -> TrialPareto:
    """Goodput per kW (higher) vs a p99 latency (lower) over the trials' chosen levels."""
    pts = [(str(tr.index), tr.figures.goodput_per_kw, tr.figures.latency(latency))
           for tr in trials if tr.status == "done" and tr.repeat_of is None]
    front = pareto_frontier(pts)
    on = {p.label for p in front}
    return TrialPareto(efficiency="goodput_per_kw", latency=latency,
                       points=[ParetoTrial(trial=int(lab), efficiency=e, latency=lat, on_frontier=lab in on)
                               for lab, e, lat in pts if e is not None and lat is not None and math.isfinite(e)],
                       frontier=[int(p.label) for p in front])
