"""Progress of ``wattbench run`` and ``measure``: a rich progress bar per level (requests done,
tokens/s, watts) on a terminal, and plain lines where stderr is not one (a CI log, ``nohup``): a line
when a level starts, one every ``PLAIN_EVERY_S`` seconds inside it, and one with its headline when it
ends, as ``vllm bench serve`` prints.

It only renders what the runner reports through its progress callback (the library never prints):
the typed events of ``run/events.py``, dispatched on their type.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, Callable, TextIO, Union

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from wattbench.core.numbers import fmt
from wattbench.run.events import (Load, LevelDone, LevelProgress, LevelStarted, Measured, Phase,
                                  ProgressEvent)

if TYPE_CHECKING:
    from wattbench.core.schema import LevelResult


COMPACT_BELOW = 120  # console columns below which the progress line takes its short form


def level_description(start: LevelStarted, compact: bool = False) -> str:
    """``level 2 of 5 · c=8`` (or ``level 3, until the search ends · c=16``), ``· trial 2 of 3`` with trials.
    ``compact`` (a console narrower than ``COMPACT_BELOW``): ``2/5 c=8``, ``3/? c=16``, `` t2/3``."""
    if not isinstance(start.load, Measured):  # priming, a re-measure: not one of the ladder's levels, no "k of n"
        return start.label.replace("concurrency=", "c=") or "level"
    k = start.load.index + 1
    n = start.levels
    label = start.label.split(" trial ")[0]
    label = label.replace("concurrency=", "c=")
    if label.startswith("rate="):
        label = "r=" + label[5:].replace(" ", "/s ", 1) + ("" if " " in label else "/s")
    trials = start.trials > 1
    if compact:
        out = f"{k}/{n if n else '?'}" + (f" {label}" if label else "")
        return out + (f" t{start.trial}/{start.trials}" if trials else "")
    where = f"level {k} of {n}" if n else f"level {k}, until the search ends"
    out = f"{where} · {label}" if label else where
    if trials:
        out += f" · trial {start.trial} of {start.trials}"
    return out


def progress_figures(p: LevelProgress, tokens_unit: str = "out tok/s") -> list[str]:
    """What a progress report shows beside the requests done, each only where known: output
    tokens/s (the level's figure, else the tokens over the elapsed seconds) in ``tokens_unit``,
    the power in W, the failed requests: ``["1,234 out tok/s", "412 W", "3 failed"]``."""
    parts = []
    tps = p.output_tokens_per_s
    if tps is None and p.elapsed_s:
        tps = p.output_tokens / max(p.elapsed_s, 1e-9)
    if tps is not None:
        parts.append(f"{fmt(tps)} {tokens_unit}")
    if p.power_w is not None:
        parts.append(f"{fmt(p.power_w)} W")
    if p.failed:
        parts.append(f"{fmt(p.failed, kind='count')} failed")
    return parts


def bar_figures(done: LevelDone) -> LevelProgress | None:
    """A finished level's own figures for its bar (as ``progress_figures`` reads them): the level's
    output tokens/s, its average power at its headline boundary, its failed requests — what its
    row in the summary says, not the last live sample's. None for no measured level."""
    level: LevelResult | None = done.level
    if level is None:
        return None
    from wattbench.results.headline import headline_boundary

    b = headline_boundary(level)
    be = level.energy.get(b) if b else None
    return LevelProgress(done.load, failed=level.requests.failed, output_tokens_per_s=level.throughput.output_tokens_per_s,
                         power_w=be.avg_power_w if be is not None else None)


class RunProgress:
    def __init__(self, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self._progress: Progress | None = None
        self._tasks: dict[Load, TaskID] = {}
        self._by_time: dict[TaskID, float] = {}  # task -> the level's seconds, when time-bound
        self.compact = False

    def __enter__(self) -> "RunProgress":
        if self.enabled:
            # below COMPACT_BELOW columns every field is short, so nothing is cut: ``2/5 c=32 ━━━ 32/32 req
            # 1,234 tok/s · 412 W 0:00:15 0:00:45`` fits 80 columns
            self.compact = self.console.width < COMPACT_BELOW
            columns = ([TextColumn("[bold]{task.description}"), BarColumn(bar_width=10),
                        TextColumn("{task.fields[done]}"), TextColumn("{task.fields[stats]}"),
                        TimeElapsedColumn(), TimeRemainingColumn()] if self.compact else
                       [TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[done]}"),
                        TextColumn("{task.fields[stats]}"), TextColumn("elapsed"), TimeElapsedColumn(),
                        TextColumn("left"), TimeRemainingColumn()])
            self._progress = Progress(*columns, console=self.console, transient=False)
            self._progress.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.__exit__(exc_type, exc, tb)
            self._progress = None

    @property
    def _req(self) -> str:
        return "req" if self.compact else "requests"

    def update(self, event: ProgressEvent) -> None:
        p = self._progress
        if p is None:
            return
        if isinstance(event, Phase):
            # printed above the bars, without rich's log time and source location (internals)
            p.console.print(Text(event.message, style="dim"))
        elif isinstance(event, LevelStarted):
            total, dur = event.total, event.duration_s
            added = p.add_task(
                level_description(event, self.compact),
                # a level bounded by --duration runs its bar over time, so the remaining time is known
                total=total if total is not None or not dur else float(dur),
                stats="",
                done=f"0/{total} {self._req}" if total is not None else f"0 {self._req}",
            )
            self._tasks[event.load] = added
            if total is None and dur:
                self._by_time[added] = float(dur)
        elif isinstance(event, LevelProgress):
            task = self._tasks.get(event.load)
            if task is None:
                return
            parts = progress_figures(event, "tok/s" if self.compact else "out tok/s")
            done = event.done
            if task in self._by_time:
                p.update(task, completed=min(float(event.elapsed_s or 0.0), self._by_time[task]),
                         done=f"{fmt(done, kind='count')} {self._req}", stats=" · ".join(parts))
            else:
                planned = p.tasks[task].total
                p.update(task, completed=done, stats=" · ".join(parts),
                         done=f"{fmt(done, kind='count')}/{fmt(planned, kind='count')} {self._req}"
                         if planned is not None else f"{fmt(done, kind='count')} {self._req}")
        elif isinstance(event, LevelDone):
            ended = self._tasks.get(event.load)
            if ended is not None:
                final = bar_figures(event)
                completed = p.tasks[ended].total or p.tasks[ended].completed
                if final is None:
                    p.update(ended, completed=completed)
                else:
                    p.update(ended, completed=completed,
                             stats=" · ".join(progress_figures(final, "tok/s" if self.compact else "out tok/s")))


PLAIN_EVERY_S = 10.0  # seconds between two plain progress lines inside one level


def _clock_text(seconds: float) -> str:
    s = int(max(seconds, 0.0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class PlainProgress:
    """Progress as plain lines on a stream that is not a terminal (no bars, no cursor moves):
    ``wattbench: level 2 of 3 · c=4 started: 64 requests``, then every ``every_s`` seconds
    ``wattbench: level 2 of 3 · c=4: 40/64 requests · 1,234 out tok/s · 412 W · 0:00:10``, and
    ``wattbench: level 2 of 3 · c=4 done in 0:00:14: <the level's headline>``. ``clock`` (seconds) is
    injectable for tests."""

    def __init__(self, stream: TextIO | None = None, every_s: float = PLAIN_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self.clock = clock
        self._levels: dict[Load, tuple[str, float, float, int | None]] = {}  # (name, start, last line, total)

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _say(self, text: str) -> None:
        self.stream.write(f"wattbench: {text}\n")
        self.stream.flush()

    def update(self, event: ProgressEvent) -> None:
        now = self.clock()
        if isinstance(event, Phase):
            self._say(event.message)
        elif isinstance(event, LevelStarted):
            name = level_description(event)
            total, dur = event.total, event.duration_s
            self._levels[event.load] = (name, now, now, total)
            size = (f"{fmt(total, kind='count')} requests" if total is not None else
                    f"{fmt(dur)} s" if dur else "")
            self._say(f"{name} started" + (f": {size}" if size else ""))
        elif isinstance(event, LevelProgress):
            lv = self._levels.get(event.load)
            if lv is None:
                return
            name, start, last, total = lv
            if now - last < self.every_s:
                return
            self._levels[event.load] = (name, start, now, total)
            done = fmt(event.done, kind="count")
            parts = [f"{done}/{fmt(total, kind='count')} requests" if total is not None else f"{done} requests",
                     *progress_figures(event), _clock_text(now - start)]
            self._say(f"{name}: " + " · ".join(parts))
        elif isinstance(event, LevelDone):
            lv = self._levels.pop(event.load, None)
            if lv is None:
                return
            name, start, _, _ = lv
            level = event.level
            what = ""
            if level is not None:
                from wattbench.report.format import headline_line as headline

                what = f": {headline(level)}"
            self._say(f"{name} done in {_clock_text(now - start)}{what}")


def run_progress(console: Console, quiet: bool, terminal: bool,
                 stream: TextIO | None = None) -> Union[RunProgress, PlainProgress]:
    """The progress display of a run: none with ``quiet``; the live bars on a terminal; else plain
    lines on ``stream`` (stderr), so a CI log or ``nohup`` shows the run is alive."""
    if quiet:
        return RunProgress(console, enabled=False)
    if terminal:
        return RunProgress(console, enabled=True)
    return PlainProgress(stream)
