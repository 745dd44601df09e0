"""``tune.json``: the versioned record of a tune (pydantic), written after every trial.

A tune directory holds ``tune.json`` and ``trials/NNN/`` (one run directory per trial, each a
normal wattbench run registered in the history store). ``--resume DIR`` reads ``tune.json`` and
continues: trials already finished are not run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from wattbench.core.errors import UserError
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


class TrialRecord(_M):
    index: int
    config: dict[str, Any] = Field(default_factory=dict)  # resolved axis -> value ({} = engine defaults)
    params: dict[str, Any] = Field(default_factory=dict)  # what the optimiser proposed (before conditions)
    label: str = ""
    engine_args: list[str] = Field(default_factory=list)
    gpu_settings: dict[str, float] = Field(default_factory=dict)  # what the trial ran under (W, MHz)
    status: TrialStatus = "done"
    detail: str | None = None
    repeat_of: int | None = None  # a repeat measurement of trial N at its chosen load
    run_dir: str | None = None
    run_id: str | None = None
    score: float | None = None
    figures: dict[str, Any] = Field(default_factory=dict)
    engine_start_s: float | None = None  # engine restart time, excluded from every measurement
    duration_s: float | None = None
    levels_measured: int | None = None


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
    space: dict[str, Any] = Field(default_factory=dict)
    strategy: str = "exhaustive"
    budget: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)  # the tune's own settings (workload, load …)
    trials: list[TrialRecord] = Field(default_factory=list)
    baseline_index: int | None = None
    recommended: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None  # how the winner was separated from the runner-up (repeats)
    # --precision: the best two measured until each one's score was known within it (tune.run.finalist_precision):
    # asked_pct, stopped (reached | max trials | max time), per finalist its measurements and reached_pct
    precision: dict[str, Any] | None = None
    pareto: dict[str, Any] | None = None
    by_axis: dict[str, Any] = Field(default_factory=dict)  # axis -> value -> best score
    warnings: list[str] = Field(default_factory=list)


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
