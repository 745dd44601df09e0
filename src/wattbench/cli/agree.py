"""`wattbench agree TARGET_A TARGET_B --prompts FILE`: output agreement under greedy decoding."""

from __future__ import annotations

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import command_options
from wattbench.config.commands import AgreeOptions


def _key(flag: str | None, side_env: str) -> str | None:
    """--api-key, else the side's own variable, else the run's (WATTBENCH_API_KEY, OPENAI_API_KEY)."""
    import os

    return (flag or os.environ.get(side_env) or os.environ.get("WATTBENCH_API_KEY")
            or os.environ.get("OPENAI_API_KEY") or None)


def register(app: typer.Typer) -> None:
    @app.command("agree", help="Send the same prompts to two servers with greedy decoding and measure how "
                               "often the answers agree (exact match, token agreement, first divergence, "
                               "structured validity). Stored like a run and registered in the history.")
    @handle_errors
    @command_options("agree", AgreeOptions)
    def agree_cmd(o: AgreeOptions) -> None:
        from pathlib import Path

        from wattbench.analysis.agree import load_prompts, run_agreement
        from wattbench.results.agreement import write_agreement

        specs = load_prompts(o.prompts)
        api_key = o.api_key.get_secret_value() if o.api_key is not None else None
        agr = run_agreement(o.target_a, o.target_b, specs, max_tokens=o.max_tokens, api=o.api,
                            model_a=o.model_a, model_b=o.model_b, concurrency=o.concurrency, timeout_s=o.timeout_s,
                            tokens=o.tokens,
                            api_key_a=_key(api_key, "WATTBENCH_API_KEY_A"),
                            api_key_b=_key(api_key, "WATTBENCH_API_KEY_B"))
        run_dir = Path(o.out) if o.out else Path("wattbench-results") / agr.run_id
        path = write_agreement(run_dir, agr)
        if o.register_run:
            from wattbench.results.store import HistoryStore

            with HistoryStore(o.db) as store:
                store.register_agreement(agr, run_dir)
        m = agr.metrics
        if o.as_json:
            import json

            data = agr.model_dump(mode="json", exclude={"prompts"})
            data["path"] = str(path)
            typer.echo(json.dumps(data, indent=2))
            return

        from wattbench.core.numbers import fmt_fraction_pct as pct

        a, b = agr.targets
        typer.echo(f"{agr.run_id}: {a.model} @ {a.base_url}  vs  {b.model} @ {b.base_url}")
        typer.echo(f"  prompts {m.prompts}, answered by both {m.compared} (failed A {m.failed_a}, B {m.failed_b})")
        typer.echo(f"  exact match      {pct(m.exact_match_rate)}")
        typer.echo(f"  token agreement  {pct(m.token_agreement)} (basis: {m.token_basis})")
        fd = m.first_divergence
        if fd.diverged:
            hist = ", ".join(f"{k}: {v}" for k, v in fd.histogram.items())
            typer.echo(f"  first divergence {fd.diverged} prompt(s) diverged; token position p50 {fd.p50:g}, "
                       f"p90 {fd.p90:g}, min {fd.min}, max {fd.max} ({hist})")
        if m.structured_prompts:
            typer.echo(f"  structured       {m.structured_prompts} prompt(s): valid A {pct(m.structured_valid_rate_a)}, "
                       f"B {pct(m.structured_valid_rate_b)} (JSON parses A {pct(m.json_valid_rate_a)}, "
                       f"B {pct(m.json_valid_rate_b)})")
        typer.echo(f"  written to {path}")
