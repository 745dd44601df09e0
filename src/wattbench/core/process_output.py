"""What a process wattbench starts writes: scrubbed and made safe inside it, before it leaves it.

wattbench starts processes that work for a run: a spawned load worker (``--workers N``,
``load/worker.py``), a Ray load actor and a Ray sensor actor on any node (``distributed/actors.py``),
an engine it launches (``engines/base.py``). What such a process writes to its file descriptors 1
and 2 leaves it as written: a spawned worker's reaches the terminal of the run; a Ray actor's goes
to Ray's log files in the session directory (``logs/worker-*.out``, ``.err``), which Ray's log monitor
also forwards to the driver's terminal; a launched engine's goes to ``server.log`` in the run
directory. Python's printers (``print``, ``logging``, ``warnings``, a traceback, asyncio's "Task
exception was never retrieved", aiohttp's "Unclosed client session") and C code alike write there,
and any of them can hold a target's URL with its query string, a header, or a server's hostile text.

- ``OutputLines(scrub, tty)``: a byte stream cut into lines, each released whole (a secret written
  by two ``write`` calls is masked whole), scrubbed (``scrub``: every form of a secret and every
  8-character piece, ``core/scrubber.py``'s ``Scrubber``) and rid of the control sequences no printer
  of wattbench writes (``core/safe_text.stream``: all of them where the output is no terminal). A
  line longer than ``LINE_MAX_BYTES`` is kept to there — scrubbed, then cut — and marked cut; the
  rest of it is dropped, so what a process writes costs bounded memory here, whatever it is.
- ``contain_output(secrets)``: while the block runs, descriptors 1 and 2 of this process are pipes,
  each read by a thread that writes what ``OutputLines`` makes of it to where the descriptor pointed
  before; on exit what was written is through and the descriptors are back (``hold_output`` keeps
  them so for the process's life: a Ray actor's process is the actor's).
- ``ProcessSecrets``: what a process scrubs from its output: the secrets it was given, held for as
  long as the process holds them (a job's targets' key, secret headers and query values; the
  credential variables of its environment, ``redact.env_secrets``), and those registered now
  (``secret_scope.registered()``). A line read after the scope that registered a secret has ended is still
  scrubbed of it: the thread reads the pipe after the write, maybe after that scope.
- ``LinePump(stream, sink, scrub)``: the same for a child's output pipe that this process reads (a
  launched engine's stdout and stderr, into ``server.log``).
- ``safe_traceback(scrub)``: the exception being handled, as a text fit to leave the process (a
  worker's error message to its parent, a line of an actor's log): scrubbed whole, then its last
  ``TRACEBACK_CHARS`` kept (the end says what failed), every control character shown escaped.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import traceback
from typing import IO, Callable, Iterable, Iterator

from wattbench.core.redact import env_secrets
from wattbench.core.scrubber import Scrubber
from wattbench.core.secret_scope import registered
from wattbench.core.safe_text import stream as terminal_safe
from wattbench.core.safe_text import term

__all__ = ["LINE_MAX_BYTES", "TRACEBACK_CHARS", "OutputLines", "ProcessSecrets", "contain_output", "hold_output",
           "LinePump", "safe_traceback"]

# A line longer than this is kept to here (scrubbed, then cut) and marked cut; the rest is dropped.
LINE_MAX_BYTES = 64 << 10
_READ_BYTES = 64 << 10
CUT_MARK = " [wattbench: line cut at 64 KiB]\n"
# what stands for output that could not be made safe (a bug in the scrubber): dropped, never passed raw
DROPPED = b"[wattbench: output dropped: it could not be scrubbed]\n"
JOIN_S = 5.0  # how long a block's end waits for its output to be through
TRACEBACK_CHARS = 20_000  # of a traceback that leaves a process: its end, where it says what failed


def safe_traceback(scrub: Callable[[str], str]) -> str:
    """The exception being handled as text fit to leave this process (module doc)."""
    return term(scrub(traceback.format_exc())[-TRACEBACK_CHARS:], None, newlines=True)


class ProcessSecrets:
    """The secrets a process scrubs from what it writes (module doc): those ``add``ed, kept as long
    as this object lives, and those registered now (every open ``secret_scope.scope``)."""

    def __init__(self, secrets: Iterable[str | None] = (), *, environment: bool = True) -> None:
        given = list(secrets) + (env_secrets(dict(os.environ)) if environment else [])
        self._kept = Scrubber(given)
        self._lock = threading.Lock()

    def add(self, *secrets: str | None) -> None:
        with self._lock:
            self._kept.add(*secrets)

    def text(self, text: str) -> str:
        return registered().text(self._kept.text(text))


class OutputLines:
    """Bytes in, safe whole lines out (module doc); ``end()`` gives what is left of a last line
    written without a newline."""

    def __init__(self, scrub: Callable[[str], str], tty: bool = False, max_bytes: int = LINE_MAX_BYTES) -> None:
        self.scrub = scrub
        self.tty = tty
        self.max_bytes = max_bytes
        self._line = bytearray()
        self._cutting = False  # inside a line longer than max_bytes: its rest is dropped

    def _clean(self, data: bytes, cut: bool = False) -> bytes:
        text = self.scrub(data.decode("utf-8", "surrogateescape"))  # scrubbed first, then cut
        if cut:
            text = text[:self.max_bytes] + CUT_MARK
        return terminal_safe(text, self.tty).encode("utf-8", "surrogateescape")

    def feed(self, data: bytes) -> bytes:
        """The lines ``data`` completes, made safe; what could not be made safe is ``DROPPED``
        (never raw, and the pump that calls this never dies of it)."""
        try:
            return self._feed(data)
        except Exception:  # noqa: BLE001 - a reader that died would block the process's writes
            self._line.clear()
            return DROPPED

    def _feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        at = 0
        while at < len(data):
            nl = data.find(b"\n", at)
            end = len(data) if nl < 0 else nl + 1
            part = data[at:end]
            at = end
            if self._cutting:
                self._cutting = nl < 0  # the long line's end: what follows is a new line
                continue
            self._line += part
            if len(self._line) > self.max_bytes:
                out.append(self._clean(bytes(self._line), cut=True))  # all it holds scrubbed, then cut
                self._line.clear()
                self._cutting = nl < 0
            elif nl >= 0:
                out.append(self._clean(bytes(self._line)))
                self._line.clear()
        return b"".join(out)

    def end(self) -> bytes:
        if self._cutting or not self._line:
            return b""
        try:
            return self._clean(bytes(self._line))
        except Exception:  # noqa: BLE001 - as in feed
            return DROPPED
        finally:
            self._line.clear()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:  # the reader is gone (a closed terminal, a dead log monitor): dropped
            return
        view = view[n:]


class _FdPump:
    """Descriptor ``fd`` of this process made a pipe whose lines a thread writes, made safe, to
    where ``fd`` pointed before."""

    def __init__(self, fd: int, scrub: Callable[[str], str]) -> None:
        self.fd = fd
        self.out = os.dup(fd)
        try:
            tty = os.isatty(self.out)
        except OSError:
            tty = False
        self.lines = OutputLines(scrub, tty)
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        self.r = r
        self.thread = threading.Thread(target=self._run, name=f"wattbench-output-{fd}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                data = os.read(self.r, _READ_BYTES)
            except InterruptedError:
                continue
            except OSError:
                break
            if not data:
                break
            _write_all(self.out, self.lines.feed(data))
        _write_all(self.out, self.lines.end())
        os.close(self.r)

    def close(self) -> None:
        """``fd`` back where it pointed; the pipe's last writer gone, the thread writes what is left."""
        os.dup2(self.out, self.fd)
        self.thread.join(JOIN_S)
        if not self.thread.is_alive():  # else another process holds the pipe still: its thread keeps out
            os.close(self.out)


