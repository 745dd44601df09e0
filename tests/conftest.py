"""Suite-wide collection rules, and the guard on process-wide signal state.

`.ci/run` runs the suite on as many pytest-xdist workers as the machine has cores. A test marked
`heavy` starts a real engine, a Ray cluster or a real load generator and takes most of the machine's
cores while it runs: every heavy test shares one xdist group, so no two of them run at once (their
throughput and latency checks keep the CPU they were written for), while the other workers run the
rest of the suite beside one of them. Outside xdist the marker changes nothing. A test marked
`serial` judges client timings against a scripted truth at millisecond precision: `.ci/run` runs
those after the parallel phase, one at a time, with nothing else on the machine.

Signal handlers, the kernel's ignored set, the blocked mask and the interval timer belong to the
whole worker process, and every later test (and every child it starts: a child inherits an ignored
or blocked signal across exec) runs with what a test leaves there. `_signal_state_unchanged` reads
them before and after each test (`_module_signal_state_unchanged`: around each module's fixtures),
fails the test that changed one, naming the signal and both states, and puts the state back so the
next test starts clean. `pytest_configure` gives every process of the suite SIGINT at Python's
default, however the runner was started.
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest

# SIGINT and SIGTERM: what Ctrl-C and a stop do; SIGHUP: a closed terminal; SIGALRM: the timeouts
# (pytest-timeout's own, and the tests' that arm one)
GUARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)


class SignalState(NamedTuple):
    handlers: tuple[Any, ...]  # signal.getsignal of each GUARDED signal: what Python has installed
    ignored: frozenset[int]  # those the kernel ignores: also set by native code, which getsignal misses
    blocked: frozenset[int]  # those blocked in this thread
    timer_armed: bool  # ITIMER_REAL (SIGALRM's timer) is running


def _kernel_ignored() -> frozenset[int]:
    """The GUARDED signals whose disposition is SIG_IGN in the kernel (SigIgn of /proc/self/status,
    a hex mask with bit n-1 for signal n; empty where there is no /proc)."""
    try:
        with open("/proc/self/status", "rb") as f:
            status = f.read()
    except OSError:
        return frozenset()
    at = status.find(b"SigIgn:")
    if at < 0:
        return frozenset()
    mask = int(status[at + 7:status.index(b"\n", at)], 16)
    return frozenset(s for s in GUARDED if mask >> (s - 1) & 1)


def signal_state() -> SignalState:
    return SignalState(
        handlers=tuple(signal.getsignal(s) for s in GUARDED),
        ignored=_kernel_ignored(),
        blocked=frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, ())) & frozenset(GUARDED),
        timer_armed=signal.getitimer(signal.ITIMER_REAL)[0] > 0,
    )


def _name(handler: Any) -> str:
    if isinstance(handler, signal.Handlers):
        return handler.name
    if handler is None:
        return "None (a handler set outside Python)"
    return f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', repr(handler))}"


def signal_changes(before: SignalState, after: SignalState, alarm: bool = True) -> list[str]:
    """One line per difference between two states, naming the signal and what it was and became;
    without ``alarm``, SIGALRM's handler and timer are left out (pytest-timeout sets its own for
    each test: two tests apart, they differ by design)."""
    out = []
    for sig, h0, h1 in zip(GUARDED, before.handlers, after.handlers):
        if h0 != h1 and (alarm or sig != signal.SIGALRM):
            out.append(f"{signal.Signals(sig).name} handler: {_name(h0)} before, {_name(h1)} after")
    for what, s0, s1 in (("ignored by the kernel", before.ignored, after.ignored),
                         ("blocked", before.blocked, after.blocked)):
        for sig in sorted(s0 ^ s1):
            was, now = ("was", "is not") if sig in s0 else ("was not", "is")
            out.append(f"{signal.Signals(sig).name} {was} {what} before, {now} after")
    if alarm and before.timer_armed != after.timer_armed:
        out.append(f"the SIGALRM timer (ITIMER_REAL) was {'armed' if before.timer_armed else 'off'} before, "
                   f"{'armed' if after.timer_armed else 'off'} after")
    return out


def _restore(before: SignalState, alarm: bool) -> None:
    """Put back what can be put back (handlers: main thread only; an armed timer's time is lost)."""
    if threading.current_thread() is threading.main_thread():
        for sig, handler in zip(GUARDED, before.handlers):
            if handler is not None and (alarm or sig != signal.SIGALRM):
                signal.signal(sig, handler)  # also resets a disposition native code changed
    signal.pthread_sigmask(signal.SIG_SETMASK, (set(signal.pthread_sigmask(signal.SIG_BLOCK, ()))
                                                - set(GUARDED)) | before.blocked)
    if alarm and not before.timer_armed:
        signal.setitimer(signal.ITIMER_REAL, 0)


TIMER_CANCELLED = pytest.StashKey[bool]()


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> None:
    """pytest-timeout stops its SIGALRM timer and handler where a test fails (its
    ``pytest_exception_interact``), before the test's teardown: that change is the runner's."""
    item.stash[TIMER_CANCELLED] = True


def _guard(what: str, alarm: Callable[[], bool]) -> Iterator[None]:
    before = signal_state()
    yield
    with_alarm = alarm()
    changes = signal_changes(before, signal_state(), with_alarm)
    if changes:
        _restore(before, with_alarm)
        pytest.fail(f"{what} changed process-wide signal state (every later test in this worker, and every "
                    "child it starts, would inherit it):\n  " + "\n  ".join(changes), pytrace=False)


@pytest.fixture(autouse=True)
def _signal_state_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test (with its function-scoped fixtures) leaves the process's signal state as it found
    it; tens of microseconds a test."""
    yield from _guard("the test", alarm=lambda: not request.node.stash.get(TIMER_CANCELLED, False))


@pytest.fixture(scope="module", autouse=True)
def _module_signal_state_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    """The same for a module's own module-scoped fixtures (a cluster or an engine started once for
    its tests): set up before them, it is torn down after them (reported at its last test)."""
    yield from _guard(f"{request.node.nodeid} (a module-scoped fixture)", alarm=lambda: False)


def pytest_configure(config: pytest.Config) -> None:
    """SIGINT at Python's default in every process of the suite, as in a terminal's foreground job.

    A runner started in the background of a non-interactive shell (``pytest … &`` in a script,
    ``nohup``) inherits SIGINT ignored, as do its xdist workers and, across exec, every child a test
    starts: a test that stops its child with SIGINT then waits for nothing. No test changes it
    (``_signal_state_unchanged``); how the suite was started must not either. The tests that need a
    child with SIGINT ignored set it in that child (``preexec_fn``)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("heavy") is not None:
            item.add_marker(pytest.mark.xdist_group(name="heavy"))
