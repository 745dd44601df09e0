"""A loopback port that refuses connections, for the tests of what a client does when nothing
listens.

A port taken from a socket bound to port 0 and closed again is free only at that moment: another
test's server (the suite runs on several workers, each starting servers on ephemeral ports) may bind
it, or the client's own connect may pick it as its source port and connect to itself (TCP's
simultaneous open on loopback), and the test that expected "refused" reads an answer or a hang.
``refused_port`` keeps the port bound, never listening, for as long as the block runs: a connect
to it is refused (RST), and no other socket can bind it or take it as a source port meanwhile.
``tests/unit/reliability/test_refused_ports.py`` holds the suite to it."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]
