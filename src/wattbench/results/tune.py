"""``tune.json``: the versioned record of a tune (pydantic), written after every trial.

A tune directory holds ``tune.json`` and ``trials/NNN/`` (one run directory per trial, each a
normal wattbench run registered in the history store). ``--resume DIR`` reads ``tune.json`` and
continues: trials already finished are not run again.

Every block is a model with named fields. The blocks whose keys grew over time (a trial's
figures, the recommendation, the decision) are written with the keys their writer set
(``_Sparse``): a tune.json written before a key existed loads and is written back as it was, and
a key a model does not name is kept (an extra, written back as read). One block stays free-form:
``TuneResult.config``, the ``TuneConfig`` as given (the recorded run configuration among it),
kept for the record and read by no code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from wattbench.core.errors import UserError
from wattbench.core.schema.base import Num, _Sparse
from wattbench.core.schema.recorded_config import AxisValue  # one value of a search axis
from wattbench.results.rundir import load_model, write_json_atomic

TUNE_SCHEMA_VERSION = 1
TUNE_FILE = "tune.json"
OBJECTIVES = ("goodput_per_kw", "output_tokens_per_s_per_kw", "j_per_output_token")
LOWER_IS_BETTER = frozenset({"j_per_output_token"})


class _M(BaseModel):
    model_config = ConfigDict(extra="allow")


# done: scored; pruned: its lowest load already missed the SLO; misses_slo: no level met it;
# failed: the engine or the run failed
TrialStatus = Literal["done", "pruned", "misses_slo", "failed"]


class TrialFigures(_Sparse):
    """What a trial measured at the load it chose (``tune.score.trial_figures``: the level's
    figures as ``--optimize`` ranks them, read at the tune's boundary). Empty when the trial did
    not score (pruned, missed the SLO, failed)."""

    boundary: str | None = None
    load_mode: str | None = None  # concurrency | rate | trace
    load_value: Num | None = None  # the streams or the rate (req/s) of the chosen level
    level_index: int | None = None  # the chosen level in the trial's run
    goodput_per_kw: float | None = None  # goodput output tokens/s per kW (= output tokens/s per kW without an SLO)
    goodput_output_tokens_per_s: float | None = None
    output_tokens_per_s: float | None = None
    output_tokens_per_s_per_kw: float | None = None
    j_per_output_token: float | None = None
    avg_power_w: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    verdict: str | None = None
    window_s: float | None = None  # the chosen level's window
    # each objective's drift over the level's trials (metrics/drift.figure_drift): objective -> (words, what to do)
    drift: dict[str, tuple[str, str]] = Field(default_factory=dict)
    top_of_ladder: bool | None = None  # the load search chose the top of the ladder it searched
    ladder: list[Num] = Field(default_factory=list)  # the load values it searched

    def objective(self, name: str) -> float | None:
        """The figure an objective scores (``OBJECTIVES``); None: not measured, or no such objective."""
        return {"goodput_per_kw": self.goodput_per_kw, "output_tokens_per_s_per_kw": self.output_tokens_per_s_per_kw,
                "j_per_output_token": self.j_per_output_token}.get(name)

    def latency(self, name: str) -> float | None:
        """A p99 latency the Pareto front is drawn against (``ttft_p99_ms`` | ``tpot_p99_ms``)."""
        return {"ttft_p99_ms": self.ttft_p99_ms, "tpot_p99_ms": self.tpot_p99_ms}.get(name)


class TrialRecord(_M):
    index: int
    config: dict[str, AxisValue] = Field(default_factory=dict)  # resolved axis -> value ({} = engine defaults)
    params: dict[str, AxisValue] = Field(default_factory=dict)  # what the optimiser proposed (before conditions)
    label: str = ""
    engine_args: list[str] = Field(default_factory=list)
    gpu_settings: dict[str, float] = Field(default_factory=dict)  # what the trial ran under (W, MHz)
    status: TrialStatus = "done"
    detail: str | None = None
    repeat_of: int | None = None  # a repeat measurement of trial N at its chosen load
    run_dir: str | None = None
    run_id: str | None = None
    score: float | None = None
    figures: TrialFigures = Field(default_factory=TrialFigures)
    engine_start_s: float | None = None  # engine restart time, excluded from every measurement
    duration_s: float | None = None
    levels_measured: int | None = None


class ScoreInterval(_M):
    """A configuration's mean score over its measurements and their 95% interval
    (``tune.score.mean_ci``): ``low``/``high`` None with one measurement."""

    mean: float
    low: float | None = None
    high: float | None = None
    n: int


class Margin(_M):
    """A ratio of two configurations' scores with its noise interval (``metrics.plateau.margin``):
    the recommendation's over ``trial``."""

    trial: int
    ratio: float
    low: float | None = None
    high: float | None = None
    within_noise: bool | None = None  # None: inconclusive (``text`` says why)
    basis: str
    text: str


class Recommendation(_Sparse):
    """The best configuration (``tune.run.conclude``): what it is, its score, the gain over the
    engine defaults, the command that serves it, and its margins where there was something to
    compare it with."""

    trial: int
    label: str = ""
    config: dict[str, AxisValue] = Field(default_factory=dict)
    engine_args: list[str] = Field(default_factory=list)
    gpu_settings: dict[str, float] = Field(default_factory=dict)
    score: float
    score_ci: ScoreInterval
    figures: TrialFigures = Field(default_factory=TrialFigures)
    gain_over_defaults_pct: float | None = None
    baseline_score: float | None = None
    serve_command: str
    summary: str
    margin_over_runner_up: Margin | None = None
    margin_over_defaults: Margin | None = None


class Decision(_Sparse):
    """How the winner was told from the runner-up: separated, or within the noise (repeats)."""

    best: int
    runner_up: int
    best_score: ScoreInterval
    runner_up_score: ScoreInterval
    separated: bool
    plateau: list[int] = Field(default_factory=list)  # the trials within noise of the best
    noise_basis: str | None = None


class FinalistPrecision(_M):
    """One of the best two, measured to ``--precision`` (``tune.run.finalist_precision``)."""

    measurements: int
    reached_pct: float | None = None  # the relative 95% half-width of its mean; None with one measurement
    met: bool
    more_measurements: int | None = None  # what more would reach it (None: not known yet)


class PrecisionOutcome(_M):
    """``--precision``: the best two measured until each one's score was known within it."""

    asked_pct: float
    stopped: str | None = None  # reached | max trials | max time | …; None: not judged yet
    finalists: dict[str, FinalistPrecision] = Field(default_factory=dict)  # trial index -> its precision


class ParetoTrial(_M):
    trial: int
    efficiency: float
    latency: float
    on_frontier: bool


class TrialPareto(_M):
    """Goodput per kW (higher) against a p99 latency (lower) over the trials' chosen levels."""

    efficiency: str = "goodput_per_kw"
    latency: str  # ttft_p99_ms | tpot_p99_ms
    points: list[ParetoTrial] = Field(default_factory=list)
    frontier: list[int] = Field(default_factory=list)  # trial indices, along the front


class AxisRecord(_Sparse):
    """One search axis as searched: its values, and where it is tried only under others' values."""

    values: list[AxisValue] = Field(default_factory=list)
    when: dict[str, list[AxisValue]] = Field(default_factory=dict)  # axis -> the values it is tried under


class SpaceRecord(_M):
    """The search space (``tune.space.Space.record``): where it came from, its axes in order."""

    source: str = "builtin"
    axes: dict[str, AxisRecord] = Field(default_factory=dict)


class Budget(_M):
    max_trials: int | None = None
    max_minutes: float | None = None


# TuneResult's fields added after the first tune.json files were written: each is written only where
# it was set (or read), so an older file is written back as it was
ADDED_SINCE = ("precision",)


class TuneResult(_M):
    schema_version: int = TUNE_SCHEMA_VERSION
    kind: Literal["wattbench-tune"] = "wattbench-tune"
    tune_id: str
    created_at: str
    directory: str | None = None  # where tune.json and trials/ live
    status: Literal["running", "complete", "interrupted", "failed"] = "running"
    status_detail: str | None = None
    engine: str
    model: str | None = None
    objective: str = "goodput_per_kw"
    boundary: str | None = None
    slo: str | None = None
    space: SpaceRecord = Field(default_factory=SpaceRecord)
    strategy: str = "exhaustive"
    budget: Budget = Field(default_factory=Budget)
    # the tune's own settings as given (TuneConfig.model_dump: workload, load …), kept for the
    # record and read by no code: free-form like the run configuration it holds (``base``)
    config: dict[str, Any] = Field(default_factory=dict)
    trials: list[TrialRecord] = Field(default_factory=list)
    baseline_index: int | None = None
    recommended: Recommendation | None = None
    decision: Decision | None = None  # how the winner was separated from the runner-up (repeats)
    precision: PrecisionOutcome | None = None  # --precision (tune.run.finalist_precision)
    pareto: TrialPareto | None = None
    by_axis: dict[str, dict[str, float | None]] = Field(default_factory=dict)  # axis -> value -> best score
    warnings: list[str] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _added_fields_when_set(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if isinstance(out, dict):
            for name in ADDED_SINCE:
                if name not in self.model_fields_set:
                    out.pop(name, None)
        return out


def write_tune(d: Path, t: TuneResult) -> None:
    """Write ``tune.json`` into ``d`` atomically (the one versioned-file writer, ``results.rundir``)."""
    write_json_atomic(d / TUNE_FILE, t)


def load_tune(path: str | Path) -> TuneResult:
    """Read a tune (its directory or its tune.json); UserError names a missing, broken or newer file."""
    p = Path(path).expanduser()
    f = p / TUNE_FILE if p.is_dir() else p
    if not f.is_file():
        raise UserError(f"no tune result at {path}: give a directory written by wattbench tune (with tune.json)")
    return load_model(f, TuneResult, "tune result", TUNE_SCHEMA_VERSION)


def is_tune_dir(path: str | Path) -> bool:
    p = Path(path).expanduser()
    return (p / TUNE_FILE).is_file() or (p.is_file() and p.name == TUNE_FILE)
