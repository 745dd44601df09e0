"""A workload that makes the process sending it print a secret every way a process can, then fail
with it: ground truth for "what a process wattbench starts writes is scrubbed inside it".

``LoudRequests(texts, at)`` is a request factory (picklable: it reaches a Ray load actor with its
job). Request ``at`` carries ``user_tags`` that are loud. Where that request is made or arrives —
the factory's call in a Ray load actor, the unpickling of the request in a spawned load worker —
``shout(texts)`` writes every text through each channel a process has: ``print`` (stdout),
``sys.stderr``, ``os.write`` on descriptors 1 and 2 (what C code does), a ``logging`` error with a
traceback, ``warnings.warn``, a thread that dies (``threading.excepthook``), an object whose
``__del__`` raises (``sys.unraisablehook``), and, on a running event loop, a callback that raises
(asyncio's "Exception in callback"). Each line starts with ``MARK`` and the channel's name, so a
test finds that the line arrived (masked) and where. When the load builds the request's record
(``list(spec.user_tags)``) the tags raise ``RuntimeError`` holding every text: the level fails with
it, in the process that sends.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import threading
import warnings
from typing import Any

from wattbench.workload.base import RequestSpec

MARK = "LOUD-CHANNEL"
CHANNELS = ("print", "stderr", "fd1", "fd2", "logging", "warning", "thread", "unraisable", "asyncio", "raise")


class _Dies:
    def __init__(self, text: str) -> None:
        self.text = text

    def __del__(self) -> None:
        raise RuntimeError(f"{MARK} unraisable {self.text}")


def shout(texts: list[str]) -> None:
    """Write ``texts`` through every channel (module doc); returns when each has been written."""
    line = " ".join(texts)
    print(f"{MARK} print {line}", flush=True)
    sys.stderr.write(f"{MARK} stderr {line}\n")
    sys.stderr.flush()
    os.write(1, f"{MARK} fd1 {line}\n".encode())
    os.write(2, f"{MARK} fd2 {line}\n".encode())
    try:
        raise ValueError(f"{MARK} logging {line}")
    except ValueError:
        logging.getLogger("tests.loud").exception(f"{MARK} logging {line}")
    with warnings.catch_warnings():  # shown whatever filter the process runs with
        warnings.simplefilter("always")
        warnings.warn(f"{MARK} warning {line}", RuntimeWarning, stacklevel=1)

    def dies() -> None:
        raise RuntimeError(f"{MARK} thread {line}")

    t = threading.Thread(target=dies)
    t.start()
    t.join()
    _Dies(line)  # dropped at once: its __del__ raises
    gc.collect()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        def cb() -> None:
            raise RuntimeError(f"{MARK} asyncio {line}")

        loop.call_soon(cb)
    sys.stdout.flush()
    sys.stderr.flush()


class LoudTags:
    """A request's ``user_tags`` that raise, with ``texts``, when the record is built; pickled, they
    shout on arrival (``_arrive``)."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def __iter__(self) -> Any:
        raise RuntimeError(f"{MARK} raise " + " ".join(self.texts))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_arrive, (self.texts,))


def _arrive(texts: list[str]) -> LoudTags:
    shout(texts)
    return LoudTags(texts)


class LoudRequests:
    """Request ``i``: a plain 4-token completion, but request ``at``'s tags are ``LoudTags(texts)``;
    called in the process that sends (a Ray load actor), request ``at`` shouts there first."""

    def __init__(self, texts: list[str], at: int = 2, shout_here: bool = False) -> None:
        self.texts, self.at, self.shout_here = texts, at, shout_here

    def __call__(self, i: int) -> RequestSpec:
        if i != self.at:
            return RequestSpec(prompt="a b c", max_tokens=4)
        if self.shout_here:
            shout(self.texts)
        return RequestSpec(prompt="a b c", max_tokens=4, user_tags=LoudTags(self.texts))  # type: ignore[arg-type]
