"""Progress of ``wattbench run`` and ``measure``: a rich progress bar per level (requests done,
tokens/s, watts) on a terminal, and plain lines where stderr is not one (a CI log, ``nohup``): a line
when a level starts, one every ``PLAIN_EVERY_S`` seconds inside it, and one with its headline when it
ends, as ``vllm bench serve`` prints.

It only renders what the runner reports through its progress callback (the library never prints).
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from collections.abc import Mapping
from typing import Any, Callable, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from wattbench.core.numbers import fmt


COMPACT_BELOW = 120  # console columns below which the progress line takes its short form


def level_description(data: Mapping[str, Any], compact: bool = False) -> str:
    """``level 2 of 5 · c=8`` (or ``level 3, until the search ends · c=16``), ``· trial 2 of 3`` with trials.
    ``compact`` (a console narrower than ``COMPACT_BELOW``): ``2/5 c=8``, ``3/? c=16``, `` t2/3``."""
    if data.get("index", 0) < 0:  # priming, a re-measure: not one of the ladder's levels, so no "k of n"
        return str(data.get("label", "")).replace("concurrency=", "c=") or "level"
    k = data.get("index", 0) + 1
    n = data.get("levels")
    label = str(data.get("label", "")).split(" trial ")[0]
    label = label.replace("concurrency=", "c=")
    if label.startswith("rate="):
        label = "r=" + label[5:].replace(" ", "/s ", 1) + ("" if " " in label else "/s")
    trials = (data.get("trials") or 1) > 1
    if compact:
        out = f"{k}/{n if n else '?'}" + (f" {label}" if label else "")
        return out + (f" t{data.get('trial', 1)}/{data['trials']}" if trials else "")
    where = f"level {k} of {n}" if n else f"level {k}, until the search ends"
    out = f"{where} · {label}" if label else where
    if trials:
        out += f" · trial {data.get('trial', 1)} of {data['trials']}"
    return out


def progress_figures(data: Mapping[str, Any], tokens_unit: str = "out tok/s") -> list[str]:
    """What a progress report shows beside the requests done, each only where known: output
    tokens/s (the runner's figure, else the tokens over the elapsed seconds) in ``tokens_unit``,
    the power in W, the failed requests: ``["1,234 out tok/s", "412 W", "3 failed"]``."""
    parts = []
    tps = data.get("output_tokens_per_s")
    if tps is None and data.get("elapsed_s"):
        tps = data.get("output_tokens", 0) / max(data["elapsed_s"], 1e-9)
    if tps is not None:
        parts.append(f"{fmt(tps)} {tokens_unit}")
    if data.get("power_w") is not None:
        parts.append(f"{fmt(data['power_w'])} W")
    if data.get("failed"):
        parts.append(f"{fmt(data['failed'], kind='count')} failed")
    return parts


def bar_figures(level: Any) -> dict[str, Any] | None:
    """A finished level's own figures for its bar (``progress_figures``' keys): the level's output
    tokens/s, its average power at its headline boundary, its failed requests — what its row in the
    summary says, not the last live sample's. None for no measured level."""
    if level is None or getattr(level, "throughput", None) is None:
        return None
    from wattbench.results.headline import headline_boundary

    b = headline_boundary(level)
    be = level.energy.get(b) if b else None
    return {"output_tokens_per_s": level.throughput.output_tokens_per_s,
            "power_w": be.avg_power_w if be is not None else None, "failed": level.requests.failed}


