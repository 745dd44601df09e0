"""The load generators' result files (results/tools/): read from files the real tools wrote.

The fixtures under ``tests/fixtures/tools/`` are the tools' own output against the scripted server
(``vllm bench serve`` 0.32 at 8 streams, 24 requests of 32 tokens; AIPerf 0.13 at 4 streams, 4
warm-up + 12 requests of 16 tokens; GuideLLM 0.8.1 at 4 streams, 12 requests of 16 tokens), with the
response texts blanked to keep them small. Every figure asserted is read off the file by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wattbench.core.clock import ClockAnchor
from wattbench.core.errors import UserError
from wattbench.results.tools.registry import check_tool_args, detect_tool, find_result_files, read_tool, tool_target_url
from wattbench.results.tools.base import place_on_run_clock, stamps, to_records
from wattbench.results.tools.markers import read_markers

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "tools"


def test_detect_tool_and_target():
    assert detect_tool(["/venv/bin/vllm", "bench", "serve", "--base-url", "http://h:1"]) == "vllm-bench-serve"
    assert detect_tool(["vllm", "serve", "m"]) == "command"
    assert detect_tool(["aiperf", "profile", "-m", "x"]) == "aiperf"
    assert detect_tool(["guidellm", "run"]) == "guidellm" and detect_tool(["guidellm", "benchmark"]) == "guidellm"
    assert detect_tool(["./load.sh"]) == "command"
    assert tool_target_url("vllm-bench-serve", ["vllm", "bench", "serve", "--base-url=http://a:9"]) == "http://a:9"
    assert tool_target_url("vllm-bench-serve", ["vllm", "bench", "serve", "--port", "8001"]) == "http://127.0.0.1:8001"
    assert tool_target_url("aiperf", ["aiperf", "profile", "--url", "http://b:2"]) == "http://b:2"
    assert tool_target_url("guidellm", ["guidellm", "run", "--backend", "kind=openai_http,target=http://c:3"]) == "http://c:3"


def test_vllm_needs_save_result_and_detailed():
    with pytest.raises(UserError, match="--save-result"):
        check_tool_args("vllm-bench-serve", ["vllm", "bench", "serve"])
    with pytest.raises(UserError, match="--save-detailed"):
        check_tool_args("vllm-bench-serve", ["vllm", "bench", "serve", "--save-result"])
    check_tool_args("vllm-bench-serve", ["vllm", "bench", "serve", "--save-result", "--save-detailed"])


def test_vllm_bench_serve_file():
    run = read_tool("vllm-bench-serve", [FIX / "vllm_bench_serve.json"])
    d = json.loads((FIX / "vllm_bench_serve.json").read_text())
    (lv,) = run.levels
    assert (lv.mode, lv.value, lv.max_in_flight) == ("concurrency", pytest.approx(8.0, rel=1e-9), None)
    assert len(lv.requests) == 24 and all(r.ok for r in lv.requests)
    r0 = lv.requests[0]
    assert r0.start_ns == round(d["start_times"][0] * 1e9)
    assert r0.first_token_ns - r0.start_ns == pytest.approx(d["ttfts"][0] * 1e9, abs=2)
    assert r0.end_ns - r0.start_ns == pytest.approx(d["latencies"][0] * 1e9, abs=2)
    assert sum(r.output_tokens for r in lv.requests) == 24 * 32 == d["total_output_tokens"]
    assert lv.figures["mean_ttft_ms"] == pytest.approx(d["mean_ttft_ms"])
    assert run.token_source == "usage"


def test_vllm_without_detail_is_one_line(tmp_path):
    d = json.loads((FIX / "vllm_bench_serve.json").read_text())
    for k in ("start_times", "ttfts", "itls", "output_lens", "input_lens", "errors", "generated_texts"):
        d.pop(k)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(d))
    with pytest.raises(UserError, match="--save-detailed"):
        read_tool("vllm-bench-serve", [p])


def test_aiperf_file():
    run = read_tool("aiperf", [FIX / "aiperf" / "profile_export.jsonl"])
    assert run.version == "0.13.0" and run.token_source == "usage"  # --use-server-token-count was given
    (lv,) = run.levels
    assert (lv.mode, lv.value) == ("concurrency", pytest.approx(4.0, rel=1e-9))
    assert sum(r.warmup for r in lv.requests) == 4 and len(lv.requests) == 16
    first = json.loads((FIX / "aiperf" / "profile_export.jsonl").read_text().splitlines()[0])
    r0 = lv.requests[0]
    assert r0.start_ns == first["metadata"]["request_start_ns"] and r0.end_ns == first["metadata"]["request_end_ns"]
    ttft_ns = first["metrics"]["time_to_first_token"]["value"] * 1e6
    assert r0.first_token_ns - r0.start_ns == pytest.approx(ttft_ns, abs=1)
    gaps = first["metrics"]["inter_chunk_latency"]["value"]
    assert len(r0.chunk_ns) == len(gaps) + 1 and r0.last_token_ns - r0.first_token_ns == pytest.approx(sum(gaps) * 1e6, abs=16)
    assert r0.output_tokens == 16
    assert lv.figures["time_to_first_token_avg_ms"] > 0


def test_guidellm_file(tmp_path):
    run = read_tool("guidellm", [FIX / "guidellm_benchmarks.json"])
    assert run.version == "0.8.1"
    (lv,) = run.levels
    assert (lv.mode, lv.value, lv.label) == ("concurrency", pytest.approx(4.0, rel=1e-9), "concurrent@4")
    d = json.loads((FIX / "guidellm_benchmarks.json").read_text())
    t = d["benchmarks"][0]["requests"]["successful"][0]["info"]["timings"]
    r0 = lv.requests[0]
    assert r0.start_ns == round(t["request_start"] * 1e9) and r0.first_token_ns == round(t["first_token_iteration"] * 1e9)
    assert sum(r.output_tokens for r in lv.requests) == 12 * 16
    # a sampled file (fewer requests than GuideLLM counted) cannot give the window's tokens
    d["benchmarks"][0]["requests"]["successful"] = d["benchmarks"][0]["requests"]["successful"][:5]
    p = tmp_path / "benchmarks.json"
    p.write_text(json.dumps(d))
    with pytest.raises(UserError, match="sampled"):
        read_tool("guidellm", [p])


def _anchor(wall, mono, u=1000):
    return ClockAnchor(wall_ns=wall, mono_ns=mono, uncertainty_ns=u)


def test_clock_placement():
    a, b = _anchor(1_700_000_000_000_000_000, 5_000_000_000), _anchor(1_700_000_010_000_000_500, 15_000_000_000)
    # monotonic stamps inside the command's run: as they are
    m = place_on_run_clock(6_000_000_000, 14_000_000_000, 5_500_000_000, 14_500_000_000, a, b, "t")
    assert (m.source_clock, m.offset_ns, m.uncertainty_ns) == ("monotonic", 0, 0)
    # wall stamps: moved by the anchor; uncertainty = both brackets + the drift (500 ns over 10 s)
    w = place_on_run_clock(1_700_000_001_000_000_000, 1_700_000_009_000_000_000, 5_500_000_000, 14_500_000_000,
                           a, b, "t")
    assert w.source_clock == "wall" and w.offset_ns == 5_000_000_000 - 1_700_000_000_000_000_000
    assert (w.wall_drift_ns, w.uncertainty_ns) == (500, 2500)
    with pytest.raises(UserError, match="outside the command's run"):
        place_on_run_clock(1_600_000_000_000_000_000, 1_600_000_001_000_000_000, 5_500_000_000, 14_500_000_000, a, b,
                           "t")


def test_records_on_the_run_clock():
    run = read_tool("aiperf", [FIX / "aiperf" / "profile_export.jsonl"])
    lo, hi = stamps(run)
    recs = to_records(run.levels[0], 0, -lo + 1_000, "usage")
    assert min(r.sent_ns for r in recs) == 1_000
    assert recs[0].chunk_ns[0] == recs[0].first_token_ns and recs[0].warmup
    assert all(r.end_ns <= hi - lo + 1_000 for r in recs)


def test_find_only_files_the_command_wrote(tmp_path):
    d = tmp_path / "vb"
    d.mkdir()
    old = d / "old.json"
    old.write_text("{}")
    argv = ["vllm", "bench", "serve", "--save-result", "--save-detailed", "--result-dir", "vb"]
    before = {str(p): p.stat().st_mtime_ns for p in find_result_files("vllm-bench-serve", argv, tmp_path, [], None,
                                                                      existing_only=True)}
    with pytest.raises(UserError, match="wrote no result file"):
        find_result_files("vllm-bench-serve", argv, tmp_path, [], before)
    new = d / "new.json"
    new.write_text("{}")
    (d / "new.pytorch.json").write_text("{}")
    assert find_result_files("vllm-bench-serve", argv, tmp_path, [], before) == [new]


def test_markers(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text("# comment\nstart 100.5 decode heavy\nend 102.25\n\nstart 103 \nend 104\n")
    assert read_markers(p) == [("decode heavy", 100_500_000_000, 102_250_000_000),
                               ("window 2", 103_000_000_000, 104_000_000_000)]
    for bad, msg in (("end 1\n", "not started"), ("start 1\n", "no end"), ("start 2\nend 1\n", "before it started"),
                     ("begin 1\n", "use start or end"), ("start x\n", "is not 'start")):
        p.write_text(bad)
        with pytest.raises(UserError, match=msg):
            read_markers(p)


def test_aiperf_rate_phase(tmp_path):
    """A rate-controlled profiling phase (as AIPerf 0.13 writes ``input_config.phases``)."""
    d = tmp_path / "ap"
    d.mkdir()
    (d / "profile_export.jsonl").write_text((FIX / "aiperf" / "profile_export.jsonl").read_text())
    summary = json.loads((FIX / "aiperf" / "profile_export_aiperf.json").read_text())
    summary["input_config"]["phases"] = [{"name": "profiling", "kind": "profiling", "type": "gamma", "rate": 12.5,
                                          "smoothness": 4, "concurrency": 32}]
    (d / "profile_export_aiperf.json").write_text(json.dumps(summary))
    (lv,) = read_tool("aiperf", [d / "profile_export.jsonl"]).levels
    assert (lv.mode, lv.arrival, lv.max_in_flight) == ("rate", "gamma:4", 32)
    assert lv.value == pytest.approx(12.5, rel=1e-12)


@pytest.mark.parametrize("strategy, want", [
    ({"type_": "concurrent", "streams": 8, "max_concurrency": 8}, ("concurrency", 8.0, None)),
    ({"type_": "synchronous"}, ("concurrency", 1.0, None)),
    ({"type_": "constant", "rate": 2.5, "max_concurrency": 16}, ("rate", 2.5, 16)),
    ({"type_": "poisson", "rate": 4.0}, ("rate", 4.0, None)),
    ({"type_": "throughput", "max_concurrency": 64}, ("rate", float("inf"), 64)),
])
def test_guidellm_strategies(tmp_path, strategy, want):
    d = json.loads((FIX / "guidellm_benchmarks.json").read_text())
    d["benchmarks"][0]["config"]["strategy"] = strategy
    p = tmp_path / "benchmarks.json"
    p.write_text(json.dumps(d))
    (lv,) = read_tool("guidellm", [p]).levels
    mode, value, max_in_flight = want
    assert (lv.mode, lv.max_in_flight) == (mode, max_in_flight)
    assert lv.value == pytest.approx(value, rel=1e-12)


def test_installed_version_of_a_console_script(tmp_path):
    import sys

    from wattbench.results.tools.registry import installed_version

    script = tmp_path / "aiperf"
    script.write_text(f"#!{sys.executable}\nprint('hi')\n")
    script.chmod(0o755)
    assert installed_version("aiperf", [str(script)]) is None  # this Python has no aiperf installed
    assert installed_version("command", [str(script)]) is None
    (tmp_path / "bin").mkdir()
    elf = tmp_path / "bin" / "vllm"
    elf.write_bytes(b"\x7fELF\x02\x01")
    elf.chmod(0o755)
    assert installed_version("vllm-bench-serve", [str(elf)]) is None


def test_guidellm_request_left_in_flight_is_counted_and_the_level_warns(tmp_path):
    """GuideLLM can close a benchmark with a request still processing (its scheduler_state says so;
    CI 2026-12-01: 47 of 48 requests in the file, the 48th's tokens inside the window): the reader
    says how many, and measure's finding bounds what that does to J/token."""
    from types import SimpleNamespace

    from wattbench.accounting.level_findings import tool_left_out_finding
    from wattbench.accounting.validity import combine

    d = json.loads((FIX / "guidellm_benchmarks.json").read_text())
    assert read_tool("guidellm", [FIX / "guidellm_benchmarks.json"]).levels[0].left_out == 0
    d["benchmarks"][0]["scheduler_state"] = {"processing_requests": 1, "processed_requests": 12}
    p = tmp_path / "benchmarks.json"
    p.write_text(json.dumps(d))
    (lv,) = read_tool("guidellm", [p]).levels
    assert lv.left_out == 1 and any("still in flight" in n for n in lv.notes)
    level = SimpleNamespace(throughput=SimpleNamespace(tokens_in_window=SimpleNamespace(output=12 * 16)),
                            requests=SimpleNamespace(completed=12))
    f = tool_left_out_finding(level, lv.left_out, max(r.output_tokens or 0 for r in lv.requests))
    # one request of at most 16 tokens against 192 credited: J/token overstated by at most 8.3%
    assert f.kind == "tool_left_out" and f.effect_pct == pytest.approx(100 * 16 / 192, rel=1e-12)
    assert f.severity == "warn" and combine([f]).verdict == "warn"


def test_a_wrapped_wattbench_runs_inf_rate_level_reads_as_inf(tmp_path):
    """``measure -- wattbench run --rate 2,inf``: result.json writes the inf rate as null (JSON has
    no inf); the wrapped level reads as inf requests/s, every request at once, not as 0."""
    import math

    from tests.fakes.results_factory import make_level, make_result
    from wattbench.results.rundir import write_result

    d = tmp_path / "run"
    write_result(d, make_result(levels=[make_level(0, mode="rate", value=2.0), make_level(1, mode="rate", value=math.inf)]))
    assert json.loads((d / "result.json").read_text())["levels"][1]["load"]["target_rate_rps"] is None
    recs = [{"id": i, "level": i, "sent_ns": 5_000_000_000, "first_token_ns": 5_100_000_000,
             "last_token_ns": 5_200_000_000, "end_ns": 5_300_000_000, "input_tokens": 16, "output_tokens": 16,
             "ok": True} for i in (0, 1)]
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = read_tool("wattbench-run", [d])
    assert [(lv.mode, lv.value) for lv in run.levels] == [("rate", 2.0), ("rate", math.inf)]
