"""Helpers shared by command modules: error handling, list parsing and the checks every command
line value passes (``number_gate``, ``one_line_usage``). No computing here."""

from __future__ import annotations

import functools
import math
import sys
from typing import IO, TYPE_CHECKING, Any, Callable, NoReturn, ParamSpec, TypeVar

import typer
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from wattbench.core.errors import WattbenchError
from wattbench.core.safe_text import LINE_CHARS, term

try:  # typer >= 0.22 vendors click
    from typer._click.exceptions import ClickException, MissingParameter, UsageError
except ImportError:  # pragma: no cover - older typer on plain click
    from click.exceptions import ClickException, MissingParameter, UsageError  # type: ignore[assignment]

if TYPE_CHECKING:
    from wattbench.config.flags import Domain

P = ParamSpec("P")
R = TypeVar("R")


API_KEY_FILE_MAX_BYTES = 64 * 1024  # a key file, not a dump: a bigger file is refused unread


def read_api_key(api_key: str | None, api_key_file: Any) -> str | None:
    """The key of ``--api-key`` or ``--api-key-file`` (its first non-empty line, stripped); one
    line (``UserError``) when both are given or the file cannot be read, is too big, or holds no key."""
    from pathlib import Path

    from wattbench.core.errors import UserError

    if api_key_file is None:
        return api_key
    if api_key:
        raise UserError("--api-key and --api-key-file both given: give one (--api-key-file keeps the key out of ps)")
    path = Path(api_key_file)
    try:
        if path.is_dir():
            raise UserError(f"--api-key-file {path}: is a directory; give the file that holds the key")
        with open(path, "rb") as f:
            data = f.read(API_KEY_FILE_MAX_BYTES + 1)
    except OSError as e:
        raise UserError(f"--api-key-file {path}: cannot read it ({e.strerror or e})") from None
    if len(data) > API_KEY_FILE_MAX_BYTES:
        raise UserError(f"--api-key-file {path}: more than {API_KEY_FILE_MAX_BYTES // 1024} KiB; give a file that "
                        "holds only the key")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"--api-key-file {path}: not UTF-8 text; give a file that holds only the key") from None
    key = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not key:
        raise UserError(f"--api-key-file {path}: holds no key (empty)")
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise UserError(f"--api-key-file {path}: the key holds a control character; give the key alone on one line")
    return key


def _choice_error(err: ErrorDetails) -> str | None:
    """``--api 'chta' is not one of completions, chat`` for a value outside a fixed set of choices
    (pydantic's ``literal_error`` / ``enum``), the field named as its flag."""
    if err.get("type") not in ("literal_error", "enum"):
        return None
    import re

    loc = [str(x) for x in err.get("loc", ()) if x != "__root__"]
    expected = (err.get("ctx") or {}).get("expected", "")
    choices = re.findall(r"'([^']*)'", str(expected))
    if not loc or not choices:
        return None
    return f"--{loc[-1].replace('_', '-')} {err.get('input')!r} is not one of {', '.join(choices)}"


def one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors():
            choice = _choice_error(err)
            if choice is not None:
                parts.append(choice)
                continue
            loc = ".".join(str(x) for x in err.get("loc", ()) if x != "__root__")
            msg = err.get("msg", "invalid").removeprefix("Value error, ")
            parts.append(f"{loc}: {msg}" if loc and not msg.startswith("-") else msg)  # a message naming its flag
        return term("; ".join(parts), LINE_CHARS)
    # a message may quote a server or a file: no control sequence reaches the terminal, and it stays one line
    text = str(exc).strip()
    return term(text.split("\n", 1)[0], LINE_CHARS) if text else exc.__class__.__name__


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command: WattbenchError/ValidationError -> one line on stderr, documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
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


