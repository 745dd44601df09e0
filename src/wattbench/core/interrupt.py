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
"""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any, Callable

__all__ = ["on_sigterm", "install_sigterm"]


def on_sigterm(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001 - a signal handler's signature
    if callable(signal.getsignal(signal.SIGINT)):
        signal.raise_signal(signal.SIGINT)
    else:
        raise KeyboardInterrupt


def install_sigterm() -> Callable[[int, FrameType | None], Any] | int | signal.Handlers | None:
    """Make SIGTERM behave as Ctrl-C (main thread only); returns the previous handler."""
    return signal.signal(signal.SIGTERM, on_sigterm)
