"""``wattbench measure -- COMMAND`` end to end with a command that is no load generator wattbench
reads: the installed CLI (``python -m wattbench``) around a small Python client that streams
completions from the scripted server (``--vllm-metrics``: vLLM's token counters), a declared node
sensor as ground truth. The tools it does read are in tests/integration/test_measure_tools.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.e2e.test_run_cli import wb
from tests.fakes.stream_server_proc import stream_server
from wattbench.results.rundir import load_result

CLIENT = r'''
import json, sys, time, urllib.request
base, n, markers = sys.argv[1], int(sys.argv[2]), (sys.argv[3] if len(sys.argv) > 3 else None)
def mark(kind, label=""):
    if markers:
        with open(markers, "a") as f:
            f.write(f"{kind} {time.time():.6f} {label}\n")
for part in ("first", "second"):
    mark("start", part)
    for i in range(n):
        body = json.dumps({"model": "fake-model", "prompt": f"p{i} hello", "max_tokens": 32, "stream": True}).encode()
        req = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            r.read()
    mark("end")
'''

POWER_W = 300.0


def _client(tmp_path: Path) -> Path:
    p = tmp_path / "client.py"
    p.write_text(CLIENT)
    return p


def test_any_command_tokens_from_the_servers_counters(tmp_path):
    with stream_server("--ttft-ms", "20", "--itl-ms", "5", "--vllm-metrics") as (base, stats):
        out = tmp_path / "run"
        p = wb("measure", "-s", f"const:node={POWER_W:g}", "--idle", "0.5", "-t", base, "--no-register", "-o", str(out),
               "--json", "--", sys.executable, str(_client(tmp_path)), base, "4", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        s = stats()
    res = load_result(out)
    assert res.measure.tool == "command" and res.measure.window_source == "command lifetime"
    assert res.measure.token_source == "server counters"
    (lv,) = res.levels
    w = lv.window
    assert (w.start_ns, w.end_ns) == (res.measure.started_ns, res.measure.ended_ns)
    assert lv.energy["node"].energy_j == pytest.approx(POWER_W * w.duration_s, rel=1e-6)
    # every token the server wrote was written while the command ran: 2 × 4 requests × 32 tokens
    assert s["tokens"] == 256
    # the counter's increase over the lifetime, within the steps of the scrapes around its edges
    assert lv.throughput.token_basis == "server_counters" and lv.token_source == "server_counters"
    got, err = lv.throughput.tokens_in_window.output, lv.tool.server_output_tokens_error
    assert err is not None and abs(got - 256) <= err + 1e-9, (got, err)
    assert lv.energy["node"].j_per_output_token == pytest.approx(POWER_W * w.duration_s / round(got), rel=1e-9)
    assert (out / "command.log").exists() and json.loads(p.stdout)["run_id"] == res.run_id


def test_window_from_markers_one_level_per_pair(tmp_path):
    with stream_server("--ttft-ms", "20", "--itl-ms", "5", "--vllm-metrics") as (base, _):
        out = tmp_path / "run"
        p = wb("measure", "-s", f"const:node={POWER_W:g}", "--idle", "0", "-t", base, "--no-register", "-o", str(out),
               "--window-from", "marks.txt", "--", sys.executable, str(_client(tmp_path)), base, "3", "marks.txt",
               cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    res = load_result(out)
    assert res.measure.window_source == "markers" and res.measure.clock.source_clock == "wall"
    assert [lv.label for lv in res.levels] == ["first", "second"]
    a, b = res.levels
    assert res.measure.started_ns <= a.window.start_ns < a.window.end_ns <= b.window.start_ns < b.window.end_ns
    assert b.window.end_ns <= res.measure.ended_ns


def test_no_counters_means_energy_only_said_so(tmp_path):
    with stream_server("--ttft-ms", "20", "--itl-ms", "5") as (base, _):
        out = tmp_path / "run"
        p = wb("measure", "-s", f"const:node={POWER_W:g}", "--idle", "0", "--no-register", "-o", str(out), "--",
               sys.executable, str(_client(tmp_path)), base, "1", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    res = load_result(out)
    (lv,) = res.levels
    assert res.measure.token_source == "none" and lv.energy["node"].energy_j > 0
    assert lv.energy["node"].j_per_output_token is None
    assert any("no tokens can be credited" in r for r in lv.validity.reasons)
    # said in words: what was measured and what was not; no per-kW figure of "–", no "from the none"
    out_text = " ".join(p.stdout.split())
    answer = next(x for x in p.stdout.split("\n") if x.startswith("answer: "))
    assert "– output tok/s per kW" not in out_text and "the none" not in out_text
    assert "answer: command — no tokens counted, so no tokens per kW; energy only: " in out_text, answer
    assert f"{POWER_W:g} W average" in out_text and "(node, declared ±20%)" in out_text
    assert "measured around a command (exit 0): windows from the command's lifetime, tokens from nowhere" in out_text


def test_with_a_target_the_fix_is_not_give_target(tmp_path):
    """With -t given to a server without token counters it still said "give --target URL"."""
    with stream_server("--ttft-ms", "20", "--itl-ms", "5") as (base, _):
        out = tmp_path / "run"
        p = wb("measure", "-s", f"const:node={POWER_W:g}", "--idle", "0", "--no-register", "-o", str(out),
               "-t", base, "--", sys.executable, "-c", "pass", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    (lv,) = load_result(out).levels
    (reason,) = [r for r in lv.validity.reasons if "no tokens can be credited" in r]
    assert "give --target" not in reason and f"the server at {base} showed no token counter" in reason
    assert "give --target" not in lv.server_metrics.model_dump_json()


@pytest.mark.slow
def test_a_wrapped_wattbench_run_is_read_like_the_other_tools(tmp_path):
    """measure -- wattbench run …: its result (found under its --out) gives the levels, their windows
    from its requests and its tokens from the server's usage, as for vllm bench serve or GuideLLM."""
    with stream_server("--ttft-ms", "20", "--itl-ms", "4") as (base, stats):
        out, inner = tmp_path / "outer", tmp_path / "inner"
        p = wb("measure", "-s", f"const:node={POWER_W:g}", "--idle", "0", "--no-register", "-o", str(out), "-t", base,
               "--", sys.executable, "-m", "wattbench", "run", "-t", base, "-c", "1,4", "-n", "12",
               "--input-tokens", "16", "--output-tokens", "16", "--no-prime", "--no-history-check", "--no-sensors",
               "--no-calibrate-prompts", "--no-register", "--out", str(inner), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        served = stats()
    res, own = load_result(out), load_result(inner)
    assert res.measure.tool == "wattbench-run" and res.measure.token_source == "tool records"
    assert [lv.label for lv in res.levels] == ["wattbench-run: concurrency=1", "wattbench-run: concurrency=4"]
    assert [lv.label for lv in own.levels] == ["concurrency=1", "concurrency=4"]
    for lv, o in zip(res.levels, own.levels):
        assert lv.throughput.output_tokens == o.throughput.output_tokens == 12 * 16
        assert lv.tool.figures["output_tokens_per_s"] == pytest.approx(o.throughput.output_tokens_per_s, rel=1e-12)
        node = lv.energy["node"]  # the measuring run's own meter over the wrapped run's window
        assert node.energy_j == pytest.approx(POWER_W * lv.window.duration_s, rel=1e-9)
        assert node.output_tokens_per_s_per_kw == pytest.approx(lv.throughput.output_tokens_per_s / 0.3, rel=1e-9)
    assert served["requests"] == 24


def test_failing_command_keeps_the_energy_and_exits_1(tmp_path):
    out = tmp_path / "run"
    p = wb("measure", "-s", "const:node=100", "--idle", "0", "--no-register", "-o", str(out), "-q", "--",
           sys.executable, "-c", "import time, sys; time.sleep(0.3); sys.exit(3)", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "exited with status 3" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    res = load_result(out)
    assert res.status == "failed" and res.measure.exit_code == 3
    assert res.levels[0].energy["node"].energy_j == pytest.approx(100 * res.levels[0].window.duration_s, rel=1e-6)


@pytest.mark.parametrize("cmd, msg", [
    (["no-such-program-xyz"], "command not found"),
    (["vllm", "bench", "serve", "--base-url", "http://127.0.0.1:1"], "--save-result"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, cmd, msg):
    out = tmp_path / "run"
    p = wb("measure", "-s", "const:node=100", "--no-register", "-o", str(out), "--", *cmd, cwd=tmp_path)
    assert p.returncode == 2 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not out.exists()


def test_sigterm_stops_the_command_by_pid_and_keeps_its_energy(tmp_path):
    import os
    import signal
    import subprocess
    import time

    from tests.e2e.test_run_cli import ROOT

    out, pidfile = tmp_path / "run", tmp_path / "child.pid"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    proc = subprocess.Popen([sys.executable, "-m", "wattbench", "measure", "-s", "const:node=200", "--idle", "0",
                             "--no-register", "-o", str(out), "-q", "--", sys.executable, "-c", child],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120  # only ends a hang
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        pid = int(pidfile.read_text())
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)  # without the stop: the child's 600 s sleep runs on
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    try:  # the command was stopped by its PID, not left running
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive
    res = load_result(out)
    assert res.status == "interrupted" and res.measure.exit_code is None
    (lv,) = res.levels  # the energy over the command's run until it was stopped
    assert lv.window.start_ns == res.measure.started_ns and lv.window.end_ns == res.measure.ended_ns
    assert lv.energy["node"].energy_j == pytest.approx(200 * lv.window.duration_s, rel=1e-6)


def test_a_measure_run_is_a_run_for_report_compare_and_history(tmp_path):
    db = tmp_path / "h.db"
    outs = [tmp_path / "a", tmp_path / "b"]
    with stream_server("--ttft-ms", "20", "--itl-ms", "5", "--vllm-metrics") as (base, _):
        for out in outs:
            p = wb("measure", "-s", f"const:node={POWER_W:g}", "--idle", "0", "-t", base, "--db", str(db), "-o",
                   str(out), "-q", "--", sys.executable, str(_client(tmp_path)), base, "2", cwd=tmp_path)
            assert p.returncode == 0, p.stderr
    ids = [load_result(o).run_id for o in outs]
    p = wb("history", "list", "--db", str(db), "--full-ids", cwd=tmp_path)
    assert p.returncode == 0 and all(i in p.stdout for i in ids), p.stdout + p.stderr
    p = wb("report", str(outs[0]), cwd=tmp_path)
    assert p.returncode == 0 and "J/tok" in p.stdout, p.stdout + p.stderr
    p = wb("compare", str(outs[0]), str(outs[1]), cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (outs[0] / "report.html").exists()


def test_a_tool_that_writes_no_result_is_one_line_and_keeps_the_energy(tmp_path):
    out = tmp_path / "run"
    p = wb("measure", "-s", "const:node=100", "--idle", "0", "--no-register", "-o", str(out), "-q", "--tool",
           "guidellm", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "wrote no result file" in lines[0], p.stderr
    res = load_result(out)
    assert res.status == "failed" and res.measure.window_source == "command lifetime"
    assert res.levels[0].energy["node"].energy_j == pytest.approx(100 * res.levels[0].window.duration_s, rel=1e-6)


def test_markers_never_written_fall_back_to_the_lifetime(tmp_path):
    out = tmp_path / "run"
    p = wb("measure", "-s", "const:node=100", "--idle", "0", "--no-register", "-o", str(out), "-q", "--window-from",
           "marks.txt", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--window-from" in lines[0] and "cannot read it" in lines[0], p.stderr
    res = load_result(out)
    assert res.status == "failed" and res.measure.window_source == "command lifetime" and len(res.levels) == 1


@pytest.mark.parametrize("width", [80, 160])
def test_a_command_with_no_requests_gets_no_throughput_and_no_latency_verdict(tmp_path, width):
    """A past defect: ``measure -- sleep 4`` printed ``out tok/s 0`` and ``latency valid`` for a
    command that sent no request. Nothing measured gets no figure and no verdict."""
    from typer.testing import CliRunner

    from wattbench.cli.main import build_app

    out = tmp_path / "run"
    p = wb("measure", "-s", f"const:node={POWER_W:g}", "--idle", "0", "--no-register", "-o", str(out),
           "--", sys.executable, "-c", "import time; time.sleep(0.5)", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = CliRunner().invoke(build_app(), ["report", str(out)], terminal_width=width)
    assert res.exit_code == 0, res.output
    text = res.output
    assert "latency not measured (no request completed)" in text and "latency valid" not in text
    row = next(ln for ln in text.splitlines() if ln.startswith("command "))
    assert row.split()[:3] == ["command", "warn", "0/0"] and "tok/s" not in text.split("level ")[-1].split("\n")[0]
    assert " 0 " not in row.replace("0/0", "")  # no zero throughput for a command that counted nothing