def split_list(value: str | None, cast: Callable[[str], Any] = str, name: str = "value",
               domain: Domain | None = None) -> list[Any]:
    """Parse a comma list like ``1,8,64``; raise UserError naming the bad item. A list of numbers
    (``cast`` int or float) is checked item by item like any numeric option: against ``domain``
    (default: the flag's entry in ``config.tables.FLAG_DOMAINS``) and ``MAX_OPTION_MAGNITUDE``; an empty
    item (``1,,2``, a trailing comma) is refused, not skipped."""
    from wattbench.core.errors import UserError

    if value is None or value == "":
        return []
    numeric: Domain | None = None  # the range a number takes; None: the items are text
    if cast in (int, float):
        from wattbench.config.tables import domain_for

        numeric = domain if domain is not None else domain_for(name)
    out = []
    for item in str(value).split(","):
        item = item.strip()
        if not item:
            raise UserError(f"{name} {value!r}: an empty item; give values separated by single commas, e.g. 1,8,64")
        try:
            v = cast(item)
        except ValueError:
            raise UserError(f"{name}: {item!r} is not a valid {cast.__name__}; give e.g. 1,8,64") from None
        if numeric is not None:
            msg = numeric.problem(name, v) or _size_problem(name, v)
            if msg:
                raise UserError(msg)
        out.append(v)
    return out


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()


def parse_headers(values: list[str] | None) -> dict[str, str]:
    """``--header K:V`` (repeatable) -> {K: V}; a value may itself hold colons."""
    from wattbench.core.errors import UserError

    out: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            raise UserError(f"--header {item!r}: give NAME:VALUE, e.g. --header X-Tenant:acme")
        out[name.strip()] = value.strip()
    return out


def parse_json_object(text: str | None, flag: str) -> dict[str, Any]:
    """A JSON object given on the command line (``--extra-body '{"top_k": 20}'``), nested at most
    ``core.jsontext.MAX_EMBEDDED_DEPTH`` deep: ``result.json`` stores it a few levels down, and a
    file nested deeper than wattbench's own reader reads would be refused by ``report`` and ``compare``."""
    import json

    from wattbench.core.errors import UserError
    from wattbench.core.jsontext import MAX_EMBEDDED_DEPTH, json_depth

    if text is None or not text.strip():
        return {}
    depth = json_depth(text)
    if depth > MAX_EMBEDDED_DEPTH:
        raise UserError(f"{flag}: JSON nested {depth} levels deep (at most {MAX_EMBEDDED_DEPTH} are stored in a result "
                        "wattbench can read back); give a flatter object like '{\"top_k\": 20}'")

    def not_a_number(word: str) -> NoReturn:  # NaN, Infinity: Python's json takes them, no server's JSON parser does
        raise UserError(f"{flag}: {word} is not a JSON number (a request body is standard JSON); give a finite number")

    def finite(word: str) -> float:
        v = float(word)
        if v != v or v in (float("inf"), float("-inf")):
            raise UserError(f"{flag}: {word[:40]} is too large for a number (it reads as infinity); give a finite number")
        return v

    try:
        obj = json.loads(text, parse_constant=not_a_number, parse_float=finite)
    except json.JSONDecodeError as e:
        raise UserError(f"{flag}: not JSON ({e.msg} at character {e.pos}); give an object like '{{\"top_k\": 20}}'") from None
    except RecursionError:
        raise UserError(f"{flag}: JSON nested too deeply (over Python's recursion limit); give a flat object like "
                        "'{\"top_k\": 20}'") from None
    if not isinstance(obj, dict):
        raise UserError(f"{flag}: give a JSON object like '{{\"top_k\": 20}}', not {type(obj).__name__}")
    return obj


# ------------------------------------------------------------------ every value on a command line

# Every int and float option of every command passes ``number_gate`` (installed by
# ``cli.main.build_command``, so a new option is covered without a line of its own), and every item
# of a comma list of numbers passes ``split_list``'s same checks: the flag's range from the one
# table (``config.tables.FLAG_DOMAINS``: finite, ``--pue >= 1``, ``--seed`` a 32-bit integer, durations at
# most ``config.flags.MAX_SECONDS``; positive for a flag not listed) and at most this large in size. No
# option means a value near 1e12 (a trillion requests); beyond it a typo (a 30-digit integer) would
# reach int64 nanoseconds, the load or numpy.
MAX_OPTION_MAGNITUDE = 1e12
LIST_METAVAR = "N,N,..."  # the metavar of a comma-list option of numbers (``split_list``): -c 1,8,64


def option_name(param: Any) -> str:
    """The flag a user typed for ``param`` (its longest form: ``--concurrency``, not ``-c``)."""
    opts = list(getattr(param, "opts", None) or [])
    return max(opts, key=len) if opts else str(getattr(param, "name", "value")).upper()


def _size_problem(flag: str, v: float | int) -> str | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and abs(v) > MAX_OPTION_MAGNITUDE:
        return f"{flag} {v:g}: too large; no option takes a value beyond {MAX_OPTION_MAGNITUDE:g} in size"
    return None


