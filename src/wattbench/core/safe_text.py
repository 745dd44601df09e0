"""Untrusted text made safe for a terminal: the one home of that rule.

Text wattbench did not write itself reaches the terminal from servers (a model id, an error body,
generated text, ``/metrics`` labels), from files (a crafted ``result.json``: run id, model, tags,
notes) and from child processes (``measure``'s command output). Such text may hold terminal
control sequences — OSC (set the window title, hyperlinks, clipboard writes), CSI (clear the
screen, move the cursor, recolour), a carriage return or backspaces that overwrite what was
printed, C1 controls (``\\x9b`` is CSI on some terminals), bidi overrides that reorder a line —
and rich markup (``[/x]`` raises a ``MarkupError`` and ends the command; ``[red]`` recolours).

- ``term(text, limit)``: the registered secrets scrubbed (``core/secret_scope.clip``: scrubbed,
  then cut), every control character (C0 but tab and, with ``newlines``, line feed;
  DEL; C1; bidi overrides and isolates; line/paragraph separators) shown as ``\\xNN``/``\\uNNNN``
  (visible, so a reader sees that something was there), the result cut to ``limit`` characters
  with ``…``. For a field printed plainly (``typer.echo``, a ``Text``, ``markup=False``).
- ``markup(text, limit)``: ``term`` and rich's markup escape, for text placed inside a rich markup
  string.
- ``stream(text)``: what the CLI's stdout/stderr guard (``core/secret_scope.guard_std_streams``,
  installed by ``cli.main`` around every command) applies to everything written, as a second line
  of defence behind the printers: control characters and sequences a printer never emits are
  removed — all of them when the stream is not a terminal (rich then writes no escapes), and on a
  terminal everything but the SGR colours and cursor moves rich itself writes (OSC, DCS, APC, PM,
  C1 controls, BEL, BS, other CSI such as ``ESC[2J``, bidi overrides).
"""

from __future__ import annotations

import re
from typing import Callable

__all__ = ["term", "markup", "stream", "use_cut", "FIELD_CHARS", "LINE_CHARS"]

FIELD_CHARS = 200  # a name, id or label shown in a table or a line


def _plain_cut(text: str, limit: int) -> str:
    return text[:limit]


# how ``term`` cuts: ``core/secret_scope.py`` installs its ``clip`` (the registered secrets scrubbed, then
# cut) when it is imported — which registering a secret does; until then no secret is registered
_cut: Callable[[str, int], str] = _plain_cut


def use_cut(cut: Callable[[str, int], str]) -> None:
    """Cut untrusted text with ``cut(text, limit)`` from now on (``core/secret_scope.py``'s ``clip``)."""
    global _cut
    _cut = cut

LINE_CHARS = 2000  # a message (an error line, a note)

# C0 but tab/newline, DEL, C1, bidi embeddings/overrides/isolates, line and paragraph separators,
# zero-width no-break space (BOM) — each shown escaped
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]")
_UNSAFE_NL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]")


def _shown(m: re.Match[str]) -> str:
    o = ord(m.group(0))
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def term(text: object, limit: int | None = FIELD_CHARS, *, newlines: bool = False) -> str:
    """``text`` (any object, ``str()`` of it) with every control character shown escaped, cut to
    ``limit`` characters (``None``: no cut); ``newlines`` keeps line feeds (a multi-line message)."""
    s = "" if text is None else str(text)
    # the registered secrets out first, then cut (no piece of one left at the cut); bounded before
    # escaping (a 5 MB run id costs nothing)
    s = _cut(s, len(s) if limit is None else 4 * limit)
    s = (_UNSAFE if newlines else _UNSAFE_NL).sub(_shown, s)
    if limit is not None and len(s) > limit:
        s = s[:max(0, limit - 1)] + "…"
    return s


def markup(text: object, limit: int | None = FIELD_CHARS, *, newlines: bool = False) -> str:
    """``term`` with rich markup escaped: for untrusted text inside a rich markup string."""
    from rich.markup import escape  # lazy: rich, which the bottom package and `wattbench --help` do without

    return escape(term(text, limit, newlines=newlines))


# what rich writes itself on a terminal: SGR (colours, ``ESC[…m``), cursor moves and erases of
# Live and progress bars (``ESC[nA/B/C/D/G/K``, ``ESC[2K``, ``ESC[?25l/h``, ``ESC[?2004…``)
_RICH_CSI = re.compile(r"\x1b\[[0-9;]*[mABCDGK]|\x1b\[\?(?:25|2004|1049)[hl]")
_ESC_SEQ = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[P_^X][^\x1b]*(?:\x1b\\)?|\x1b\[[0-?]*[ -/]*[@-~]?"
                      r"|\x9b[0-?]*[ -/]*[@-~]?|\x1b[ -~]?|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\x80-\x9f"
                      "\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_ANY_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def stream(text: str, tty: bool) -> str:
    """``text`` as the CLI's guard writes it: sequences and controls no printer of wattbench emits
    removed (on a terminal the SGR colours and cursor moves rich writes are kept)."""
    if not text or not _ANY_CONTROL.search(text):
        return text
    if not tty:
        return _ESC_SEQ.sub("", text.replace("\r", ""))

    def one(m: re.Match[str]) -> str:
        s = m.group(0)
        return s if _RICH_CSI.fullmatch(s) else ""

    return re.sub(_RICH_CSI.pattern + "|" + _ESC_SEQ.pattern, one, text)
