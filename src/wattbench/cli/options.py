"""A command's typer options, generated from the configuration fields it sets.

Each option of ``run``, ``measure`` and ``tune`` is declared once, on its field, by a ``config.flags.Flag``
in the field's ``Annotated`` type (``config/flags.py`` says how). ``options_from(command, *models)``
decorates a command's body: the typer signature is generated from the fields of ``models`` whose
flag names ``command`` (an ``inspect.Signature`` of ``typer.Option`` defaults, set as the
wrapper's ``__signature__``), and the body receives what was typed as field values, one dict per
model (``Given``), ready for ``Model(**given[Model])``:

* the option's type and default follow the field's (``default_in`` a command's own default);
* a list of numbers is typed as a comma list (``-c 1,8,64``), read by ``common.split_list`` against
  the flag's domain; a list of text is a repeated option; ``dict[str, str]`` repeated ``K:V``
  (``common.parse_headers``); another dict a JSON object (``common.parse_json_object``);
* a ``negated`` flag (``--no-prime``) gives the field its opposite; a ``text`` flag (``--warmup
  10s``) gives the typed text, which the command reads itself.

What a command takes that is no configuration (``--api-key-file``, ``--json``, ``--quiet``) is
declared the same way on ``CommandOptions``. Every other command's options are one model
(``config.plan.PlanTcoOptions``), made by ``command_options``; a flag several commands share is one
field type in ``config/shared.py`` (``--db``, ``--sensor``), so it keeps one wording. No computing here: reading the text of an option is ``cli/common.py``'s.
"""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass
from typing import Annotated, Any, Callable, List, Literal, Optional, TypeVar, Union, get_args, get_origin

import typer
from pydantic import BaseModel, SecretStr

from wattbench.cli.common import LIST_METAVAR, parse_headers, parse_json_object, split_list
from wattbench.config.flags import MEASURE, POSITIVE, RUN, TUNE, Flag, flags
from wattbench.config.shared import ApiKeyFile

Given = dict[type[BaseModel], dict[str, Any]]  # per model: field name -> the value typed (or its default)



class CommandOptions(BaseModel):
    """What ``run``, ``measure`` and ``tune`` take that is no configuration: where the API key
    comes from, and how the answer is shown."""

    api_key_file: ApiKeyFile
    as_json: Annotated[bool, Flag(
        "--json", commands=(RUN, MEASURE, TUNE), help="Print the result as JSON on stdout (progress goes to stderr).",
        help_in={MEASURE: "Print the result as JSON on stdout (the command's output goes to stderr).",
                 TUNE: "Print tune.json on stdout."})] = False
    quiet: Annotated[bool, Flag(
        "--quiet", "-q", commands=(RUN, MEASURE), help="No progress display.",
        help_in={MEASURE: "Do not echo the command's output (it is in command.log)."})] = False


# how a typed value becomes the field's value
AS_TYPED, NEGATE, INT_LIST, FLOAT_LIST, TEXTS, HEADERS, JSON = (
    "as typed", "negate", "int list", "float list", "texts", "headers", "json")


