"""``core/safe_text.py``: untrusted text made safe for a terminal — control characters shown
escaped, lengths capped, rich markup escaped — and the stream filter the CLI's stdout/stderr guard
applies to everything written (a second line of defence behind the printers)."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console
from rich.text import Text

from wattbench.core.safe_text import markup, stream, term
from wattbench.core import scrubber, secret_scope

HOSTILE = ("\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x1b[0m\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\\r\x08\x9b1m"
           "\u202eevil\u2028[/x][bold]b[/bold]")
RAW_CONTROLS = ("\x1b", "\x07", "\x08", "\r", "\x9b", "\u202e", "\u2028")


def test_term_escapes_every_control_and_caps():
    s = term(HOSTILE, None)
    assert not any(c in s for c in RAW_CONTROLS), s
    assert "\\x1b]0;pwned\\x07" in s and "\\u202e" in s  # visible: a reader sees something was there
    assert "[/x]" in s  # markup untouched by term (printed as Text or markup=False)
    assert term("x" * 10_000_000, 200) == "x" * 199 + "…"  # a 10 MB id costs a bounded amount
    assert term("a\nb") == "a\\x0ab" and term("a\nb", newlines=True) == "a\nb"
    assert term(None) == "" and term(3.5) == "3.5"


def test_markup_is_shown_as_typed_and_never_raises():
    c = Console(file=io.StringIO(), width=200, color_system=None)
    c.print(f"model {markup('[/x] [bold]m[/bold]')}")  # unescaped, "[/x]" raises rich's MarkupError
    assert c.file.getvalue().strip() == "model [/x] [bold]m[/bold]"


def test_stream_filter_off_a_terminal_removes_every_sequence():
    out = stream("ok " + HOSTILE + "\n", tty=False)
    assert not any(c in out for c in RAW_CONTROLS[:5]) and out.startswith("ok ") and out.endswith("\n")
    assert "pwned" not in out and "http://evil/" not in out  # OSC payloads go with their sequence
    assert stream("plain\ttext\n", tty=False) == "plain\ttext\n"


def test_stream_filter_on_a_terminal_keeps_what_rich_writes_only():
    buf = io.StringIO()
    c = Console(file=buf, force_terminal=True, color_system="truecolor", width=80)
    c.print(Text("valid", style="bold green"), Text(" 12.5 tok/s", style="cyan"))
    rich_out = buf.getvalue()
    assert "\x1b[" in rich_out and stream(rich_out, tty=True) == rich_out  # colours kept
    live = "\x1b[?25l\r\x1b[2K\x1b[1A\x1b[2Kline\x1b[?25h"
    assert stream(live, tty=True) == live  # rich Live's cursor moves kept
    out = stream(HOSTILE, tty=True)
    assert "\x1b]" not in out and "\x07" not in out and "\x1b[2J" not in out and "\x9b" not in out


def test_the_cli_stream_guard_applies_the_filter(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with secret_scope.guard_std_streams(scrubber.Scrubber()):
        print("model " + HOSTILE)
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue() and out.getvalue().startswith("model ")


@pytest.mark.parametrize("text", ["\x1b[2J", "\x9b2J", "\x1bP1$r\x1b\\", "\x1b_apc\x1b\\", "\x1bc", "\x07"])
def test_each_sequence_kind_is_removed_off_a_terminal(text):
    assert stream(f"a{text}b", tty=False) == "ab"
