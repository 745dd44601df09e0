"""A wrapped ``wattbench run``'s own run directory → a ``ToolRun``, so ``wattbench measure --
wattbench run …`` reads it as it reads the other load generators.

Read: ``result.json`` (each level's load, label and figures) and ``requests.jsonl`` (per request
``sent_ns``, ``first_token_ns``, ``last_token_ns``, ``end_ns`` — ``perf_counter_ns``, the run's own
CLOCK_MONOTONIC on the same host — the server's ``usage`` token counts, warm-up, errors). One level per
level of the wrapped run, its window from its requests as for any tool. Its own figures are carried
over under names that say they are the wrapped run's: output tok/s, p99 TTFT, p50 TPOT and, when
it measured energy, its tok/s per kW at its headline boundary.

Not read: the wrapped run's telemetry and energy accounting (the measuring run reads its own
meters), its priming and history-check requests (not in its ``requests.jsonl``). Refused: a run
with ``--trials`` (each level's trials would share one window, cooldowns included) and a run
directory without ``requests.jsonl`` (``--no-requests``).
"""

from __future__ import annotations

import math
from pathlib import Path

from wattbench.core.errors import UserError
from wattbench.core.schema import LevelResult
from wattbench.results.tools.base import ToolLevelData, ToolRequest, ToolRun, checked
from wattbench.results.headline import headline_boundary
from wattbench.results.rundir import iter_requests, load_result

TOOL = "wattbench-run"
WHAT = "wattbench run"
RESULT_NAME = "result.json"
NOT_READ = ["its telemetry and energy accounting (this run reads its own meters)",
            "its priming and history-check requests (not in its requests.jsonl)"]


def _figures(lv: LevelResult) -> dict[str, float | None]:
    figs: dict[str, float | None] = {
        "output_tokens_per_s": lv.throughput.output_tokens_per_s,
        "ttft_p99_ms": lv.latency.ttft_ms.p99,
        "tpot_p50_ms": lv.latency.tpot_ms.p50,
    }
    b = headline_boundary(lv)
    if b is not None:
        figs["output_tokens_per_s_per_kw"] = lv.energy[b].output_tokens_per_s_per_kw
    return figs


def read(paths: list[Path]) -> ToolRun:
    """The wrapped run's directory (or its ``result.json``) as a ``ToolRun``."""
    if len(paths) != 1:
        raise UserError(f"{WHAT}: give one run directory (got {len(paths)})")
    where = Path(paths[0])
    run_dir = where.parent if where.is_file() else where
    result = load_result(run_dir)
    if any(lv.trials is not None for lv in result.levels):
        raise UserError(f"{WHAT}: {run_dir} ran --trials, whose trials of a level would share one window "
                        "(cooldowns included); wrap a run with --trials 1")
    if not (run_dir / "requests.jsonl").is_file():
        raise UserError(f"{WHAT}: {run_dir} has no requests.jsonl (per-request times); wrap a run that writes it")
    by_level: dict[int, list[ToolRequest]] = {lv.index: [] for lv in result.levels}
    source = "usage"
    for r in iter_requests(run_dir):
        if r.level not in by_level:
            continue
        source = r.token_source or source
        by_level[r.level].append(ToolRequest(
            start_ns=r.sent_ns, first_token_ns=r.first_token_ns, last_token_ns=r.last_token_ns, end_ns=r.end_ns,
            chunk_ns=list(r.chunk_ns) or None, input_tokens=r.input_tokens, output_tokens=r.output_tokens,
            ok=r.ok, error=r.error, warmup=r.warmup))
    levels = []
    for lv in result.levels:
        reqs = checked(by_level[lv.index], run_dir / "requests.jsonl", WHAT, f"level {lv.index}: ")
        if not reqs:
            continue
        ld = lv.load
        rate = ld.mode == "rate"
        value = (ld.target_rate_rps if rate else ld.target_concurrency)  # a rate's inf: every request at once
        if value is not None and not (value >= 0 and (math.isfinite(value) or rate)):
            raise UserError(f"{WHAT}: {run_dir / RESULT_NAME} level {lv.index}'s load is {value!r}; "
                            "is it a file wattbench wrote, unedited?")
        levels.append(ToolLevelData(
            label=lv.label, mode="rate" if rate else "concurrency", value=float(value if value is not None else 0),
            requests=reqs, figures=_figures(lv), max_in_flight=ld.max_in_flight if rate else None,
            arrival=result.config.arrival or "poisson" if rate else "poisson"))
    if not levels:
        raise UserError(f"{WHAT}: {run_dir} holds no measured request")
    return ToolRun(tool=TOOL, levels=levels, tokens_counted_by="the server's usage (as the wrapped run counted)",
                   token_source=source, version=result.wattbench_version, files=[str(run_dir / RESULT_NAME)],
                   not_read=list(NOT_READ))