def _flush_std() -> None:
    for s in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if s is not None:
                s.flush()


@contextlib.contextmanager
def contain_output(secrets: ProcessSecrets) -> Iterator[None]:
    """Descriptors 1 and 2 of this process pass through ``OutputLines`` scrubbing ``secrets`` while
    the block runs (module doc); on exit what was written is through (``JOIN_S`` at most)."""
    _flush_std()
    pumps = [_FdPump(fd, secrets.text) for fd in (1, 2)]
    try:
        yield
    finally:
        _flush_std()
        for p in pumps:
            p.close()


_HELD: list[_FdPump] = []
_HELD_LOCK = threading.Lock()


def hold_output(secrets: ProcessSecrets) -> None:
    """``contain_output`` for the rest of this process's life (a Ray actor's process); once."""
    with _HELD_LOCK:
        if not _HELD:
            _flush_std()
            _HELD.extend(_FdPump(fd, secrets.text) for fd in (1, 2))


class LinePump:
    """A child's output pipe ``stream`` read on a thread into ``sink`` as ``OutputLines`` makes it
    (scrubbed by ``scrub``, no terminal); ``close`` waits for the pipe's end, then stops writing."""

    def __init__(self, stream: IO[bytes], sink: IO[bytes], scrub: Callable[[str], str], name: str) -> None:
        self.stream, self.sink = stream, sink
        self.lines = OutputLines(scrub, tty=False)
        self.lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _put(self, data: bytes) -> None:
        with self.lock:
            if data and not self.closed:
                with contextlib.suppress(OSError, ValueError):
                    self.sink.write(data)

    def _run(self) -> None:
        try:
            while True:
                data = self.stream.read1(_READ_BYTES) if hasattr(self.stream, "read1") else self.stream.read(_READ_BYTES)
                if not data:
                    break
                self._put(self.lines.feed(data))
        except (OSError, ValueError):  # the pipe closed under the reader
            pass
        self._put(self.lines.end())

    def close(self, wait_s: float = JOIN_S) -> None:
        self.thread.join(wait_s)
        with self.lock:
            self.closed = True
        with contextlib.suppress(OSError):
            self.stream.close()
