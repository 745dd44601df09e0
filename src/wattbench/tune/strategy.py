"""Which configuration to try next: exhaustive for small spaces, Optuna's TPE sampler for larger.

Both take ``tell(config, params, score)`` after each trial (score None = pruned / missed the SLO)
and can be replayed from the trials of an earlier, interrupted tune (``--resume``). Optuna is an
optional extra (``pip install 'wattbench[tune]'``); a space larger than the trial budget without
it is refused with that hint.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

from wattbench.core.errors import UserError
from wattbench.results.tune import LOWER_IS_BETTER
from wattbench.tune.space import Space, config_key

if TYPE_CHECKING:  # optional (the [tune] extra): imported where the sampler is built
    from optuna.distributions import BaseDistribution
    from optuna.trial import Trial

# A configuration (axis name -> value; Space.resolve drops inactive axes) or the sampler's raw
# parameters of one.
Config = dict[str, Any]

EXHAUSTIVE_MAX = 16  # spaces up to this many configurations are tried in full when the budget allows


def choose(space: Space, max_trials: int | None, strategy: str = "auto") -> str:
    n = space.size()
    if strategy == "auto":
        return "exhaustive" if n <= EXHAUSTIVE_MAX or (max_trials is not None and n <= max_trials) else "optuna"
    if strategy not in ("exhaustive", "optuna"):
        raise UserError(f"--strategy {strategy!r}: choose auto, exhaustive or optuna")
    return strategy


class Strategy(Protocol):
    """What a tune asks of a search: the next configuration to measure (with the parameters that
    gave it), None when the space is exhausted; and each trial's score, measured or replayed."""

    name: str

    def ask(self) -> tuple[Config, Config] | None: ...

    def tell(self, config: Config, params: Config, score: float | None) -> None: ...


class Exhaustive:
    name = "exhaustive"

    def __init__(self, space: Space, seed: int = 0, objective: str = "goodput_per_kw") -> None:
        self.todo = space.configurations()
        self.done: set[str] = set()

    def ask(self) -> tuple[Config, Config] | None:
        for c in self.todo:
            if config_key(c) not in self.done:
                return c, dict(c)
        return None

    def tell(self, config: Config, params: Config, score: float | None) -> None:
        self.done.add(config_key(config))


class OptunaSearch:
    """Optuna's TPE sampler over the axes as categorical parameters. A configuration proposed
    again (conditions can map different parameters to one configuration) is answered from the
    trials already measured, without running it again."""

    name = "optuna"

    def __init__(self, space: Space, seed: int = 0, objective: str = "goodput_per_kw") -> None:
        try:
            import optuna
        except ImportError:
            raise UserError(f"the space has {space.size()} configurations, more than the budget tries in full; "
                            "the optimiser needs Optuna: pip install 'wattbench[tune]' (or give --strategy exhaustive)") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.space = space
        self.sign = -1.0 if objective in LOWER_IS_BETTER else 1.0
        self.dists: dict[str, BaseDistribution] = {a.name: optuna.distributions.CategoricalDistribution(a.values) for a in space.axes}
        self.study = optuna.create_study(direction="minimize" if self.sign < 0 else "maximize",
                                         sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=4))
        self.known: dict[str, float | None] = {}
        self.keys = {config_key(c) for c in space.configurations()}
        self._pending: dict[str, Trial] = {}

    def _record(self, params: Config, score: float | None) -> None:
        if set(params) != set(self.dists):
            return  # e.g. the engine-defaults baseline: not a point of the sampler's space
        ft = self.optuna.trial
        state = self.optuna.trial.TrialState
        if score is None or not math.isfinite(score):
            self.study.add_trial(ft.create_trial(params=params, distributions=self.dists, state=state.PRUNED))
        else:
            self.study.add_trial(ft.create_trial(params=params, distributions=self.dists, value=score))

    def ask(self) -> tuple[Config, Config] | None:
        for _ in range(200):  # proposals that map to a measured configuration are answered at once
            if self.keys <= set(self.known):
                return None
            trial = self.study.ask(self.dists)
            params = dict(trial.params)
            cfg = self.space.resolve(params)
            key = config_key(cfg)
            if key in self.known:
                s = self.known[key]
                if s is None:
                    self.study.tell(trial, state=self.optuna.trial.TrialState.PRUNED)
                else:
                    self.study.tell(trial, s)
                continue
            self._pending[key] = trial
            return cfg, params
        return None  # the sampler keeps proposing measured configurations: the space is exhausted

    def tell(self, config: Config, params: Config, score: float | None) -> None:
        key = config_key(config)
        self.known[key] = score
        trial = self._pending.pop(key, None)
        if trial is None:  # replayed from an earlier tune
            self._record(params or config, score)
        elif score is None:
            self.study.tell(trial, state=self.optuna.trial.TrialState.PRUNED)
        else:
            self.study.tell(trial, score)


def make(name: str, space: Space, seed: int, objective: str) -> Strategy:
    return (Exhaustive if name == "exhaustive" else OptunaSearch)(space, seed=seed, objective=objective)
