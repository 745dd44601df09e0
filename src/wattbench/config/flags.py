"""An option, declared on the configuration field it sets: ``Flag`` (the metadata of the field's
``Annotated`` type: the option's name, short alias, help, the commands that take it, the numbers it
takes), ``flags``/``flag_of`` (read a model's options), the numbers an option takes (``Domain`` and
the common ones: ``POSITIVE``, ``SECONDS`` …), the command names a ``Flag`` lists (``RUN``,
``MEASURE``, ``TUNE``, ``AB``; ``EVERY`` for a one-command model) and ``FlaggedConfig``, the base of
every configuration model, which checks its numbers against its flags' domains as the command line
does."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from wattbench.core.errors import UserError


# ------------------------------------------------------------------ what each numeric option takes
#
# A numeric option's range is a ``Domain``: declared on the field's ``Flag`` for the options of
# ``run``, ``measure`` and ``tune``, and for the other commands' one-command models alike
# configuration model. The CLI checks each value against it while the command line is parsed
# (``cli.common.number_gate``, before anything starts). A flag means one thing in every command, so
# ``FLAG_DOMAINS`` (``config/tables.py``) is keyed by flag; a flag that takes other numbers in one command has a
# ``(command, flag)`` entry in ``COMMAND_FLAG_DOMAINS``. A flag not listed takes positive numbers
# only: a new option is checked from the day it is declared.

MAX_SECONDS = 366 * 24 * 3600.0  # the longest duration, interval or timeout any option takes (a year)
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class Domain:
    """The numbers an option takes: from ``lo`` to ``hi`` (``None``: no bound; ``*_open``: the end
    itself excluded); ``inf_ok``: ``inf`` too (``--rate inf``); ``unit`` names what the number is."""

    lo: float | None = 0.0
    lo_open: bool = True
    hi: float | None = None
    hi_open: bool = False
    inf_ok: bool = False
    unit: str = ""

    def describe(self) -> str:
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {_num(self.lo)}")
        if self.hi is not None:
            parts.append(f"{'<' if self.hi_open else '<='} {_num(self.hi)}")
        return " and ".join(parts) + (f" {self.unit}" if self.unit else "")

    def problem(self, flag: str, v: float | int) -> str | None:
        """One line naming ``flag`` when ``v`` is outside the domain, else None."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        if math.isnan(v) or (math.isinf(v) and not (self.inf_ok and v > 0)):
            return f"{flag} must be a finite number {self.describe()}, got {v} (1e400 and larger read as inf)"
        below = self.lo is not None and (v <= self.lo if self.lo_open else v < self.lo)
        above = self.hi is not None and not math.isinf(v) and (v >= self.hi if self.hi_open else v > self.hi)
        if below or above:
            return f"{flag} must be {self.describe()}, got {_num(v)}"
        return None

    def check(self, flag: str, v: float | int) -> None:
        msg = self.problem(flag, v)
        if msg:
            raise UserError(msg)


def _num(x: float | int) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


POSITIVE = Domain()
NON_NEGATIVE = Domain(lo_open=False)
AT_LEAST_ONE = Domain(lo=1, lo_open=False)
SECONDS = Domain(hi=MAX_SECONDS, unit="seconds")
SECONDS_OR_ZERO = Domain(lo_open=False, hi=MAX_SECONDS, unit="seconds")
PERCENT = Domain(lo_open=False, hi=100.0, hi_open=True, unit="%")
INDEX = Domain(lo_open=False)
SEED = Domain(lo_open=False, hi=MAX_SEED)


# ------------------------------------------------------------------ an option, declared on its field

RUN, MEASURE, TUNE, AB = "run", "measure", "tune", "ab"
# ``Flag.commands`` of a field of a one-command options model (``plan tco``'s, ``history list``'s):
# the command is the one whose options the model is (``cli.options.command_options``); a field
# shared by such models (``--db``, ``--json``) is one ``Annotated`` type declared once.
EVERY: tuple[str, ...] = ("*",)


@dataclass(frozen=True)
class Flag:
    """How a configuration field is given on the command line (the metadata of its ``Annotated``
    type). ``name``: the option (``--idle``; an on/off pair ``--register/--no-register``);
    ``short``: its one-letter alias; ``help``: what it does, ``help_in``: other words in a command
    where it means something narrower (``--idle``: before the first level in ``run``, before the
    command in ``measure``); ``commands``: the commands that take it (none: the field is named by
    ``name`` in messages but set through another field's option, as ``warmup_requests`` through
    ``--warmup``); ``domain``: the numbers it takes (None: positive numbers); ``default_in``: a
    command's own default (the field's default otherwise); ``negated``: the option turns the field
    off (``--no-prime`` sets ``prime=False``); ``text``: the command line gives text the command
    parses itself (``--warmup 10s`` or ``20``); ``empty_means``: what an empty value typed means,
    where it means something (else an empty value is refused); ``show_default``: whether the help
    shows the default; ``beside``: for an option that sets no configuration field, the field it is
    listed after; ``positional``: an argument, not an option; ``aliases``: other long names it
    answers to (``--timeout`` for ``--request-timeout``); ``envvar``: the environment variables
    read when it is not given (not shown in the help); ``metavar``: the word its value is shown as.

    How a value is read follows the field's type: a list of numbers is a comma list (``-c 1,8,64``),
    a list of text a repeated option, ``dict[str, str]`` repeated ``K:V``, another dict a JSON object."""

    name: str
    short: str | None = None
    help: str | None = None
    commands: tuple[str, ...] = (RUN,)
    help_in: Mapping[str, str] = field(default_factory=dict)
    domain: Domain | None = None
    default_in: Mapping[str, Any] = field(default_factory=dict)
    negated: bool = False
    text: bool = False
    empty_means: str | None = None
    show_default: bool = True
    beside: str | None = None
    positional: bool = False
    envvar: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    metavar: str | None = None

    def takes(self, command: str) -> bool:
        """Whether ``command`` takes this option (``EVERY``: each command whose model declares it)."""
        return command in self.commands or self.commands == EVERY

    def help_for(self, command: str) -> str | None:
        return self.help_in.get(command, self.help)


def flag_of(model: type[BaseModel], name: str) -> Flag | None:
    """The ``Flag`` on ``model``'s field ``name``, or None when the field is not an option."""
    return next((m for m in model.model_fields[name].metadata if isinstance(m, Flag)), None)


def flags(model: type[BaseModel]) -> list[tuple[str, Flag]]:
    """(field name, Flag) for every field of ``model`` that is an option, in field order."""
    return [(name, f) for name in model.model_fields if (f := flag_of(model, name)) is not None]


class FlaggedConfig(BaseModel):
    """A configuration whose fields are options (``Flag``): every number in a field, or in a list
    field, is checked against its flag's domain, as the command line is (one message, naming the flag)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*")
    @classmethod
    def _in_domain(cls, v: Any, info: Any) -> Any:
        flag = flag_of(cls, info.field_name)
        if flag is None:
            return v
        domain = flag.domain or POSITIVE
        for x in v if isinstance(v, list) else [v]:
            msg = None if x is None else domain.problem(flag.name, x)
            if msg:
                raise ValueError(msg)
        return v
