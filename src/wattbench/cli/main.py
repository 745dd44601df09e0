"""Entry point: builds the typer app from one module per command.

Each command module exposes ``register(app: typer.Typer) -> None`` and imports its library code
inside the command function, so ``wattbench --help`` stays instant. ``main()`` turns a
``UserError`` into one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import typer

from wattbench.errors import WattbenchError

# Command modules, in the order ``--help`` lists them.
COMMANDS = [
    "run",
    "tune",
    "sensors",
    "report",
    "compare",
    "regress",
    "history",
    "agree",
    "plan",
    "doctor",
    "monitor",
]


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="wattbench",
        help="Measure how much useful LLM inference a kilowatt buys.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True),
    ) -> None:
        if version:
            from wattbench import __version__

            typer.echo(__version__)
            raise typer.Exit(0)

    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"wattbench.cli.{name}")
        except ModuleNotFoundError as e:  # a command module not present in this build
            if e.name == f"wattbench.cli.{name}":
                continue
            raise
        mod.register(app)
    return app


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print one clear line on stderr and return an Exit to raise."""
    typer.echo(f"wattbench: error: {message}", err=True)
    return typer.Exit(code)


def main(argv: list[str] | None = None) -> None:
    app = build_app()
    try:
        app(args=argv, standalone_mode=True)
    except WattbenchError as e:  # raised outside a command's own handling
        typer.echo(f"wattbench: error: {e}", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        typer.echo("wattbench: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
