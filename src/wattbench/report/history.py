"""Text and tables of ``wattbench history``: the run list, one run, its tag and baseline lines, a
configuration's run-to-run noise and the import lines. Renderers only: the store decides, this
words it; result-file text is shown as text (``core.safe_text.term``), never as markup."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.table import Table

from wattbench.core.numbers import fmt
from wattbench.core.safe_text import term
from wattbench.report.comparison import noise_lines

if TYPE_CHECKING:
    from wattbench.results.store import RunRecord
    from wattbench.results.store_noise import Spread

# At this terminal width and more, ``history list`` shows the date, model and engine (where they
# fit on one line).
WIDE_COLUMNS = 120


def fold_parts(text: str, width: int, sep: str = " · ") -> list[str]:
    """A ``describe`` line folded at its `` · `` separators to ``width`` columns (the lines after the
    first indented by four); a part longer than the width stays whole on its own line."""
    lines: list[str] = []
    for part in text.split(sep):
        if lines and len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines.append(part if not lines else "    " + part)
    return lines


def headline_cell(summary: dict[str, Any] | None) -> str:
    """``c=8 2,067 node``: the headline level, its figure per kW (goodput per kW under an SLO,
    marked ``goodput``) and its boundary (``host, estimate`` where the figure is not measured);
    ``—`` for a run registered without one."""
    h = (summary or {}).get("headline")
    if not isinstance(h, dict):
        return "—"
    if h.get("unanswered"):  # no level answered the run's question (report.summary.Headline.unanswered)
        return "no answer"
    if h.get("boundary") is None or h.get("value") is None:
        return f"{h.get('level') or '?'} no energy"
    where = str(h["boundary"]) + (f", {h['label']}" if h.get("label") and h.get("label") != "measured" else "")
    kind = " goodput" if h.get("name") == "goodput_per_kw" else ""
    return f"{h.get('level') or '?'} {fmt(h['value'])}{kind} {where}"


def no_runs_line(filtered: bool) -> str:
    """What ``history list`` says when no run is listed (``filtered``: a filter was given)."""
    return "no runs registered" + (" matching the filters" if filtered else "")


def _cut(text: str, width: int) -> str:
    """``text`` in ``width`` characters: whole where it fits, else cut with ``…`` at its end."""
    if len(text) <= width:
        return text
    return text[:max(0, width - 1)] + "…" if width > 0 else ""


def runs_lines(runs: list[RunRecord], width_cols: int, ids: dict[str, str] | None = None) -> list[str]:
    """``history list``'s table of runs (``results.store.RunRecord``, at least one), one line per
    run for a terminal ``width_cols`` wide: run id (``ids``: its shortened form,
    ``HistoryStore.short_ids``; the whole id where not given), the headline (level, figure per kW,
    boundary), verdict, then the target, configuration and tags in the room left (cut with ``…``
    where it runs out: a run id, a figure and a verdict never are); from ``WIDE_COLUMNS`` also the
    date, model and engine. Text from result files is escaped (``core.safe_text.term``)."""
    ids = ids or {}
    wide = width_cols >= WIDE_COLUMNS
    kinds = any(r.kind != "run" for r in runs)
    tagged = any(r.tags or r.baselines for r in runs)
    # (header, cells, right-aligned, can be cut)
    cols: list[tuple[str, list[str], bool, bool]] = [("run id", [ids.get(r.run_id, r.run_id) for r in runs], False, False)]
    if wide:
        cols.append(("created", [(r.created_at or "")[:16].replace("T", " ") for r in runs], False, False))
    if kinds:
        cols.append(("kind", [r.kind for r in runs], False, False))
    cols += [("tok/s/kW", [headline_cell(r.summary) for r in runs], False, False),
             ("verdict", [r.verdict or "—" for r in runs], False, False)]
    if wide:
        cols += [("model", [r.model or "—" for r in runs], False, True),
                 ("engine", [f"{r.engine or '—'} {r.engine_version or ''}".strip() for r in runs], False, True)]
    cols += [("target", [r.target or "—" for r in runs], False, True),
             ("config", [r.config_label or (r.config_id or "")[:8] or "—" for r in runs], False, True)]
    if tagged:
        cols.append(("tags", [",".join(r.tags + [f"baseline:{b}" for b in r.baselines]) or "—" for r in runs],
                     False, True))
    cols = [(h, [term(c) for c in cells], right, cut) for h, cells, right, cut in cols]
    widths = [max(len(h), *(len(c) for c in cells)) for h, cells, _, _ in cols]
    gap = 2
    # the columns that may be cut give way, the widest first, down to 6 characters each (a
    # configuration's key to its 8)
    least = [8 if h == "config" else 6 for h, _, _, _ in cols]
    while sum(widths) + gap * (len(widths) - 1) > width_cols:
        cuttable = [i for i, (_, _, _, cut) in enumerate(cols) if cut and widths[i] > least[i]]
        if not cuttable:
            break
        i = max(cuttable, key=lambda k: widths[k])
        widths[i] -= 1

    def line(cells: list[str]) -> str:
        parts = [(_cut(c, w).rjust(w) if right else _cut(c, w).ljust(w))
                 for c, w, (_, _, right, _) in zip(cells, widths, cols)]
        return (" " * gap).join(parts).rstrip()

    out = [line([h for h, _, _, _ in cols]), "─" * min(width_cols, sum(widths) + gap * (len(widths) - 1))]
    out += [line([cells[k] for _, cells, _, _ in cols]) for k in range(len(runs))]
    return out


def run_lines(rec: Any) -> list[str]:
    """``history show``'s lines for one run (``results.store.RunRecord``): id, kind, status and
    verdict, then path, dates, model, engine, GPU, boundaries, tags, target, configuration and the
    summary fields. Plain text, to be printed without markup."""
    out = [f"{term(rec.run_id)} ({rec.kind}) {rec.status or ''} verdict {rec.verdict or '—'}",
           f"  path      {rec.path}",
           f"  created   {rec.created_at}",
           f"  model     {term(rec.model or '—')}  engine {term(rec.engine or '—')} {term(rec.engine_version or '')}",
           f"  gpu       {rec.gpu or '—'}  boundaries {', '.join(rec.boundaries) or '—'}"]
    if rec.tags or rec.baselines:
        out.append(f"  tags      {term(', '.join(rec.tags)) or '—'}  baselines {', '.join(rec.baselines) or '—'}")
    if rec.target or rec.config_id:
        out.append(f"  target    {term(rec.target or '—')}  config {term(rec.config_label or '—')} "
                   f"(key {rec.config_id or '—'})")
    for k, v in (rec.summary or {}).items():
        out.append(f"  {term(k):<9} {headline_cell(rec.summary) if k == 'headline' else term(v, 2000)}")
    return out


def levels_table(rec: Any) -> Table | None:
    """``history show``'s per-level table (throughput, latency, power and energy per token at the
    registered boundary; the verdict only where one is not valid); None for a run without levels."""
    if not rec.levels:
        return None
    bnds = sorted({lv["boundary"] for lv in rec.levels if lv["boundary"]})
    t = Table(title=f"per level, energy at {', '.join(bnds) or '—'} (latency in ms)", title_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False)
    show_verdict = any(lv["verdict"] != "valid" for lv in rec.levels)  # narrow tables when all valid
    rows = [[term(lv["label"]), fmt(lv["output_tokens_per_s"]),
             fmt(lv["ttft_p99_ms"]), fmt(lv["tpot_p99_ms"]), fmt(lv["avg_power_w"]), fmt(lv["j_per_output_token"]),
             fmt(lv["output_tokens_per_s_per_kw"]), *([lv["verdict"] or "—"] if show_verdict else [])]
            for lv in rec.levels]
    # a number is never cut ("5…" for 500): each numeric column is at least as wide as its widest
    # cell, headers fold onto two lines, and the level label folds where the width runs out
    t.add_column("level", overflow="fold", min_width=6)
    for i, col in enumerate(("tok/s", "TTFT\np99", "TPOT\np99", "W", "J/tok", "tok/s\nper kW"), start=1):
        t.add_column(col, justify="right", no_wrap=True, min_width=max(len(r[i]) for r in rows))
    if show_verdict:
        t.add_column("verdict", no_wrap=True, min_width=max(len(r[-1]) for r in rows))
    for cells in rows:
        t.add_row(*cells)
    return t


def baseline_lines(baselines: dict[str, str]) -> list[str]:
    """``history baseline``'s lines: ``NAME -> RUN`` each, or that none is set."""
    if not baselines:
        return ["no baselines set"]
    return [f"{k} -> {v}" for k, v in baselines.items()]


