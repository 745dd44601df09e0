"""``load.executor.run_loop`` owns SIGINT for one level only: Ctrl-C sets the level's flag while it
runs, and the caller's handler is back once the level has ended, however it ended (returned,
raised, or was interrupted)."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest

from wattbench.load.executor import run_loop


@pytest.mark.parametrize("fast", [False, True], ids=["asyncio", "uvloop"])
def test_the_callers_sigint_handler_is_back_after_a_level_that_fails(fast):
    before = signal.getsignal(signal.SIGINT)
    during: list[object] = []

    async def level(loop: asyncio.AbstractEventLoop, interrupted: threading.Event) -> None:
        during.append(signal.getsignal(signal.SIGINT))
        signal.raise_signal(signal.SIGINT)  # Ctrl-C: sets the flag, raises nothing
        await asyncio.sleep(0.01)
        during.append(interrupted.is_set())
        raise ValueError("the level failed")

    with pytest.raises(ValueError, match="the level failed"):
        run_loop(level, fast=fast)
    assert during[0] is not before and callable(during[0]) and during[1] is True
    assert signal.getsignal(signal.SIGINT) is before


def test_the_callers_sigint_handler_is_back_after_a_level_that_returns():
    before = signal.getsignal(signal.SIGINT)

    async def level(loop: asyncio.AbstractEventLoop, interrupted: threading.Event) -> str:
        return "done"

    assert run_loop(level, fast=False) == ("done", False)
    assert signal.getsignal(signal.SIGINT) is before