class RunProgress:
    def __init__(self, console: Console, enabled: bool = True):
        self.console = console
        self.enabled = enabled
        self._progress: Progress | None = None
        self._tasks: dict[int, TaskID] = {}  # level index -> its bar
        self._by_time: dict[TaskID, tuple[float, int | None]] = {}  # bar -> (level seconds, requests) when time-bound
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

    def update(self, event: str, data: Mapping[str, Any]) -> None:
        p = self._progress
        if p is None:
            return
        if event == "phase":
            # printed above the bars, without rich's log time and source location (internals)
            p.console.print(Text(str(data.get("message", data.get("name", ""))), style="dim"))
        elif event == "level_start":
            total, dur = data.get("total"), data.get("duration_s")
            task = p.add_task(
                level_description(data, self.compact),
                # a level bounded by --duration runs its bar over time, so the remaining time is known
                total=total if total is not None or not dur else float(dur),
                stats="",
                done=f"0/{total} {self._req}" if total is not None else f"0 {self._req}",
            )
            self._tasks[data["index"]] = task
            if total is None and dur:
                self._by_time[task] = (float(dur), None)
        elif event == "progress":
            bar = self._tasks.get(data.get("index", -1))
            if bar is None:
                return
            task = bar
            parts = progress_figures(data, "tok/s" if self.compact else "out tok/s")
            done = data.get("done", 0)
            if task in self._by_time:
                p.update(task, completed=min(float(data.get("elapsed_s") or 0.0), self._by_time[task][0]),
                         done=f"{fmt(done, kind='count')} {self._req}", stats=" · ".join(parts))
            else:
                total = p.tasks[task].total
                p.update(task, completed=done, stats=" · ".join(parts),
                         done=f"{fmt(done, kind='count')}/{fmt(total, kind='count')} {self._req}" if total is not None
                         else f"{fmt(done, kind='count')} {self._req}")
        elif event == "level_done":
            done_bar = self._tasks.get(data.get("index", -1))
            if done_bar is not None:
                task = done_bar
                final = bar_figures(data.get("level"))
                completed = p.tasks[task].total or p.tasks[task].completed
                if final:
                    p.update(task, completed=completed,
                             stats=" · ".join(progress_figures(final, "tok/s" if self.compact else "out tok/s")))
                else:
                    p.update(task, completed=completed)


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
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self.clock = clock
        self._levels: dict[int, tuple[str, float, float, Any]] = {}  # index -> (name, start, last line, total)

    def __enter__(self) -> "PlainProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _say(self, text: str) -> None:
        self.stream.write(f"wattbench: {text}\n")
        self.stream.flush()

    @staticmethod
    def _name(data: Mapping[str, Any]) -> str:
        return level_description(data)

    def update(self, event: str, data: Mapping[str, Any]) -> None:
        now = self.clock()
        if event == "phase":
            self._say(str(data.get("message", data.get("name", ""))))
        elif event == "level_start":
            name = self._name(data)
            total, dur = data.get("total"), data.get("duration_s")
            self._levels[data.get("index", 0)] = (name, now, now, total)
            size = (f"{fmt(total, kind='count')} requests" if total is not None else
                    f"{fmt(dur)} s" if dur else "")
            self._say(f"{name} started" + (f": {size}" if size else ""))
        elif event == "progress":
            lv = self._levels.get(data.get("index", -99))
            if lv is None:
                return
            name, start, last, total = lv
            if now - last < self.every_s:
                return
            self._levels[data["index"]] = (name, start, now, total)
            done = fmt(data.get("done", 0), kind="count")
            parts = [f"{done}/{fmt(total, kind='count')} requests" if total is not None else f"{done} requests",
                     *progress_figures(data), _clock_text(now - start)]
            self._say(f"{name}: " + " · ".join(parts))
        elif event == "level_done":
            lv = self._levels.pop(data.get("index", -99), None)
            if lv is None:
                return
            name, start, _, _ = lv
            level = data.get("level")
            what = ""
            if level is not None and getattr(level, "requests", None) is not None:
                from wattbench.report.format import headline_line

                what = f": {headline_line(level)}"
            self._say(f"{name} done in {_clock_text(now - start)}{what}")


def run_progress(console: Console, quiet: bool, terminal: bool,
                 stream: TextIO | None = None) -> RunProgress | PlainProgress:
    """The progress display of a run: none with ``quiet``; the live bars on a terminal; else plain
    lines on ``stream`` (stderr), so a CI log or ``nohup`` shows the run is alive."""
    if quiet:
        return RunProgress(console, enabled=False)
    if terminal:
        return RunProgress(console, enabled=True)
    return PlainProgress(stream)
