"""`wattbench regress RESULT --baseline REF --fail-on CHECKS`: a CI gate.

Exit 0 when every check holds, 1 when one fails (or a matched level measured nothing or lacks the
boundary), 2 on bad input (missing/corrupt files, bad check strings, incomparable runs, a baseline
that is the run itself). Compare's answer line for each pair first, then every check one line each
(``ok``, ``pass``, ``FAIL``, ``skip``), then the diagnosis.
"""

from __future__ import annotations

from typing import Optional

import typer

from wattbench.cli.common import handle_errors
from wattbench.config import DB_HELP


def register(app: typer.Typer) -> None:
    @app.command("regress", help="Gate a run against a baseline: exit 0 all checks hold, 1 a check fails, "
                                 "2 bad input. Checks: METRIC:+N% (fails when it rises more than N%), "
                                 "METRIC:-N% (falls more than N%), or absolute like ttft_p99_ms:+20ms.")
    @handle_errors
    def regress_cmd(
        result: str = typer.Argument(..., help="The run to check: directory, run id, tag."),
        baseline: str = typer.Option(..., "--baseline", help="Baseline: name, tag, run id or directory."),
        fail_on: str = typer.Option("j_per_output_token:+5%,output_tokens_per_s:-3%", "--fail-on",
                                    help="Comma list of checks."),
        boundary: Optional[str] = typer.Option(None, "--boundary", help="Power boundary for energy checks."),
        force: bool = typer.Option(False, "--force", help="Check even when workloads/measurement differ."),
        window: str = typer.Option("full", "--window", help="Energy window: full or steady (steady state)."),
        match: str = typer.Option("key", "--match", help="Pair levels by 'key' or 'index'."),
        strict: bool = typer.Option(False, "--strict", help="Fail a change beyond the limit even when it is within "
                                                              "the noise (trials' CIs, the history's run-to-run spread)."),
        out: Optional[str] = typer.Option(None, "--out", help="Also write the report JSON to this file."),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        from wattbench.analysis.regress import parse_checks, regress
        from wattbench.cli.compare import history_spread
        from wattbench.results.rundir import write_json_atomic
        from wattbench.results.store import load_ref

        checks = parse_checks(fail_on)  # bad check strings fail before any file is read
        cand = load_ref(result, db)
        base = load_ref(baseline, db)
        rep = regress(cand, base, checks, boundary=boundary, force=force,
                      match=match, window=window,  # type: ignore[arg-type]
                      history=history_spread(db, [cand.run_id, base.run_id]), strict=strict)
        if out:
            write_json_atomic(out, rep)
        if as_json:
            import json

            data = rep.model_dump(mode="json")
            data["passed"] = rep.passed
            typer.echo(json.dumps(data, indent=2))
        else:
            from wattbench.report.comparison import render_regress

            render_regress(rep)
        raise typer.Exit(0 if rep.passed else 1)
