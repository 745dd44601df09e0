"""Reading a command line's flags (an engine's argv, the engine arguments a run records, a load
generator's command line): the one parser, used where wattbench launches an engine (``engines/``),
where a result's recorded arguments are read (``core/schema/recorded_config.model_precision``) and
where ``wattbench measure`` reads the wrapped tool's options (``results/tools/registry.py``)."""

from __future__ import annotations

from collections.abc import Sequence


def flag_values(args: Sequence[str], *names: str) -> list[str]:
    """Every value given for any of ``names`` in an argv list (``--x v`` or ``--x=v``), in order."""
    out = []
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                out.append(args[i + 1])
            elif a.startswith(n + "="):
                out.append(a[len(n) + 1:])
    return out


def flag_value(args: Sequence[str], *names: str) -> str | None:
    """The last value given for any of ``names`` (``flag_values``), as the engine's own parser reads
    a flag given twice; None when none is."""
    values = flag_values(args, *names)
    return values[-1] if values else None


def has_flag(args: Sequence[str], *names: str) -> bool:
    """Whether any of ``names`` is given (``--x``, ``--x v`` or ``--x=v``)."""
    return any(a in names or any(a.startswith(n + "=") for n in names) for a in args)
