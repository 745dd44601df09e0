"""`wattbench regress RESULT --baseline REF --fail-on CHECKS`: a CI gate.

Exit 0 when every check holds, 1 when one fails, 2 on bad input (missing/corrupt files, bad
check strings, incomparable runs, a baseline that is the run itself). Every check is printed, one
line each (``ok``, ``FAIL``, ``skip``), then the diagnosis.
"""

from __future__ import annotations

from typing import Optional

import typer

from wattbench.cli.common import DB_HELP, handle_errors


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
            from rich.console import Console
            from rich.markup import escape

            from wattbench.cli.compare import render_findings

            c = Console(highlight=False, soft_wrap=True)
            for o in rep.outcomes:  # every check, one line each: the passing ones too
                if o.status == "fail":
                    c.print(f"[red]FAIL[/red] {escape(o.message)}")
                elif o.status == "skipped":
                    c.print(f"[dim]skip {escape(o.message)}[/dim]")
                elif o.within_noise:  # every check one line: a pass inside the noise says so
                    c.print(f"[cyan]pass[/cyan] {escape(o.message)}")
                else:
                    c.print(f"[green]ok[/green]   {escape(o.message)}")
            if any(o.status != "skipped" and not o.noise_aware for o in rep.outcomes):
                from wattbench.metrics.noise import unknown_noise_hint

                c.print(f"[dim]{escape(unknown_noise_hint())}[/dim]")
            held = sum(1 for o in rep.outcomes if o.status == "pass")
            verdict = "[green]all checks hold[/green]" if rep.passed else f"[red]{len(rep.failed)} failed[/red]"
            c.print(escape(f"{rep.run_id} vs baseline {rep.baseline_id} @ {rep.boundary}: {held} held, ") + verdict)
            render_findings(c, rep.findings, rep.incomparable if rep.forced else
                            [p for p in rep.incomparable if p.category != "setup"])
        raise typer.Exit(0 if rep.passed else 1)
