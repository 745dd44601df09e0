"""The secrets of what runs now: registered for the lifetime of what registered them, and scrubbed
from everything written or printed meanwhile, from any thread.

- ``scope(*secrets)``: a context manager that registers secrets while its block runs (a run, a
  command), for every writer and printer below, in every thread; nested scopes, ``hold=True`` for
  the CLI's command (``register_secrets`` adds to the newest open scope, ``registered()`` is the
  scrubber of every open scope's secrets);
- ``clip(text, limit)``: the one way untrusted text is cut (an identity setting, a model id, an error
  body, a finding printed): scrubbed of the registered secrets first, then cut, so a secret that
  straddles the cut leaves no piece behind;
- ``on_scope_end(end)``: ``end`` called when the newest open scope ends (what runs now holds
  besides secrets and lets go of with them: a target's query string, ``core.origin.send_query``);
- ``scrub(text)``: ``text`` without any registered secret;
- ``guard_std_streams()``: ``sys.stdout`` and ``sys.stderr`` scrubbed of the registered secrets (and
  made safe for a terminal, ``core/safe_text.stream``) while the CLI's command runs.

Scrubbing happens at three boundaries, with the same ``Scrubber``: where untrusted text is cut
(``clip``), where a request's record is made (the streaming client scrubs its error detail and kept text with the target's secrets: records are
spooled to disk during a level), and where anything is written or printed: a run registers its
secrets for its lifetime (``scope``), the run directory's writers (``results/rundir.py``: result.json,
requests.jsonl, every JSON file), the server timeline, the history store and the CLI's stdout and
stderr (``guard_std_streams``, installed by ``cli.main``) pass what they write through ``scrub``.

Importing this module makes ``core/safe_text.term`` cut by ``clip`` (scrubbed first): registering a
secret imports it, so no secret is registered while ``term`` still cuts plainly.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, BinaryIO, Callable, Iterable, Iterator, TextIO, TypeVar, overload

from wattbench.core import safe_text as _safe_text
from wattbench.core.redact import MIN_SECRET
from wattbench.core.safe_text import stream as terminal_safe
from wattbench.core.scrubber import Scrubber

_T = TypeVar("_T")

__all__ = ["scope", "on_scope_end", "register_secrets", "registered", "scrub", "clip", "guard_std_streams"]

# Secrets are registered by scopes: ``with scope(*secrets):`` (a run's key, URL credentials, secret
# headers) masks them in everything written or printed while the block runs — from any thread: the
# sampler's, the scraper's, the feeder's — and no longer once it ends. Scopes nest and may end in any
# order: a secret stays registered while any open scope holds it. ``register_secrets`` adds to the
# newest open scope what it meets while running (a target's query values: ``core.origin.send_query``).
# A scope opened with ``hold=True`` (the CLI's whole command, ``cli.main``) keeps the secrets of the
# scopes that end inside it until it ends itself: the summary a command prints after its run is
# scrubbed of the run's secrets.

_REGISTERED = Scrubber()  # the secrets of every open scope (one object: writers may keep a reference)
_LOCK = threading.Lock()  # scopes open and close from any thread
_COUNTS: dict[str, int] = {}  # secret -> how many open scopes hold it
_OWNED: set[str] = set()  # the secrets the scopes added to _REGISTERED (the only ones they discard)


class _Scope:
    __slots__ = ("secrets", "hold", "ends")

    def __init__(self, secrets: list[str], hold: bool):
        self.secrets = secrets
        self.hold = hold
        self.ends: list[Callable[[], None]] = []  # called when the scope ends (``on_scope_end``)


_OPEN: list[_Scope] = []  # the open scopes, oldest first


def _take(secrets: list[str]) -> None:
    """Count ``secrets`` as held once more; those held by no scope before are added (under _LOCK)."""
    fresh: list[str] = []
    for s in secrets:
        _COUNTS[s] = _COUNTS.get(s, 0) + 1
        if _COUNTS[s] == 1 and s not in _REGISTERED.secrets:
            fresh.append(s)
            _OWNED.add(s)
    if fresh:
        _REGISTERED.add(*fresh)


def _release(secrets: list[str]) -> None:
    """Count ``secrets`` as held once less; those no scope holds any more are discarded (under _LOCK)."""
    gone: list[str] = []
    for s in secrets:
        n = _COUNTS.get(s, 0) - 1
        if n > 0:
            _COUNTS[s] = n
            continue
        _COUNTS.pop(s, None)
        if s in _OWNED:
            _OWNED.discard(s)
            gone.append(s)
    if gone:
        _REGISTERED.discard(*gone)


@contextlib.contextmanager
def scope(*secrets: str | None, hold: bool = False) -> Iterator[Scrubber]:
    """Register ``secrets`` while the block runs (see above); yields the scrubber of every open
    scope's secrets (``registered()``). ``hold``: the secrets of scopes that end inside this one stay
    registered until this one ends."""
    own = _Scope([s for s in dict.fromkeys(secrets) if s and len(s) >= MIN_SECRET], hold)
    with _LOCK:
        _OPEN.append(own)
        _take(own.secrets)
    try:
        yield _REGISTERED
    finally:
        with _LOCK:
            _OPEN[:] = [o for o in _OPEN if o is not own]
            holder = next((o for o in reversed(_OPEN) if o.hold), None)
            if holder is not None:  # kept by the scope that holds what ends inside it (counted once)
                kept = set(holder.secrets)
                holder.secrets += [s for s in own.secrets if s not in kept]
                _release([s for s in own.secrets if s in kept])
            else:
                _release(own.secrets)
        for end in own.ends:  # what the scope held besides secrets (outside the lock: each takes its own)
            end()


def on_scope_end(end: Callable[[], None]) -> bool:
    """Call ``end`` when the newest open scope ends (what runs now holds besides secrets, and must
    let go of with them: a target's query string, ``core.origin.send_query``); a holding scope keeps
    only secrets, so ``end`` runs when the scope it was given to ends. False, and ``end`` is never
    called, outside every scope."""
    with _LOCK:
        if not _OPEN:
            return False
        _OPEN[-1].ends.append(end)
    return True


def register_secrets(*secrets: str | None) -> None:
    """Add ``secrets`` to the newest open scope (what runs now met them: a target URL's query
    values): registered until that scope ends. Outside every scope nothing is registered: each
    command scopes what it runs (``cli.main``'s holding scope; a run, measure, doctor, monitor and
    agree each open one with their target's secrets)."""
    fresh = [s for s in dict.fromkeys(secrets) if s and len(s) >= MIN_SECRET]
    with _LOCK:
        if not _OPEN:
            return
        newest = _OPEN[-1]
        fresh = [s for s in fresh if s not in newest.secrets]
        newest.secrets += fresh
        _take(fresh)


def registered() -> Scrubber:
    """The scrubber of the secrets every open scope holds (the same object while the process runs:
    a writer may keep it, and it scrubs what is registered when it writes)."""
    return _REGISTERED


@overload
def scrub(text: str) -> str: ...


@overload
def scrub(text: _T) -> _T: ...


def scrub(text: object) -> object:
    """``text`` without any registered secret (non-strings unchanged)."""
    return _REGISTERED.text(text)


@overload
def clip(text: str, limit: int, ellipsis: str = "") -> str: ...


@overload
def clip(text: _T, limit: int, ellipsis: str = "") -> _T: ...


def clip(text: object, limit: int, ellipsis: str = "") -> object:
    """Untrusted ``text`` cut to ``limit`` characters (the last one ``ellipsis`` when given and
    something was cut), scrubbed of every registered secret first (``Scrubber.cut``): the one way
    text a server, a file or a child wrote is cut (non-strings unchanged)."""
    return _REGISTERED.cut(text, limit, ellipsis)


_safe_text.use_cut(clip)  # safe_text.term cuts by this rule too (scrubbed first)


class _ScrubbingStream:
    """A text stream whose ``write`` removes ``scrubber``'s secrets; everything else is the
    wrapped stream's (``isatty``, ``fileno``, ``encoding`` …). Its ``buffer`` scrubs bytes too."""

    def __init__(self, raw: TextIO, scrubber: Scrubber):
        self._raw = raw
        self._scrubber = scrubber
        try:
            self._tty = bool(raw.isatty())
        except (AttributeError, ValueError, OSError):
            self._tty = False

    def write(self, s: str) -> int:
        if isinstance(s, str):
            if self._scrubber:
                s = self._scrubber.text(s)
            s = terminal_safe(s, self._tty)  # no control sequence a printer never writes (core/safe_text.py)
        return self._raw.write(s)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    @property
    def buffer(self) -> _ScrubbingBuffer | None:
        raw = getattr(self._raw, "buffer", None)
        return _ScrubbingBuffer(raw, self._scrubber, self._tty) if raw is not None else None

    def __getattr__(self, name: str) -> Any:  # the wrapped stream's
        return getattr(self._raw, name)


class _ScrubbingBuffer:
    def __init__(self, raw: BinaryIO, scrubber: Scrubber, tty: bool = False):
        self._raw = raw
        self._scrubber = scrubber
        self._tty = tty

    def write(self, b: bytes) -> int:
        b = self._scrubber.bytes(b) if self._scrubber else b
        text = bytes(b).decode("utf-8", "surrogateescape")
        safe = terminal_safe(text, self._tty)
        return self._raw.write(b if safe is text else safe.encode("utf-8", "surrogateescape"))

    def __getattr__(self, name: str) -> Any:  # the wrapped stream's
        return getattr(self._raw, name)


@contextlib.contextmanager
def guard_std_streams(scrubber: Scrubber | None = None) -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` scrub ``scrubber``'s secrets (None: the registered ones,
    those of every open ``scope``) while the block runs (the CLI's whole command: tables,
    ``--json``, error lines, even a traceback). A secret registered while the block runs is
    scrubbed from then on, and until its scope ends."""
    scrubber = _REGISTERED if scrubber is None else scrubber
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, _ScrubbingStream) and sys.stdout is not None:
        sys.stdout = _ScrubbingStream(sys.stdout, scrubber)
    if not isinstance(sys.stderr, _ScrubbingStream) and sys.stderr is not None:
        sys.stderr = _ScrubbingStream(sys.stderr, scrubber)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
