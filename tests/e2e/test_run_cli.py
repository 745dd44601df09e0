"""``wattbench run`` end to end: the installed CLI (``python -m wattbench``) against a scripted
streaming server started as a real process, with a declared node sensor as ground truth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.results.rundir import load_requests, load_result

ROOT = Path(__file__).resolve().parents[2]


def wb(*args: str, cwd: Path, env_extra: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("WATTBENCH_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "wattbench", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_run_declared_node_power_gives_exact_energy_and_per_kw(tmp_path):
    with stream_server("--ttft-ms", "40", "--itl-ms", "8") as (base, stats):
        out = tmp_path / "run"
        p = wb(
            "run", "--target", base, "--concurrency", "1,4", "--num-requests", "12", "--input-tokens", "32",
            "--keep-chunks", "--no-prime", "--no-history-check",  # the server's log holds the measured requests only
            "--no-calibrate-prompts",  # (no prompt-length probes either)
            "--output-tokens", "16", "--sensor", "const:node=700", "--idle", "0.5", "--db", str(tmp_path / "h.db"),
            "--out", str(out), "--json", cwd=tmp_path,
        )
        assert p.returncode == 0, p.stderr
        served = stats()
        per_chunk, emit_ns = stats.emissions()
    printed = json.loads(p.stdout)
    result = load_result(out)
    assert printed["run_id"] == result.run_id and result.status == "complete"
    assert result.noise.priming is None and result.noise.history_check is None  # as asked
    assert [lv.label for lv in result.levels] == ["concurrency=1", "concurrency=4"]
    for lv in result.levels:
        # the keys every level carries
        for fig in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
            stats_ = getattr(lv.latency, fig)
            for k in ("mean", "p50", "p90", "p95", "p99", "max"):
                assert getattr(stats_, k) is not None, (fig, k)
        assert lv.requests.completed == 12 and lv.requests.failed == 0
        assert lv.throughput.output_tokens == 12 * 16
        node = lv.energy["node"]
        assert node.label == "declared" and node.method == "declared"
        # node energy = 700 W x window, and tok/s per kW = tok/s / 0.7
        assert node.energy_j == pytest.approx(700.0 * lv.window.duration_s, rel=1e-9)
        assert node.output_tokens_per_s_per_kw == pytest.approx(lv.throughput.output_tokens_per_s / 0.7, rel=1e-9)
        assert node.j_per_output_token == pytest.approx(node.energy_j / lv.throughput.output_tokens, rel=1e-9)
        for k in ("energy_j", "avg_power_w", "j_per_output_token", "output_tokens_per_s_per_kw", "tokens_per_kwh",
                  "cost_per_million_output_tokens", "method"):
            assert getattr(node, k) is not None, k
    # every request the server completed is in requests.jsonl, and nothing else
    recs = load_requests(out)
    _latency_against_server_truth(result, recs, per_chunk, emit_ns)
    assert len(recs) == 24 == served["streams_done"]
    assert sum(r.output_tokens for r in recs) == served["tokens"]
    assert (out / "report.html").stat().st_size > 100_000
    assert (out / "telemetry.jsonl").exists()
    assert printed["levels"][0]["energy"]["node"]["energy_j"] == pytest.approx(result.levels[0].energy["node"].energy_j)


def _latency_against_server_truth(result, recs, per_chunk: int, emit_ns: list[int]) -> None:
    """TTFT/ITL of the CLI run against the scripted server's own log of when it wrote every chunk
    (``perf_counter_ns`` = CLOCK_MONOTONIC, the client's clock too), never against wall-clock
    expectations: on a loaded host every figure may grow, and that is not an error of the tool.

    - the report's figures are the records' own (mean of ``first_token - sent``; chunk gaps);
    - causality: the server writes token 0 of a request ``--ttft-ms`` 40 after reading it, so no
      client TTFT is below 40 ms;
    - per request (concurrency 1: one stream at a time, so the k-th request's chunks are the k-th
      16 of the emission log): the client stamped each first/last chunk no earlier than the
      server wrote it, and later by no more than its read path (2 ms) plus the longest wait its
      own event-loop probe saw (``client_loop_lag_ms.max``: the host kept it off a CPU)."""
    n_out = 16 // per_chunk
    assert len(emit_ns) == 24 * n_out
    for lv in result.levels:
        mine = [r for r in recs if r.level == lv.index and r.ok and not r.warmup]
        assert len(mine) == 12 and all(r.first_token_ns == r.chunk_ns[0] and len(r.chunk_ns) == n_out for r in mine)
        ttft = [(r.first_token_ns - r.sent_ns) / 1e6 for r in mine]
        assert lv.latency.ttft_ms.mean == pytest.approx(sum(ttft) / len(ttft), rel=1e-9)
        spans = sum(r.chunk_ns[-1] - r.chunk_ns[0] for r in mine) / 1e6
        assert lv.latency.itl_ms.mean == pytest.approx(spans / (len(mine) * (n_out - 1)), rel=1e-9)
        assert min(ttft) >= 40.0, min(ttft)  # the server cannot have written token 0 sooner
    lv1 = result.levels[0]
    assert lv1.label == "concurrency=1"
    seq = sorted((r for r in recs if r.level == lv1.index), key=lambda r: r.sent_ns)
    lag_ms = lv1.load.client_loop_lag_ms.max or 0.0
    slack_ns = int((2.0 + lag_ms) * 1e6)
    for k, r in enumerate(seq):
        first_w, last_w = emit_ns[k * n_out], emit_ns[(k + 1) * n_out - 1]
        assert r.sent_ns < first_w and first_w - r.sent_ns >= 40_000_000  # written 40 ms after the request
        assert 0 <= r.first_token_ns - first_w <= slack_ns, (k, r.first_token_ns - first_w, lag_ms)
        assert 0 <= r.last_token_ns - last_w <= slack_ns, (k, r.last_token_ns - last_w, lag_ms)
    true_ttft = sum(emit_ns[k * n_out] - r.sent_ns for k, r in enumerate(seq)) / len(seq) / 1e6
    assert 0 <= lv1.latency.ttft_ms.mean - true_ttft <= 2.0 + lag_ms
    true_itl = sum(emit_ns[(k + 1) * n_out - 1] - emit_ns[k * n_out] for k in range(len(seq))) / 1e6 / (len(seq) * (n_out - 1))
    assert abs(lv1.latency.itl_ms.mean - true_itl) <= (2.0 + lag_ms) / (n_out - 1)


def test_run_terminal_summary_shows_headline(tmp_path):
    with stream_server("--ttft-ms", "20", "--itl-ms", "2") as (base, _):
        p = wb("run", "--target", base + "/v1", "-c", "2", "-n", "6", "--output-tokens", "8", "--input-tokens", "8",
               "--sensor", "const:node=500", "--idle", "0", "--no-register", "--out", str(tmp_path / "r"),
               cwd=tmp_path, env_extra={"COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    # the answer first: the headline figure, its boundary and label, the level's verdict
    lines = p.stdout.splitlines()
    answer = next(x for x in lines if x.startswith("answer: "))
    assert answer.startswith("answer: c=2 — ") and "output tok/s per kW (node, declared ±20%)" in answer, answer
    # then, right after the verdicts, the level table, its headers stacked at 80 columns: out tok/s and
    # tok/s/kW first, then requests and latency (TTFT, TPOT, ITL, E2E as mean, p50, p99)
    verdict = lines.index(next(x for x in lines if x.startswith("verdict: ")))
    first_table = lines.index("", verdict)  # the blank line after the verdicts
    assert first_table == verdict + 1
    header = " ".join(" ".join(lines[first_table:lines.index(next(x for x in lines if x.startswith("level ")))
                                     + 1]).split())
    assert all(w in header for w in ("out", "tok/s", "tok/s/kW")), header  # the efficiency first
    flat = " ".join(p.stdout.split())
    assert all(w in flat for w in ("TTFT", "TPOT", "ITL", "E2E", "mean", "p50", "p99", "req/s"))
    assert f"results:{tmp_path / 'r'}" in "".join(p.stdout.split())  # where the run directory is
    # readable at 80 columns: nothing cut short, the level under its short label, each note once
    assert "…" not in p.stdout and max(len(x) for x in p.stdout.splitlines()) <= 80
    assert any(line.startswith("c=2 ") for line in p.stdout.splitlines())
    # after the tables, the notes: summary.NOTE_MARK + text, one per distinct finding, folded under its mark
    last_row = max(i for i, x in enumerate(lines) if x.startswith("c=2 "))
    notes = lines[lines.index("", last_row) + 1:]
    notes = notes[:next(i for i, x in enumerate(notes) if not x.startswith(("✗ ", "! ", "≈ ", "- ", "  ")))]
    heads = [x for x in notes if not x.startswith("  ")]
    assert heads and all(x[:2] in ("✗ ", "! ", "≈ ", "- ") for x in heads) and len(heads) == len(set(heads)), notes
    # stderr is not a terminal here (a CI log): the progress is plain lines, a level's start and its end
    # with its headline, never a bar's control characters
    assert "wattbench: level 1 of 1 · c=2 started: 6 requests" in p.stderr, p.stderr
    done = next(x for x in p.stderr.splitlines() if x.startswith("wattbench: level 1 of 1 · c=2 done in "))
    assert "out tok/s" in done and "tok/s/kW" in done and "\x1b" not in p.stderr and "\r" not in p.stderr


@pytest.mark.parametrize(
    "args, server_args, needle",
    [
        (["--target", "http://127.0.0.1:9"], None, "127.0.0.1:9"),
        (["--model", "no-such-model"], [], "no-such-model"),
        (["--input-tokens", "weird:1"], [], "weird:1"),
        (["--rate", "-2"], [], "rate"),
        ([], ["--not-openai"], "OpenAI"),
        (["--concurrency", "0"], [], "concurrency"),
        (["--warmup", "abc"], [], "--warmup"),
    ],
)
def test_bad_input_one_line_exit_2_no_result(tmp_path, args, server_args, needle):
    out = tmp_path / "run"

    def go(base_args):
        return wb("run", *base_args, *args, "-n", "2", "--no-register", "--sensor", "const:node=1", "--idle", "0",
                  "--out", str(out), cwd=tmp_path)

    if server_args is None:
        p = go([])
    else:
        with stream_server(*server_args) as (base, _):
            p = go(["--target", base] if "--target" not in args else [])
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("wattbench: error:"), p.stderr
    assert needle in lines[0]
    assert "Traceback" not in p.stderr
    assert not (out / "result.json").exists()


def test_dataset_prompts_are_not_judged_against_an_asked_length(tmp_path):
    """A past defect: a dataset's prompts (no length asked) were warned about as "input tokens asked 7,
    the server counted …". Synthetic prompts built to --input-tokens still are (control)."""
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"tell me about the number {i} in a few words"}) + "\n"
                            for i in range(8)))
    with stream_server("--ttft-ms", "5", "--itl-ms", "2") as (base, _):
        p = wb("run", "--target", base, "-c", "2", "-n", "8", "--workload", str(data), "--output-tokens", "8",
               "--no-sensors", "--idle", "0", "--no-register", "--out", str(tmp_path / "ds"), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        q = wb("run", "--target", base, "-c", "2", "-n", "8", "--input-tokens", "64", "--output-tokens", "8",
               "--no-sensors", "--idle", "0", "--no-register", "--no-calibrate-prompts", "--out", str(tmp_path / "syn"),
               cwd=tmp_path)  # the approximate lengths this rule judges (calibrated ones are fitted to the server)
        assert q.returncode == 0, q.stderr
    ds, syn = load_result(tmp_path / "ds"), load_result(tmp_path / "syn")
    assert ds.prompt_length_source == "approx" and syn.prompt_length_source == "approx"
    assert not any("input tokens asked" in r for lv in ds.levels for r in lv.validity.reasons)
    assert "input tokens asked" not in p.stdout
    # the fake server counts words: a 64-token synthetic prompt counted approximately is far off
    assert any("input tokens asked 64" in r for lv in syn.levels for r in lv.validity.reasons)


def test_no_idle_baseline_from_declared_constants_alone(tmp_path):
    """A past defect: the idle baseline was measured with only --sensor const:node=W, reading the constant
    back. It is skipped and the run says so; with a metered figure beside it, it is measured."""
    with stream_server("--ttft-ms", "5", "--itl-ms", "2") as (base, _):
        p = wb("run", "--target", base, "-c", "1", "-n", "4", "--output-tokens", "4", "--sensor", "const:node=300",
               "--idle", "30", "--no-register", "--out", str(tmp_path / "c"), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        q = wb("run", "--target", base, "-c", "1", "-n", "4", "--output-tokens", "4", "--sensor", "const:node=300",
               "--sensor", "estimate:cpu,tdp=100", "--idle", "0.5", "--no-register", "--out", str(tmp_path / "m"),
               cwd=tmp_path)
        assert q.returncode == 0, q.stderr
    c, m = load_result(tmp_path / "c"), load_result(tmp_path / "m")
    assert c.idle_window is None and not c.idle
    # a note of the run, said once (not a warning, not a progress line as well)
    (f,) = [f for f in c.validity.findings if f.kind == "no_idle"]
    assert f.severity == "note" and f.text.startswith("no idle baseline: the only power figures are declared")
    assert not any("no idle baseline" in w for w in c.warnings)
    assert (p.stdout + p.stderr).count("no idle baseline") == 1 and "- no idle baseline" in p.stdout
    assert c.levels[0].energy["node"].dynamic_energy_j is None
    assert m.idle_window is not None and "cpu" in m.idle
    assert not any(w.startswith("no idle baseline") for w in m.warnings)
    assert not [f for f in m.validity.findings if f.kind == "no_idle"]


def test_the_priming_is_bracketed_by_scrapes_so_no_level_counts_its_tokens(tmp_path):
    """The server's counters over the first measured level start from a scrape taken after the
    priming ended (as every level's end is: ``RunSession.await_closing_reads``), so the level's
    counter delta (``server_metrics``) holds none of the priming's tokens: between the scrapes that
    bracket each level the server counted exactly the tokens its requests reported."""
    from wattbench.server.metrics import ServerTimeline

    with stream_server("--ttft-ms", "5", "--itl-ms", "1", "--vllm-metrics") as (base, _):
        p = wb("run", "--target", base, "-c", "2,4", "-n", "8", "--input-tokens", "8", "--output-tokens", "8",
               "--no-sensors", "--idle", "0", "--no-register", "--no-html", "--out", str(tmp_path / "r"),
               cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = load_result(tmp_path / "r")
    tl = ServerTimeline.from_jsonl(tmp_path / "r" / "server_timeline.jsonl")
    prime = res.noise.priming
    assert prime is not None and prime.completed == 8  # two rounds of c=4
    first = min(res.levels, key=lambda lv: lv.window.start_ns)
    assert any(prime.end_ns <= t <= first.window.start_ns for t, _ in tl.scrapes), "no scrape after the priming"
    for lv in res.levels:
        before = [v for t, v in tl.scrapes if t <= lv.window.start_ns][-1]
        after = next(v for t, v in tl.scrapes if t >= lv.window.end_ns)
        assert after["generation_tokens"] - before["generation_tokens"] == lv.throughput.output_tokens, lv.label
