"""`wattbench history list|show|tag|untag|baseline|noise|import`: the run index (SQLite).

Thin: one function per command parses its flags, asks ``results.store.HistoryStore`` and prints
what ``report.history`` words (or ``--json``)."""

from __future__ import annotations

import json
from typing import Callable, List, Optional

import typer

from wattbench.cli.common import handle_errors
from wattbench.config import DB_HELP

# the history filters' wording, shared by the commands that filter runs
MODEL_FILTER_HELP = "Substring of the model name."
ENGINE_FILTER_HELP = "Substring of the engine name."


def _print_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def list_cmd(
    model: Optional[str] = typer.Option(None, "--model", help=MODEL_FILTER_HELP),
    engine: Optional[str] = typer.Option(None, "--engine", help=ENGINE_FILTER_HELP),
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
    from wattbench.report.history import no_runs_line, runs_table

    if not runs:
        typer.echo(no_runs_line(any((model, engine, gpu, tag, kind, since, target, label))))
        return
    from rich.console import Console

    console = Console(highlight=False)
    console.print(runs_table(runs, console.width))


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

    from wattbench.report.history import levels_table, run_lines

    c = Console(highlight=False, markup=False)  # result-file text: no markup; term() caps and escapes
    for line in run_lines(rec):
        c.print(line)
    table = levels_table(rec)
    if table is not None:
        c.print(table)


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


def untag_cmd(
    tag: str = typer.Argument(..., help="The tag to remove."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    from wattbench.results.store import HistoryStore

    with HistoryStore(db) as store:
        store.untag(tag)
    typer.echo(f"removed tag {tag}")


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
        return
    from wattbench.report.history import baseline_lines

    for line in baseline_lines(data):
        typer.echo(line)


def noise_cmd(
    model: Optional[str] = typer.Option(None, "--model", help=MODEL_FILTER_HELP),
    engine: Optional[str] = typer.Option(None, "--engine", help=ENGINE_FILTER_HELP),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Substring of the machine (GPU, CPU)."),
    min_runs: int = typer.Option(2, "--min-runs", help="Only configurations with at least this many runs."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    from wattbench.report.history import no_noise_line, noise_data, noise_text_lines
    from wattbench.results.store import HistoryStore

    with HistoryStore(db) as store:
        rows = store.noise_table(min_runs=max(1, min_runs), model=model, engine=engine, gpu=gpu)
    if as_json:
        _print_json(noise_data(rows))
        return
    if not rows:
        typer.echo(no_noise_line(max(1, min_runs), any((model, engine, gpu))))
        return
    import shutil

    for line in noise_text_lines(rows, shutil.get_terminal_size((80, 24)).columns):
        typer.echo(line)


def import_cmd(
    paths: List[str] = typer.Argument(..., help="Run directories or folders holding them."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    from wattbench.report.summary import history_summary
    from wattbench.results.store import HistoryStore

    with HistoryStore(db) as store:
        recs, problems = store.import_dirs(paths, summarize=history_summary)
    if as_json:
        _print_json({"imported": [r.run_id for r in recs], "problems": problems,
                     "notes": [n for r in recs for n in r.notes]})
    else:
        from wattbench.report.history import import_lines

        for line, err in import_lines(recs, problems):
            typer.echo(line, err=err)
    if problems and not recs:
        raise typer.Exit(2)


# (name, help, function) in the order `wattbench history --help` lists them
COMMANDS: list[tuple[str, str, Callable[..., None]]] = [
    ("list", "List registered runs, newest first: where the load went, the configuration "
             "(its --config-label, else the first 8 characters of its key) and the headline figure.", list_cmd),
    ("show", "Show one run (directory, run id, id prefix, tag or baseline name).", show_cmd),
    ("tag", "Tag a run. A tag names one run; --force moves an existing tag.", tag_cmd),
    ("untag", "Remove a tag.", untag_cmd),
    ("baseline", "Set baseline NAME to a run; with only NAME show it; with none list them.", baseline_cmd),
    ("noise", "The run-to-run spread of each configuration measured by repeated runs "
              "(machine, engine, model, engine flags, the server's identity and --config-label, workload shape, "
              "load level, boundary).", noise_cmd),
    ("import", "Register run directories (searched recursively for result.json).", import_cmd),
]


def register(app: typer.Typer) -> None:
    hist = typer.Typer(help="The run history: list, show, tag, set baselines, run-to-run noise, import run directories.",
                       no_args_is_help=True, rich_markup_mode=None)
    for name, help_text, fn in COMMANDS:
        hist.command(name, help=help_text)(handle_errors(fn))
    app.add_typer(hist, name="history")
