"""``WordEnum``: an enumeration whose members are their words — ``str`` subclasses that compare,
hash, print and format as the word (``Severity.WARN == "warn"``, ``f"{Severity.WARN}"`` is
``"warn"``), written as the word in JSON and SQLite.

It is what the standard library's string enumeration gives from Python 3.11, written here once so
the package runs on the Python ``pyproject.toml`` promises (3.10): a plain ``(str, Enum)`` mixin
prints ``Severity.WARN`` from ``str()`` and, from 3.12, from ``format()`` too; this class prints the
word on every version.
"""

from __future__ import annotations

from enum import Enum


class WordEnum(str, Enum):
    """A ``str`` enumeration that reads as its value everywhere (``str``, ``format``, f-strings)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)
