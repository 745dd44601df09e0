"""Realistic Result objects for tests of history, compare, regress and diagnosis.

Every energy figure is derived from the inputs the way accounting derives it (energy = power ×
duration, J/token = energy / tokens, per kW = tok/s / kW), so tests can assert exact ratios.
"""

from __future__ import annotations

import math

import copy
from typing import Any

from wattbench.core.schema import (
    BoundaryEnergy,
    ClockInfo,
    Environment,
    Goodput,
    GPUInfo,
    Latency,
    LevelResult,
    LoadStats,
    Requests,
    Result,
    ServerInfo,
    ServerMetrics,
    Stats,
    Thermal,
    Throughput,
    Validity,
    Window,
)


def make_energy(
    boundary: str,
    avg_power_w: float,
    duration_s: float,
    output_tokens: int,
    input_tokens: int,
    method: str = "counter",
    label: str = "measured",
    idle_power_w: float | None = None,
) -> BoundaryEnergy:
    energy_j = avg_power_w * duration_s
    idle = idle_power_w if idle_power_w is not None else avg_power_w * 0.2
    total = output_tokens + input_tokens
    return BoundaryEnergy(
        boundary=boundary,
        method=method,
        label=label,
        energy_j=energy_j,
        avg_power_w=avg_power_w,
        max_power_w=avg_power_w * 1.1,
        idle_power_w=idle,
        idle_energy_j=idle * duration_s,
        dynamic_energy_j=energy_j - idle * duration_s,
        j_per_output_token=energy_j / output_tokens,
        j_per_token=energy_j / total,
        output_tokens_per_s_per_kw=(output_tokens / duration_s) / (avg_power_w / 1000.0),
        tokens_per_kwh=total / (energy_j / 3.6e6),
        output_tokens_per_kwh=output_tokens / (energy_j / 3.6e6),
        uncertainty_pct=1.0,
        coverage=1.0,
        largest_gap_s=0.1,
    )


def stats(p50: float, p99: float | None = None, count: int = 100) -> Stats:
    p99 = p99 if p99 is not None else p50 * 1.5
    return Stats(count=count, mean=(p50 + p99) / 2, p50=p50, p90=p50 + 0.8 * (p99 - p50),
                 p95=p50 + 0.9 * (p99 - p50), p99=p99, max=p99 * 1.1, min=p50 * 0.5, std=(p99 - p50) / 2)


