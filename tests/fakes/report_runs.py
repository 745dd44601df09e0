"""A complete, realistic run directory for report tests, written from a seeded simulation.

``write_run(dir)`` writes ``result.json`` (levels with two boundaries), ``requests.jsonl``
(closed-loop requests with per-token chunk times), ``telemetry.jsonl`` (10 Hz power + energy
counter + node power) and ``server_timeline.jsonl`` (1 Hz scrapes). Some text fields carry script
injections (``INJECT_*``) that a report must show as inert text.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from wattbench.core.schema import DeviceThermal, ServerMetrics, Thermal
from wattbench.core.schema import (
    BoundaryEnergy,
    ClockInfo,
    Environment,
    GPUInfo,
    Latency,
    LevelResult,
    LoadStats,
    RequestRecord,
    Requests,
    Result,
    ServerInfo,
    Stats,
    Throughput,
    Validity,
    Window,
)

INJECT_PROMPT = "<script>window.__pwned=1;alert(1)</script> tell me a story"
INJECT_LABEL = "concurrency=16 </script><script>window.__pwned=3</script>"
INJECT_MODEL = "tiny-<script>window.__pwned=4</script>-model"
INJECT_DETAIL = '<img src=x onerror="window.__pwned=2">'
ANCHOR_MONO_NS = 5_000_000_000_000
SLO_SPEC = "ttft_p99=120ms,tpot_p99=20ms"
ANCHOR_WALL_NS = 1_790_000_000_000_000_000


def _stats(values: list[float]) -> Stats:
    if not values:
        return Stats()
    a = np.asarray(values, dtype=float)
    return Stats(
        count=int(a.size),
        mean=float(a.mean()),
        p50=float(np.percentile(a, 50)),
        p90=float(np.percentile(a, 90)),
        p95=float(np.percentile(a, 95)),
        p99=float(np.percentile(a, 99)),
        max=float(a.max()),
        min=float(a.min()),
        std=float(a.std()),
    )


def _write_jsonl(path: Path, rows) -> None:
    with path.open("wb") as f:
        for row in rows:
            f.write(orjson.dumps(row))
            f.write(b"\n")


def write_run(
    run_dir: str | Path,
    *,
    concurrencies: tuple[int, ...] = (1, 4, 16),
    level_s: float = 20.0,
    telemetry_hz: float = 10.0,
    energy: bool = True,
    node_label: str = "measured",
    batched_telemetry: bool = False,
    run_id: str = "run-report-fake",
    seed: int = 0,
    min_output_tokens: int = 16,
    max_output_tokens: int = 48,
    slo: bool = True,
) -> Path:
    """Write a run directory and return its path. ``energy=False`` writes a run without sensors."""
    rng = np.random.default_rng(seed)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    idle_s = 3.0
    t0 = ANCHOR_MONO_NS
    gap_ns = int(1e9)
    records: list[RequestRecord] = []
    levels: list[LevelResult] = []
    # power model: accelerator = 80 W idle + 14 W per in-flight request (cap 650), node = acc + 300 W
    start = t0 + int(idle_s * 1e9)
    rid = 0
    level_windows = []
    for li, conc in enumerate(concurrencies):
        s = start
        e_target = s + int(level_s * 1e9)
        lrecs: list[RequestRecord] = []
        for w in range(conc):
            t = s + int(rng.uniform(0, 5e6))
            while t < e_target:
                out = int(rng.integers(min_output_tokens, max_output_tokens + 1))
                ttft = int((25 + 4 * conc + rng.exponential(10)) * 1e6)
                itl = (12 + 0.8 * conc) * 1e6
                gaps = rng.gamma(8.0, itl / 8.0, size=out - 1)
                first = t + ttft
                chunks = [first] + list(first + np.cumsum(gaps).astype(np.int64))
                chunks = [int(c) for c in chunks]
                last = chunks[-1]
                end = last + int(1e6)
                ok = rng.random() > 0.01
                rec = dict(
                    id=rid, level=li, worker=w, warmup=False, sent_ns=t,
                    input_tokens=256, output_tokens=out, requested_input_tokens=256,
                    requested_output_tokens=out,
                )
                if ok:
                    rec.update(first_token_ns=first, last_token_ns=last, end_ns=end, chunk_ns=chunks)
                else:
                    rec.update(ok=False, error="timeout", error_detail=f"stalled {INJECT_DETAIL}", end_ns=first,
                               output_tokens=None)
                if rid == 3:
                    rec["output_text"] = INJECT_PROMPT.replace("__pwned=1", "__pwned=5")
                    rec["prompt"] = INJECT_PROMPT
                lrecs.append(RequestRecord.model_validate(rec))
                rid += 1
                t = end
        e = max(r.end_ns for r in lrecs)
        level_windows.append((s, e))
        records.extend(lrecs)
        start = e + gap_ns
    t_end = start + int(2e9)

    # ---- telemetry: simulate power from in-flight count
    dt_ns = int(1e9 / telemetry_hz)
    ts = np.arange(t0, t_end, dt_ns, dtype=np.int64)
    sends = np.sort(np.asarray([r.sent_ns for r in records]))
    ends = np.sort(np.asarray([r.end_ns for r in records]))
    inflight = np.searchsorted(sends, ts, side="right") - np.searchsorted(ends, ts, side="right")
    acc_w = np.minimum(80 + 14 * inflight, 650) + rng.normal(0, 3, ts.size)
    acc_w[ts.size // 2] += 250  # a one-sample spike the report must not thin away
    node_w = acc_w + 300 + rng.normal(0, 5, ts.size)
    acc_e = np.concatenate([[0.0], np.cumsum((acc_w[1:] + acc_w[:-1]) / 2 * dt_ns / 1e9)]) + 12345.0
    channels = [
        dict(id="nvml0.power", sensor="nvml", kind="power", quantity="power", unit="W", boundary="accelerator",
             device="gpu0", update_period_s=0.1, source="nvmlDeviceGetPowerUsage", primary=False),
        dict(id="nvml0.energy", sensor="nvml", kind="counter", quantity="energy", unit="J", boundary="accelerator",
             device="gpu0", update_period_s=0.1, source="nvmlDeviceGetTotalEnergyConsumption", primary=True),
        dict(id="ipmi.node", sensor="ipmi", kind="power", quantity="power", unit="W", boundary="node",
             device="bmc", update_period_s=1.0, source="ipmitool dcmi power reading", method=node_label,
             primary=True),
    ]
    if energy:
        rows: list = [{"channels": channels}]
        if batched_telemetry:
            for i in range(0, ts.size, 10):
                sl = slice(i, i + 10)
                batch = []
                for k in range(sl.start, min(sl.stop, ts.size)):
                    batch += [[int(ts[k]), "nvml0.power", float(acc_w[k])], [int(ts[k]) + 1000, "nvml0.energy", float(acc_e[k])],
                              [int(ts[k]) + 2000, "ipmi.node", float(node_w[k])]]
                rows.append({"r": batch})
        else:
            for k in range(ts.size):
                rows.append({"t_ns": int(ts[k]), "c": "nvml0.power", "v": float(acc_w[k])})
                rows.append({"t_ns": int(ts[k]) + 1000, "c": "nvml0.energy", "v": float(acc_e[k])})
                rows.append({"t_ns": int(ts[k]) + 2000, "c": "ipmi.node", "v": float(node_w[k])})
        _write_jsonl(run_dir / "telemetry.jsonl", rows)

    # ---- server timeline at 1 Hz
    ss = np.arange(t0, t_end, int(1e9), dtype=np.int64)
    infl_s = np.searchsorted(sends, ss, side="right") - np.searchsorted(ends, ss, side="right")
    # the format of wattbench.server.metrics.ServerTimeline.to_jsonl: a meta line, then one line per scrape
    srows = [{"type": "meta", "url": "http://127.0.0.1:1/metrics", "engine": "vllm", "available": True}]
    for k in range(ss.size):
        running = int(infl_s[k])
        srows.append({"t_ns": int(ss[k]),
                      'vllm:num_requests_running{model_name="' + INJECT_MODEL + '"}': running,
                      "vllm:num_requests_waiting": max(0, running - 12),
                      "vllm:gpu_cache_usage_perc": min(1.0, running * 0.05)})
    _write_jsonl(run_dir / "server_timeline.jsonl", srows)

    # ---- per-level results (figures from the simulated data; the report must show them as stored)
    for li, conc in enumerate(concurrencies):
        s, e = level_windows[li]
        lrecs = [r for r in records if r.level == li]
        okr = [r for r in lrecs if r.ok]
        dur = (e - s) / 1e9
        out_tok = sum(r.output_tokens or 0 for r in okr)
        in_tok = sum(r.input_tokens or 0 for r in okr)
        ttft = [(r.first_token_ns - r.sent_ns) / 1e6 for r in okr]
        tpot = [(r.last_token_ns - r.first_token_ns) / 1e6 / (r.output_tokens - 1) for r in okr]
        itl = [(b - a) / 1e6 for r in okr for a, b in zip(r.chunk_ns, r.chunk_ns[1:])]
        e2e = [(r.end_ns - r.sent_ns) / 1e6 for r in okr]
        otps = out_tok / dur
        energy_map: dict[str, BoundaryEnergy] = {}
        steady_map: dict[str, BoundaryEnergy] = {}
        if energy:
            m = (ts >= s) & (ts <= e)
            for name, series, method, label, idle_w in (
                ("accelerator", acc_w, "counter", "measured", 80.0),
                ("node", node_w, "power_integral", node_label, 380.0),
            ):
                avg = float(series[m].mean())
                ej = avg * dur
                be = BoundaryEnergy(
                    boundary=name, method=method, label=label, energy_j=ej, avg_power_w=avg,
                    p95_power_w=float(np.percentile(series[m], 95)), p99_power_w=float(np.percentile(series[m], 99)),
                    max_power_w=float(series[m].max()), idle_power_w=idle_w, idle_energy_j=idle_w * dur,
                    dynamic_energy_j=ej - idle_w * dur, j_per_output_token=ej / out_tok,
                    j_per_token=ej / (out_tok + in_tok), output_tokens_per_s_per_kw=otps / (avg / 1000),
                    tokens_per_kwh=(out_tok + in_tok) / (ej / 3.6e6), output_tokens_per_kwh=out_tok / (ej / 3.6e6),
                    cost_per_million_output_tokens=0.15 * (ej / 3.6e6) / out_tok * 1e6, uncertainty_pct=2.0 if
                    label == "measured" else 15.0, coverage=0.995, largest_gap_s=0.2,
                    devices=["gpu0"] if name == "accelerator" else ["bmc"],
                    channels=["nvml0.energy"] if name == "accelerator" else ["ipmi.node"],
                )
                energy_map[name] = be
                steady_map[name] = be.model_copy(update={"energy_j": ej * 0.9, "avg_power_w": avg * 1.01})
        from wattbench.core.schema import Finding

        verdict, findings = [
            ("valid", [Finding(kind="small_sample", severity="note", figures=("ttft", "e2e"),
                               text="latency percentiles from 40 requests: read p99 as the maximum",
                               summary="p99 from fewer than 100 requests")]),
            ("warn", [Finding(kind="coverage", severity="warn", figures=("energy", "efficiency"), effect_pct=3.0,
                              text="node: sample coverage 0.97 < 0.99", summary="node: window not covered by samples")]),
            ("invalid", [Finding(kind="send_lag", severity="invalid", figures=("load",), effect_pct=240.0,
                                 text="send lag p99 120 ms > 50 ms", summary="open-loop send lag")])][li % 3]
        label = INJECT_LABEL if conc == 16 else f"concurrency={conc}"
        goodput = None
        if slo:  # the real goodput block, from the level's own records (metrics.slo.goodput)
            from wattbench.metrics.slo import goodput as slo_goodput, parse_slos

            goodput = slo_goodput(lrecs, parse_slos(SLO_SPEC), dur,
                                  {b: e.avg_power_w for b, e in energy_map.items()})
        levels.append(
            LevelResult(
                index=li, label=label,
                load=LoadStats(mode="concurrency", target_concurrency=conc, mean_in_flight=conc * 0.98, workers=1),
                window=Window(start_ns=s, end_ns=e, duration_s=dur, kind="full"),
                steady_window=Window(start_ns=s + int(0.5e9), end_ns=e - int(1e9), duration_s=dur - 1.5,
                                     kind="steady"),
                requests=Requests(completed=len(okr), failed=len(lrecs) - len(okr),
                                  errors={"timeout": len(lrecs) - len(okr)} if len(lrecs) > len(okr) else {}),
                latency=Latency(ttft_ms=_stats(ttft), tpot_ms=_stats(tpot), itl_ms=_stats(itl), e2e_ms=_stats(e2e)),
                throughput=Throughput(output_tokens_per_s=otps, input_tokens_per_s=in_tok / dur,
                                      total_tokens_per_s=(in_tok + out_tok) / dur, requests_per_s=len(okr) / dur,
                                      duration_s=dur, output_tokens=out_tok, input_tokens=in_tok),
                energy=energy_map, energy_steady=steady_map,
                energy_unavailable_reason=None if energy else "no sensors: --no-sensors was given",
                validity=Validity(verdict=verdict, latency=verdict, findings=findings),
                thermal=Thermal(max_temperature_c=61.0, devices={"gpu0": DeviceThermal(max_temperature_c=61.0)}),
                server_metrics=ServerMetrics(available=True, max_running_requests=conc,
                                             max_kv_cache_usage_pct=min(100.0, conc * 5.0)),
                goodput=goodput,
            )
        )
    result = Result(
        wattbench_version="0.1.0", run_id=run_id, created_at="2026-09-22T10:00:00Z", status="complete",
        clock=ClockInfo(anchor_wall_ns=ANCHOR_WALL_NS, anchor_mono_ns=ANCHOR_MONO_NS, anchor_uncertainty_ns=300),
        config={"target": "http://127.0.0.1:8000", "model": INJECT_MODEL, "concurrency": list(concurrencies),
                "slo": SLO_SPEC if slo else None, "tags": ["nightly</script>"],
                "sample_interval_s": 1 / telemetry_hz, "price_per_kwh": 0.15},
        environment=Environment(hostname="bench-01", os="Linux", kernel="6.8.0", python="3.11.9",
                                cpu_model="AMD EPYC 9654", cpu_count=192, memory_total_bytes=1_500_000_000_000,
                                gpus=[GPUInfo(index=0, name="NVIDIA H200", driver="580.65", power_limit_w=700.0,
                                              memory_total_bytes=150_000_000_000)],
                                packages={"wattbench": "0.1.0", "vllm": "0.11.0"}),
        server=ServerInfo(base_url="http://127.0.0.1:8000/v1", engine="vllm", version="0.11.0", model=INJECT_MODEL,
                          models=[INJECT_MODEL]),
        sensors=channels if energy else [],
        sensor_problems=[] if energy else ["no sensors: --no-sensors was given"],
        idle={"accelerator": {"power_w": 80.0, "duration_s": idle_s}, "node": {"power_w": 380.0, "duration_s": idle_s}}
        if energy else {},
        levels=levels,
        validity=Validity(verdict="invalid", latency="invalid"),
        warnings=["server batches stream output: ITL is per chunk"],
        tags=["nightly</script>", "h200"],
    )
    (run_dir / "result.json").write_bytes(orjson.dumps(result.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
    _write_jsonl(run_dir / "requests.jsonl", (r.model_dump(mode="json", exclude_none=True) for r in records))
    return run_dir
