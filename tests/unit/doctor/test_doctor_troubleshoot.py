"""The troubleshooting order on recorded-style log snippets and run directories."""

import json

import pytest
from typer.testing import CliRunner

from tests.fakes.results_factory import make_level, make_result
from wattbench.doctor.troubleshoot import STEPS, config_in_effect, diagnose_failure, load_run

CUDA_OOM = """\
INFO 11-29 10:00:01 [gpu_model_runner.py:2007] Model loading took 14.99 GiB and 5.1 seconds
ERROR 11-29 10:00:09 [core.py:700] EngineCore failed to start.
Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/vllm/v1/worker/gpu_worker.py", line 250, in determine_available_memory
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.12 GiB is free.
"""
LIBCUDA = """\
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/torch/__init__.py", line 290, in _load_global_deps
OSError: libcuda.so.1: cannot open shared object file: No such file or directory
"""
TOKENIZER = """\
INFO 11-29 10:01:00 [api_server.py:1034] vLLM API server version 0.11.0
OSError: Can't load tokenizer for '/models/llama-8b'. If you were trying to load it from 'https://huggingface.co/models', make sure you don't have a local directory with the same name.
"""
TRITON = """\
INFO 11-29 10:02:00 [backends.py:548] Compiling a graph for dynamic shape takes 21.3 s
triton.compiler.errors.CompilationError: at 12:4:
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
torch._inductor.exc.InductorError: CompilationError: at 12:4
"""
TOO_LONG = ("openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"This model's maximum context "
            "length is 2048 tokens. However, you requested 3000 tokens (2900 in the messages, 100 in the completion). "
            "Please reduce the length of the messages or completion.\", 'type': 'BadRequestError', 'code': 400}")
FALLBACK = """\
INFO 11-29 10:03:00 [cuda.py:372] Using Flash Attention backend on V1 engine.
WARNING 11-29 10:03:00 [topk_topp_sampler.py:61] FlashInfer is not available. Falling back to the PyTorch-native implementation of top-p & top-k sampling.
WARNING 11-29 10:03:01 [fp8.py:100] Your GPU does not have native support for FP8 computation; falling back to Marlin kernels.
INFO 11-29 10:03:02 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='/models/llama-8b', dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=1, quantization=fp8, enforce_eager=False
"""


def first(checks):
    assert checks[0].id == "troubleshoot.first_cause"
    return checks[0]


def ids(checks, status=("fail", "warn")):
    return [c.id for c in checks if c.status in status and c.id != "troubleshoot.first_cause"]


def test_every_step_reported_in_order_even_when_clean():
    checks = diagnose_failure("ValueError: something nobody knows")
    steps = [c.id.split(".")[1] for c in checks[1:]]
    assert steps == list(STEPS)
    assert first(checks).status == "pass"


def test_cuda_oom():
    checks = diagnose_failure(None, server_log=CUDA_OOM)
    assert ids(checks) == ["troubleshoot.resources.cuda_oom"]
    f = first(checks)
    assert f.status == "fail" and "step 5 (resources)" in f.message and "gpu_memory_utilization" in f.fix
    oom = [c for c in checks if c.id == "troubleshoot.resources.cuda_oom"][0]
    assert oom.data["source"] == "server.log:5" and "Tried to allocate 2.00 GiB" in oom.message


def test_libcuda_missing_is_a_log_finding_not_a_missing_module():
    checks = diagnose_failure(None, server_log=LIBCUDA)
    assert ids(checks) == ["troubleshoot.logs.libcuda"]
    assert "NVIDIA runtime" in first(checks).fix


def test_tokenizer_not_found():
    checks = diagnose_failure(None, server_log=TOKENIZER)
    assert ids(checks) == ["troubleshoot.paths.tokenizer_missing"]
    assert "step 2 (paths)" in first(checks).message


def test_triton_kernel_build_failure():
    checks = diagnose_failure(None, server_log=TRITON)
    assert ids(checks) == ["troubleshoot.logs.kernel_build"]
    k = [c for c in checks if c.id == "troubleshoot.logs.kernel_build"][0]
    assert k.data["count"] == 2 and "--enforce-eager" in k.fix


