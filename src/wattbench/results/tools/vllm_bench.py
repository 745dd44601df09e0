"""``vllm bench serve --save-result --save-detailed``: its result JSON → a ``ToolRun``.

Read (vLLM 0.32, ``vllm/benchmarks/serve.py``): per request ``start_times`` (``time.perf_counter()``
when the request was about to be posted: CLOCK_MONOTONIC, the run's own clock), ``ttfts`` (s, to
the first chunk with ``choices``), ``latencies`` (s, to the last ``choices`` chunk — the finish
chunk included), ``output_lens`` (the
server's ``usage.completion_tokens`` where it sent one, else vLLM retokenizes the text),
``input_lens`` (the server's ``usage.prompt_tokens`` where sent, else the prompt's length) and
``errors`` (a failed request has a non-empty one); the level's load from ``max_concurrency`` and
``request_rate``; its own figures (``mean_ttft_ms`` …, ``output_throughput``) carried over.

Not read: ``itls`` (the gaps between ``choices`` chunks count the finish chunk, which carries no
token: the tokens are spread evenly from the first chunk to the last instead), ``generated_texts``, ``queue_times`` (the client's wait for a concurrency slot: the
request was not sent yet, and ``start_times`` is taken after it), goodput and the ``--percentile-
metrics`` other than those named in ``FIGURES``. The warm-up requests (``--num-warmups``) are not
in the file: vLLM waits for all of them before the first timed request, so none is in flight
inside the window. Without ``--save-detailed`` the file has no per-request times, and no level can
be placed: that is refused with one line saying to add it.

One file is one level; ``--append-result`` writes one JSON object per line, one level each.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from wattbench.core.errors import UserError
from wattbench.results.tools.base import (
    DurationS,
    PositiveCount,
    Rate,
    StampS,
    Text,
    Tokens,
    ToolLevelData,
    ToolModel,
    ToolRequest,
    ToolRun,
    bad_file,
    checked,
    finite_figure,
    json_lines,
    parse_json,
    read_bytes,
    seconds_to_ns,
    validate,
)

TOOL = "vllm-bench-serve"
WHAT = "vllm bench serve"
FIGURES = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
           "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms",
           "request_throughput", "output_throughput", "total_token_throughput", "duration")
NOT_READ = ["itls (they count the finish chunk, which carries no token)", "generated_texts", "queue_times (the wait for a --max-concurrency slot, before start_times)",
            "goodput and percentile metrics other than mean/median/p99 of ttft, tpot, itl, e2el"]


class VllmResult(ToolModel):
    """The fields of a ``--save-result --save-detailed`` file wattbench reads, bounded."""

    start_times: list[StampS]
    ttfts: list[DurationS | None]
    latencies: list[DurationS | None] = []
    output_lens: list[Tokens | None] = []
    input_lens: list[Tokens | None] = []
    errors: list[Annotated[str, Field(max_length=1 << 20)] | None] = []
    request_rate: Rate | Literal["inf", "Infinity"] | None = None
    max_concurrency: PositiveCount | None = None
    burstiness: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] | None = None
    ramp_up_strategy: Text | None = None

    @field_validator("request_rate", mode="before")
    @classmethod
    def _no_nan(cls, v: object) -> object:
        if isinstance(v, float) and math.isnan(v):
            raise ValueError("request_rate is NaN")
        return v


def _objects(path: Path) -> list[object]:
    data = read_bytes(path, WHAT)
    try:
        return [parse_json(data, path, WHAT)]
    except UserError:
        pass
    return [obj for _, obj in json_lines(data, path, WHAT)]  # --append-result: one object a line


def _level(raw: dict[str, Any], path: Path, n: int) -> ToolLevelData:
    if "start_times" not in raw or "ttfts" not in raw:
        raise UserError(f"{WHAT}: {path} has no per-request times; run it with --save-result --save-detailed")
    where = f"result {n + 1}: " if n else ""
    d = validate(VllmResult, raw, path, WHAT, where)
    starts, ttfts, lats, outs, ins, errs = d.start_times, d.ttfts, d.latencies, d.output_lens, d.input_lens, d.errors
    if not (len(starts) == len(ttfts) == len(lats)):
        raise bad_file(WHAT, path, "has per-request lists of different lengths")
    reqs = []
    for i, st in enumerate(starts):
        err = errs[i] if i < len(errs) else None
        s = seconds_to_ns(st)
        ttft, lat = ttfts[i], lats[i]
        if err or ttft is None or lat is None:
            reqs.append(ToolRequest(start_ns=s, ok=False, error="tool_error", end_ns=None))
            continue
        n_out = outs[i] if i < len(outs) else None
        reqs.append(ToolRequest(start_ns=s, first_token_ns=s + seconds_to_ns(ttft), last_token_ns=s + seconds_to_ns(lat),
                                end_ns=s + seconds_to_ns(lat), output_tokens=n_out,
                                input_tokens=ins[i] if i < len(ins) else None))
    checked(reqs, path, WHAT, where)
    rate = math.inf if d.request_rate in (None, "inf", "Infinity") else float(d.request_rate)
    conc = d.max_concurrency
    notes = []
    if conc is not None and math.isinf(rate):
        mode, value, cap = "concurrency", float(conc), None
    elif math.isinf(rate):  # every request at once, no cap
        mode, value, cap = "rate", math.inf, None
    else:
        mode, value, cap = "rate", rate, conc
    burst = d.burstiness
    arrival = "poisson" if burst in (None, 1, 1.0) else f"gamma:{float(burst):g}"
    if d.ramp_up_strategy:
        notes.append(f"the request rate ramped ({d.ramp_up_strategy}); the level's rate is not one rate")
    label = (f"concurrency={int(value)}" if mode == "concurrency" else
             ("rate=inf" if math.isinf(value) else f"rate={value:g}") + (f" max_concurrency={cap}" if cap else ""))
    if n:
        label += f" #{n + 1}"
    figures = {k: finite_figure(raw[k]) for k in FIGURES if k in raw}
    if "duration" in figures:
        figures["duration_s"] = figures.pop("duration")
    return ToolLevelData(label=label, mode=mode, value=value, requests=reqs, figures=figures, max_in_flight=cap,
                         arrival=arrival, notes=notes)


def read(paths: list[Path]) -> ToolRun:
    levels, version = [], None
    for p in paths:
        for n, d in enumerate(_objects(p)):
            if not isinstance(d, dict):
                raise bad_file(WHAT, p, "is not a JSON object")
            levels.append(_level(d, p, n))
    return ToolRun(tool=TOOL, levels=levels, version=version, files=[str(p) for p in paths], not_read=list(NOT_READ),
                   tokens_counted_by="the server's usage.completion_tokens (vLLM retokenizes the text where a "
                                     "response has none)",
                   token_source="usage")
