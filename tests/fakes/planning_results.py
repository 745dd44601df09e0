"""Results with known figures for the planning tests (ground truth: the numbers put in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wattbench.core.schema import (
    BoundaryEnergy,
    ClockInfo,
    Environment,
    GPUInfo,
    Latency,
    LevelResult,
    LoadStats,
    Requests,
    Result,
    ServerInfo,
    Stats,
    Throughput,
    Validity,
)


def make_level(
    index: int,
    out_tps: float,
    acc_p95_w: float | None = None,
    acc_p99_w: float | None = None,
    devices: int = 1,
    node_p95_w: float | None = None,
    node_p99_w: float | None = None,
    host_p95_w: float | None = None,
    goodput_tps: float | None = None,
    concurrency: int = 1,
    ttft_p95_ms: float | None = None,
    tpot_p95_ms: float | None = None,
    verdict: str = "valid",
    completed: int = 100,
    input_tokens: int = 100 * 1000,
    output_tokens: int = 100 * 200,
    node_tokens_per_kwh: float | None = None,
) -> LevelResult:
    energy: dict[str, BoundaryEnergy] = {}
    if acc_p95_w is not None:
        energy["accelerator"] = BoundaryEnergy(
            boundary="accelerator", method="counter", p95_power_w=acc_p95_w,
            p99_power_w=acc_p99_w if acc_p99_w is not None else acc_p95_w,
            devices=[f"gpu{i}" for i in range(devices)],
        )
    if node_p95_w is not None:
        energy["node"] = BoundaryEnergy(
            boundary="node", method="counter", p95_power_w=node_p95_w,
            p99_power_w=node_p99_w if node_p99_w is not None else node_p95_w,
            output_tokens_per_kwh=node_tokens_per_kwh,
        )
    if host_p95_w is not None:
        energy["host"] = BoundaryEnergy(boundary="host", method="sum", p95_power_w=host_p95_w, p99_power_w=host_p95_w)
    return LevelResult(
        index=index,
        label=f"concurrency={concurrency}",
        load=LoadStats(mode="concurrency", target_concurrency=concurrency),
        requests=Requests(completed=completed),
        latency=Latency(ttft_ms=Stats(p95=ttft_p95_ms), tpot_ms=Stats(p95=tpot_p95_ms)),
        throughput=Throughput(output_tokens_per_s=out_tps, input_tokens=input_tokens, output_tokens=output_tokens),
        energy=energy,
        goodput=None if goodput_tps is None else {"output_tokens_per_s": goodput_tps, "requests_per_s": 1.0},
        validity=Validity(verdict=verdict),
    )


def make_result(run_id: str, levels: list[LevelResult], gpu: str = "NVIDIA H200", gpus: int = 1,
                model: str = "llama-8b", **extra: Any) -> Result:
    return Result(
        wattbench_version="0.1.0",
        run_id=run_id,
        created_at="2026-01-01T00:00:00Z",
        status="complete",
        clock=ClockInfo(anchor_wall_ns=0, anchor_mono_ns=0),
        environment=Environment(gpus=[GPUInfo(index=i, name=gpu) for i in range(gpus)]),
        server=ServerInfo(model=model),
        levels=levels,
        **extra,
    )


def write_run(directory: Path, result: Result) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "result.json").write_text(result.model_dump_json(indent=1))
    return directory
