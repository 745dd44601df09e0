"""Decode roofline: the fastest a GPU could generate tokens for a model, batch and context length.

One decode step generates one token for each of ``batch`` sequences that each hold ``context``
tokens of KV cache. The step cannot be faster than either

* moving its bytes: ``weight_bytes + batch × context × kv_bytes_per_token`` over the memory
  bandwidth (memory bound: ``tokens/s = batch × bandwidth / bytes_per_step``), or
* doing its FLOPs: ``batch × flops_per_token`` at the dense peak (compute bound:
  ``tokens/s = peak / flops_per_token``),

so the bound is ``batch / max(t_memory, t_compute)`` = the smaller of the two rates.

``weight_bytes`` counts **every stored parameter**, input embedding included
(Llama-3.1-8B: 8.03e9 × 2 B = 16.06 GB; H200 4.8e12 / 16.06e9 = 299 tokens/s at batch 1). Strictly,
a decode step reads only ``batch`` rows of the input embedding table; pass
``count_input_embedding=False`` for that tighter reading (the output projection is always read in
full). The default follows the usual "model bytes / bandwidth" convention so that figures match
published rooflines; the difference is the embedding table's share (6.5% for Llama-3.1-8B).

``flops_per_token = 2 × matmul parameters + 4 × layers × context × heads × head_dim``: a
multiply-add per weight of the blocks and the output projection, plus ``QKᵀ`` and ``AV`` over the
context (2 FLOPs × context × head_dim per head, twice). Activations, norms, softmax and the
embedding lookup are ignored. With ``gpus > 1`` bandwidth, FLOP/s and memory are summed (perfect
tensor parallelism, no communication cost). int4/int8 dtypes are weight-only (math at BF16 peak).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
import re

from wattbench.config.plan import DEFAULT_DECODE_BATCH, DEFAULT_DECODE_CONTEXT, DEFAULT_WEIGHT_DTYPE
from wattbench.core.errors import UserError
from wattbench.planning.hardware import GPUSpec, HardwareTable, find_gpu
from wattbench.planning.model_shapes import COMPUTE_DTYPE, ModelShape, dtype_bytes, load_model_shape
from wattbench.core.schema import Result
from wattbench.planning.measured import get_level


@dataclass
class RooflineResult:
    model: str
    gpu: str
    gpus: int
    dtype: str
    kv_dtype: str
    compute_dtype: str
    batch: int
    context: int
    params: int
    weight_bytes: float
    kv_bytes_per_token: float
    kv_bytes_per_step: float
    bytes_per_step: float
    flops_per_token: float
    memory_bandwidth_bytes_per_s: float
    peak_flops: float
    memory_bound_tokens_per_s: float
    compute_bound_tokens_per_s: float
    bound_tokens_per_s: float
    limited_by: str  # memory | compute
    crossover_batch: float | None  # batch where compute starts to bind (None: never at this context)
    memory_required_bytes: float
    memory_capacity_bytes: float
    fits_in_memory: bool
    count_input_embedding: bool
    measured_tokens_per_s: float | None = None
    measured_pct_of_bound: float | None = None
    measured_from: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def roofline(
    model: str | Path | ModelShape,
    gpu: str | GPUSpec,
    dtype: str = DEFAULT_WEIGHT_DTYPE,
    batch: int = DEFAULT_DECODE_BATCH,
    context: int = DEFAULT_DECODE_CONTEXT,
    kv_dtype: str | None = None,
    gpus: int = 1,
    count_input_embedding: bool = True,
    measured_tokens_per_s: float | None = None,
    hardware: HardwareTable | None = None,
) -> RooflineResult:
    """Memory- and compute-bound decode tokens/s (summed over the batch)."""
    shape = load_model_shape(model)
    spec = gpu if isinstance(gpu, GPUSpec) else find_gpu(gpu, hardware)
    dtype = dtype.strip().lower()
    kv_dtype = (kv_dtype or ("bf16" if dtype in ("int4", "int8") else dtype)).strip().lower()
    if batch < 1:
        raise UserError(f"batch must be at least 1, got {batch}")
    if context < 0:
        raise UserError(f"context must be 0 or more tokens, got {context}")
    if gpus < 1:
        raise UserError(f"gpus must be at least 1, got {gpus}")
    wbytes_per_param = dtype_bytes(dtype)
    compute_dtype = COMPUTE_DTYPE[dtype]
    peak = spec.peak_flops(compute_dtype) * gpus
    bandwidth = spec.memory_bandwidth_bytes_per_s * gpus
    capacity = spec.memory_bytes * gpus

    weight_bytes_stored = shape.total_params * wbytes_per_param
    weight_bytes = weight_bytes_stored
    if not count_input_embedding:
        # only `batch` rows of the input embedding are read; a tied table is read in full by the head
        if not shape.tie_word_embeddings:
            weight_bytes -= (shape.embedding_params - batch * shape.hidden_size) * wbytes_per_param
    kv_per_token = shape.kv_bytes_per_token(kv_dtype)
    kv_step = batch * context * kv_per_token
    bytes_step = weight_bytes + kv_step
    flops_token = 2.0 * shape.matmul_params_per_token + 4.0 * shape.num_layers * context * (
        shape.num_attention_heads * shape.head_dim
    )
    mem_tps = batch * bandwidth / bytes_step
    comp_tps = peak / flops_token
    bound = min(mem_tps, comp_tps)
    # t_mem(B) = (W + B·c·kv)/bw ; t_comp(B) = B·F/peak ; equal at B* = (W/bw) / (F/peak − c·kv/bw)
    denom = flops_token / peak - context * kv_per_token / bandwidth
    crossover = (weight_bytes / bandwidth) / denom if denom > 0 else None
    required = weight_bytes_stored + kv_step
    warnings: list[str] = []
    if required > capacity:
        warnings.append(
            f"weights + KV cache need {required / 1e9:.1f} GB but {gpus} × {spec.name} has {capacity / 1e9:.1f} GB; "
            "the bound is not reachable at this batch and context"
        )
    res = RooflineResult(
        model=shape.name,
        gpu=spec.name,
        gpus=gpus,
        dtype=dtype,
        kv_dtype=kv_dtype,
        compute_dtype=compute_dtype,
        batch=batch,
        context=context,
        params=shape.total_params,
        weight_bytes=weight_bytes,
        kv_bytes_per_token=kv_per_token,
        kv_bytes_per_step=kv_step,
        bytes_per_step=bytes_step,
        flops_per_token=flops_token,
        memory_bandwidth_bytes_per_s=bandwidth,
        peak_flops=peak,
        memory_bound_tokens_per_s=mem_tps,
        compute_bound_tokens_per_s=comp_tps,
        bound_tokens_per_s=bound,
        limited_by="memory" if mem_tps <= comp_tps else "compute",
        crossover_batch=crossover,
        memory_required_bytes=required,
        memory_capacity_bytes=capacity,
        fits_in_memory=required <= capacity,
        count_input_embedding=count_input_embedding,
        warnings=warnings,
    )
    if measured_tokens_per_s is not None:
        if measured_tokens_per_s < 0:
            raise UserError(f"measured tokens/s must not be negative, got {measured_tokens_per_s}")
        res.measured_tokens_per_s = measured_tokens_per_s
        res.measured_pct_of_bound = 100.0 * measured_tokens_per_s / bound
        if res.measured_pct_of_bound > 100.0:
            res.warnings.append(
                "measured throughput exceeds the bound: check --gpu, --gpus, --dtype and --context "
                "(or the run used speculative decoding / a smaller model)"
            )
    return res


def roofline_for_result(
    result: Result,
    level: int,
    model: str | Path | ModelShape,
    gpu: str | GPUSpec | None = None,
    dtype: str = DEFAULT_WEIGHT_DTYPE,
    batch: int | None = None,
    context: int | None = None,
    kv_dtype: str | None = None,
    gpus: int = 1,
    count_input_embedding: bool = True,
    hardware: HardwareTable | None = None,
) -> RooflineResult:
    """The roofline at a measured level's operating point, with measured output tokens/s vs the bound.

    Defaults taken from the run: ``gpu`` = the first GPU's name in ``environment.gpus``; ``batch`` =
    the level's target concurrency (else its mean in-flight requests, rounded); ``context`` = mean input
    tokens + half the mean output tokens per request (the average KV length during decode).
    """
    lv = get_level(result, level)
    measured_from = f"run {result.run_id} level {lv.index} ({lv.label})"
    if gpu is None:
        if not result.environment.gpus or not result.environment.gpus[0].name:
            raise UserError(f"run {result.run_id} records no GPU name; give --gpu")
        gpu = result.environment.gpus[0].name
    if batch is None:
        if lv.load.target_concurrency:
            batch = int(lv.load.target_concurrency)
        elif lv.load.mean_in_flight:
            batch = max(1, round(lv.load.mean_in_flight))
        else:
            raise UserError(f"{measured_from} has no concurrency figure; give --batch")
    if context is None:
        n = lv.requests.completed
        if n <= 0:
            raise UserError(f"{measured_from} has no completed requests; give --context")
        m = lv.throughput.measured_request_tokens  # per completed request: their own tokens
        n_in, n_out = (m.input, m.output) if m is not None else (lv.throughput.input_tokens,
                                                                lv.throughput.output_tokens)
        context = int(round(n_in / n + 0.5 * n_out / n))
    res = roofline(
        model, gpu, dtype=dtype, batch=batch, context=context, kv_dtype=kv_dtype, gpus=gpus,
        count_input_embedding=count_input_embedding,
        measured_tokens_per_s=lv.throughput.output_tokens_per_s, hardware=hardware,
    )
    res.measured_from = measured_from
    n_run = len(result.environment.gpus)
    if n_run > gpus:
        res.warnings.append(
            f"the run saw {n_run} GPUs but the bound is for {gpus}; if the server used them all "
            f"(tensor parallel or replicas), give --gpus {n_run}"
        )
    served = result.server.model
    if served and not isinstance(model, ModelShape) and not same_model(str(model), served):
        res.warnings.append(
            f"run {result.run_id} served {served!r}, not {Path(str(model)).name!r}: the bound is for "
            f"{Path(str(model)).name}, the measured tokens/s for {served}; give --model for the served model"
        )
    return res


def _name_tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9.]+", name.lower()) if t} | {
        t for t in re.split(r"[^a-z0-9]+", name.lower()) if t}


def same_model(given: str, served: str) -> bool:
    """Whether ``--model`` (a preset like ``llama-8b``, or a config path) plausibly names the model a
    run served (``meta-llama/Llama-3.1-8B-Instruct``): every word of the given name appears in the
    served name. A loose test on purpose: it exists to catch a run of another model family or size."""
    g = Path(given).name if ("/" in given or given.endswith(".json")) and Path(given).exists() else given
    if g == "config.json":
        g = Path(given).parent.name
    want = {t for t in _name_tokens(g) if t not in ("json", "config")}
    return want <= _name_tokens(served)
