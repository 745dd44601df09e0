"""`wattbench regress RESULT --baseline REF --fail-on CHECKS`: a CI gate.

Exit 0 when every check holds, 1 when one fails (or a matched level measured nothing or lacks the
boundary), 6 when none fails but one is inconclusive (its noise cannot tell whether it holds:
``analysis/regress``), 2 on bad input (missing/corrupt files, bad check strings, incomparable runs,
a baseline that is the run itself). Compare's answer line for each pair first, then every check one
line each (``ok``, ``pass``, ``FAIL``, ``inconclusive``, ``skip``), then the diagnosis.
"""

from __future__ import annotations

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import command_options
from wattbench.config.commands import RegressOptions


def register(app: typer.Typer) -> None:
    @app.command("regress", help="Gate a run against a baseline: exit 0 all checks hold, 1 a check fails, "
                                 "6 a check is inconclusive (its noise cannot tell), 2 bad input. "
                                 "Checks: METRIC:+N% (fails when it rises more than N%), "
                                 "METRIC:-N% (falls more than N%), or absolute like ttft_p99_ms:+20ms.")
    @handle_errors
    @command_options("regress", RegressOptions)
    def regress_cmd(o: RegressOptions) -> None:
        from wattbench.analysis.regress import parse_checks, regress
        from wattbench.cli.compare import history_spread
        from wattbench.results.rundir import write_json_atomic
        from wattbench.results.store import load_ref

        checks = parse_checks(o.fail_on)  # bad check strings fail before any file is read
        cand = load_ref(o.result, o.db)
        base = load_ref(o.baseline, o.db)
        rep = regress(cand, base, checks, boundary=o.boundary, force=o.force,
                      match=o.match, window=o.window,
                      history=history_spread(o.db, [cand.run_id, base.run_id]), strict=o.strict)
        if o.out:
            write_json_atomic(o.out, rep)
        if o.as_json:
            import json

            data = rep.model_dump(mode="json")
            data["passed"] = rep.passed
            data["verdict"] = rep.verdict
            typer.echo(json.dumps(data, indent=2))
        else:
            from wattbench.report.comparison import render_regress

            render_regress(rep)
        from wattbench.core.errors import EXIT_INCONCLUSIVE

        raise typer.Exit({"pass": 0, "fail": 1, "inconclusive": EXIT_INCONCLUSIVE}[rep.verdict])
