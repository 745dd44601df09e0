"""`wattbench compare A B [C …]`: one answer line per level pair, then side-by-side tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import command_options
from wattbench.config.commands import CompareOptions

if TYPE_CHECKING:
    from pathlib import Path

    from wattbench.core.schema import LevelResult, RequestRecord, Result
    from wattbench.metrics.figure_noise import FigureNoise


def history_spread(db: str | None, judged: list[str]) -> Callable[[Result, LevelResult, str], FigureNoise | None] | None:
    """The history store's run-to-run noise of a level's configuration's figure, split at its change
    points (``HistoryStore.noise``: the spread ``history noise`` prints, ``judged`` — the runs being
    compared — left out of it where they share a segment, as its sentence says); None when there is
    no history database (none is created)."""
    from pathlib import Path

    from wattbench.results.store import HistoryStore, default_db_path

    path = Path(db).expanduser() if db else default_db_path()
    if not path.exists():
        return None

    def spread(result: Result, level: LevelResult, figure: str) -> FigureNoise | None:
        from wattbench.results.configuration import configuration, configuration_key

        try:
            with HistoryStore(path, create=False) as store:
                sp = store.noise(configuration_key(configuration(result, level)), figure=figure, judged=judged)
        except Exception:  # noqa: BLE001 - a history that cannot be read gives no spread, never an error
            return None
        if sp is None or sp.figure != figure:
            return None
        from wattbench.metrics.figure_noise import no_spread

        return sp.noise() or no_spread(sp.text(), sp.runs)

    return spread


def records_of(paths: dict[str, Path]) -> Callable[[Result, LevelResult], list[RequestRecord] | None]:
    """A run's level's request records from its run directory (``requests.jsonl``), those sent in
    the level's window; None where the file is missing."""
    cache: dict[str, list[RequestRecord] | None] = {}

    def records(result: Result, level: LevelResult) -> list[RequestRecord] | None:
        from wattbench.results.rundir import load_requests

        rid = result.run_id
        if rid not in cache:
            p = paths.get(rid)
            try:
                cache[rid] = load_requests(p) if p is not None else None
            except Exception:  # noqa: BLE001 - no readable file: the caller says so in one line
                cache[rid] = None
        recs = cache[rid]
        if recs is None:
            return None
        w = level.window
        return [r for r in recs if r.level == level.index and (w is None or w.start_ns <= r.sent_ns <= w.end_ns)]

    return records


def register(app: typer.Typer) -> None:
    @app.command("compare", help="Compare runs level by level; the first is the baseline. One answer line "
                                 "per level: per kW = throughput ratio ÷ power ratio at one boundary, and "
                                 "whether it is beyond noise, within noise or inconclusive.")
    @handle_errors
    @command_options("compare", CompareOptions)
    def compare_cmd(o: CompareOptions) -> None:
        from wattbench.analysis.compare import compare
        from wattbench.core.errors import UserError
        from wattbench.metrics.slo import parse_slos
        from wattbench.results.rundir import load_result, write_json_atomic
        from wattbench.results.store import resolve_run_path

        runs, db = o.runs, o.db
        if len(runs) < 2:
            raise UserError("compare needs at least two runs (directories, ids or tags)")
        if o.at_slo is not None:
            parse_slos(o.at_slo)  # a bad SLO fails before any file is read
        paths = [resolve_run_path(r, db) for r in runs]
        results = [load_result(p) for p in paths]
        cmp = compare(results, force=o.force, boundary=o.boundary, match=o.match, window=o.window,
                      history=history_spread(db, [r.run_id for r in results]), at_slo=o.at_slo,
                      records=records_of({r.run_id: p for r, p in zip(results, paths)}))
        agr = None
        if o.agreement:
            from wattbench.analysis.agree import load_agreement_ref

            agr = load_agreement_ref(o.agreement, db)
        if o.out:
            write_json_atomic(o.out, cmp)
        if o.as_json:
            data = cmp.model_dump(mode="json")
            if agr is not None:
                data["agreement"] = agr.model_dump(mode="json", exclude={"prompts"})
            import json

            typer.echo(json.dumps(data, indent=2))
            return
        from wattbench.report.comparison import render_compare  # lazy: the renderer, only when a command runs

        render_compare(cmp, agr, results)
