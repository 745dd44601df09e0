"""Entry point: builds the typer app from one module per command.

Each command module exposes ``register(app: typer.Typer) -> None`` and imports its library code
inside the command function, so ``wattbench --help`` stays instant. ``main()`` turns a
``UserError`` into one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from typer._click import Command

from wattbench.cli.options import version_option
from wattbench.core.errors import WattbenchError

# Command modules, in the order ``--help`` lists them.
COMMANDS = [
    "run",
    "measure",
    "tune",
    "ab",
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
        rich_markup_mode=None,  # help is plain text: `uniform:A:B` and `wattbench[ray]` shown as typed
    )

    def _print_version(value: bool) -> None:
        # A parameter callback runs while the options are parsed, before click asks for a command,
        # so `wattbench --version` alone prints the version instead of "Missing command".
        if value:
            from wattbench import __version__

            typer.echo(f"wattbench {__version__}")
            raise typer.Exit(0)

    @app.callback()
    def _root(version: bool = version_option(_print_version)) -> None:
        pass

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


_METAVARS = {"int": "N", "float": "NUM"}


def _plain_metavars(cmd: Command) -> None:
    """Show a value option as ``--num-requests N`` instead of typer's ``<int>``/``<list[str]>``."""
    for p in getattr(cmd, "params", []):
        if getattr(p, "param_type_name", "") == "option" and not p.is_flag and not p.count and p.metavar is None:
            bare = p.bare_type() if hasattr(p, "bare_type") else "str"
            p.metavar = _METAVARS.get(bare, "TEXT")
        elif getattr(p, "param_type_name", "") == "argument":
            if p.metavar is None:
                p.metavar = (p.name or "value").upper()
            p.display_type_rich = lambda ctx: None  # the name says it; typer would add "<list[str]>"
    for sub in getattr(cmd, "commands", {}).values():
        _plain_metavars(sub)


def _gate_numbers(cmd: Command, path: str = "") -> None:
    """Every int/float option of every command passes ``cli.common.number_gate`` (its flag's range
    in ``config.tables.FLAG_DOMAINS``, finite, of a size an option can mean) and every other value option
    ``cli.common.text_gate`` (not empty when typed, ``config.tables.EMPTY_TEXT_OK`` aside) before its
    command runs; a new option is covered by being declared."""
    from wattbench.cli.common import number_gate, text_gate

    for p in getattr(cmd, "params", []):
        if getattr(p, "param_type_name", "") != "option" or not hasattr(p, "bare_type"):
            continue
        if p.bare_type() in ("int", "float"):
            number_gate(p, path or None)
        elif not p.is_flag and not p.count:  # text, a path, a repeated text option: never empty when typed
            text_gate(p)
    for name, sub in getattr(cmd, "commands", {}).items():
        _gate_numbers(sub, f"{path} {name}".strip())


def _one_line_usage_errors(cmd: Command) -> None:
    """A usage error anywhere under ``cmd`` (a value that does not parse, an unknown option, a
    missing argument) is one line on stderr and exit 2, like every other bad input, instead of
    click's usage block: the root command's context making and invoking re-raise it as
    ``OneLineUsageError`` (sub-commands' contexts are made inside the root's invoke)."""
    from wattbench.cli.common import usage_errors_in_one_line

    setattr(cmd, "make_context", usage_errors_in_one_line(cmd.make_context))  # noqa: B010 - replaces a method
    setattr(cmd, "invoke", usage_errors_in_one_line(cmd.invoke))  # noqa: B010


def build_command() -> Command:
    """The click command behind the typer app: plain metavars, every number gated, usage errors
    in one line."""
    import typer.main

    cmd = typer.main.get_command(build_app())
    _plain_metavars(cmd)
    _gate_numbers(cmd)
    _one_line_usage_errors(cmd)
    return cmd


def main(argv: list[str] | None = None) -> None:
    from wattbench.core.secret_scope import guard_std_streams, scope

    cmd = build_command()
    # stdout and stderr never show a secret the command registered (core/secret_scope.py): tables,
    # --json, error lines that quote a server, even a traceback; the command's scope holds what its
    # run (doctor, monitor, agree …) registered until it has printed its summary and ended
    with guard_std_streams(), scope(hold=True):
        try:
            cmd.main(args=argv, standalone_mode=True, prog_name="wattbench")
        except WattbenchError as e:  # raised outside a command's own handling
            from wattbench.cli.common import one_line

            typer.echo(f"wattbench: error: {one_line(e)}", err=True)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            typer.echo("wattbench: interrupted", err=True)
            sys.exit(130)
        except Exception:  # a bug: its traceback, printed while stderr still scrubs
            import traceback

            traceback.print_exc()
            sys.exit(1)


if __name__ == "__main__":
    main()
