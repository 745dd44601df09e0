"""Text of ``wattbench ab``: the answer first, in compare's words (``analysis/ab.py`` decides; this
only words it): who A and B are, one answer line per level (``analysis/ratios.answer_line``), the
precision reached, the order measured and why it stopped, the shared meter's idle draw, each run's
verdict and directory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from wattbench.core.schema import Result
from wattbench.report.notes import count_text, verdict_text

if TYPE_CHECKING:
    from wattbench.analysis.ab import PairedComparison

SEQUENCE_SHOWN = 12  # trials of the order shown before it is cut


def sequence_text(sequence: list[str], limit: int = SEQUENCE_SHOWN) -> str:
    """The measured order, sides only, shortened: ``A B B A A B B A … (16 trials)``."""
    head = " ".join(s.split(" ", 1)[0] for s in sequence[:limit])
    return head + (f" … ({len(sequence)} trials)" if len(sequence) > limit else "")


def ab_lines(cmp: PairedComparison, sides: list[str] | None = None) -> list[str]:
    """The lines ``ab`` leads with (``cmp``: ``analysis.ab.PairedComparison``; ``sides``: how A and B
    were given)."""
    names = sides or ["", ""]
    out = [" · ".join(f"{letter} = {rid}{f' ({n})' if n else ''}"
                      for letter, rid, n in zip(cmp.letters, cmp.run_ids, names))]
    out.extend(lv.answer for lv in cmp.levels)
    out.extend(lv.precision_line for lv in cmp.levels)
    out.append(f"paired: {sequence_text(cmp.sequence)}; stopped at {cmp.stopped}")
    out.extend(cmp.idle_lines)
    return out


def render_ab(cmp: PairedComparison, results: list[Result], run_dirs: list[str], sides: list[str] | None = None,
              console: Console | None = None) -> None:
    """``ab`` on a terminal: the answer lines, what would decide an inconclusive one, then each run's
    verdict line and directory."""
    c = console or Console(highlight=False, soft_wrap=True)
    for line in ab_lines(cmp, sides):
        c.print(escape(line), soft_wrap=True)
    if cmp.todo:
        c.print(escape(f"inconclusive: {cmp.todo}"), style="dim", soft_wrap=True)
    for letter, r, d in zip(cmp.letters, results, run_dirs):
        counted = count_text(r)
        tail = f" · {counted} (wattbench report --notes)" if counted else ""
        c.print(escape(f"{letter} {r.run_id}: {verdict_text(r)}{tail}"), soft_wrap=True)
        c.print(escape(f"results {letter}: {d}"), soft_wrap=True)
