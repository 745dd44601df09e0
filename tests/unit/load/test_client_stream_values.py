"""Every field the streaming client reads from a server is checked where it is parsed (a
hostile server's values): a bad value fails that request as ``bad_stream`` or ``bad_usage`` with a short detail,
never an exception out of the client (which cost the level its records)."""

from __future__ import annotations

import json

import pytest

from wattbench.load.client import _Stream
from wattbench.server.openai import MAX_USAGE_TOKENS, usage_problem


def _sse(*objs) -> bytes:
    return b"".join(b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n" for o in objs)


def _feed(data: bytes, chat: bool = False) -> _Stream:
    st = _Stream(chat, keep=True)
    st.feed(data, 1)
    return st


GOOD = {"choices": [{"index": 0, "text": " a", "finish_reason": None}]}
USAGE = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


def test_a_good_stream_is_read_as_before():
    st = _feed(_sse(GOOD, {"choices": [{"text": "", "finish_reason": "length"}]}, USAGE, b"[DONE]"))
    assert st.error is None and st.done and st.finished and st.usage == USAGE["usage"]
    assert st.texts == [" a"] and len(st.chunk_ns) == 1
    chat = _feed(_sse({"choices": [{"delta": {"content": "x"}}]}, {"choices": [{"delta": {}, "finish_reason": "stop"}]},
                      {"choices": [{"delta": None}]}, {"usage": None, "choices": []}, b"[DONE]"), chat=True)
    assert chat.error is None and chat.texts == ["x"] and chat.usage is None


@pytest.mark.parametrize("event, error, words", [
    ({"choices": {"0": {"text": "a"}}}, "bad_stream", "choices is a dict"),
    ({"choices": "abc"}, "bad_stream", "choices is a str"),
    ({"choices": {}}, "bad_stream", "choices is a dict"),
    ({"choices": [1]}, "bad_stream", "choices[0] is a int"),
    ({"choices": [{"text": 5}]}, "bad_stream", "text is a int"),
    ({"choices": [{"text": ["a"]}]}, "bad_stream", "text is a list"),
    ({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1e30}}, "bad_usage", "is a float"),
    ({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": "many"}}, "bad_usage", "is a str"),
    ({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": [1, 2]}}, "bad_usage", "is a list"),
    ({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": {"n": 1}}}, "bad_usage", "is a dict"),
    ({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": -600}}, "bad_usage", "= -600: outside"),
    ({"choices": [], "usage": {"prompt_tokens": True, "completion_tokens": 1}}, "bad_usage", "is a bool"),
    ({"choices": [], "usage": {"prompt_tokens": 10 ** 40, "completion_tokens": 1}}, "bad_usage", "float (1e+40)"),  # orjson: a float
    ({"choices": [], "usage": [3, 2]}, "bad_usage", "usage is a list"),
    ({"choices": [], "usage": "3"}, "bad_usage", "usage is a str"),
])
def test_a_bad_value_fails_the_request_with_a_detail(event, error, words):
    st = _feed(_sse(GOOD, event, USAGE, b"[DONE]"))
    assert (st.error, st.done) == (error, True), st.detail
    assert words in st.detail and len(st.detail) < 200


def test_chat_delta_must_be_an_object_and_content_a_string():
    st = _feed(_sse({"choices": [{"delta": "hi"}]}), chat=True)
    assert st.error == "bad_stream" and "delta is a str" in st.detail
    st = _feed(_sse({"choices": [{"delta": {"content": {"x": 1}}}]}), chat=True)
    assert st.error == "bad_stream" and "text is a dict" in st.detail


def test_an_endless_line_fails_the_request_without_growing():
    st = _Stream(False, keep=False)
    st.feed(b'data: {"choices": [{"text": "', 1)
    piece = b"a" * (1 << 20)
    for _ in range(9):
        if st.done:
            break
        st.feed(piece, 2)
    assert st.error == "bad_stream" and "passed 8388608 bytes" in st.detail
    assert not st.parser.pending


def test_usage_bounds_are_documented_numbers():
    assert MAX_USAGE_TOKENS == 100_000_000
    assert usage_problem({"prompt_tokens": 0, "completion_tokens": MAX_USAGE_TOKENS}) is None
    assert usage_problem({"completion_tokens": MAX_USAGE_TOKENS + 1})
    assert usage_problem({}) is None and usage_problem({"total_tokens": "x"}) is None
