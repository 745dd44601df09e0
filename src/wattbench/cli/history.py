"""`wattbench history list|show|tag|untag|baseline|noise|import`: the run index (SQLite)."""

from __future__ import annotations

import json
from typing import List, Optional

import typer

from wattbench.cli.common import DB_HELP, handle_errors


def _fmt(v) -> str:
    """Numbers as every report writes them (``report.format.fmt``)."""
    from wattbench.report.format import fmt

    return fmt(v)


def escape(text: str) -> str:
    """A cell as text: rich markup in a target or label is shown, never interpreted."""
    from rich.markup import escape as _escape

    return _escape(text)


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


def _headline(summary: dict) -> str:
    """``c=8 2,067 node``: the headline level, its figure per kW (goodput per kW under an SLO,
    marked ``goodput``) and its boundary (``host, estimate`` where the figure is not measured);
    ``—`` for a run registered without one."""
    h = (summary or {}).get("headline")
    if not isinstance(h, dict):
        return "—"
    if h.get("boundary") is None or h.get("value") is None:
        return f"{h.get('level') or '?'} no energy"
    where = str(h["boundary"]) + (f", {h['label']}" if h.get("label") and h.get("label") != "measured" else "")
    kind = " goodput" if h.get("name") == "goodput_per_kw" else ""
    return f"{h.get('level') or '?'} {_fmt(h['value'])}{kind} {where}"


