"""SIGTERM stops a command as Ctrl-C does: one rule for ``run`` and ``tune``.

``on_sigterm`` re-delivers SIGTERM as SIGINT, so whichever SIGINT handler is current decides:
inside a load level that is the level's own (it cancels the requests in flight and keeps the
completed ones); elsewhere Python's, which raises ``KeyboardInterrupt`` and lets every ``finally``
and context manager (the engine's stop by PID, the GPU settings' restore) run. Raising
``KeyboardInterrupt`` directly instead would surface inside an event-loop callback during a level,
where the loop swallows it.

Where SIGINT is ignored or at its default action — a process started in the background of a
non-interactive shell (``wattbench run &`` in a script, ``nohup``) inherits SIGINT ignored, and
Python then installs no handler — re-delivering it would drop the SIGTERM (or kill the process
with no clean-up), so ``KeyboardInterrupt`` is raised here instead.

A handler is process-wide: whatever installs one for a command or a context puts the previous one
back when that ends, on every path (``handler_during``, ``sigterm_as_ctrl_c``, ``interrupts_deferred``;
``restore_handler`` where a handler's life is not one block), so a caller that goes on (a test
runner, a program calling the library) keeps its own.

A Python handler runs between any two statements of the main thread, so a ``KeyboardInterrupt`` can
land after a child was started and before its handle is where the clean-up finds it (``Popen``
returned, the ``try`` whose ``except`` stops the child not yet entered): the child then outlives the
stop. ``interrupts_deferred`` holds Ctrl-C and SIGTERM for such a block and delivers them as it ends.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, Callable, Union

__all__ = ["on_sigterm", "restore_handler", "handler_during", "sigterm_as_ctrl_c", "interrupts_deferred",
           "Handler"]

# what signal.signal returns and signal.getsignal gives: None where the handler was not set from Python
Handler = Union[Callable[[int, Union[FrameType, None]], Any], int, signal.Handlers, None]


def on_sigterm(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 - a signal handler's signature
    if callable(signal.getsignal(signal.SIGINT)):
        signal.raise_signal(signal.SIGINT)
    else:
        raise KeyboardInterrupt


def restore_handler(signum: int, previous: Handler) -> None:
    """Put back ``previous`` (what ``signal.signal`` returned) for ``signum``: one not set from
    Python (``None``) cannot be set again, so the default action stands in for it."""
    signal.signal(signum, signal.SIG_DFL if previous is None else previous)


@contextlib.contextmanager
def handler_during(signum: int, handler: Handler) -> Iterator[None]:
    """``handler`` answers ``signum`` inside the block; the previous handler is back after it,
    however it ends. Outside the main thread (where Python allows no handler) the handlers stay as
    they are. Also a decorator: ``@handler_during(...)`` covers each call."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        restore_handler(signum, previous)


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """SIGTERM behaves as Ctrl-C inside the block (``handler_during`` with ``on_sigterm``). Also a
    decorator: ``@sigterm_as_ctrl_c()`` covers each call of a command."""
    with handler_during(signal.SIGTERM, on_sigterm):
        yield


DEFERRED = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait for the end of the block: one that comes inside it is noted, the
    previous handlers are put back, and it is delivered again to them as the block ends normally
    (where the block raises, the handlers are put back and its exception goes on). Only a signal
    answered by a Python handler is held: an ignored one stays ignored, one at its default action
    keeps it. Outside the main thread (where Python allows no handler) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 - a signal handler's signature
        if signum not in pending:
            pending.append(signum)

    previous: dict[int, Handler] = {}
    try:
        for sig in DEFERRED:
            if callable(signal.getsignal(sig)):
                previous[sig] = signal.signal(sig, note)
        yield
    finally:
        for held, handler in previous.items():
            restore_handler(held, handler)
    for signum in pending:
        signal.raise_signal(signum)  # answered now by the handler just put back
