"""Secrets registered for the lifetime of what registered them (``core.secret_scope.scope``), not for the
process's: a secret of one scope is not masked once it ends, nested scopes keep what an outer one
still holds, a thread that scrubs while the scope is open masks it (the sampler, the scraper), and
the CLI's holding scope keeps what a command's run registered until the command has printed."""

from __future__ import annotations

import io
import sys
import threading

import pytest

from wattbench.core import scrubber, secret_scope
from wattbench.core.redact import MASK
from wattbench.core.scrubber import GRAM
from wattbench.core.secret_scope import clip, register_secrets, registered, scope, scrub

KEY = "sk-SCOPEkey-7f3Q9zX2Lp8Vw"
OTHER = "sk-OTHERkey-4b2M8nR6Tq1Yx"
SHORT = "pw5"  # shorter than a piece: masked by whole value only


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch):
    """Each test starts with no open scope and an empty scrubber (and leaves them as they were)."""
    monkeypatch.setattr(secret_scope, "_REGISTERED", scrubber.Scrubber())
    monkeypatch.setattr(secret_scope, "_COUNTS", {})
    monkeypatch.setattr(secret_scope, "_OWNED", set())
    monkeypatch.setattr(secret_scope, "_OPEN", [])


def _pieces(secret: str) -> list[str]:
    return [secret[i:i + GRAM] for i in range(len(secret) - GRAM + 1)]


def test_a_secret_is_masked_in_its_scope_and_not_after_it():
    assert scrub(f"a {KEY} b") == f"a {KEY} b"
    with scope(KEY, SHORT) as s:
        assert s is registered()
        assert scrub(f"a {KEY} b {SHORT}") == f"a {MASK} b {MASK}"
        for piece in _pieces(KEY):  # every 8-character piece, as clip cuts through one
            assert piece not in clip(f"echo {piece} end", 200)
    assert scrub(f"a {KEY} b {SHORT}") == f"a {KEY} b {SHORT}"
    assert not registered() and registered().secrets == []
    assert clip(f"echo {KEY[:12]}", 200) == f"echo {KEY[:12]}"


def test_a_scope_that_raises_still_ends():
    with pytest.raises(RuntimeError), scope(KEY):
        assert scrub(KEY) == MASK
        raise RuntimeError("the run failed")
    assert scrub(KEY) == KEY and secret_scope._OPEN == [] and secret_scope._COUNTS == {}


def test_nested_scopes_keep_what_an_outer_one_still_holds():
    with scope(KEY):
        with scope(KEY, OTHER):  # the same key again, and one of the inner scope's own
            assert scrub(f"{KEY} {OTHER}") == f"{MASK} {MASK}"
        assert scrub(f"{KEY} {OTHER}") == f"{MASK} {OTHER}"  # the outer scope still holds KEY
        with scope(OTHER):
            with scope():
                assert scrub(f"{KEY} {OTHER}") == f"{MASK} {MASK}"
        assert scrub(OTHER) == OTHER
    assert scrub(f"{KEY} {OTHER}") == f"{KEY} {OTHER}"
    assert secret_scope._COUNTS == {} and secret_scope._OPEN == []


def test_scopes_may_end_in_any_order():
    """Two runs in one process (ab's sides, two threads): the first to start may end last."""
    a, b = scope(KEY), scope(OTHER)
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)  # the older one ends first
    assert scrub(f"{KEY} {OTHER}") == f"{KEY} {MASK}"
    b.__exit__(None, None, None)
    assert scrub(f"{KEY} {OTHER}") == f"{KEY} {OTHER}"


def test_register_secrets_adds_to_the_newest_open_scope_and_nothing_outside_every_scope():
    register_secrets(KEY)  # no scope is open: nothing runs whose output could hold it
    assert scrub(KEY) == KEY
    with scope(OTHER):
        with scope():
            register_secrets(KEY)  # met while the inner scope runs (a target's query value)
            register_secrets(KEY)  # twice: still one registration of that scope
            assert scrub(KEY) == MASK
        assert scrub(f"{KEY} {OTHER}") == f"{KEY} {MASK}"  # it ended with the scope that met it
    assert scrub(OTHER) == OTHER


