"""Helpers for the tests that scan wattbench's own source with ``ast`` (reliability rules)."""

from __future__ import annotations

import ast


def call_name(func: ast.AST) -> str:
    """The dotted name of a call's function (``socket.socket.bind``); ``?`` for a part that is not a name."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return call_name(func.value) + "." + func.attr
    return "?"
