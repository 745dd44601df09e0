"""vLLM: its ``/metrics`` carries its configuration as info gauges (a sample of value 1 whose labels
are the settings): ``vllm:cache_config_info`` (block size, KV cache dtype, prefix caching, GPU
memory utilization, swap space, ...; ``PrometheusStatLogger.log_metrics_info``), and any other
``vllm:*_info`` family a version adds. ``/v1/models`` gives the served model's ``max_model_len`` and
``root`` (the weights it was started from); ``/version`` the version.

Left out as volatile: the ``engine`` and ``model_name`` labels (which engine core, which model: not
settings), the sizes vLLM finds by profiling memory at start (``num_gpu_blocks``,
``num_cpu_blocks``, ``kv_cache_size_tokens``, ``kv_cache_max_concurrency``: they move a little from
one start of one configuration to the next), ``vllm:lora_requests_info``'s running and waiting
adapters (a live state), and ``/v1/models``' ``created`` and ``permission`` (made per request).
Its scheduler settings (max_num_seqs, max_num_batched_tokens, chunked prefill) are not exposed."""

from __future__ import annotations

from typing import Any

from wattbench.server.identity.common import Responses, missing, model_entry, settings
from wattbench.server.metrics import parse_exposition

LABELS_NOT_SETTINGS = ("engine", "model_name")
PROFILED = ("num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens", "kv_cache_max_concurrency")
LIVE = ("running_lora_adapters", "waiting_lora_adapters")
MAX_GAUGES = 16  # info families kept (vLLM 0.32 has one; a hostile exposition cannot grow the identity)


def info_gauges(metrics_text: str, prefix: str = "vllm:") -> dict[str, dict[str, str]]:
    """``{family: labels}`` of the ``<prefix>*_info`` samples in a Prometheus exposition (the first
    sample of each family, the first ``MAX_GAUGES`` families by name); {} when the text does not parse."""
    try:
        samples = parse_exposition(metrics_text)
    except Exception:  # noqa: BLE001 - a server's malformed exposition: nothing exposed, said by the caller
        return {}
    names = [n for n, rows in sorted(samples.items()) if n.startswith(prefix) and n.endswith("_info") and rows]
    return {name: dict(samples[name][0][0]) for name in names[:MAX_GAUGES]}


def exposed(responses: Responses, model: str | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    out: dict[str, dict[str, Any]] = {}
    status, _, body = responses.get("/metrics", (0, {}, b""))
    gauges = info_gauges(body.decode("utf-8", "replace")) if status == 200 else {}
    for name, labels in gauges.items():
        out[f"/metrics {name}"] = settings(labels, lambda n: n in LABELS_NOT_SETTINGS + PROFILED + LIVE)
    entry = model_entry(responses, model)
    if entry:
        out["/v1/models"] = entry
    return out, ([] if gauges else [missing(responses, "/metrics", "no vllm:*_info gauge")
                                    if status != 200 else "/metrics: no vllm:*_info gauge"])