def test_a_holding_scope_keeps_what_ended_inside_it_until_it_ends():
    """The CLI's command (``cli.main``): a run's scope ends inside it, and the summary printed after
    the run is still scrubbed of the run's secrets."""
    with scope(hold=True):
        with scope(KEY):
            pass
        with scope(KEY, OTHER):  # KEY held already: counted once
            pass
        assert scrub(f"summary {KEY} {OTHER}") == f"summary {MASK} {MASK}"
    assert scrub(f"{KEY} {OTHER}") == f"{KEY} {OTHER}"
    assert secret_scope._COUNTS == {} and secret_scope._OPEN == []


def test_a_thread_that_scrubs_while_the_scope_is_open_masks_its_secret():
    """A sampler or scraper thread started before the run's scope opens (and living past it)
    scrubs with what is registered when it writes."""
    go, wrote = threading.Event(), threading.Event()
    seen: list[str] = []

    def scraper() -> None:
        go.wait(10)
        seen.append(scrub(f"model {KEY}"))
        seen.append(clip(f"401: Incorrect API key provided: {KEY[:15]}…", 300))
        wrote.set()

    t = threading.Thread(target=scraper)
    t.start()
    with scope(KEY):
        go.set()
        assert wrote.wait(10)
    t.join(10)
    assert seen == [f"model {MASK}", f"401: Incorrect API key provided: {MASK}…"]


def test_a_secret_held_by_an_open_scope_is_masked_whatever_other_threads_open_and_close():
    """Scopes open and end in four threads while a fifth scrubs the outer scope's key without pause:
    each search table is swapped in whole, so no scrub between two of them lets the key through."""
    stop = threading.Event()
    leaks: list[str] = []
    scrubs = [0]

    def scrubber() -> None:
        while not stop.is_set():
            out = scrub(f"x {KEY} y")
            scrubs[0] += 1
            if out != f"x {MASK} y":
                leaks.append(out)

    def churn(k: int) -> None:
        for n in range(8):
            with scope(f"sk-churn{k}-{n}-Q9zX2Lp8Vw3"):
                pass

    with scope(KEY):
        watcher = threading.Thread(target=scrubber)
        watcher.start()
        workers = [threading.Thread(target=churn, args=(k,)) for k in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        stop.set()
        watcher.join(10)
    assert leaks == [] and scrubs[0] > 0
    assert registered().secrets == [] and secret_scope._COUNTS == {}


def test_a_scope_discards_only_what_it_added():
    """A secret the scrubber held before any scope (a test's own, a writer given a Scrubber) is not
    taken away when a scope that registered it too ends."""
    secret_scope._REGISTERED.add(KEY)
    with scope(KEY, OTHER):
        pass
    assert scrub(f"{KEY} {OTHER}") == f"{MASK} {OTHER}"


def test_the_guarded_streams_scrub_a_scope_s_secret_while_it_is_open(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with secret_scope.guard_std_streams():
        print(f"before {KEY}")
        with scope(KEY):
            print(f"during {KEY}")
        print(f"after {KEY}")
    assert out.getvalue() == f"before {KEY}\nduring {MASK}\nafter {KEY}\n"


def test_discard_keeps_every_other_secret_and_its_pieces():
    s = scrubber.Scrubber([KEY, OTHER, SHORT])
    s.discard(OTHER)
    assert s.secrets == [KEY, SHORT]
    assert s.text(f"{KEY[2:12]} {OTHER} {SHORT}") == f"{MASK} {OTHER} {MASK}"
    s.discard(KEY, SHORT)
    assert not s and s.text(KEY) == KEY
