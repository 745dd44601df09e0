"""Malformed load-generator result files (results/tools/): each reader validates what it reads
(``base.read_bytes``/``parse_json``: size and nesting caps; a pydantic model per tool: stamps and
durations finite and non-negative, token counts whole numbers in range), so a bad file is one
``UserError`` naming the file — never a traceback, never a negative or NaN figure accepted.

Before: null/str/huge/NaN fields raised TypeError/OverflowError/ValueError from the readers, a
100,000-deep file RecursionError, a 3 GB file was read whole, and negative lengths were accepted.
The mutations are applied to the tools' own files (tests/fixtures/tools/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wattbench.core.errors import UserError
from wattbench.results.tools.registry import read_tool
from wattbench.results.tools.markers import read_markers

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "tools"


def _vllm(tmp_path: Path, edit) -> list[Path]:
    d = json.loads((FIX / "vllm_bench_serve.json").read_text())
    edit(d)
    p = tmp_path / "vllm.json"
    p.write_text(json.dumps(d))
    return [p]


def _aiperf(tmp_path: Path, edit) -> list[Path]:
    lines = [json.loads(x) for x in (FIX / "aiperf" / "profile_export.jsonl").read_text().splitlines() if x.strip()]
    summary = json.loads((FIX / "aiperf" / "profile_export_aiperf.json").read_text())
    edit(lines, summary)
    d = tmp_path / "aiperf"
    d.mkdir()
    (d / "profile_export.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (d / "profile_export_aiperf.json").write_text(json.dumps(summary))
    return [d / "profile_export.jsonl"]


def _guidellm(tmp_path: Path, edit) -> list[Path]:
    d = json.loads((FIX / "guidellm_benchmarks.json").read_text())
    edit(d)
    p = tmp_path / "benchmarks.json"
    p.write_text(json.dumps(d))
    return [p]


def _set(path: str, value):
    """An edit setting a dotted path (list indices as numbers) of a JSON document."""
    def edit(d, *_):
        keys = path.split(".")
        for k in keys[:-1]:
            d = d[int(k)] if isinstance(d, list) else d[k]
        last = keys[-1]
        if isinstance(d, list):
            d[int(last)] = value
        else:
            d[last] = value
    return edit


GR = "benchmarks.0.requests.successful.0"
CASES = [
    # tool, name, edit, words the one line must hold
    ("vllm-bench-serve", "null start", _set("start_times.3", None), "start_times.3"),
    ("vllm-bench-serve", "str ttft", _set("ttfts.0", "fast"), "ttfts.0"),
    ("vllm-bench-serve", "huge latency", _set("latencies.0", 1e300), "latencies.0"),
    ("vllm-bench-serve", "nan start", _set("start_times.0", float("nan")), "start_times.0"),
    ("vllm-bench-serve", "negative output length", _set("output_lens.2", -32), "output_lens.2"),
    ("vllm-bench-serve", "huge output length", _set("output_lens.2", 10**30), "output_lens.2"),
    ("vllm-bench-serve", "start_times a string", _set("start_times", "soon"), "start_times"),
    ("vllm-bench-serve", "ttft after the end", _set("ttfts.1", 99.0), "last token is before its first"),
    ("vllm-bench-serve", "nan rate", _set("request_rate", float("nan")), "request_rate"),
    ("vllm-bench-serve", "negative concurrency", _set("max_concurrency", -8), "max_concurrency"),
    ("aiperf", "null start", lambda lines, s: lines[0]["metadata"].__setitem__("request_start_ns", None),
     "request_start_ns"),
    ("aiperf", "negative tokens", lambda lines, s: lines[5]["metrics"]["output_token_count"].__setitem__("value", -16),
     "line 6"),
    ("aiperf", "nan ttft", lambda lines, s: lines[1]["metrics"]["time_to_first_token"].__setitem__("value",
                                                                                                  float("nan")),
     "time_to_first_token"),
    ("aiperf", "metrics a list", lambda lines, s: lines[0].__setitem__("metrics", [1, 2]), "metrics"),
    ("aiperf", "str gaps", lambda lines, s: lines[0]["metrics"]["inter_chunk_latency"].__setitem__("value", "x"),
     "inter_chunk_latency"),
    ("aiperf", "a line not an object", lambda lines, s: lines.__setitem__(2, [1]), "line 3"),
    ("aiperf", "nan rate in the summary", lambda lines, s: s["input_config"]["phases"][1].__setitem__(
        "rate", float("nan")), "rate"),
    ("aiperf", "end before start", lambda lines, s: lines[0]["metadata"].__setitem__(
        "request_end_ns", lines[0]["metadata"]["request_start_ns"] - 10**9), "before its start"),
    ("guidellm", "null timings", _set(f"{GR}.info.timings", None), "timings"),
    ("guidellm", "str start", _set(f"{GR}.info.timings.request_start", "then"), "request_start"),
    ("guidellm", "huge start", _set(f"{GR}.info.timings.request_start", 1e300), "request_start"),
    ("guidellm", "negative output tokens", _set(f"{GR}.output_tokens", -16), "output_tokens"),
    ("guidellm", "nan strategy rate", lambda d: d["benchmarks"][0]["config"].__setitem__(
        "strategy", {"type_": "constant", "rate": float("nan")}), "rate"),
    ("guidellm", "streams a string", _set("benchmarks.0.config.strategy.streams", "four"), "streams"),
    ("guidellm", "benchmark a number", _set("benchmarks.0", 7), "benchmarks.0"),
    ("guidellm", "requests a string", _set("benchmarks.0.requests", "all"), "requests"),
    ("guidellm", "negative warmup", _set("benchmarks.0.warmup_duration", -1.0), "warmup_duration"),
]

WRITERS = {"vllm-bench-serve": _vllm, "aiperf": _aiperf, "guidellm": _guidellm}


@pytest.mark.parametrize("tool, name, edit, words", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_malformed_field_is_one_line_naming_the_file(tmp_path, tool, name, edit, words):
    paths = WRITERS[tool](tmp_path, edit)
    with pytest.raises(UserError) as e:
        read_tool(tool, paths)
    text = str(e.value)
    assert words in text and str(paths[0].parent) in text and "\n" not in text, text
    assert len(text) < 600, text


@pytest.mark.parametrize("tool", sorted(WRITERS))
def test_the_tools_own_files_still_read(tmp_path, tool):
    paths = WRITERS[tool](tmp_path, (lambda *a: None))
    run = read_tool(tool, paths)
    assert run.levels and all(r.output_tokens is None or r.output_tokens >= 0 for r in run.levels[0].requests)


def _deep(n: int = 100_000) -> str:
    return "[" * n + "]" * n


@pytest.mark.parametrize("tool", sorted(WRITERS))
def test_a_100k_deep_file_is_one_line(tmp_path, tool):
    p = tmp_path / ("profile_export.jsonl" if tool == "aiperf" else "r.json")
    p.write_text(_deep() + "\n" if tool == "aiperf" else '{"benchmarks": ' + _deep() + ', "start_times": []}')
    with pytest.raises(UserError, match="nested 100001 levels deep|nested 100000 levels deep"):
        read_tool(tool, [p])


@pytest.mark.parametrize("tool", sorted(WRITERS))
def test_a_3_gb_file_is_refused_before_it_is_read(tmp_path, tool):
    p = tmp_path / ("profile_export.jsonl" if tool == "aiperf" else "r.json")
    with open(p, "wb") as f:  # sparse: 3 GB long, no disk used
        f.truncate(3 << 30)
    with pytest.raises(UserError, match=r"is 3 GiB, larger than the 256 MiB wattbench reads"):
        read_tool(tool, [p])


@pytest.mark.parametrize("tool", sorted(WRITERS))
def test_a_file_that_is_not_utf8_json_is_one_line(tmp_path, tool):
    p = tmp_path / ("profile_export.jsonl" if tool == "aiperf" else "r.json")
    p.write_bytes(b'{"start_times": [1, \xff\xfe]}\n')
    with pytest.raises(UserError, match="is not JSON it reads"):
        read_tool(tool, [p])


@pytest.mark.parametrize("text, words", [
    ("start inf a\nend inf\n", "line 1"),
    ("start nan a\nend 5\n", "line 1"),
    ("start 1e300 a\nend 2e300\n", "line 1"),
    ("start -5 a\nend 5\n", "line 1"),
])
def test_markers_with_a_time_that_is_not_one_are_one_line(tmp_path, text, words):
    p = tmp_path / "marks"
    p.write_text(text)
    with pytest.raises(UserError, match=words):
        read_markers(p)


def test_markers_not_utf8_are_one_line(tmp_path):
    p = tmp_path / "marks"
    p.write_bytes(b"start 1.0 \xff\xfe\nend 2.0\n")
    with pytest.raises(UserError, match="not UTF-8"):
        read_markers(p)


def test_a_reader_slip_still_names_the_file(tmp_path, monkeypatch):
    """The net under the readers: an exception a reader did not foresee becomes one line."""
    from wattbench.results.tools import vllm_bench

    def broken(paths):
        raise KeyError("start_times")

    monkeypatch.setattr(vllm_bench, "read", broken)
    p = _vllm(tmp_path, lambda d: None)
    with pytest.raises(UserError, match="could not be read"):
        read_tool("vllm-bench-serve", p)


def test_a_fifo_as_a_marker_file_is_one_line_not_a_hang(tmp_path):
    import os

    p = tmp_path / "marks"
    os.mkfifo(p)
    with pytest.raises(UserError, match="not a regular file"):
        read_markers(p)


@pytest.mark.parametrize("field, value, words", [
    ("output_tokens", -5, "output_tokens -5 is not a token count"),
    ("output_tokens", 10**12, "is not a token count"),
    ("end_ns", -1, "end_ns -1 is not a time"),
    ("first_token_ns", 1, "first token is before its start"),
])
def test_a_wrapped_wattbench_runs_records_are_bounded_too(tmp_path, field, value, words):
    """``measure -- wattbench run``: its requests.jsonl is read by the run's own loader, whose
    records carry no bounds of their own; the reader checks them as it checks every tool's."""
    from tests.fakes.results_factory import make_result
    from wattbench.results.rundir import write_result

    d = tmp_path / "run"
    d.mkdir()
    write_result(d, make_result())
    rec = {"id": 0, "level": 0, "sent_ns": 5_000_000_000, "first_token_ns": 5_100_000_000,
           "last_token_ns": 5_200_000_000, "end_ns": 5_300_000_000, "input_tokens": 16, "output_tokens": 16,
           "ok": True}
    good = dict(rec, id=1)
    rec[field] = value
    (d / "requests.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(UserError) as e:
        read_tool("wattbench-run", [d])
    assert words in str(e.value) and "requests.jsonl" in str(e.value), str(e.value)
    (d / "requests.jsonl").write_text(json.dumps(good) + "\n")
    assert read_tool("wattbench-run", [d]).levels[0].requests[0].output_tokens == 16
