"""The SSE parser: events survive any split of the byte stream, any line ending."""

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
