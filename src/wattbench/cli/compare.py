"""`wattbench compare A B [C …]`: side-by-side per level, the per-kW ratio decomposed."""

from __future__ import annotations

from typing import List, Optional

import typer

from wattbench.cli.common import DB_HELP, handle_errors

FIGURE_LABELS = {
    "output_tokens_per_s": "output tok/s",
    "avg_power_w": "avg power W",
    "output_tokens_per_s_per_kw": "tok/s per kW",
    "j_per_output_token": "J / output token",
    "ttft_p50_ms": "TTFT p50 ms",
    "ttft_p99_ms": "TTFT p99 ms",
    "tpot_p50_ms": "TPOT p50 ms",
    "tpot_p99_ms": "TPOT p99 ms",
    "goodput_rps": "goodput req/s",
    "goodput_per_kw": "goodput tok/s per kW",
    "failed_pct": "failed %",
}


def _cell(v, ci=None, base=None) -> str:
    """A figure in the report's number format, its trials' CI, and its ratio to the baseline
    (candidate ÷ baseline, the one direction of every ratio on the screen)."""
    from wattbench.report.format import MISSING, fmt, fmt_range, fmt_ratio

    if v is None:
        return MISSING
    s = fmt(v)
    if ci:
        s += f" [{fmt_range(ci[0], ci[1])}]"
    if base not in (None, 0):
        s += f" ({fmt_ratio(v / base)})"
    return s


def render_findings(console, findings, incomparable=(), warnings=()) -> None:
    from rich.markup import escape

    if incomparable:
        console.print("[bold yellow]compared with --force despite:[/bold yellow]")
        for p in incomparable:
            console.print(f"  [yellow]! {escape(p.line())}[/yellow]")
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    if findings:
        console.print("[bold]diagnosis[/bold]")
        colour = {"alert": "red", "warn": "yellow", "info": "cyan"}
        for f in findings:
            where = escape(f" [{f.level}]") if f.level else ""
            console.print(f"  [{colour.get(f.severity, 'white')}]{f.severity}[/] {f.id}{where}: {escape(f.message)}")


def render(cmp, agreement=None, results=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    c = Console(highlight=False)
    from wattbench.report.summary import verdict_text

    for i, r in enumerate(results or []):  # one verdict line per run
        role = "baseline" if i == 0 else "run"
        from wattbench.report.notes import count_text

        counted = count_text(r)  # the summary's and the HTML report's count
        tail = f" · {counted} (wattbench report --notes)" if counted else ""
        c.print(escape(f"{role} {r.run_id}: {verdict_text(r)}{tail}"), soft_wrap=True)
    if len(cmp.run_ids) > 1:
        c.print(escape(f"ratios: each run ÷ the baseline {cmp.run_ids[0]}"), style="dim")
    for row in cmp.levels:
        where = cmp.boundary or "no energy measured"
        t = Table(title=escape(f"{row.key} @ {where}"), title_justify="left")
        t.add_column("figure")
        for rid, label, verdict in zip(cmp.run_ids, row.labels, row.verdicts):
            mark = "" if verdict == "valid" else f" ({verdict})"
            # folded, never cut: two runs of one minute differ only in the id's last characters
            t.add_column(escape(f"{rid}{mark}"), justify="right", overflow="fold")
        for key, name in FIGURE_LABELS.items():
            vals = [f.get(key) for f in row.figures]
            if all(v is None for v in vals):
                continue
            cells = [_cell(v, ci.get(key), vals[0] if i else None)
                     for i, (v, ci) in enumerate(zip(vals, row.cis or [{}] * len(vals)))]
            t.add_row(name, *cells)
        c.print(t)
        for d in row.decompositions:
            c.print(escape(f"  {d.candidate} vs {cmp.run_ids[0]}: {d.text()}"))
            if d.noise is not None:
                c.print(escape(f"    {d.noise.text()}"))
        for cand, nv in zip(cmp.run_ids[1:], row.noise):
            c.print(escape(f"  {cand} vs {cmp.run_ids[0]}: {nv.text()}"))
    if cmp.unmatched:
        c.print("[dim]unmatched levels: " + escape("; ".join(cmp.unmatched)) + "[/dim]")
    render_findings(c, cmp.findings, cmp.incomparable, cmp.warnings)
    if agreement is not None:
        m = agreement.metrics
        from wattbench.report.format import fmt_fraction_pct as pct

        c.print("[bold]output agreement[/bold] " + escape(
            f"({agreement.run_id}): exact match {pct(m.exact_match_rate)}, token agreement "
            f"{pct(m.token_agreement)} ({m.token_basis}), structured valid A {pct(m.structured_valid_rate_a)} / "
            f"B {pct(m.structured_valid_rate_b)}"))


def history_spread(db, exclude: list[str]):
    """The history store's run-to-run spread of a level's configuration, without the runs being
    judged (``HistoryStore.noise``); None when there is no history database (none is created)."""
    from pathlib import Path

    from wattbench.results.store import HistoryStore, default_db_path

    path = Path(db).expanduser() if db else default_db_path()
    if not path.exists():
        return None

    def spread(result, level, figure: str):
        from wattbench.results.configuration import configuration, configuration_key

        try:
            with HistoryStore(path, create=False) as store:
                sp = store.noise(configuration_key(configuration(result, level)), exclude_runs=exclude)
        except Exception:  # noqa: BLE001 - a history that cannot be read gives no spread, never an error
            return None
        if sp is None or sp.figure != figure:
            return None
        return sp.rel_sd, sp.runs

    return spread


def register(app: typer.Typer) -> None:
    @app.command("compare", help="Compare runs level by level; the first is the baseline. "
                                 "Per kW = throughput ratio × power ratio at one boundary.")
    @handle_errors
    def compare_cmd(
        runs: List[str] = typer.Argument(..., help="Two or more run directories, run ids, tags or baselines."),
        boundary: Optional[str] = typer.Option(None, "--boundary",
                                               help="Power boundary for the ratios (default: the headline "
                                                    "boundary every run has, never a part such as the HBM rail)."),
        force: bool = typer.Option(False, "--force", help="Compare incomparable runs; each reason is flagged."),
        window: str = typer.Option("full", "--window", help="Energy window: full or steady (steady state)."),
        match: str = typer.Option("key", "--match", help="Pair levels by 'key' (concurrency/rate) or 'index'."),
        agreement: Optional[str] = typer.Option(None, "--agreement",
                                                help="An `agree` run to show next to the energy figures."),
        out: Optional[str] = typer.Option(None, "--out", help="Also write the comparison JSON to this file."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        from wattbench.analysis.compare import compare
        from wattbench.errors import UserError
        from wattbench.results.rundir import write_json_atomic
        from wattbench.results.store import load_ref

        if len(runs) < 2:
            raise UserError("compare needs at least two runs (directories, ids or tags)")
        results = [load_ref(r, db) for r in runs]
        cmp = compare(results, force=force, boundary=boundary, match=match, window=window,  # type: ignore[arg-type]
                      history=history_spread(db, [r.run_id for r in results]))
        agr = None
        if agreement:
            from wattbench.analysis.agree import load_agreement_ref

            agr = load_agreement_ref(agreement, db)
        if out:
            write_json_atomic(out, cmp)
        if as_json:
            data = cmp.model_dump(mode="json")
            if agr is not None:
                data["agreement"] = agr.model_dump(mode="json", exclude={"prompts"})
            import json

            typer.echo(json.dumps(data, indent=2))
            return
        render(cmp, agr, results)
