"""The SSE parser: events survive any split of the byte stream, any line ending."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wattbench.server.sse import DONE, SSEParser

STREAM = (
    b": keep-alive comment\n"
    b'data: {"a": 1}\n\n'
    b"event: error\ndata: {\"error\": \"x\"}\n\n"
    b"data: line1\ndata: line2\n\n"
    b"id: 7\nretry: 10\ndata:no-space\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    (None, b'{"a": 1}'),
    ("error", b'{"error": "x"}'),
    (None, b"line1\nline2"),
    (None, b"no-space"),
    (None, DONE),
]


def feed_all(stream: bytes, cuts: list[int]) -> list:
    p = SSEParser()
    out = []
    prev = 0
    for c in sorted(set(cuts)) + [len(stream)]:
        out += p.feed(stream[prev:c])
        prev = c
    return out


def test_whole_stream():
    assert feed_all(STREAM, []) == EXPECTED


def test_every_single_split_point():
    for eol in (b"\n", b"\r\n", b"\r"):
        s = STREAM.replace(b"\n", eol)
        for i in range(len(s) + 1):
            assert feed_all(s, [i]) == EXPECTED, (eol, i)


def test_byte_by_byte_crlf():
    s = STREAM.replace(b"\n", b"\r\n")
    assert feed_all(s, list(range(len(s)))) == EXPECTED


def test_incomplete_event_is_pending_not_dispatched():
    p = SSEParser()
    assert p.feed(b'data: {"a"') == []
    assert p.pending
    assert p.feed(b": 1}\n") == []
    assert p.feed(b"\n") == [(None, b'{"a": 1}')]
    assert not p.pending


def test_event_without_data_is_not_dispatched():
    assert SSEParser().feed(b"event: ping\n\n: c\n\n") == []


@settings(max_examples=300, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=len(STREAM) * 2), max_size=20),
    eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
)
def test_hypothesis_any_split(cuts, eol):
    s = STREAM.replace(b"\n", eol)
    assert feed_all(s, [c % (len(s) + 1) for c in cuts]) == EXPECTED


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=10))
def test_hypothesis_garbage_never_crashes_and_split_invariant(data, cuts):
    whole = feed_all(data, [])
    assert feed_all(data, [c % (len(data) + 1) for c in cuts]) == whole


def test_a_line_past_the_cap_raises_and_holds_nothing():
    """A hostile endless line (a past defect: 300 MB of line grew to 707 MB) fails at the cap, whichever
    way it is split, and the parser keeps nothing of it; an event of many short data lines too."""
    from wattbench.server.sse import MAX_LINE_BYTES, SSEError

    assert MAX_LINE_BYTES == 8 << 20
    p = SSEParser(max_line_bytes=1000)
    assert p.feed(b"data: ok\n\n") == [(None, b"ok")]
    p.feed(b"data: " + b"a" * 500)
    with pytest.raises(SSEError, match="passed 1000 bytes"):
        for _ in range(10):
            p.feed(b"a" * 100)
    assert not p.pending
    with pytest.raises(SSEError):
        SSEParser(max_line_bytes=1000).feed(b"data: " + b"b" * 2000)  # in one read
    many = SSEParser(max_line_bytes=1000)
    with pytest.raises(SSEError, match="event"):
        for _ in range(100):
            many.feed(b"data: " + b"c" * 50 + b"\n")  # never a blank line: one growing event
    # just under the cap is still an event, split anywhere
    line = b"data: " + b"d" * 990 + b"\n\n"
    assert feed_all(line, [3, 500, 995]) == [(None, b"d" * 990)] == SSEParser(1000).feed(line)


def test_the_cap_does_not_copy_a_long_line_again_per_read():
    """Pieces of a long line are kept as they came (no quadratic re-copy): 8 MiB in 4 KiB reads is
    fast and its event comes back whole."""
    p = SSEParser()
    p.feed(b"data: ")
    piece = b"x" * 4096
    for _ in range((8 << 20) // 4096 - 1):
        assert p.feed(piece) == []
    assert p.feed(b"\n\n") == [(None, piece * ((8 << 20) // 4096 - 1))]