def noise_data(rows: list[Spread]) -> list[dict[str, Any]]:
    """``history noise --json``: each configuration's spread (``results.store_noise.Spread``) with
    one more run's relative half-width (None where the spread cannot bound it)."""
    out: list[dict[str, Any]] = []
    for sp in rows:
        d = sp.to_dict()
        fn = sp.noise()
        d["one_more_run_rel_half_width"] = fn.rel_half_width if fn else None
        out.append(d)
    return out


def no_noise_line(min_runs: int, filtered: bool) -> str:
    """What ``history noise`` says when no configuration has ``min_runs`` complete runs."""
    return (f"no configuration measured by {min_runs}+ complete runs"
            + (" matching the filters" if filtered else "")
            + ": repeat a run (or `wattbench history import DIR` older ones) to see its spread")


def noise_text_lines(rows: list[Spread], width_cols: int) -> list[str]:
    """``history noise``'s lines for a terminal ``width_cols`` wide: each configuration's
    ``report.comparison.noise_lines``, its first line (the configuration) folded to the width."""
    out: list[str] = []
    for sp in rows:
        lines = noise_lines(sp)
        out += fold_parts(lines[0], width_cols) + lines[1:]
    return out


def import_lines(recs: list[RunRecord], problems: list[str]) -> list[tuple[str, bool]]:
    """``history import``'s lines in the order they are printed, each with whether it goes to
    stderr: each run imported with its notes, each directory skipped and why (stderr), the count."""
    out: list[tuple[str, bool]] = []
    for r in recs:
        out.append((f"imported {r.run_id}  {r.path}", False))
        out += [(f"  note: {n}", False) for n in r.notes]
    out += [(f"skipped: {p}", True) for p in problems]
    out.append((f"{len(recs)} run(s) imported, {len(problems)} skipped", False))
    return out