def check_number(flag: str, value: Any, command: str | None = None) -> None:
    """Raise ``UsageError`` (one line naming ``flag``) unless ``value`` (a number; None passes)
    is in the flag's domain (``config.tables.domain_for``: finite, its range) and at most
    ``MAX_OPTION_MAGNITUDE`` in size."""
    from wattbench.config.tables import domain_for

    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    msg = domain_for(flag, command).problem(flag, value) or _size_problem(flag, value)
    if msg:
        raise UsageError(msg)


def number_gate(param: Any, command: str | None = None) -> None:
    """Install ``check_number`` on an int/float option of ``command`` (after typer's conversion,
    before its own callback, before the command runs)."""
    flag = option_name(param)
    original = param.callback

    def callback(ctx: Any, p: Any, value: Any) -> Any:
        check_number(flag, value, command)
        return original(ctx, p, value) if original is not None else value

    param.callback = callback


def text_gate(param: Any) -> None:
    """Refuse an empty value (or an empty item of a repeated option) typed for a text option: it
    was read as "not given" (``-c ''`` ran the default level, ``--out ''`` the default directory).
    Options where empty means something are listed in ``config.tables.EMPTY_TEXT_OK``; a value from the
    environment or the default is not the user's typing and passes. The raw text is checked, before
    the option's type reads it (a path option would read ``''`` as ``.``)."""
    from wattbench.config.tables import EMPTY_TEXT_OK

    flag = option_name(param)
    if flag in EMPTY_TEXT_OK:
        return
    original = param.process_value

    def process_value(ctx: Any, value: Any) -> Any:
        typed = getattr(ctx.get_parameter_source(param.name), "name", "") == "COMMANDLINE"
        items = value if isinstance(value, (list, tuple)) else [value]
        if typed and any(isinstance(v, str) and not v.strip() for v in items):
            raise UsageError(f"{flag}: an empty value; give a value or leave the option out")
        return original(ctx, value)

    param.process_value = process_value


def one_line_usage(exc: UsageError) -> str:
    """A usage error (a value that does not parse, an unknown option, a missing argument) as one
    line naming the option and where to look, instead of click's usage block."""
    param = getattr(exc, "param", None)
    cmd = getattr(getattr(exc, "ctx", None), "command_path", None) or "wattbench"
    if param is None or getattr(param, "param_type_name", "") != "option" or isinstance(exc, MissingParameter):
        msg = exc.format_message()
        return msg if msg.startswith("-") else f"{msg} (see {cmd} --help)"
    msg = exc.message
    kind = {"int": "a whole number", "float": "a number"}.get(param.bare_type() if hasattr(param, "bare_type") else "")
    if kind and "should be a valid" in msg:  # typer's own parse error: say what the option takes
        msg = f"not {kind}" + ("; give seconds (600 for 10 minutes)" if "seconds" in (param.help or "").lower() else "")
    return f"{option_name(param)}: {msg} (see {cmd} --help)"


def usage_errors_in_one_line(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` (a click command's context making or invoking) with a usage error raised as
    ``OneLineUsageError`` (``one_line_usage``)."""

    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except UsageError as e:
            raise OneLineUsageError(one_line_usage(e)) from None

    return wrapped


class OneLineUsageError(ClickException):
    """What a usage error becomes: ``wattbench: error: <one line>`` on stderr, exit 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:  # noqa: ARG002 - always stderr
        typer.echo(f"wattbench: error: {self.message}", err=True)


def strict_exit(strict: bool, result: Any, run_dir: Any) -> None:
    """``--strict`` (``run``, ``measure``): a complete run with any figure not ``valid``
    (``run.benchmark.strict_failures``) is one line — the verdict line, and where the reasons are —
    and exit ``core.errors.EXIT_STRICT`` (5); the run is kept and registered all the same."""
    if not strict:
        return
    from wattbench.core.errors import EXIT_STRICT  # lazy: keeps `wattbench --help` light
    from wattbench.report.notes import verdict_text
    from wattbench.run.benchmark import strict_failures

    if strict_failures(result):
        typer.echo(f"wattbench: error: --strict: not every figure is valid — verdict: {verdict_text(result)}; the run "
                   f"is kept (why: wattbench report --notes {run_dir})", err=True)
        raise typer.Exit(EXIT_STRICT)
