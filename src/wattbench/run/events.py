"""What a run reports while it goes: the progress events ``run``, ``ab`` and ``measure`` pass to
their caller's callback (the library never prints; ``cli/progress.py`` renders them).

Each event is a frozen dataclass; a callback dispatches on its type. A level's events name which
load they are about (``Load``):

- ``Measured(index)``: level ``index`` of the run, recorded in result.json (its trials included);
- ``Unrecorded(index)``: one more measurement of level ``index`` that is recorded nowhere (the
  history check's re-measure: ``Result.noise`` keeps its verdict, not the level);
- ``Priming()``: the priming load before the first level, of which nothing is measured.

The events:

- ``Phase(name, message)``: a step outside any level (idle power, the engine starting, a drain,
  a cooldown), ``message`` in words;
- ``LevelStarted``: a load begins, with its label, its size (requests, or seconds when bounded
  by ``--duration``), how many levels the ladder plans (None: a search, until it ends) and which
  trial of how many;
- ``LevelProgress``: at most every ``load.plan.PROGRESS_PERIOD_S``: requests done and failed,
  output tokens and the seconds since the load started, the meter's latest power (W, None
  without one);
- ``LevelDone``: the load ended; ``level`` is what was recorded (None for the priming);
- ``CommandOutput(line)``: a line of ``measure``'s command, as it printed it (clipped, scrubbed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Union

if TYPE_CHECKING:
    from wattbench.core.schema import LevelResult


@dataclass(frozen=True)
class Measured:
    """Level ``index`` of the run (0 for the first), recorded in result.json."""

    index: int


@dataclass(frozen=True)
class Unrecorded:
    """Another measurement of level ``index`` that is recorded nowhere (the history check's)."""

    index: int


@dataclass(frozen=True)
class Priming:
    """The priming load before the first level: nothing of it is measured."""


Load = Union[Measured, Unrecorded, Priming]


@dataclass(frozen=True)
class Phase:
    """A step of the run outside any level: ``name`` (idle, engine, prime, drain, cooldown, calibrate,
    precondition, command) and what it does, in words."""

    name: str
    message: str


@dataclass(frozen=True)
class LevelStarted:
    """A load begins: ``total`` requests (None: bounded by ``duration_s`` seconds instead), the
    ladder's ``levels`` (None: not known, a search runs until it ends), trial ``trial`` of ``trials``."""

    load: Load
    label: str
    total: int | None
    levels: int | None = None
    trial: int = 1
    trials: int = 1
    duration_s: float | None = None


@dataclass(frozen=True)
class LevelProgress:
    """How far a load has come: requests ``done`` and ``failed``, ``output_tokens`` over
    ``elapsed_s`` seconds, the meter's latest ``power_w`` (None without a meter), and the level's
    own ``output_tokens_per_s`` where one is known (a finished level's figure)."""

    load: Load
    done: int = 0
    failed: int = 0
    output_tokens: int = 0
    elapsed_s: float | None = None
    power_w: float | None = None
    output_tokens_per_s: float | None = None


@dataclass(frozen=True)
class LevelDone:
    """A load ended; ``level`` is the level as recorded (None where nothing is, the priming)."""

    load: Load
    level: LevelResult | None


@dataclass(frozen=True)
class CommandOutput:
    """A line ``measure``'s command printed (clipped to a progress line, secrets masked)."""

    line: str


ProgressEvent = Union[Phase, LevelStarted, LevelProgress, LevelDone, CommandOutput]
ProgressFn = Callable[[ProgressEvent], None]
