"""`wattbench agree TARGET_A TARGET_B --prompts FILE`: output agreement under greedy decoding."""

from __future__ import annotations

from typing import Optional

import typer

from wattbench.cli.common import handle_errors
from wattbench.config import DB_HELP, REGISTER_HELP


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
    def agree_cmd(
        target_a: str = typer.Argument(..., help="Base URL of the reference server, e.g. http://127.0.0.1:8000"),
        target_b: str = typer.Argument(..., help="Base URL of the server under test."),
        prompts: str = typer.Option(..., "--prompts", help="JSONL: {prompt|messages, max_tokens?, schema?, "
                                                           "required?} per line; both kinds in one file."),
        model_a: Optional[str] = typer.Option(None, "--model-a", help="Model at A (default: first listed)."),
        model_b: Optional[str] = typer.Option(None, "--model-b", help="Model at B (default: first listed)."),
        api: str = typer.Option("completions", "--api", help="API for 'prompt' rows: completions or chat "
                                                             "('messages' rows always use chat)."),
        api_key: Optional[str] = typer.Option(None, "--api-key", help="API key for both servers (or env "
                                               "WATTBENCH_API_KEY / OPENAI_API_KEY; per server "
                                               "WATTBENCH_API_KEY_A / _B). Never written anywhere.",
                                               show_default=False),
        max_tokens: int = typer.Option(128, "--max-tokens", help="Tokens per answer (a prompt may override)."),
        concurrency: int = typer.Option(4, "--concurrency", help="Prompts in flight at once."),
        tokens: str = typer.Option("auto", "--tokens",
                                   help="Token basis: auto (server tokens if both return them), "
                                        "server_tokens, whitespace."),
        timeout_s: float = typer.Option(300.0, "--request-timeout", "--timeout", help="Seconds a request may take."),
        out: Optional[str] = typer.Option(None, "--out", help="Directory to write (default "
                                                             "wattbench-results/<agree id>)."),
        register_run: bool = typer.Option(True, "--register/--no-register", help=REGISTER_HELP),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print JSON (metrics, without per-prompt rows)."),
    ) -> None:
        from pathlib import Path

        from wattbench.analysis.agree import load_prompts, run_agreement
        from wattbench.core.errors import UserError
        from wattbench.results.agreement import write_agreement

        if api not in ("completions", "chat"):
            raise UserError(f"--api must be completions or chat, got {api!r}")
        if tokens not in ("auto", "server_tokens", "whitespace"):
            raise UserError(f"--tokens must be auto, server_tokens or whitespace, got {tokens!r}")
        specs = load_prompts(prompts)
        agr = run_agreement(target_a, target_b, specs, max_tokens=max_tokens, api=api,  # type: ignore[arg-type]
                            model_a=model_a, model_b=model_b, concurrency=concurrency, timeout_s=timeout_s,
                            tokens=tokens,  # type: ignore[arg-type]
                            api_key_a=_key(api_key, "WATTBENCH_API_KEY_A"),
                            api_key_b=_key(api_key, "WATTBENCH_API_KEY_B"))
        run_dir = Path(out) if out else Path("wattbench-results") / agr.run_id
        path = write_agreement(run_dir, agr)
        if register_run:
            from wattbench.results.store import HistoryStore

            with HistoryStore(db) as store:
                store.register_agreement(agr, run_dir)
        m = agr.metrics
        if as_json:
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
