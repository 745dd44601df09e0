"""A level's trials in every report: the mean and 95% CI of each headline figure over ``--trials``
(``results.headline.trial_ci``), and the titles that say a table's figures are the last trial's."""

from __future__ import annotations

from dataclasses import dataclass

from wattbench.report import format as F
from wattbench.core.numbers import fmt_estimate, fmt_fraction_pct
from wattbench.core.schema import LevelResult, Result
from wattbench.results.headline import trial_ci


# (figure name in the trials block, display name, is it read at a boundary)
TRIAL_FIGURES: list[tuple[str, str, bool]] = [
    ("output_tokens_per_s", "out tok/s", False),
    ("output_tokens_per_s_per_kw", "tok/s/kW", True),
    ("j_per_output_token", "J/tok", True),
    ("avg_power_w", "W", True),
    ("ttft_p99_ms", "TTFT p99 ms", False),
    ("tpot_p50_ms", "TPOT p50 ms", False),
    ("goodput_per_kw", "goodput tok/s/kW", True),
    ("goodput_fraction", "met SLO", False),
]


@dataclass(frozen=True)
class TrialCell:
    name: str  # display name
    mean: str
    ci: str  # "980–1,020"
    n: int | None


def unmeasured_text(level: LevelResult) -> str | None:
    """``trial 2 of 3 measured nothing (8 of 8 requests failed: http_500 8)``: the level's trials that
    measured nothing (``TrialsBlock.unmeasured``), which no mean or interval counts; None when every
    trial measured (or without trials)."""
    block = level.trials
    if block is None or not block.unmeasured:
        return None
    which = ", ".join(str(u.trial) for u in block.unmeasured)
    whys = "; ".join(sorted({u.why for u in block.unmeasured if u.why}))
    word = "trial" if len(block.unmeasured) == 1 else "trials"
    return f"{word} {which} of {block.n} measured nothing" + (f" ({whys})" if whys else "")


def trials_n(level: LevelResult) -> int | None:
    return level.trials.n if level.trials is not None else None


def trials_cell(level: LevelResult) -> str | None:
    """The trials column's cell: ``3``, or ``2 of 3`` when a trial measured nothing (the means are
    the measuring trials'); None without trials."""
    n = trials_n(level)
    if n is None:
        return None
    dead = len(level.trials.unmeasured) if level.trials is not None else 0
    return f"{n - dead} of {n}" if dead else str(n)


def trial_cells(level: LevelResult) -> list[TrialCell]:
    """Mean and 95% CI of each headline figure over the level's trials (empty without trials)."""
    if trials_n(level) is None:
        return []
    hb = F.headline_energy(level)
    b = hb[0] if hb else None
    out = []
    for name, title, at_boundary in TRIAL_FIGURES:
        ci = trial_ci(level, name, b if at_boundary else None)
        if ci is None:
            continue
        if name == "goodput_fraction":
            mean, ci_txt = fmt_fraction_pct(ci.mean), f"{fmt_fraction_pct(ci.low)}–{fmt_fraction_pct(ci.high)}"
        else:
            mean, ci_txt = fmt_estimate(ci.mean, ci.low, ci.high)
        out.append(TrialCell(title, mean, ci_txt, ci.n))
    return out


def any_trials(result: Result) -> bool:
    return any(trials_n(lv) for lv in result.levels)


def _n_text(result: Result) -> str:
    n = {trials_n(lv) for lv in result.levels} - {None}
    return f"{n.pop()} trials" if len(n) == 1 else "trials"


def trials_n_text(result: Result) -> str:
    """``2 trials`` (``3 trials`` …): how many trials the run's levels had, as the titles say it."""
    return _n_text(result)


def last_trial_title(result: Result) -> str | None:
    """Above the level table of a run with trials: its figures are the last trial's."""
    return f"last of {_n_text(result)} (means and 95% CIs below)" if any_trials(result) else None


def trials_title(result: Result) -> str:
    return f"mean and 95% CI over {_n_text(result)}"