def test_prompt_too_long_is_the_first_cause_before_later_steps():
    checks = diagnose_failure(TOO_LONG, server_log=CUDA_OOM)
    f = first(checks)
    assert f.data["check"] == "troubleshoot.input.prompt_too_long"
    assert "troubleshoot.input.bad_request" not in ids(checks)  # explained by the specific rule
    assert "troubleshoot.resources.cuda_oom" in ids(checks)


def test_fallbacks_listed_and_config_in_effect():
    checks = diagnose_failure(None, server_log=FALLBACK)
    fb = [c for c in checks if c.id == "troubleshoot.fallbacks.fallback"][0]
    assert fb.status == "warn" and fb.data["count"] == 2 and "Marlin" in fb.message
    cfg = [c for c in checks if c.id == "troubleshoot.config.in_effect"][0]
    assert cfg.data["config"]["max_seq_len"] == "8192" and cfg.data["config"]["quantization"] == "fp8"
    assert cfg.data["config"]["dtype"] == "torch.bfloat16"


def test_config_in_effect_sglang():
    log = "server_args=ServerArgs(model_path='/m', tp_size=2, mem_fraction_static=0.88, context_length=4096, " \
          "max_running_requests=128)"
    c = config_in_effect(log)
    assert c == {"mem_fraction_static": "0.88", "context_length": "4096", "max_running_requests": "128",
                 "tp_size": "2"}


