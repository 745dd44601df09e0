"""``wattbench report RUN [RUN …]``: reports of run directories (terminal, HTML, CSV, Markdown)."""

from __future__ import annotations

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import command_options
from wattbench.config.commands import ReportOptions


def register(app: typer.Typer) -> None:
    @app.command("report")
    @handle_errors
    @command_options("report", ReportOptions)
    def report(o: ReportOptions) -> None:
        """Summarize run directories; optionally write HTML, CSV and Markdown reports."""
        import json

        from wattbench.report.data import load_runs

        if o.glossary:
            import shutil

            from wattbench.report.glossary import glossary_lines

            for line in glossary_lines(shutil.get_terminal_size().columns):
                typer.echo(line)
            return
        if not o.runs:
            raise typer.BadParameter("give at least one run directory (or --glossary)", param_hint="RUNS")
        html, csv_dir, md = o.html, o.csv_dir, o.md
        data = load_runs(o.runs)
        if o.notes:
            from wattbench.report.notes import notes_full_lines

            for d in data:
                for line in notes_full_lines(d.result):
                    typer.echo(line)
            return
        written: dict[str, list[str]] = {}
        if html is not None:
            from wattbench.report.html import render_html

            written["html"] = [str(render_html(data, html))]
        if csv_dir is not None:
            from wattbench.report.csv import write_csvs

            written["csv"] = [str(p) for p in write_csvs(data, csv_dir)]
        if md is not None:
            from wattbench.report.markdown import write_markdown

            written["md"] = [str(write_markdown(data, md))]
        if o.json_out:
            from wattbench.report import format as F
            from wattbench.report import summary as S
            from wattbench.report.tables import level_json

            doc = {
                "written": written,
                "runs": [
                    {"run_id": d.run_id, "path": str(d.path), "status": d.result.status,
                     "verdict": d.result.validity.verdict, "reasons": list(d.result.validity.reasons),
                     # what the run answers, as the summary's first line says it, and its parts
                     "answer": S.answer_line(d.result), **S.history_summary(d.result),
                     "not_measured": S.unmeasured_levels(d.result),
                     "levels": [{"index": lv.index, "label": lv.label, "verdict": lv.validity.verdict,
                                 "headline": F.headline_line(lv), **level_json(lv)}
                                for lv in d.result.levels],
                     "recovered": [dict(r.to_dict(), how=d.recovered_how) for r in d.recovered]}
                    for d in data
                ],
            }
            typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))
            return
        from rich.console import Console

        from wattbench.report.terminal import recovered_lines, run_summary

        console = Console()
        if not o.quiet:
            for d in data:
                console.print(run_summary(d.result, d.path))
                for recovered in recovered_lines(d.recovered, d.recovered_how):
                    console.print(recovered)
        for kind, paths in written.items():
            for p in paths:
                console.print(f"wrote {kind}: {p}", markup=False, highlight=False)