def make_level(
    index: int = 0,
    mode: str = "concurrency",
    value: float = 8,
    output_tokens_per_s: float = 1000.0,
    power_w: dict[str, float] | float = 700.0,
    duration_s: float = 60.0,
    output_len: int = 128,
    input_len: int = 256,
    ttft_p50_ms: float = 50.0,
    ttft_p99_ms: float = 120.0,
    tpot_p50_ms: float = 20.0,
    tpot_p99_ms: float = 30.0,
    e2e_p99_ms: float | None = None,
    failed: int = 0,
    errors: dict[str, int] | None = None,
    method: str = "counter",
    label_kind: str = "measured",
    max_temp_c: float = 65.0,
    sm_clock_mhz: float = 1980.0,
    throttle_reasons: list[str] | None = None,
    gpu_utilization_pct: float = 95.0,
    running_mean: float = 8.0,
    waiting_mean: float = 0.0,
    client_cpu_pct: float = 30.0,
    saturated: bool = False,
    verdict: str = "valid",
    goodput_rps: float | None = None,
    trials: dict[str, Any] | None = None,
) -> LevelResult:
    output_tokens = int(round(output_tokens_per_s * duration_s))
    completed = max(1, output_tokens // output_len)
    input_tokens = completed * input_len
    if isinstance(power_w, (int, float)):
        power_w = {"accelerator": float(power_w)}
    energy = {
        b: make_energy(b, p, duration_s, output_tokens, input_tokens, method=method, label=label_kind)
        for b, p in power_w.items()
    }
    if mode == "concurrency":
        load = LoadStats(mode="concurrency", target_concurrency=int(value), mean_in_flight=float(value),
                         client_cpu_pct=client_cpu_pct, saturated=saturated)
        label = f"concurrency={int(value)}"
    else:
        load = LoadStats(mode="rate", target_rate_rps=float(value), achieved_rate_rps=float(value),
                         arrival="poisson", client_cpu_pct=client_cpu_pct, saturated=saturated)
        label = f"rate={value:g}"
    e2e_p99 = e2e_p99_ms if e2e_p99_ms is not None else ttft_p99_ms + tpot_p99_ms * output_len
    return LevelResult(
        index=index,
        label=label,
        load=load,
        window=Window(start_ns=1_000_000_000, end_ns=1_000_000_000 + int(duration_s * 1e9), duration_s=duration_s),
        requests=Requests(completed=completed, failed=failed, errors=dict(errors or {})),
        latency=Latency(
            ttft_ms=stats(ttft_p50_ms, ttft_p99_ms, completed),
            tpot_ms=stats(tpot_p50_ms, tpot_p99_ms, completed),
            itl_ms=stats(tpot_p50_ms, tpot_p99_ms * 1.2, completed),
            e2e_ms=stats(e2e_p99 * 0.7, e2e_p99, completed),
        ),
        throughput=Throughput(
            output_tokens_per_s=output_tokens / duration_s,
            input_tokens_per_s=input_tokens / duration_s,
            total_tokens_per_s=(output_tokens + input_tokens) / duration_s,
            requests_per_s=completed / duration_s,
            duration_s=duration_s,
            output_tokens=output_tokens,
            input_tokens=input_tokens,
        ),
        energy=energy,
        validity=Validity(verdict=verdict, reasons=[] if verdict == "valid" else ["coverage 80% < 95%"]),
        thermal=Thermal(
            max_temperature_c=max_temp_c,
            mean_sm_clock_mhz=sm_clock_mhz,
            min_sm_clock_mhz=sm_clock_mhz * 0.95,
            throttle_reasons_seen=list(throttle_reasons or []),
            capping_reasons_seen=list(throttle_reasons or []),
            mean_gpu_utilization_pct=gpu_utilization_pct,
        ),
        server_metrics=ServerMetrics(
            available=True,
            mean_running_requests=running_mean, max_running_requests=running_mean * 1.2,
            mean_waiting_requests=waiting_mean, max_waiting_requests=waiting_mean * 1.5,
        ),
        goodput=None if goodput_rps is None else Goodput(requests_per_s=goodput_rps),
        trials=trials,
    )


def make_result(
    run_id: str = "run-a",
    levels: list[LevelResult] | None = None,
    model: str = "Qwen/Qwen2.5-0.5B-Instruct",
    dtype: str = "bfloat16",
    engine: str = "vllm",
    engine_version: str = "0.11.0",
    gpu_name: str = "NVIDIA H200",
    driver: str = "580.65.06",
    power_limit_w: float = 700.0,
    n_gpus: int = 1,
    workload: str = "chat",
    input_tokens: str = "256",
    output_tokens: str = "128",
    api: str = "completions",
    slo: str | None = None,
    packages: dict[str, str] | None = None,
    created_at: str = "2026-11-29T12:00:00Z",
    status: str = "complete",
    tags: list[str] | None = None,
) -> Result:
    levels = levels if levels is not None else [make_level(0, value=1, output_tokens_per_s=150.0, power_w=350.0),
                                                make_level(1, value=8, output_tokens_per_s=1000.0, power_w=600.0)]
    for i, lv in enumerate(levels):
        lv.index = i
    conc = [int(lv.load.target_concurrency) for lv in levels if lv.load.mode == "concurrency"]
    rate = [lv.load.target_rate_rps for lv in levels if lv.load.mode == "rate"]
    return Result(
        wattbench_version="0.1.0",
        run_id=run_id,
        created_at=created_at,
        status=status,
        clock=ClockInfo(anchor_wall_ns=1_795_000_000_000_000_000, anchor_mono_ns=1_000_000, anchor_uncertainty_ns=200),
        config={
            "model": model, "api": api, "workload": workload, "input_tokens": input_tokens,
            "output_tokens": output_tokens, "concurrency": conc, "rate": rate, "arrival": "poisson",
            "slo": slo, "trials": 1, "engine_args": [f"--dtype={dtype}"],
        },
        environment=Environment(
            hostname="node-1", os="Linux", kernel="6.8.0", python="3.11.9", cpu_model="Xeon 8480+", cpu_count=112,
            gpus=[GPUInfo(index=i, name=gpu_name, uuid=f"GPU-{run_id}-{i}", driver=driver, cuda_driver="13.0",
                          power_limit_w=power_limit_w, default_power_limit_w=power_limit_w)
                  for i in range(n_gpus)],
            packages=dict(packages if packages is not None else {"torch": "2.9.0", "vllm": engine_version}),
        ),
        server=ServerInfo(base_url="http://127.0.0.1:8000/v1", engine=engine, version=engine_version, model=model,
                          models=[model], effective_config={"dtype": dtype}),
        levels=levels,
        validity=Validity(verdict="valid"),
        tags=list(tags or []),
    )


def variant(result: Result, **changes: Any) -> Result:
    """A deep copy with top-level attributes replaced."""
    r = copy.deepcopy(result)
    for k, v in changes.items():
        setattr(r, k, v)
    return r


def trials_block(figures: dict[str, tuple[float, float]], n: int = 5, confidence: float = 0.95) -> dict[str, Any]:
    """``{name: (mean, half_width)}`` -> the ``LevelResult.trials`` block (see docs/compare.md). A
    positive figure's interval is log-symmetric, as the trials block builds it
    (``metrics.trials.trial_interval``): ``mean · e^±h`` with ``h = half_width / mean``, so the noise
    read from it (``metrics.trials.rel_half_width``) is ``h`` exactly; any other, ``mean ± half_width``."""

    def interval(m: float, hw: float) -> dict[str, Any]:
        if m > 0:
            return {"mean": m, "ci_low": m * math.exp(-hw / m), "ci_high": m * math.exp(hw / m), "n": n,
                    "scale": "log"}
        return {"mean": m, "ci_low": m - hw, "ci_high": m + hw, "n": n}

    return {"n": n, "confidence": confidence, "figures": {k: interval(m, hw) for k, (m, hw) in figures.items()}}
