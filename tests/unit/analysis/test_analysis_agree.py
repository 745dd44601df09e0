"""agree: against two real local servers whose answers are known; scoring; prompt file errors."""

from __future__ import annotations

import json

import pytest

from tests.fakes.agree_servers import FakeOpenAIServer
from wattbench.analysis.agree import (
    PromptSpec,
    check_structured,
    load_prompts,
    run_agreement,
    score_tokens,
)
from wattbench.core.errors import TargetError, UserError

ANSWERS_A = {
    "capital of France?": "The capital of France is Paris.",
    "2+2?": "2 + 2 = 4",
    "json person": '{"name": "Ada", "age": 36}',
    "long story": "once upon a time there was a small robot who liked to count tokens",
}
ANSWERS_B = {
    "capital of France?": "The capital of France is Paris.",
    "2+2?": "2 + 2 equals 4",  # diverges at whitespace token 3
    "json person": '```json\n{"name": "Ada"}\n```',  # parses, misses "age"
    "long story": "once upon a time there was a small robot who liked to sum numbers",  # diverges at 12
}


def _prompts_file(tmp_path):
    rows = [
        {"id": "q1", "prompt": "capital of France?"},
        {"id": "q2", "prompt": "2+2?"},
        {"id": "q3", "prompt": "json person", "required": ["name", "age"],
         "schema": {"type": "object", "required": ["name"]}},
        {"id": "q4", "prompt": "long story", "max_tokens": 64},
    ]
    p = tmp_path / "prompts.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return p


@pytest.fixture
def servers():
    with FakeOpenAIServer("model-bf16", ANSWERS_A) as a, FakeOpenAIServer("model-int4", ANSWERS_B) as b:
        yield a, b


def test_agreement_known_outputs_server_tokens(tmp_path, servers):
    a, b = servers
    agr = run_agreement(a.url, b.url, load_prompts(_prompts_file(tmp_path)), max_tokens=32)
    m = agr.metrics
    assert [t.model for t in agr.targets] == ["model-bf16", "model-int4"]
    assert m.prompts == 4 and m.compared == 4
    assert m.exact_match_rate == pytest.approx(0.25)
    assert m.token_basis == "server_tokens"
    by = {p.id: p for p in agr.prompts}
    assert by["q1"].exact_match and by["q1"].first_divergence is None and by["q1"].token_agreement == pytest.approx(1.0, rel=1e-9)
    # "2 + 2 = 4" vs "2 + 2 equals 4": tokens [2, " +", " 2", " =", " 4"] vs [.., " equals", " 4"]
    assert by["q2"].first_divergence == 3
    assert by["q2"].token_agreement == pytest.approx(4 / 5)
    # the story: 14 tokens each, differ at 12 and 13
    assert by["q4"].first_divergence == 12
    assert by["q4"].token_agreement == pytest.approx(12 / 14)
    # structured: A valid; B parses (fenced) but lacks age
    assert by["q3"].a.structured_valid is True and by["q3"].a.json_valid is True
    assert by["q3"].b.json_valid is True and by["q3"].b.missing_fields == ["age"]
    assert m.structured_prompts == 1
    assert m.structured_valid_rate_a == pytest.approx(1.0, rel=1e-9) and m.structured_valid_rate_b == pytest.approx(0.0, rel=1e-9)
    fd = m.first_divergence
    assert fd.diverged == 3 and fd.min == 0 and fd.max == 12
    assert list(fd.histogram.items()) == [("0", 1), ("1-3", 1), ("4-15", 1)]
    # greedy settings went to both servers, with per-prompt max_tokens
    for srv in (a, b):
        assert all(r["temperature"] == pytest.approx(0.0, rel=1e-9) and r["seed"] == 0 and r["stream"] is False for r in srv.requests)
        assert sorted(r["max_tokens"] for r in srv.requests) == [32, 32, 32, 64]
    # micro-averaged token agreement
    lens = {p.id: max(p.length_a, p.length_b) for p in agr.prompts}
    matches = sum(p.token_agreement * lens[p.id] for p in agr.prompts)
    assert m.token_agreement == pytest.approx(matches / sum(lens.values()))


def test_whitespace_fallback_when_server_lacks_logprobs(tmp_path):
    with FakeOpenAIServer("a", ANSWERS_A) as a, FakeOpenAIServer("b", ANSWERS_B, logprobs_supported=False) as b:
        agr = run_agreement(a.url, b.url, load_prompts(_prompts_file(tmp_path)), max_tokens=32, concurrency=1)
        assert b.requests[0].get("logprobs") == 1 and "logprobs" not in b.requests[-1]
    assert agr.metrics.token_basis == "whitespace"
    assert agr.targets[1].token_source == "none" and agr.targets[0].token_source == "server_logprobs"
    by = {p.id: p for p in agr.prompts}
    assert by["q2"].first_divergence == 3  # "2","+","2","=" vs "equals"
    assert by["q2"].token_agreement == pytest.approx(4 / 5)