def test_exception_object_accepted():
    checks = diagnose_failure(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert ids(checks) == ["troubleshoot.logs.cuda_error"]


def _run_dir(tmp_path, *, status="failed", detail=None, requests=(), log=None, mml=2048):
    d = tmp_path / "run"
    d.mkdir()
    res = make_result(levels=[make_level()])  # a result.json as wattbench writes it: read by the one loader
    res.status, res.status_detail = status, detail
    res.server.max_model_len, res.server.effective_config = mml, {"max_num_seqs": 256}
    res.levels[0].validity.reasons = []
    (d / "result.json").write_text(res.model_dump_json())
    with open(d / "requests.jsonl", "w") as f:
        for r in requests:
            f.write(json.dumps(r) + "\n")
    if log is not None:
        (d / "server.log").write_text(log)
    return d


def test_run_dir_requests_too_long_and_error_classes(tmp_path):
    reqs = [{"id": i, "level": 0, "sent_ns": 0, "input_tokens": 2000, "requested_output_tokens": 128, "ok": False,
             "error": "http_400", "error_detail": "prompt rejected"} for i in range(3)]
    reqs += [{"id": 9, "level": 0, "sent_ns": 0, "input_tokens": 10, "requested_output_tokens": 10, "ok": False,
              "error": "timeout"},
             {"id": 10, "level": 0, "sent_ns": 0, "input_tokens": 10, "requested_output_tokens": 10, "ok": False,
              "error": "http_503", "error_detail": "Service Unavailable"}]
    d = _run_dir(tmp_path, requests=reqs, log="INFO starting\n")
    checks = diagnose_failure(d)
    got = {c.id: c for c in checks}
    tl = got["troubleshoot.input.requests_too_long"]
    assert tl.status == "fail" and tl.message.startswith("3 of 5 requests") and "2048" in tl.message
    assert "http_400 × 3" in got["troubleshoot.input.rejected"].message
    assert got["troubleshoot.resources.timeouts"].message.startswith("1 request(s)")
    assert "http_503 × 1" in got["troubleshoot.logs.server_errors"].message
    assert got["troubleshoot.config.in_effect"].data["config"]["max_num_seqs"] == 256
    assert first(checks).data["check"] == "troubleshoot.input.requests_too_long"


def test_run_dir_engine_exit_137_and_throttling(tmp_path):
    d = _run_dir(tmp_path, detail="vllm server exited with code 137 while starting", log="loading weights\n")
    res = json.loads((d / "result.json").read_text())
    res["levels"][0]["validity"]["reasons"] = ["GPU throttled: sw_power_cap active 40% of the window"]
    (d / "result.json").write_text(json.dumps(res))
    got = {c.id: c for c in diagnose_failure(d)}
    assert got["troubleshoot.resources.host_oom"].status == "fail"
    assert got["troubleshoot.resources.throttling"].status == "warn"


def test_cli_doctor_run_exit_codes(tmp_path):
    from wattbench.cli.main import build_app

    app = build_app()
    r = CliRunner().invoke(app, ["doctor", "--no-env", "--run", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "not a directory" in r.output
    r = CliRunner().invoke(app, ["doctor", "--no-env"])
    assert r.exit_code == 2 and "nothing to check" in r.output
    d = _run_dir(tmp_path, log=CUDA_OOM)
    r = CliRunner().invoke(app, ["doctor", "--no-env", "--run", str(d), "--json"])
    assert r.exit_code == 1
    rep = json.loads(r.output)
    assert rep["checks"][0]["id"] == "troubleshoot.first_cause" and "CUDA out of memory" in rep["checks"][0]["message"]
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "server.log").write_text("INFO all good\n")
    r = CliRunner().invoke(app, ["doctor", "--no-env", "--run", str(clean)])
    assert r.exit_code == 0 and "0 fail" in r.output


@pytest.mark.parametrize("text,rule", [
    ("ModuleNotFoundError: No module named 'vllm._C'", "dependencies.module_missing"),
    ("ImportError: /x/_C.so: undefined symbol: _ZN3c105ErrorC2E", "dependencies.abi_mismatch"),
    ("RuntimeError: operator torchvision::nms does not exist", "dependencies.abi_mismatch"),
    ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).", "dependencies.driver_too_old"),
    ("ValueError: Cannot find any model weights with `/models/x`", "paths.weights_missing"),
    ("ValueError: Cannot find the config file for awq", "paths.quant_config_missing"),
    ("ValueError: The model's max seq len (8192) is larger than the maximum number of tokens that can be stored in "
     "KV cache (4096).", "config.kv_cache_too_small"),
    ('{"detail":"Unexpected fields in the request: {\'ignore_eos\'}"}', "input.unexpected_fields"),
    ("OSError: [Errno 28] No space left on device", "resources.disk_full"),
    ("OSError: [Errno 24] Too many open files", "resources.files_threads"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970", "logs.nccl"),
    ("Fatal Python error: Segmentation fault", "logs.crash"),
])
def test_rule_table(text, rule):
    checks = diagnose_failure(text)
    assert f"troubleshoot.{rule}" in ids(checks), ids(checks)


@pytest.mark.parametrize("width", [80, 160])
def test_doctor_run_on_an_external_servers_failed_run(tmp_path, width):
    """A past defect: on a failed run against a server wattbench did not start (no server.log),
    ``doctor --run`` said "read server.log" and counted ``0 fail``."""
    from wattbench.cli.main import build_app

    reqs = [{"id": i, "level": 0, "sent_ns": 0, "input_tokens": 10, "requested_output_tokens": 10, "ok": False,
             "error": "connect"} for i in range(4)]
    d = _run_dir(tmp_path, detail="the target stopped answering", requests=reqs)
    assert not (d / "server.log").exists()
    r = CliRunner().invoke(build_app(), ["doctor", "--no-env", "--run", str(d)], terminal_width=width)
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert "read server.log" not in text
    assert "the run has no server.log (wattbench did not start this server): read the server's own log" in text
    import re

    assert int(re.search(r"(\d+) pass, (\d+) warn, (\d+) fail", text).group(3)) >= 1
    assert "the run failed: " in text and "the target stopped answering" in text
    # with the log wattbench kept for a server it started, it says to read that log
    (d / "server.log").write_text("INFO starting\n")
    got = {c.id: c for c in diagnose_failure(d)}
    assert got["troubleshoot.logs.server_errors"].fix.endswith("read server.log around those times")


def test_a_result_file_the_loader_refuses_is_said_and_the_requests_are_still_read(tmp_path):
    """``--run`` reads result.json through the one bounded loader (``results.rundir.load_result``): a
    file cut short is named as unreadable, and what requests.jsonl holds is still diagnosed."""
    reqs = [{"id": i, "level": 0, "sent_ns": 0, "input_tokens": 2000, "requested_output_tokens": 128, "ok": False,
             "error": "http_400", "error_detail": "prompt rejected"} for i in range(2)]
    d = _run_dir(tmp_path, requests=reqs)
    text = (d / "result.json").read_text()
    (d / "result.json").write_text(text[: len(text) // 2])
    run = load_run(d)
    said = [t for src, t in run["texts"] if src == "result.json"]
    assert len(said) == 1 and said[0].startswith("result.json unreadable: ") and "result.json" in said[0][24:]
    assert "status" not in run  # nothing of the result is guessed from a file the loader refused
    assert run["errors"] == {"http_400": 2} and run["max_model_len"] is None
