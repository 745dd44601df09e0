"""Live progress for ``wattbench run``: a rich progress bar per level (requests done, tokens/s, watts).

It only renders what the runner reports through its progress callback.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text


def level_description(data: dict) -> str:
    """``level 2 of 5 · c=8`` (or ``level 3, until the search ends · c=16``), ``· trial 2 of 3`` with trials."""
    k = data.get("index", 0) + 1
    n = data.get("levels")
    where = f"level {k} of {n}" if n else f"level {k}, until the search ends"
    label = str(data.get("label", "")).split(" trial ")[0]
    label = label.replace("concurrency=", "c=")
    if label.startswith("rate="):
        label = "r=" + label[5:].replace(" ", "/s ", 1) + ("" if " " in label else "/s")
    out = f"{where} · {label}" if label else where
    if (data.get("trials") or 1) > 1:
        out += f" · trial {data.get('trial', 1)} of {data['trials']}"
    return out


class RunProgress:
    def __init__(self, console: Console, enabled: bool = True):
        self.console = console
        self.enabled = enabled
        self._progress: Progress | None = None
        self._tasks: dict[int, Any] = {}
        self._by_time: dict[int, tuple[float, int | None]] = {}  # task -> (level seconds, requests) when time-bound

    def __enter__(self) -> "RunProgress":
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[done]}"),
                TextColumn("{task.fields[stats]}"),
                TextColumn("elapsed"),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
            )
            self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
            self._progress = None

    def update(self, event: str, data: dict) -> None:
        p = self._progress
        if p is None:
            return
        if event == "phase":
            # printed above the bars, without rich's log time and source location (internals)
            p.console.print(Text(str(data.get("message", data.get("name", ""))), style="dim"))
        elif event == "level_start":
            total, dur = data.get("total"), data.get("duration_s")
            task = p.add_task(
                level_description(data),
                # a level bounded by --duration runs its bar over time, so the remaining time is known
                total=total if total is not None or not dur else float(dur),
                stats="",
                done=f"0/{total} requests" if total is not None else "0 requests",
            )
            self._tasks[data["index"]] = task
            if total is None and dur:
                self._by_time[task] = (float(dur), None)
        elif event == "progress":
            task = self._tasks.get(data.get("index", -1))
            if task is None:
                return
            parts = []
            tps = data.get("output_tokens_per_s")
            if tps is None and data.get("elapsed_s"):
                tps = data.get("output_tokens", 0) / max(data["elapsed_s"], 1e-9)
            if tps is not None:
                parts.append(f"{tps:,.0f} out tok/s")
            if data.get("power_w") is not None:
                parts.append(f"{data['power_w']:,.0f} W")
            if data.get("failed"):
                parts.append(f"{data['failed']} failed")
            done = data.get("done", 0)
            if task in self._by_time:
                p.update(task, completed=min(float(data.get("elapsed_s") or 0.0), self._by_time[task][0]),
                         done=f"{done:,} requests", stats=" · ".join(parts))
            else:
                total = p.tasks[task].total
                p.update(task, completed=done, stats=" · ".join(parts),
                         done=f"{done:,}/{int(total):,} requests" if total is not None else f"{done:,} requests")
        elif event == "level_done":
            task = self._tasks.get(data.get("index", -1))
            if task is not None:
                p.update(task, completed=p.tasks[task].total or p.tasks[task].completed)
