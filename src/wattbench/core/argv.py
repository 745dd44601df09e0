"""Reading a command line's flags (an engine's argv, the engine arguments a run records): the one
parser, used where wattbench launches an engine (``engines/``) and where a result's recorded
arguments are read (``core/schema/recorded_config.model_precision``)."""

from __future__ import annotations

from collections.abc import Sequence


def flag_value(args: Sequence[str], *names: str) -> str | None:
    """The last value given for any of ``names`` in an argv list (``--x v`` or ``--x=v``), as the
    engine's own parser reads a flag given twice; None when none is."""
    val = None
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                val = args[i + 1]
            elif a.startswith(n + "="):
                val = a.split("=", 1)[1]
    return val


def has_flag(args: Sequence[str], *names: str) -> bool:
    """Whether any of ``names`` is given (``--x``, ``--x v`` or ``--x=v``)."""
    return any(a in names or any(a.startswith(n + "=") for n in names) for a in args)
