"""What ``tune`` reports while it goes, to its caller's callback (``cli/tune.py`` prints it):

- ``TrialStarted(index, label, repeat_of)``: trial ``index`` (the configuration ``label``; a
  repeat of trial ``repeat_of``, else None) begins;
- ``TrialDone(trial)``: the trial ended, as recorded in tune.json (its status, score, detail);
- ``GpuRestored(actions)``: GPU settings an earlier, killed tune left changed were put back;
- ``InTrial(trial, event)``: a progress event of the run measuring trial ``trial``
  (``run.events``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from wattbench.results.tune import TrialRecord
from wattbench.run.events import ProgressEvent


@dataclass(frozen=True)
class TrialStarted:
    """Trial ``index`` of configuration ``label`` begins (``repeat_of``: the trial it repeats)."""

    index: int
    label: str
    repeat_of: int | None = None


@dataclass(frozen=True)
class TrialDone:
    """A trial ended, as tune.json records it."""

    trial: TrialRecord


@dataclass(frozen=True)
class GpuRestored:
    """What was put back of the GPU settings a killed tune left changed, one line each."""

    actions: tuple[str, ...]


@dataclass(frozen=True)
class InTrial:
    """A progress event of the run that measures trial ``trial``."""

    trial: int
    event: ProgressEvent


TuneEvent = Union[TrialStarted, TrialDone, GpuRestored, InTrial]
Progress = Callable[[TuneEvent], None]
