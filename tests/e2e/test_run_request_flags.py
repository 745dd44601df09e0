"""What a vLLM or GuideLLM user reaches for, through the installed CLI against the scripted
server: ``--rate R --max-concurrency N`` (open loop capped at N in flight), ``--rate inf`` (all at
once), ``--header K:V`` (sent, never written when it carries a secret), ``--extra-body``,
``--temperature``, ``--top-p``; bad values exit 2 with one line."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_run_cli import wb
from tests.fakes.stream_server_proc import stream_server
from wattbench.results.rundir import load_result

COMMON = ("--input-tokens", "8", "--output-tokens", "8", "--sensor", "const:node=500", "--idle", "0",
          "--no-register", "--no-html", "--quiet")


def test_rate_capped_by_max_concurrency(tmp_path):
    # 500 requests/s offered, each stream ~75 ms: uncapped, ~30 would be in flight; the cap holds 3
    with stream_server("--ttft-ms", "40", "--itl-ms", "5") as (base, stats):
        p = wb("run", "-t", base, "--rate", "500", "--max-concurrency", "3", "-n", "24", "--arrival", "constant",
               *COMMON, "--out", str(tmp_path / "r"), cwd=tmp_path)
        served = stats()
    assert p.returncode == 0, p.stderr
    res = load_result(tmp_path / "r")
    primed = res.noise.priming  # the priming load (not measured) went through the same cap
    assert (primed.label, primed.requests, primed.completed) == ("rate=500", 24, 24)
    probes = res.prompt_calibration.counted  # the prompt-length probes went first, through the same cap
    assert served["max_active"] == 3 and served["streams_completed"] == 24 + primed.completed + probes
    lv = res.levels[0]
    assert lv.load.max_in_flight == 3 and lv.requests.completed == 24
    # a rate held down by the cap is by design, not a saturated load generator
    assert not any("achieved rate" in r for r in lv.load.saturation_reasons)


def test_rate_inf_sends_everything_at_once(tmp_path):
    with stream_server("--ttft-ms", "300", "--itl-ms", "5") as (base, stats):
        p = wb("run", "-t", base, "--rate", "inf", "-n", "10", *COMMON, "--out", str(tmp_path / "r"), cwd=tmp_path)
        served = stats()
    assert p.returncode == 0, p.stderr
    assert served["max_active"] == 10  # every stream open at once (each waits 300 ms for its first token)
    res = load_result(tmp_path / "r")
    assert res.levels[0].label == "rate=inf"
    assert (res.noise.priming.label, res.noise.priming.value, res.noise.priming.completed) == ("rate=inf", None, 10)
    # the prompt-length probes (one token each), the priming's ten, then the level's
    assert served["streams_completed"] == 20 + res.prompt_calibration.counted


def test_headers_and_body_fields_sent_secrets_never_written(tmp_path):
    secret = "sk-live-0123456789abcdef"
    with stream_server("--ttft-ms", "5", "--itl-ms", "1") as (base, stats):
        p = wb("run", "-t", base, "-c", "1", "-n", "3", *COMMON, "--out", str(tmp_path / "r"),
               "--header", "X-Tenant:acme", "--header", f"X-Api-Key:{secret}", "--header", "X-Trace: a:b:c",
               "--extra-body", '{"top_k": 20, "repetition_penalty": 1.1}', "--temperature", "0.7",
               "--top-p", "0.9", cwd=tmp_path)
        last = stats.last()
    assert p.returncode == 0, p.stderr
    h, body = last["headers"], last["body"]
    assert h["x-tenant"] == "acme" and h["x-api-key"] == secret and h["x-trace"] == "a:b:c"
    assert body["top_k"] == 20 and body["repetition_penalty"] == pytest.approx(1.1, rel=1e-9)
    assert body["temperature"] == pytest.approx(0.7, rel=1e-9) and body["top_p"] == pytest.approx(0.9, rel=1e-9)
    assert body["stream"] is True and body["max_tokens"] == 8  # wattbench's own fields kept
    written = "".join(f.read_text(errors="replace") for f in (tmp_path / "r").rglob("*") if f.is_file())
    assert secret not in written and secret not in p.stdout + p.stderr
    cfg = json.loads((tmp_path / "r" / "result.json").read_text())["config"]
    assert cfg["headers"] == {"X-Tenant": "acme", "X-Api-Key": "<redacted>", "X-Trace": "a:b:c"}
    assert cfg["temperature"] == pytest.approx(0.7, rel=1e-9) and cfg["extra_body"] == pytest.approx({"top_k": 20, "repetition_penalty": 1.1}, rel=1e-9)


@pytest.mark.parametrize("args, needle", [
    (["--rate", "inf"], "--num-requests"),
    (["-c", "1", "-n", "2", "--header", "no-colon"], "--header"),
    (["-c", "1", "-n", "2", "--extra-body", "[1, 2]"], "--extra-body"),
    (["-c", "1", "-n", "2", "--extra-body", "{bad"], "--extra-body"),
    (["-c", "1", "-n", "2", "--top-p", "1.5"], "top-p"),
    (["--rate", "5", "-n", "2", "--max-concurrency", "0"], "--max-concurrency"),
])
def test_bad_request_flags_one_line_exit_2(tmp_path, args, needle):
    with stream_server() as (base, _):
        p = wb("run", "-t", base, *args, "--no-register", "--idle", "0", "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr
    assert not (tmp_path / "r" / "result.json").exists()
