"""A server's identity (``server/identity``): the target without credentials, and per engine the
settings it exposes with the volatile ones (uptime, counters, timestamps, slot states, sizes found
by memory profiling), places and credentials left out; what was not exposed is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wattbench.server.detect import classify
from wattbench.server.identity.build import build_identity
from wattbench.server.identity.common import target_of

FAKES = Path(__file__).resolve().parents[2] / "fakes"


def ok(obj) -> tuple[int, dict, bytes]:
    return 200, {}, obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()


def models(entry: dict) -> tuple[int, dict, bytes]:
    return ok({"object": "list", "data": [entry]})


@pytest.mark.parametrize("url, want", [
    ("http://user:pw@Host.Example:8000/v1?api_key=s3cret#f", "http://host.example:8000"),
    ("https://gw.example/api/v1", "https://gw.example:443/api"),
    ("http://127.0.0.1/v1", "http://127.0.0.1:80"),
    ("http://[::1]:9000/v1/", "http://[::1]:9000"),
    ("not a url", None),
])
def test_the_target_is_scheme_host_port_and_path_never_credentials_or_query(url, want):
    assert target_of(url) == want


def test_vllm_keeps_its_info_gauges_settings_but_what_profiling_finds_at_start():
    text = (FAKES / "engines_vllm_metrics_sample.txt").read_text()
    ident = build_identity("http://h:8000/v1", "vllm", {
        "/metrics": ok(text),
        "/v1/models": models({"id": "tiny", "object": "model", "created": 1764650000, "owned_by": "vllm",
                              "root": "/m/tiny", "max_model_len": 2048, "permission": [{"id": "modelperm-1"}]}),
    }, "tiny", "0.32.0")
    gauge = ident.exposed["/metrics vllm:cache_config_info"]
    # the sample's own labels (tests/fakes/engines_vllm_metrics_sample.txt, vLLM 0.32 CPU)
    assert gauge["gpu_memory_utilization"] == "0.92" and gauge["block_size"] == "128"
    assert gauge["enable_prefix_caching"] == "True" and gauge["cache_dtype"] == "auto"
    for volatile in ("num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens", "kv_cache_max_concurrency",
                     "engine", "model_name"):
        assert volatile not in gauge
    assert ident.exposed["/v1/models"] == {"id": "tiny", "max_model_len": 2048, "owned_by": "vllm", "root": "/m/tiny"}
    assert ident.target == "http://h:8000" and ident.not_exposed == []


def test_sglang_keeps_its_arguments_but_secrets_places_seeds_and_live_state():
    info = {"tp_size": 2, "mem_fraction_static": 0.88, "schedule_policy": "fcfs", "api_key": "sk-secret-1",
            "admin_api_key": "adm-2", "host": "0.0.0.0", "port": 30000, "nccl_port": 12345, "random_seed": 817263,
            "model_path": "/models/org/Llama-3-8B", "download_dir": "/tmp/x", "log_level": "info",
            "max_total_num_tokens": 500123, "version": "0.5.4",
            "internal_states": [{"last_gen_throughput": 1234.5, "memory_usage": {"weight": 1.0}}]}
    ident = build_identity("http://h:30000/v1", "sglang", {"/get_server_info": ok(info)}, "x", "0.5.4")
    got = ident.exposed["/get_server_info"]
    assert got.pop("mem_fraction_static") == pytest.approx(0.88)
    assert got == {"model_path": "Llama-3-8B", "schedule_policy": "fcfs", "tp_size": 2}
    assert "sk-secret-1" not in json.dumps(ident.model_dump())


def test_llamacpp_keeps_slots_context_and_sampling_not_slot_state_or_the_drawn_marker():
    tmpl = "{% for m in messages %}{{ m.content }}{% endfor %}"
    props = {"default_generation_settings": {"n_ctx": 1024, "id": 0, "id_task": 17, "is_processing": True,
                                             "prompt": "hello", "next_token": {"n_remain": 3},
                                             "params": {"temperature": 0.8, "top_k": 40, "lora": [{"id": 0}]}},
             "total_slots": 4, "model_path": "/cache/tiny.f16.gguf", "build_info": "b7000-abc",
             "chat_template": tmpl, "media_marker": "<__media_8f3a__>", "is_sleeping": False}
    ident = build_identity("http://h:8080/v1", "llamacpp", {"/props": ok(props)}, "tiny", "b7000-abc")
    got = ident.exposed["/props"]
    assert got["total_slots"] == 4 and got["default_generation_settings.n_ctx"] == 1024
    assert got["default_generation_settings.params.temperature"] == pytest.approx(0.8)
    assert got["model_path"] == "tiny.f16.gguf" and got["build_info"] == "b7000-abc"
    assert len(got["chat_template_sha256"]) == 16
    for k in got:
        assert not any(w in k for w in ("id_task", "is_processing", "prompt", "next_token", "media_marker",
                                        "is_sleeping", "lora")), k
    busy = dict(props, default_generation_settings=dict(props["default_generation_settings"], id_task=99,
                                                        is_processing=False), media_marker="<__media_0000__>")
    again = build_identity("http://h:8080/v1", "llamacpp", {"/props": ok(busy)}, "tiny", "b7000-abc")
    assert again.exposed == ident.exposed  # another moment, another start: the same configuration


def test_tgi_keeps_its_router_info_and_transformers_serve_says_it_exposes_nothing():
    info = {"model_id": "org/m", "max_concurrent_requests": 128, "max_total_tokens": 4096, "version": "3.1.0"}
    tgi = build_identity("http://h/v1", "tgi", {"/info": ok(info)}, "org/m", "3.1.0")
    assert tgi.exposed["/info"] == {"max_concurrent_requests": 128, "max_total_tokens": 4096, "model_id": "org/m",
                                    "version": "3.1.0"}
    tf = build_identity("http://h:8000/v1", "transformers", {"/v1/models": models(
        {"id": "/m/tiny", "object": "model", "created": 5, "owned_by": "local", "status": {"value": "loaded"}})},
        "/m/tiny", None)
    assert tf.exposed == {"/v1/models": {"id": "/m/tiny", "owned_by": "local"}}  # no status, no created
    assert tf.not_exposed == ["transformers serve exposes no server configuration"]


def test_a_probe_that_failed_is_named_not_exposed():
    ident = build_identity("http://h:8080/v1", "llamacpp", {"/props": (404, {}, b"")}, "m", None)
    assert ident.exposed == {} and ident.not_exposed == ["/props: HTTP 404 (llama.cpp's slots and context)"]
    ident = build_identity("http://h:8000/v1", "vllm", {"/metrics": (0, {}, b"")}, "m", None)
    assert ident.not_exposed == ["/metrics: no answer (no vllm:*_info gauge)"]


def test_classify_records_the_identity_of_the_model_the_run_uses():
    r = {p: (404, {}, b"") for p in ("/version", "/get_server_info", "/info", "/health", "/metrics")}
    r["/v1/models"] = ok({"data": [{"id": "a", "owned_by": "llamacpp"}, {"id": "b", "owned_by": "llamacpp"}]})
    r["/props"] = ok({"default_generation_settings": {"n_ctx": 512}, "total_slots": 2, "build_info": "b1"})
    info = classify("http://10.0.0.5:8080", r, model="b")
    assert info.engine == "llamacpp" and info.identity.model == "b"
    assert info.identity.exposed["/v1/models"]["id"] == "b" and info.identity.target == "http://10.0.0.5:8080"
    assert info.identity.exposed["/props"]["total_slots"] == 2 and info.identity.version == "b1"


def test_a_hostile_exposition_cannot_grow_the_identity_without_bound():
    import json

    from wattbench.server.identity.common import MAX_IDENTITY_BYTES, MAX_SETTINGS, MAX_TEXT
    from wattbench.server.identity.vllm import MAX_GAUGES

    labels = ",".join(f'k{i}="{"v" * 500}"' for i in range(MAX_SETTINGS + 50))
    text = "\n".join(f"vllm:x{n}_info{{{labels}}} 1.0" for n in range(MAX_GAUGES + 10)) + "\n"
    ident = build_identity("http://h/v1", "vllm", {"/metrics": ok(text)}, "m", None)
    kept = sum(len(v) for v in ident.exposed.values())
    # each source's settings capped first, then the whole identity: 16 KiB, and it says so
    assert len(json.dumps(ident.exposed, separators=(",", ":"))) <= MAX_IDENTITY_BYTES
    assert all(len(x) == MAX_TEXT for v in ident.exposed.values() for x in v.values())
    total = MAX_GAUGES * MAX_SETTINGS
    assert 0 < kept < total and ident.capped is not None
    assert ident.capped.startswith(f"16 KiB kept: {kept} of {total} settings ({total - kept} left out, of /metrics")


def test_names_past_the_cap_are_left_out_and_a_capped_identity_hashes_the_same_twice():
    from wattbench.results.configuration import configuration_key
    from wattbench.server.identity.common import MAX_NAME

    props = {"total_slots": 2, "model_alias": "a", "n" * (MAX_NAME + 1): 1,
             "default_generation_settings": {"params": {f"p{i:04d}": "x" * 300 for i in range(400)}}}
    a = build_identity("http://h:8080/v1", "llamacpp", {"/props": ok(props)}, "m", None)
    b = build_identity("http://h:8080/v1", "llamacpp", {"/props": ok(props)}, "m", None)
    assert "n" * (MAX_NAME + 1) not in a.exposed["/props"] and a.exposed["/props"]["total_slots"] == 2
    assert a.capped is not None and configuration_key(a.model_dump()) == configuration_key(b.model_dump())


def test_identity_change_names_what_a_restart_changed():
    from wattbench.server.identity.build import identity_change

    props = {"total_slots": 2, "default_generation_settings": {"n_ctx": 512}}
    a = build_identity("http://h:8080/v1", "llamacpp", {"/props": ok(props)}, "m", "b1")
    moved = build_identity("http://h:9090/v1", "llamacpp", {"/props": ok(props)}, "m", "b1")
    assert identity_change(a, moved) is None  # another port only: a launched engine's every start
    other = build_identity("http://h:8080/v1", "llamacpp", {"/props": ok(dict(props, total_slots=4))}, "m2", "b1")
    assert identity_change(a, other) == "model id 'm' -> 'm2'; /props changed"
    assert identity_change(None, other) is None


KEY = "sk-AUDITkeyQ7w3Zp9Lm2Xc8VbN4tR6yU1"


def test_a_key_after_171_characters_is_scrubbed_before_the_200_character_cut(monkeypatch):
    """An identity setting, a vLLM ``*_info`` label, a served model id: each is cut to 200 characters,
    and a key echoed at character 171 would leave 29 of its characters if it were cut first."""
    from wattbench.core import redact
    from wattbench.core import scrubber, secret_scope
    from wattbench.server.engine_rules import Answers

    monkeypatch.setattr(secret_scope, "_REGISTERED", scrubber.Scrubber([KEY]))  # what a run registers
    echoed = "f" * 171 + KEY
    props = {"default_generation_settings": {"n_ctx": 512}, "model_alias": echoed, "total_slots": 1}
    ll = build_identity("http://h:8080/v1", "llamacpp", {"/props": ok(props)}, "m", None)
    assert ll.exposed["/props"]["model_alias"] == "f" * 171 + redact.MASK
    label = f'vllm:cache_config_info{{block_size="16",swap_label="{echoed}"}} 1.0\n'
    vl = build_identity("http://h:8000/v1", "vllm", {"/metrics": ok(label)}, "m", None)
    assert vl.exposed["/metrics vllm:cache_config_info"] == {"block_size": "16", "swap_label": "f" * 171 + redact.MASK}
    r = {p: (404, {}, b"") for p in ("/version", "/get_server_info", "/info", "/health", "/metrics", "/props")}
    r["/v1/models"] = ok({"data": [{"id": echoed, "owned_by": "x"}]})
    g = Answers.read(r)
    assert g.models == ["f" * 171 + redact.MASK]
    for text in (json.dumps(ll.model_dump()), json.dumps(vl.model_dump()), json.dumps(g.models)):
        assert not any(KEY[i:i + 8] in text for i in range(len(KEY) - 7))
