"""A dataset or trace line past the cap is refused with one line, before it is held."""

from __future__ import annotations

import json

import pytest

from wattbench.core.errors import UserError
from wattbench.workload import dataset, trace


def test_a_jsonl_line_past_the_cap_is_refused(tmp_path, monkeypatch):
    assert dataset.MAX_LINE_BYTES == trace.MAX_LINE_CHARS == 32 << 20  # the documented cap
    monkeypatch.setattr(dataset, "MAX_LINE_BYTES", 1000)
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps({"prompt": "ok"}) + "\n" + json.dumps({"prompt": "x" * 2000}) + "\n")
    with pytest.raises(UserError, match=r"d.jsonl:2: a line longer than"):
        dataset.read_entries(p)
    p.write_text(json.dumps({"prompt": "y" * 900}) + "\n")  # under the cap: read as before
    assert dataset.read_entries(p)[1][0][1]["prompt"] == "y" * 900
    arr = tmp_path / "a.json"  # a JSON array is one document: read whole, whatever its line length
    arr.write_text(json.dumps([{"conversations": [{"from": "human", "value": "z" * 2000},
                                                  {"from": "gpt", "value": "a"}]}]))
    assert dataset.read_entries(arr)[0] == "sharegpt"


def test_a_trace_line_past_the_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(trace, "MAX_LINE_CHARS", 1000)
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"arrival_s": 0, "input_tokens": 5, "output_tokens": 5}) + "\n"
                 + json.dumps({"arrival_s": 1, "input_tokens": 5, "output_tokens": 5, "pad": "p" * 2000}) + "\n")
    with pytest.raises(UserError, match=r"t.jsonl:2: a line longer than"):
        trace.read_trace(p)
