"""The run's configuration as recorded (``core/schema/recorded_config.py``): every key
``RunConfig.public_dict()`` writes is a named, typed field; a block is written back with the keys
the file held, in its order, values as they were (an older file's, an unknown key's, a value of
another type than today's); and ``model_precision`` says where the run's dtype and quantization
were read."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import SecretStr

from wattbench.config.run import RunConfig
from wattbench.core.schema import ClockInfo, ModelPrecision, RecordedConfig, Result, model_precision

# every RunConfig field, none at its default (a field RunConfig gains fails the parity check below
# until it is named here and in RecordedConfig)
_EVERY_SETTING = dict(
    targets=["http://a:8000", "http://b:8000"], target="http://user:pw@a:8000/v1", model="m", api="chat",
    api_key=SecretStr("sk-live-abcdefgh12345678"), concurrency=[1, 8], rate=[2.0, math.inf], arrival="gamma:2",
    num_requests=40, duration_s=12.5, warmup_s=5.0, warmup_requests=3, workers=2, seed=7, workload="chat",
    input_tokens="128", output_tokens="64", tokenizer="/tok", speedup=2.0, sensors=["nvml"], no_sensors=True,
    sample_interval_s=0.2, idle_s=1.5, idle_after_s=2.5, price_per_kwh=0.3, currency="EUR", pue=1.4,
    carbon_intensity="400", attribute_idle=True, tenant_field="who", slo="ttft_p99=500ms", trials="auto",
    precision_pct=3.0, max_trials=5, max_time_s=100.0, trial_order="shuffled", restart_engine=True, prime=False,
    prime_requests=10, prompt_salt="", calibrate_prompts=False, history_check=False, cooldown_s=2.0,
    precondition=True, precondition_max_s=90.0, sweep="auto", optimize="goodput_per_kw", max_concurrency=64, prefill_decode_pair=True,
    ray="local", ray_actors=3, engine="vllm", engine_model="llama-1b", engine_args=["--dtype", "float16"],
    device="cpu", out="/tmp/x", tags=["a"], config_label="lbl", db="/tmp/db", register_run=False, strict=True,
    html=False, keep_output_text=True, keep_chunks=True, request_timeout_s=30.0,
    headers={"X-Api-Key": "hdr-secret-0123456789"}, secret_headers=["X-Other"],
    extra_body={"top_k": 20, "api_key": "body-secret-0123456789", "nested": {"a": [1, 2.5, None, True]}},
    temperature=0.7, top_p=0.9, stall_timeout_s=15.0)

# a block as an older wattbench wrote it: its own key order, settings it did not have yet left out,
# and a key today's wattbench does not name
_OLD = {"targets": [], "target": "http://127.0.0.1:8000", "model": "tiny", "api": "completions",
        "concurrency": [1, 4], "rate": [], "gpu_clock_mhz": 1980, "arrival": "poisson", "num_requests": None,
        "duration_s": 3.0, "seed": 0, "input_tokens": "256", "output_tokens": "128", "pue": 1.0,
        "price_per_kwh": 0.15, "slo": None, "trials": 1, "engine": "transformers", "engine_args": []}


def _text(d: object) -> str:
    """JSON as written (keys in order, 1 and 1.0 told apart)."""
    return json.dumps(d)


def _result(config: object) -> Result:
    return Result.model_validate({"wattbench_version": "0", "run_id": "r", "created_at": "2026-01-01T00:00:00+00:00",
                                  "clock": ClockInfo(anchor_wall_ns=0, anchor_mono_ns=0).model_dump(),
                                  "config": config})


def test_every_setting_a_run_writes_is_a_named_field():
    assert set(_EVERY_SETTING) == set(RunConfig.model_fields)  # the table above lists them all
    written = RunConfig.model_construct(**_EVERY_SETTING).public_dict()
    rec = RecordedConfig.model_validate(written)
    assert rec.model_extra == {}  # none left as an unnamed extra
    assert set(written) - set(RecordedConfig.model_fields) == set()
    assert "api_key" not in written and "sk-live" not in _text(written)
    # typed as read: the values a reader gets
    assert rec.concurrency == [1, 8] and rec.rate == pytest.approx([2.0, math.inf], rel=1e-12) and rec.trials == "auto"
    assert rec.target == "http://***@a:8000/v1" and rec.headers == {"X-Api-Key": "<redacted>"}
    assert rec.extra_body["api_key"] == "<redacted>" and rec.extra_body["nested"] == {"a": [1, 2.5, None, True]}
    assert rec.engine == "vllm" and rec.api == "chat" and rec.trial_order == "shuffled" and rec.prompt_salt == ""


def test_a_written_block_reads_back_key_for_key_in_its_order():
    written = RunConfig.model_construct(**_EVERY_SETTING).public_dict()
    as_file = {**written, "rate": [2.0, None]}  # JSON has no inf: result.json has always held null for it
    rec = RecordedConfig.model_validate(written)
    assert _text(rec.recorded()) == _text(as_file)
    assert list(rec.recorded())[-1] == "headers"  # public_dict adds it last; it stays last
    # inside a result, through result.json's own writer and reader
    back = json.loads(_result(written).model_dump_json(indent=2))["config"]
    assert _text(back) == _text(as_file)
    again = _result(back)
    assert again.config.rate == pytest.approx([2.0, math.inf], rel=1e-12)  # the null read back as the inf it was written for
    assert _text(json.loads(again.model_dump_json())["config"]) == _text(as_file)


def test_an_older_block_loads_and_writes_back_as_it_was():
    res = _result(_OLD)
    cfg = res.config
    assert cfg.model == "tiny" and cfg.concurrency == [1, 4] and cfg.duration_s == pytest.approx(3.0, rel=1e-12) and cfg.trials == 1
    assert cfg.model_extra == {"gpu_clock_mhz": 1980}  # the key wattbench does not name, kept
    assert cfg.stall_timeout_s is None and cfg.currency is None and cfg.sensors == []  # not recorded
    back = json.loads(res.model_dump_json())["config"]
    assert _text(back) == _text(_OLD)  # no setting added as null, the unknown key in its place, 1.0 stays 1.0
    assert list(back).index("gpu_clock_mhz") == list(_OLD).index("gpu_clock_mhz")


def test_a_value_of_another_type_reads_as_not_recorded_and_is_kept():
    odd = {"model": "m", "concurrency": "eight", "seed": 3, "trials": {"n": 2}}
    cfg = RecordedConfig.model_validate(odd)
    assert cfg.concurrency == [] and cfg.trials is None  # not read as something it is not
    assert cfg.model == "m" and cfg.seed == 3  # the rest read
    assert _text(cfg.recorded()) == _text(odd)  # and the file's values written back as they were
    cfg.concurrency = [8]  # set since: its value, in the file's place
    assert cfg.recorded() == {"model": "m", "concurrency": [8], "seed": 3, "trials": {"n": 2}}


def test_a_setting_assigned_after_reading_is_written_after_the_read_ones():
    cfg = RecordedConfig.model_validate({"seed": 1, "model": "m"})
    cfg.slo = "ttft_p99=500ms"
    assert list(cfg.recorded()) == ["seed", "model", "slo"]
    assert RecordedConfig().recorded() == {} and json.loads(_result({}).model_dump_json())["config"] == {}


def _precision(effective: dict[str, object] | None = None, **config: object) -> ModelPrecision:
    return model_precision(effective or {}, RecordedConfig.model_validate(config))


@pytest.mark.parametrize("effective,config,dtype,source", [
    ({"dtype": "bfloat16", "torch_dtype": "float32"}, {"engine_args": ["--dtype", "half"]}, "bfloat16",
     "effective_config.dtype"),
    ({"torch_dtype": "float16"}, {"dtype": "float32", "engine_args": ["--dtype=half"]}, "float16",
     "effective_config.torch_dtype"),  # a transformers config.json's name for it
    ({"dtype": ""}, {"dtype": "float32", "engine_args": ["--dtype=half"]}, "float32", "config.dtype"),
    ({}, {"engine_args": ["--dtype", "half", "--port", "1", "--dtype=bfloat16"]}, "bfloat16",
     "engine_args --dtype"),  # the last one given, as the engine's parser reads it
    ({"max_model_len": 2048}, {"engine_args": ["--dtype"]}, None, None),  # a flag without a value: none
])
def test_the_dtype_comes_from_the_first_source_that_states_it(effective, config, dtype, source):
    p = _precision(effective, **config)
    assert (p.dtype, p.dtype_from) == (dtype, source)
    assert p.text() == dtype


def test_quantization_sources_and_the_joined_text():
    assert _precision({"quantization": "awq"}, quantization="gptq").quantization_from == "effective_config.quantization"
    p = _precision({}, quantization="gptq", engine_args=["--quantization", "fp8"])
    assert (p.quantization, p.quantization_from) == ("gptq", "config.quantization")
    p = _precision({"dtype": "bfloat16"}, engine_args=["--quantization=fp8"])
    assert (p.quantization_from, p.text()) == ("engine_args --quantization", "bfloat16/fp8")
    assert _precision({}, engine_args=["--quantization", "awq"]).text() == "awq"
    none = _precision({}, model="m")
    assert none == ModelPrecision() and none.text() is None