def _print_json(data) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def register(app: typer.Typer) -> None:
    hist = typer.Typer(help="The run history: list, show, tag, set baselines, run-to-run noise, import run directories.",
                       no_args_is_help=True, rich_markup_mode=None)

    @hist.command("list", help="List registered runs, newest first: where the load went, the configuration "
                               "(its --config-label, else the first 8 characters of its key) and the headline figure.")
    @handle_errors
    def list_cmd(
        model: Optional[str] = typer.Option(None, "--model", help="Substring of the model name."),
        engine: Optional[str] = typer.Option(None, "--engine", help="Substring of the engine name."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="Substring of the GPU description."),
        target: Optional[str] = typer.Option(None, "--target", "-t", help="Substring of the target (host:port, or the launched engine)."),
        label: Optional[str] = typer.Option(None, "--label", help="Substring of the --config-label."),
        tag: Optional[str] = typer.Option(None, "--tag", help="Only the run with this tag."),
        kind: Optional[str] = typer.Option(None, "--kind", help="run or agree."),
        since: Optional[str] = typer.Option(None, "--since", help="ISO date, e.g. 2026-11-01 (or 2026-11-01T09:00)."),
        limit: int = typer.Option(50, "--limit", help="At most this many runs (0 = all)."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        from wattbench.results.store import HistoryStore

        with HistoryStore(db) as store:
            runs = store.list_runs(model=model, engine=engine, gpu=gpu, tag=tag, kind=kind, since=since,
                                   limit=limit or None, target=target, label=label)
        if as_json:
            _print_json([r.to_dict() for r in runs])
            return
        if not runs:
            typer.echo("no runs registered" + (" matching the filters" if any((model, engine, gpu, tag, kind,
                                                                               since, target, label)) else ""))
            return
        from rich import box
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        from wattbench.core.safe_text import term

        console = Console(highlight=False)
        wide = console.width >= 120  # the date, model and engine only where they fit on one line
        t = Table(show_lines=False, box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        # a run id is never cut (two runs of one minute differ only in its last characters; it
        # starts with the date and time), a target or a verdict: the headline folds, the tags give way
        t.add_column("run id", no_wrap=True, min_width=max(len(term(r.run_id)) for r in runs))
        if wide:
            t.add_column("created", no_wrap=True, min_width=16)
        if any(r.kind != "run" for r in runs):
            t.add_column("kind", no_wrap=True, min_width=max(4, *(len(r.kind) for r in runs)))
        if wide:
            t.add_column("model", no_wrap=True, overflow="ellipsis", max_width=28, min_width=8)
            t.add_column("engine", no_wrap=True, overflow="ellipsis", max_width=24)
        t.add_column("target", no_wrap=True, overflow="ellipsis",
                     min_width=min(28, max(6, *(len(r.target or "—") for r in runs))))
        t.add_column("config", no_wrap=True, overflow="ellipsis", min_width=8, max_width=24)
        t.add_column("tok/s/kW", overflow="fold", min_width=12)
        t.add_column("verdict", no_wrap=True, min_width=7)
        tagged = any(r.tags or r.baselines for r in runs)
        if tagged:
            t.add_column("tags", no_wrap=True, overflow="ellipsis", max_width=20, min_width=4)
        for r in runs:
            cells = [r.run_id]
            if wide:
                cells.append((r.created_at or "")[:16].replace("T", " "))
            if any(x.kind != "run" for x in runs):
                cells.append(r.kind)
            if wide:
                cells += [r.model or "—", f"{r.engine or '—'} {r.engine_version or ''}".strip()]
            cells += [r.target or "—", r.config_label or (r.config_id or "")[:8] or "—", _headline(r.summary),
                      r.verdict or "—"]
            if tagged:
                cells.append(",".join(r.tags + [f"baseline:{b}" for b in r.baselines]) or "—")
            # from result files: shown as text (``[/x]`` is no markup), control characters escaped, capped
            t.add_row(*(Text(term(c)) for c in cells))
        console.print(t)

    @hist.command("show", help="Show one run (directory, run id, id prefix, tag or baseline name).")
    @handle_errors
    def show_cmd(
        ref: str = typer.Argument(..., help="Run directory, run id, id prefix, tag or baseline."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        from wattbench.results.store import HistoryStore

        with HistoryStore(db) as store:
            rec = store.get(ref)
        if as_json:
            _print_json(rec.to_dict())
            return
        from rich.console import Console
        from rich.table import Table

        from wattbench.core.safe_text import term

        c = Console(highlight=False, markup=False)  # result-file text: no markup; term() caps and escapes
        c.print(f"{term(rec.run_id)} ({rec.kind}) {rec.status or ''} verdict {rec.verdict or '—'}")
        c.print(f"  path      {rec.path}")
        c.print(f"  created   {rec.created_at}")
        c.print(f"  model     {term(rec.model or '—')}  engine {term(rec.engine or '—')} {term(rec.engine_version or '')}")
        c.print(f"  gpu       {rec.gpu or '—'}  boundaries {', '.join(rec.boundaries) or '—'}")
        if rec.tags or rec.baselines:
            c.print(f"  tags      {term(', '.join(rec.tags)) or '—'}  baselines {', '.join(rec.baselines) or '—'}")
        if rec.target or rec.config_id:
            c.print(f"  target    {term(rec.target or '—')}  config {term(rec.config_label or '—')} (key {rec.config_id or '—'})")
        for k, v in (rec.summary or {}).items():
            c.print(f"  {term(k):<9} {_headline(rec.summary) if k == 'headline' else term(v, 2000)}")
        if rec.levels:
            bnds = sorted({lv["boundary"] for lv in rec.levels if lv["boundary"]})
            from rich import box

            t = Table(title=f"per level, energy at {', '.join(bnds) or '—'} (latency in ms)", title_justify="left",
                      box=box.SIMPLE_HEAD, pad_edge=False)
            t.add_column("level", no_wrap=True)
            for col in ("tok/s", "TTFT p99", "TPOT p99", "W", "J/tok", "tok/s/kW"):
                t.add_column(col, justify="right", no_wrap=True)
            show_verdict = any(lv["verdict"] != "valid" for lv in rec.levels)  # narrow tables when all valid
            if show_verdict:
                t.add_column("verdict", no_wrap=True)
            for lv in rec.levels:
                cells = [term(lv["label"]), _fmt(lv["output_tokens_per_s"]), _fmt(lv["ttft_p99_ms"]),
                         _fmt(lv["tpot_p99_ms"]), _fmt(lv["avg_power_w"]), _fmt(lv["j_per_output_token"]),
                         _fmt(lv["output_tokens_per_s_per_kw"])]
                t.add_row(*cells, *([lv["verdict"] or "—"] if show_verdict else []))
            c.print(t)

    @hist.command("tag", help="Tag a run. A tag names one run; --force moves an existing tag.")
    @handle_errors
    def tag_cmd(
        ref: str = typer.Argument(..., help="The run to tag."),
        tag: str = typer.Argument(..., help="The tag."),
        force: bool = typer.Option(False, "--force", help="Move the tag if it names another run."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        from wattbench.results.store import HistoryStore

        with HistoryStore(db) as store:
            rec = store.tag(ref, tag, force=force)
        if as_json:
            _print_json({"tag": tag, "run_id": rec.run_id})
        else:
            typer.echo(f"{tag} -> {rec.run_id}")

    @hist.command("untag", help="Remove a tag.")
    @handle_errors
    def untag_cmd(
        tag: str = typer.Argument(..., help="The tag to remove."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    ) -> None:
        from wattbench.results.store import HistoryStore

        with HistoryStore(db) as store:
            store.untag(tag)
        typer.echo(f"removed tag {tag}")

    @hist.command("baseline", help="Set baseline NAME to a run; with only NAME show it; with none list them.")
    @handle_errors
    def baseline_cmd(
        name: Optional[str] = typer.Argument(None, help="Baseline name, e.g. main."),
        ref: Optional[str] = typer.Argument(None, help="The run it points at."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        from wattbench.core.errors import UserError
        from wattbench.results.store import HistoryStore

        with HistoryStore(db) as store:
            if name is None:
                data = store.baselines()
            elif ref is None:
                data = store.baselines()
                if name not in data:
                    raise UserError(f"no baseline {name!r} in {store.path}; set one with "
                                    f"`wattbench history baseline {name} RUN`")
                data = {name: data[name]}
            else:
                rec = store.set_baseline(name, ref)
                data = {name: rec.run_id}
        if as_json:
            _print_json(data)
        elif not data:
            typer.echo("no baselines set")
        else:
            for k, v in data.items():
                typer.echo(f"{k} -> {v}")

    @hist.command("noise", help="The run-to-run spread of each configuration measured by repeated runs "
                                "(machine, engine, model, engine flags, the server's identity and --config-label, workload shape, load level, boundary).")
    @handle_errors
    def noise_cmd(
        model: Optional[str] = typer.Option(None, "--model", help="Substring of the model name."),
        engine: Optional[str] = typer.Option(None, "--engine", help="Substring of the engine name."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="Substring of the machine (GPU, CPU)."),
        min_runs: int = typer.Option(2, "--min-runs", help="Only configurations with at least this many runs."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        from wattbench.report.comparison import noise_lines
        from wattbench.results.store import HistoryStore

        with HistoryStore(db) as store:
            rows = store.noise_table(min_runs=max(1, min_runs), model=model, engine=engine, gpu=gpu)
        if as_json:
            out = []
            for sp in rows:
                d = sp.to_dict()
                fn = sp.noise()
                d["one_more_run_rel_half_width"] = fn.rel_half_width if fn else None
                out.append(d)
            _print_json(out)
            return
        if not rows:
            typer.echo(f"no configuration measured by {max(1, min_runs)}+ complete runs"
                       + (" matching the filters" if any((model, engine, gpu)) else "")
                       + ": repeat a run (or `wattbench history import DIR` older ones) to see its spread")
            return
        import shutil

        width = shutil.get_terminal_size((80, 24)).columns
        for sp in rows:
            lines = noise_lines(sp)  # its first line describes the configuration: folded to the width
            for line in fold_parts(lines[0], width) + lines[1:]:
                typer.echo(line)

    @hist.command("import", help="Register run directories (searched recursively for result.json).")
    @handle_errors
    def import_cmd(
        paths: List[str] = typer.Argument(..., help="Run directories or folders holding them."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        from wattbench.results.store import HistoryStore

        with HistoryStore(db) as store:
            from wattbench.report.summary import history_summary

            recs, problems = store.import_dirs(paths, summarize=history_summary)
        if as_json:
            _print_json({"imported": [r.run_id for r in recs], "problems": problems,
                         "notes": [n for r in recs for n in r.notes]})
        else:
            for r in recs:
                typer.echo(f"imported {r.run_id}  {r.path}")
                for n in r.notes:
                    typer.echo(f"  note: {n}")
            for p in problems:
                typer.echo(f"skipped: {p}", err=True)
            typer.echo(f"{len(recs)} run(s) imported, {len(problems)} skipped")
        if problems and not recs:
            raise typer.Exit(2)

    app.add_typer(hist, name="history")
