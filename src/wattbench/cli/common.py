"""Helpers shared by command modules: error handling and list parsing. No computing here."""

from __future__ import annotations

import functools
import sys
from typing import Callable

import typer
from pydantic import ValidationError

from wattbench.errors import WattbenchError


# One wording for the flags every command shares (issue 18: the same flag for the same thing).
DB_HELP = "History database (default: $WATTBENCH_DB or the user data directory's history.sqlite3)."
API_KEY_HELP = "API key (or env WATTBENCH_API_KEY / OPENAI_API_KEY). Never written anywhere."
API_KEY_ENV = ["WATTBENCH_API_KEY", "OPENAI_API_KEY"]
REGISTER_HELP = "Add the run to the history store (default) or not."


def one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err.get("loc", ()) if x != "__root__")
            msg = err.get("msg", "invalid").removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc else msg)
        return "; ".join(parts)
    return str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__


def handle_errors(fn: Callable) -> Callable:
    """Wrap a command: WattbenchError/ValidationError -> one line on stderr, documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except ValidationError as e:
            typer.echo(f"wattbench: error: {one_line(e)}", err=True)
            raise typer.Exit(2) from None
        except WattbenchError as e:
            typer.echo(f"wattbench: error: {one_line(e)}", err=True)
            tail = getattr(e, "log_tail", "")
            if tail:
                typer.echo("--- last lines of the engine log ---", err=True)
                typer.echo(tail.rstrip(), err=True)
            raise typer.Exit(e.exit_code) from None

    return wrapper


def split_list(value: str | None, cast: Callable = str, name: str = "value") -> list:
    """Parse a comma list like ``1,8,64``; raise UserError naming the bad item."""
    from wattbench.errors import UserError

    if value is None or value == "":
        return []
    out = []
    for item in str(value).split(","):
        item = item.strip()
        if not item:
            continue
        try:
            out.append(cast(item))
        except ValueError:
            raise UserError(f"{name}: {item!r} is not a valid {cast.__name__}; give e.g. 1,8,64") from None
    return out


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()


def parse_headers(values: list[str] | None) -> dict[str, str]:
    """``--header K:V`` (repeatable) -> {K: V}; a value may itself hold colons."""
    from wattbench.errors import UserError

    out: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            raise UserError(f"--header {item!r}: give NAME:VALUE, e.g. --header X-Tenant:acme")
        out[name.strip()] = value.strip()
    return out


def parse_json_object(text: str | None, flag: str) -> dict:
    """A JSON object given on the command line (``--extra-body '{"top_k": 20}'``)."""
    import json

    from wattbench.errors import UserError

    if text is None or not text.strip():
        return {}
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{flag}: not JSON ({e.msg} at character {e.pos}); give an object like '{{\"top_k\": 20}}'") from None
    if not isinstance(obj, dict):
        raise UserError(f"{flag}: give a JSON object like '{{\"top_k\": 20}}', not {type(obj).__name__}")
    return obj