def test_chat_api_and_failures(tmp_path):
    with FakeOpenAIServer("a", ANSWERS_A) as a, FakeOpenAIServer("b", ANSWERS_B, fail_prompts={"2+2?"}) as b:
        agr = run_agreement(a.url, b.url, load_prompts(_prompts_file(tmp_path)), api="chat", max_tokens=32)
    m = agr.metrics
    assert m.compared == 3 and m.failed_b == 1 and m.failed_a == 0
    by = {p.id: p for p in agr.prompts}
    assert by["q2"].exact_match is None and by["q2"].b.error.startswith("http_503")
    assert m.exact_match_rate == pytest.approx(1 / 3)
    assert m.token_basis == "server_tokens"


def test_unreachable_target(tmp_path, servers):
    a, _ = servers
    with pytest.raises(TargetError, match="cannot reach the server"):
        run_agreement(a.url, "http://127.0.0.1:9", load_prompts(_prompts_file(tmp_path)))


def test_score_tokens():
    assert score_tokens(["a", "b", "c"], ["a", "b", "c"]) == (pytest.approx(1.0, rel=1e-9), None, 3)
    assert score_tokens(["a", "b"], ["a", "b", "c", "d"]) == pytest.approx((0.5, 2, 2), rel=1e-9)
    assert score_tokens([], []) == (pytest.approx(1.0, rel=1e-9), None, 0)
    assert score_tokens(["x"], ["y"]) == pytest.approx((0.0, 0, 0), rel=1e-9)


def test_check_structured():
    spec = PromptSpec(id="1", prompt="p", required=["a"])
    assert check_structured('{"a": 1}', spec) == (True, [], True)
    assert check_structured("[1]", spec) == (True, ["a"], False)
    assert check_structured("not json", spec) == (False, ["a"], False)
    spec2 = PromptSpec.model_validate({"id": "2", "prompt": "p", "schema": {"type": "object"}})
    assert check_structured("3", spec2) == (True, [], False)


@pytest.mark.parametrize("content,msg", [
    ('{"prompt": "a"}\n{"prompt": \n', "line 2: not valid JSON"),
    ('{"prompt": "a", "messages": []}\n', "line 1: give exactly one of 'prompt' or 'messages'"),
    ('{"id": "x", "prompt": "a"}\n{"id": "x", "prompt": "b"}\n', "line 2: duplicate prompt id 'x'"),
    ('{"prompt": "a", "max_tokens": 0}\n', "line 1: max_tokens must be >= 1"),
    ("\n\n", "no prompts"),
])
def test_bad_prompt_files(tmp_path, content, msg):
    p = tmp_path / "p.jsonl"
    p.write_text(content)
    with pytest.raises(UserError, match=msg):
        load_prompts(p)


def test_other_4xx_does_not_disable_logprobs(tmp_path):
    # B refuses one prompt with 422 whether or not logprobs are asked: after the retry without them
    # fails too, logprobs are asked for again
    with FakeOpenAIServer("a", ANSWERS_A) as a, \
            FakeOpenAIServer("b", ANSWERS_B, fail_prompts={"2+2?"}, fail_status=422) as b:
        agr = run_agreement(a.url, b.url, load_prompts(_prompts_file(tmp_path)), max_tokens=32, concurrency=1)
        assert [("logprobs" in r) for r in b.requests] == [True, True, False, True, True]
    assert agr.metrics.failed_b == 1
    assert agr.targets[1].token_source == "server_logprobs"
    assert agr.metrics.token_basis == "server_tokens"


def test_url_credentials_become_basic_auth_and_never_reach_the_record(tmp_path):
    """agree goes through server/: ``http://user:pa55word@host`` is sent as ``Basic`` auth (the
    server refuses anything else) and agreement.json holds the URL without the credentials."""
    import base64

    basic = "Basic " + base64.b64encode(b"user:pa55word").decode()
    with FakeOpenAIServer("m-a", ANSWERS_A, authorization=basic) as a, FakeOpenAIServer("m-b", ANSWERS_B) as b:
        url_a = a.url.replace("http://", "http://user:pa55word@")
        agr = run_agreement(url_a, b.url, load_prompts(_prompts_file(tmp_path)), max_tokens=32)
    assert agr.metrics.compared == 4  # every call to A carried the Basic credential
    assert agr.targets[0].base_url == a.url + "/v1" and agr.targets[0].model == "m-a"
    assert "pa55word" not in agr.model_dump_json()


def test_url_credentials_and_an_api_key_together_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="carries credentials"):
        run_agreement("http://u:p@127.0.0.1:9", "http://127.0.0.1:9", load_prompts(_prompts_file(tmp_path)),
                      api_key_a="k")
