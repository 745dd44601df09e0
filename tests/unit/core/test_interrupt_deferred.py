"""``core.interrupt.interrupts_deferred``: Ctrl-C and SIGTERM that come inside the block are held
and delivered, once each, to the handlers that were there before, as the block ends; a block that
raises keeps its own exception; an ignored signal stays ignored."""

from __future__ import annotations

import signal

import pytest

from wattbench.core.interrupt import handler_during, interrupts_deferred, sigterm_as_ctrl_c


def test_an_interrupt_inside_the_block_is_raised_as_it_ends_not_before():
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            signal.raise_signal(signal.SIGINT)
            reached.append("after the signal")  # the statement after it still runs
            signal.raise_signal(signal.SIGINT)  # a second Ctrl-C: still one interrupt
        reached.append("after the block")
    assert reached == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_is_held_then_answered_by_the_commands_handler():
    seen: list[int] = []
    with handler_during(signal.SIGTERM, lambda signum, frame: seen.append(signum)):
        with interrupts_deferred():
            signal.raise_signal(signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM]
    with sigterm_as_ctrl_c(), pytest.raises(KeyboardInterrupt):  # as measure has it: SIGTERM is a Ctrl-C
        with interrupts_deferred():
            signal.raise_signal(signal.SIGTERM)


def test_a_block_that_raises_keeps_its_exception_and_the_handlers_are_back():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(ValueError, match="the block's own"):
        with interrupts_deferred():
            signal.raise_signal(signal.SIGINT)
            raise ValueError("the block's own")
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_an_ignored_signal_stays_ignored():
    with handler_during(signal.SIGINT, signal.SIG_IGN):
        with interrupts_deferred():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # nothing delivered, nothing raised