@dataclass(frozen=True)
class Option:
    """One generated option: the field it sets (``model``, ``field``), its ``flag``, how its
    typed value is read (``read``), the type typer parses (``annotation``) and its ``default``."""

    model: type[BaseModel]
    field: str
    flag: Flag
    read: str
    annotation: Any
    default: Any
    optional: bool  # the field takes None

    def parameter_info(self, command: str) -> Any:
        """The ``typer.Option`` (``typer.Argument``) that declares this option in ``command``."""
        f = self.flag
        extra: dict[str, Any] = {"help": f.help_for(command)}
        if not f.show_default:
            extra["show_default"] = False
        if f.metavar:
            extra["metavar"] = f.metavar
        if f.envvar:
            extra["envvar"], extra["show_envvar"] = list(f.envvar), False
        if f.positional:
            return typer.Argument(self.default, **extra)
        if self.read in (INT_LIST, FLOAT_LIST):
            extra["metavar"] = LIST_METAVAR
        names = [f.name, *f.aliases] + ([f.short] if f.short else [])
        return typer.Option(self.default, *names, **extra)

    def value(self, typed: Any) -> Any:
        """The field's value for what was typed (``UserError`` naming the flag when it does not read)."""
        name = self.flag.name
        if self.read == NEGATE:
            return not typed
        if self.read in (INT_LIST, FLOAT_LIST):
            items = split_list(typed, int if self.read == INT_LIST else float, name, domain=self.flag.domain or POSITIVE)
            return None if self.optional and not items else items
        if self.read == TEXTS:
            return list(typed or [])
        if self.read == HEADERS:
            return parse_headers(typed)
        if self.read == JSON:
            return parse_json_object(typed, name)
        return typed


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    """(the type, whether None is allowed) of ``X | None`` / ``Optional[X]`` / ``X``."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return (args[0] if len(args) == 1 else annotation), len(args) < len(get_args(annotation))
    return annotation, False


def _read_and_type(annotation: Any, flag: Flag) -> tuple[str, Any]:
    """How a field of type ``annotation`` is typed: (how its value is read, the type typer parses)."""
    base, _ = _unwrap_optional(annotation)
    origin, args = get_origin(base), get_args(base)
    if flag.text:
        return AS_TYPED, Optional[str]
    if base is bool:
        return (NEGATE if flag.negated else AS_TYPED), bool
    if origin is list:
        item = args[0] if args else str
        if item in (int, float):
            return (INT_LIST if item is int else FLOAT_LIST), Optional[str]
        return TEXTS, Optional[List[item]]  # type: ignore[valid-type]
    if origin is dict:
        return (HEADERS, Optional[List[str]]) if args == (str, str) else (JSON, Optional[str])
    if base is SecretStr or origin is Literal:
        base = str
    return AS_TYPED, base


def _option(model: type[BaseModel], name: str, flag: Flag, command: str) -> Option:
    info = model.model_fields[name]
    read, typed = _read_and_type(info.annotation, flag)
    _, optional = _unwrap_optional(info.annotation)
    if command in flag.default_in:
        default = flag.default_in[command]
    elif read == NEGATE:
        default = False
    elif info.default_factory is not None or flag.text:
        default = None
    elif info.is_required():
        default = ...  # a required option (``plan tco --it-kw``) or argument
    else:
        default = info.default
    if default is None and typed in (int, float, str):
        typed = Optional[typed]
    return Option(model, name, flag, read, typed, default, optional)


def options(command: str, *models: type[BaseModel], every_field: bool = False) -> list[Option]:
    """The options of ``command``: every field of ``models`` whose flag names it (``every_field``:
    every field that is an option, for a one-command model), in field order (an option with
    ``beside`` listed after that field's)."""
    out = [_option(m, name, f, command) for m in models for name, f in flags(m) if every_field or f.takes(command)]
    for o in [o for o in out if o.flag.beside]:
        at = next((i for i, p in enumerate(out) if p.field == o.flag.beside), None)
        if at is not None:
            out.remove(o)
            out.insert(at + 1, o)
    names = [o.field for o in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"{command}: two options set a field named {sorted(dup)}; rename one")
    return out


def given_from(opts: list[Option], typed: dict[str, Any], models: tuple[type[BaseModel], ...]) -> Given:
    """What was typed (keyword -> value, as typer passes it) as field values, one dict per model."""
    given: Given = {m: {} for m in models}
    for o in opts:
        given[o.model][o.field] = o.value(typed[o.field])
    return given


def options_from(command: str, *models: type[BaseModel]) -> Callable[[Callable[[Given], None]], Callable[..., None]]:
    """Decorate ``body(given: Given)`` into a typer command function taking ``command``'s options
    generated from ``models`` (see the module docstring)."""
    return options_in(command, options(command, *models), models)


def borrowed(own: list[Option], from_command: str, *models: type[BaseModel],
             leave_out: tuple[str, ...] = ()) -> list[Option]:
    """``own`` followed by the options of ``from_command`` on ``models`` that another command takes
    too (``ab`` takes ``run``'s): every one but the fields in ``leave_out`` and any flag ``own``
    already declares (the command's own wording wins)."""
    names = {o.flag.name for o in own}
    return own + [o for o in options(from_command, *models) if o.field not in leave_out and o.flag.name not in names]


def options_in(command: str, opts: list[Option], models: tuple[type[BaseModel], ...]
               ) -> Callable[[Callable[[Given], None]], Callable[..., None]]:
    """Decorate ``body(given: Given)`` into a typer command function taking the options ``opts``
    (of ``models``), each worded as ``command`` words it."""

    def decorate(body: Callable[[Given], None]) -> Callable[..., None]:
        def command_fn(**typed: Any) -> None:
            return body(given_from(opts, typed, models))

        params = [inspect.Parameter(o.field, inspect.Parameter.KEYWORD_ONLY, default=o.parameter_info(command),
                                    annotation=o.annotation) for o in opts]
        command_fn.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command_fn.__annotations__ = {o.field: o.annotation for o in opts}
        command_fn.__name__ = body.__name__
        command_fn.__doc__ = body.__doc__
        return command_fn

    return decorate


M = TypeVar("M", bound=BaseModel)


def command_options(command: str, model: type[M]) -> Callable[[Callable[[M], None]], Callable[..., None]]:
    """Decorate ``body(options: model)`` into a typer command function taking the options of
    ``model``, a one-command options model (``config.plan.PlanTcoOptions``): its fields, in field order,
    worded as ``command`` words them; the body receives the model made from what was typed (its
    fields' domains checked once more, as every ``FlaggedConfig``'s are)."""
    opts = options(command, model, every_field=True)

    def decorate(body: Callable[[M], None]) -> Callable[..., None]:
        def given_body(given: Given) -> None:
            body(model(**given[model]))

        given_body.__name__ = body.__name__
        given_body.__doc__ = body.__doc__
        return options_in(command, opts, (model,))(given_body)

    return decorate


def version_option(callback: Callable[[bool], None]) -> Any:
    """``wattbench --version``: the root command's one option, eager (``callback`` prints the
    version and exits while the options are parsed, before a command is asked for)."""
    return typer.Option(False, "--version", help="Print the version and exit.", is_eager=True, callback=callback,
                        expose_value=True)
