"""The one bounded JSON reader for JSON from outside (``core/jsontext.py``)."""

from __future__ import annotations

import json

import pytest

from wattbench.core.jsontext import MAX_DEPTH, clip_value, json_depth, loads_bounded, value_depth


def _deep(n: int) -> str:
    return "[" * n + "1" + "]" * n


def test_a_text_past_the_depth_is_refused_before_it_is_parsed():
    with pytest.raises(ValueError, match="nested 200000 levels deep"):
        loads_bounded(_deep(200_000))  # json.loads: a RecursionError
    assert loads_bounded(_deep(MAX_DEPTH)) is not None
    assert json_depth('{"a": "[[[[", "b": [{"c": 1}]}') == 3


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_clip_value_keeps_at_most_its_depth_and_what_fits(depth):
    v = {"a": 1, "s": "x" * 500, "l": list(range(100)), "d": json.loads(_deep(40)), "o": {"k": [1, 2]}}
    got = clip_value(v, depth, max_items=8, cut=lambda s: s[:10])
    assert value_depth(got) <= depth
    if depth >= 1:
        assert got["a"] == 1 and got["s"] == "x" * 10
    if depth == 1:
        assert set(got) == {"a", "s"}  # every container left out
    if depth >= 2:
        assert got["l"] == list(range(8)) and got["o"] == ({} if depth == 2 else {"k": [1, 2]})


def test_value_depth_counts_without_recursion():
    v: list = [1]
    for _ in range(2999):
        v = [v]
    assert value_depth(v) == 3000  # past Python's recursion limit
    assert value_depth(1) == 0 and value_depth([]) == 1 and value_depth({"a": [1]}) == 2
