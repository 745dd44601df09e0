"""Detection against small fake servers imitating each engine's read-only endpoints."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.fakes import engines_fake_servers as fk
from tests.fakes.ports import refused_port
from wattbench.core.errors import TargetError
from wattbench.server.detect import detect_server
from wattbench.server.engine_rules import metric_engine


def detect(app, api_key=None):
    async def go():
        async with fk.serve(app) as url:
            return await detect_server(url, api_key)

    return asyncio.run(go())


def test_vllm():
    info = detect(fk.vllm_app())
    assert info.engine == "vllm"
    assert info.version == "0.32.0+cpu"
    assert info.model == "tiny" and info.models == ["tiny"]
    assert info.max_model_len == 2048
    assert info.supports_ignore_eos is True
    assert info.extra_body == {"ignore_eos": True}
    assert info.metrics_endpoint.endswith("/metrics")
    assert info.stream_batching.stream_interval is None  # not exposed by vLLM
    assert info.stream_batching.note == "vLLM does not expose --stream-interval (default 1)"
    assert any("owned_by=vllm" in e for e in info.detected_by)


def test_vllm_with_api_key():
    assert detect(fk.vllm_app(api_key="k"), api_key="k").engine == "vllm"
    with pytest.raises(TargetError, match="API key"):
        detect(fk.vllm_app(api_key="k"))


def test_sglang_reads_server_args():
    info = detect(fk.sglang_app())
    assert info.engine == "sglang"
    assert info.version == "0.5.4"
    assert info.stream_batching.model_dump() == {"stream_interval": 4}
    assert info.effective_config["tp_size"] == 2
    assert info.effective_config["max_total_num_tokens"] == 500000
    assert info.max_model_len == 32768  # from /v1/models, context_length was None
    assert info.extra_body == {"ignore_eos": True}


def test_tgi_cannot_force_length():
    info = detect(fk.tgi_app())
    assert info.engine == "tgi"
    assert info.version == "3.1.0"
    assert info.max_model_len == 4096
    assert info.supports_ignore_eos is False and info.extra_body == {}
    assert info.output_length_forced is False
    assert info.effective_config["max_concurrent_requests"] == 128


def test_llamacpp():
    info = detect(fk.llamacpp_app())
    assert info.engine == "llamacpp"
    assert info.version == "b6500-1a2b3c4"
    assert info.max_model_len == 8192
    assert info.effective_config["total_slots"] == 4
    assert info.extra_body == {"ignore_eos": True}


def test_transformers_gets_no_extra_fields():
    info = detect(fk.transformers_app())
    assert info.engine == "transformers"
    assert info.supports_ignore_eos is False
    assert info.extra_body == {}
    assert info.metrics_endpoint is None


def test_generic_openai():
    info = detect(fk.generic_app())
    assert info.engine == "openai"
    assert info.supports_ignore_eos is None and info.extra_body == {}
    assert info.model == "gpt-x"


def test_unreachable_raises_target_error():
    with refused_port() as port, pytest.raises(TargetError, match="cannot reach"):
        asyncio.run(detect_server(f"http://127.0.0.1:{port}/v1"))


def test_metric_engine_from_real_vllm_exposition():
    text = (Path(__file__).resolve().parents[2] / "fakes" / "engines_vllm_metrics_sample.txt").read_text()
    assert metric_engine(text) == "vllm"
    assert metric_engine(fk.SGLANG_METRICS) == "sglang"
    assert metric_engine("# nothing\n") is None
