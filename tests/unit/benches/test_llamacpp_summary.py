"""benches/gpu/llamacpp_summary.py: llama.cpp's /metrics counters between the scrapes bracketing a
level's window hold every request inside in full and any share of those straddling a scrape —
checked on the committed H200 run (docs/validation-data/h200-llamacpp-beside-embedded/run.tgz) and on
scripted requests where the answer is known."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from benches.gpu import llamacpp_summary as summary  # the repository root is on the tests' path

ROOT = Path(__file__).resolve().parents[3]
RUN_TGZ = ROOT / "docs" / "validation-data" / "h200-llamacpp-beside-embedded" / "run.tgz"


@pytest.fixture(scope="module")
def h200_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("lc")
    with tarfile.open(RUN_TGZ) as t:
        for name in ("lc/result.json", "lc/requests.jsonl", "lc/server_timeline.jsonl"):
            t.extract(name, d, filter="data")
    return d / "lc"


def test_h200_c1_counters_hold_the_32_measured_and_both_straddling_requests(h200_run):
    (lj, gen, prm), _ = summary.level_checks(h200_run)
    assert lj["label"] == "concurrency=1"
    # 32 measured requests of 128 tokens inside; two 128-token warm-up streams straddle the opening scrape
    assert (gen.counter_delta, gen.inside_tokens, gen.straddle_tokens) == (4352, 4096, 256)
    assert (gen.inside_requests, gen.straddle_requests, gen.unrecorded_streams) == (32, 2, 0)
    assert gen.verdict == prm.verdict == "ok"
    assert lj["throughput"]["output_tokens"] == 4096  # the window's own count, not the bracket's


def test_h200_c16_cut_run_holds_the_lower_bound_and_names_the_unrecorded_streams(h200_run):
    _, (lj, gen, prm) = summary.level_checks(h200_run)
    assert lj["label"] == "concurrency=16"
    assert (gen.counter_delta, gen.inside_tokens, gen.straddle_tokens) == (227328, 224128, 3200)
    # the timeout cut c=64 after its first prompts were evaluated: 7 × 257 prompt tokens past the
    # recorded requests, streams the running gauge shows and requests.jsonl does not hold
    assert prm.counter_delta - (prm.inside_tokens + prm.straddle_tokens) == 7 * 257
    assert gen.unrecorded_streams > 0 and gen.verdict == prm.verdict == "low-ok"


def _req(sent, end, out, inp=10):
    return {"sent_ns": sent, "end_ns": end, "output_tokens": out, "input_tokens": inp}


def _scrapes(gen_at_100, gen_at_200, running_at_200=0):
    return [{"t_ns": 0, "generation_tokens": 0, "prompt_tokens": 0, "running": 0},
            {"t_ns": 100, "generation_tokens": gen_at_100, "prompt_tokens": 0, "running": 0},
            {"t_ns": 200, "generation_tokens": gen_at_200, "prompt_tokens": 0, "running": running_at_200}]


# window [10, 190] -> bracket scrapes at 0 and 200; one request inside (50 tokens), one straddling 0 (8)
REQS = [_req(-5, 30, 8), _req(20, 180, 50)]


@pytest.mark.parametrize("delta,verdict", [(50, "ok"), (54, "ok"), (58, "ok"), (49, "FAIL"), (59, "FAIL")])
def test_bounds_are_inside_tokens_to_inside_plus_straddling(delta, verdict):
    c = summary.bracket_check("output", REQS, _scrapes(0, delta), 10, 190, slack_ns=0)
    assert (c.inside_tokens, c.straddle_tokens, c.verdict) == (50, 8, verdict)


def test_no_straddler_means_exact_equality():
    c = summary.bracket_check("output", REQS[1:], _scrapes(0, 51), 10, 190, slack_ns=0)
    assert c.verdict == "FAIL"
    assert summary.bracket_check("output", REQS[1:], _scrapes(0, 50), 10, 190, slack_ns=0).verdict == "ok"


def test_scrape_slack_moves_a_request_near_a_scrape_to_straddling():
    c = summary.bracket_check("output", [_req(3, 180, 50)], _scrapes(0, 0), 10, 190, slack_ns=5)
    assert (c.inside_tokens, c.straddle_tokens, c.verdict) == (0, 50, "ok")


def test_unrecorded_running_streams_leave_only_the_lower_bound():
    over = summary.bracket_check("output", REQS, _scrapes(0, 70, running_at_200=2), 10, 190, slack_ns=0)
    assert (over.unrecorded_streams, over.verdict) == (2, "low-ok")
    under = summary.bracket_check("output", REQS, _scrapes(0, 40, running_at_200=2), 10, 190, slack_ns=0)
    assert under.verdict == "FAIL"


def test_no_bracketing_scrape_is_not_a_pass():
    assert summary.bracket_check("output", REQS, _scrapes(0, 50)[1:], 10, 190, slack_ns=0).verdict == "n/a"
