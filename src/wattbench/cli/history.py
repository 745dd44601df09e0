"""`wattbench history list|show|tag|untag|baseline|noise|import`: the run index (SQLite).

Thin: one function per command parses its flags, asks ``results.store.HistoryStore`` and prints
what ``report.history`` words (or ``--json``)."""

from __future__ import annotations

import json
from typing import Any, Callable

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import command_options
from wattbench.config.flags import FlaggedConfig
from wattbench.config.history import (HistoryBaselineOptions, HistoryImportOptions, HistoryListOptions,
                                      HistoryNoiseOptions, HistoryShowOptions, HistoryTagOptions, HistoryUntagOptions)


def _print_json(data: object) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def list_cmd(o: HistoryListOptions) -> None:
    from wattbench.results.store import HistoryStore

    with HistoryStore(o.db) as store:
        runs = store.list_runs(model=o.model, engine=o.engine, gpu=o.gpu, tag=o.tag, kind=o.kind, since=o.since,
                               limit=o.limit or None, target=o.target, label=o.label)
        ids = None if o.full_ids else store.short_ids([r.run_id for r in runs])
    if o.as_json:
        _print_json([r.to_dict() for r in runs])
        return
    from wattbench.report.history import no_runs_line, runs_lines

    if not runs:
        typer.echo(no_runs_line(any((o.model, o.engine, o.gpu, o.tag, o.kind, o.since, o.target, o.label))))
        return
    import shutil

    for line in runs_lines(runs, shutil.get_terminal_size().columns, ids):
        typer.echo(line)


def show_cmd(o: HistoryShowOptions) -> None:
    from wattbench.results.store import HistoryStore

    with HistoryStore(o.db) as store:
        rec = store.get(o.ref)
    if o.as_json:
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


def tag_cmd(o: HistoryTagOptions) -> None:
    from wattbench.results.store import HistoryStore

    with HistoryStore(o.db) as store:
        rec = store.tag(o.ref, o.tag, force=o.force)
    if o.as_json:
        _print_json({"tag": o.tag, "run_id": rec.run_id})
    else:
        typer.echo(f"{o.tag} -> {rec.run_id}")


def untag_cmd(o: HistoryUntagOptions) -> None:
    from wattbench.results.store import HistoryStore

    with HistoryStore(o.db) as store:
        store.untag(o.tag)
    typer.echo(f"removed tag {o.tag}")


def baseline_cmd(o: HistoryBaselineOptions) -> None:
    from wattbench.core.errors import UserError
    from wattbench.results.store import HistoryStore

    name, ref = o.name, o.ref
    with HistoryStore(o.db) as store:
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
    if o.as_json:
        _print_json(data)
        return
    from wattbench.report.history import baseline_lines

    for line in baseline_lines(data):
        typer.echo(line)


def noise_cmd(o: HistoryNoiseOptions) -> None:
    from wattbench.report.history import no_noise_line, noise_data, noise_text_lines
    from wattbench.results.store import HistoryStore

    with HistoryStore(o.db) as store:
        rows = store.noise_table(min_runs=max(1, o.min_runs), model=o.model, engine=o.engine, gpu=o.gpu)
    if o.as_json:
        _print_json(noise_data(rows))
        return
    if not rows:
        typer.echo(no_noise_line(max(1, o.min_runs), any((o.model, o.engine, o.gpu))))
        return
    import shutil

    for line in noise_text_lines(rows, shutil.get_terminal_size((80, 24)).columns):
        typer.echo(line)


def import_cmd(o: HistoryImportOptions) -> None:
    from wattbench.report.summary import history_summary
    from wattbench.results.store import HistoryStore

    with HistoryStore(o.db) as store:
        recs, problems = store.import_dirs(o.paths, summarize=history_summary)
    if o.as_json:
        _print_json({"imported": [r.run_id for r in recs], "problems": problems,
                     "notes": [n for r in recs for n in r.notes]})
    else:
        from wattbench.report.history import import_lines

        for line, err in import_lines(recs, problems):
            typer.echo(line, err=err)
    if problems and not recs:
        raise typer.Exit(2)


# (name, help, its options' model, function) in the order `wattbench history --help` lists them
COMMANDS: list[tuple[str, str, type[FlaggedConfig], Callable[[Any], None]]] = [
    ("list", "List registered runs, newest first: where the load went, the configuration "
             "(its --config-label, else the first 8 characters of its key) and the headline figure.",
     HistoryListOptions, list_cmd),
    ("show", "Show one run (directory, run id, id prefix, tag or baseline name).", HistoryShowOptions, show_cmd),
    ("tag", "Tag a run. A tag names one run; --force moves an existing tag.", HistoryTagOptions, tag_cmd),
    ("untag", "Remove a tag.", HistoryUntagOptions, untag_cmd),
    ("baseline", "Set baseline NAME to a run; with only NAME show it; with none list them.", HistoryBaselineOptions,
     baseline_cmd),
    ("noise", "The run-to-run spread of each configuration measured by repeated runs "
              "(machine, engine, model, engine flags, the server's identity and --config-label, workload shape, "
              "load level, boundary).", HistoryNoiseOptions, noise_cmd),
    ("import", "Register run directories (searched recursively for result.json).", HistoryImportOptions, import_cmd),
]


def register(app: typer.Typer) -> None:
    hist = typer.Typer(help="The run history: list, show, tag, set baselines, run-to-run noise, import run directories.",
                       no_args_is_help=True, rich_markup_mode=None)
    for name, help_text, model, fn in COMMANDS:
        hist.command(name, help=help_text)(handle_errors(command_options(f"history {name}", model)(fn)))
    app.add_typer(hist, name="history")
