"""Per level of every run of a ``history_runs.py`` directory: the figures and the server's and the
GPU's state inside the level's window (the mechanism evidence of docs/validation.md part 11a).

    python3 benches/gpu/history_summary.py DIR      # writes DIR/summary.json and DIR/summary.txt

Columns: run, level, trial, out tok/s, accelerator W, tok/s per kW, TTFT p50, ITL p50, mean in
flight; inside the window: CUDA graphs captured (and their capture seconds), prompt tokens served
from the prefix cache, the allocator's reserved GiB at the window's end and its retries, the server
process's GPU memory (NVML), mean SM and memory clocks, mean/max GPU temperature, mean GPU
utilisation, polls with a throttle reason. A column is ``-`` when its log is absent.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _jsonl(p: Path) -> list[dict]:
    if not p.is_file():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def _mean(v):
    v = [x for x in v if x is not None]
    return sum(v) / len(v) if v else None


def _last_before(series: list[dict], t: int) -> dict | None:
    best = None
    for r in series:
        if r.get("t_ns", 0) <= t:
            best = r
    return best


def level_state(a: int, b: int, gpu: list[dict], mem: list[dict], graphs: list[dict], server_pids: set[str]) -> dict:
    g = [r for r in gpu if "sm_mhz" in r and a <= r["t_ns"] <= b]
    caps = [r for r in graphs if a <= r["t_ns"] <= b]
    m0, m1 = _last_before(mem, a), _last_before(mem, b)
    st: dict = {
        "gpu_polls": len(g),
        "sm_mhz": _mean([r.get("sm_mhz") for r in g]),
        "mem_mhz": _mean([r.get("mem_mhz") for r in g]),
        "temp_c_mean": _mean([r.get("temp_c") for r in g]),
        "temp_c_max": max((r["temp_c"] for r in g if r.get("temp_c") is not None), default=None),
        "mem_temp_c_mean": _mean([r.get("mem_temp_c") for r in g]),
        "util_gpu_mean": _mean([r.get("util_gpu") for r in g]),
        "util_mem_mean": _mean([r.get("util_mem") for r in g]),
        "power_w_mean": _mean([r.get("power_w") for r in g]),
        "throttled_polls": sum(1 for r in g if r.get("throttle")),
        "throttle_masks": sorted({r["throttle"] for r in g if r.get("throttle")}),
        "gpu_mem_used_gib_end": (g[-1]["mem_used_b"] / 2**30) if g and g[-1].get("mem_used_b") else None,
        "graphs_captured": len(caps) if graphs or mem else None,
        "graph_capture_s": sum(r.get("capture_s") or 0 for r in caps) if caps else 0.0,
    }
    procs = [r.get("procs") or {} for r in g]
    if procs:
        last = procs[-1]
        mine = {p: v for p, v in last.items() if p in server_pids} or last
        st["server_gpu_mem_gib_end"] = sum(v or 0 for v in mine.values()) / 2**30
    if m0 is not None and m1 is not None:
        st["graphs_total_end"] = m1.get("graphs")
        st["prefix_tokens"] = (m1.get("prefix_tokens") or 0) - (m0.get("prefix_tokens") or 0)
        st["prefix_hits"] = (m1.get("prefix_hits") or 0) - (m0.get("prefix_hits") or 0)
        st["prefix_searches"] = (m1.get("prefix_searches") or 0) - (m0.get("prefix_searches") or 0)
        if m1.get("reserved_bytes") is not None:
            st["alloc_reserved_gib_end"] = m1["reserved_bytes"] / 2**30
            st["alloc_allocated_gib_end"] = (m1.get("allocated_bytes") or 0) / 2**30
            st["alloc_inactive_split_gib_end"] = (m1.get("inactive_split_bytes") or 0) / 2**30
            st["alloc_retries"] = (m1.get("alloc_retries") or 0) - (m0.get("alloc_retries") or 0)
            st["device_allocs"] = (m1.get("device_allocs") or 0) - (m0.get("device_allocs") or 0)
        if m1.get("cpu_user_s") is not None and m0.get("cpu_user_s") is not None:
            dt = (m1["t_ns"] - m0["t_ns"]) / 1e9
            st["server_cpu_pct"] = (100 * ((m1["cpu_user_s"] + m1["cpu_sys_s"]) - (m0["cpu_user_s"] + m0["cpu_sys_s"])) / dt
                                    if dt > 0 else None)
    return st


def level_figures(lv: dict) -> dict:
    acc = (lv.get("energy") or {}).get("accelerator") or {}
    lat = lv.get("latency") or {}
    return {
        "label": lv.get("label"), "trial": lv.get("trial"),
        "output_tokens_per_s": (lv.get("throughput") or {}).get("output_tokens_per_s"),
        "accelerator_w": acc.get("avg_power_w"),
        "tok_s_per_kw": acc.get("output_tokens_per_s_per_kw"),
        "ttft_p50_ms": (lat.get("ttft_ms") or {}).get("p50"),
        "itl_p50_ms": (lat.get("itl_ms") or {}).get("p50"),
        "tpot_p50_ms": (lat.get("tpot_ms") or {}).get("p50"),
        "mean_in_flight": (lv.get("load") or {}).get("mean_in_flight"),
        "verdict": (lv.get("validity") or {}).get("verdict"),
        "window": [((lv.get("window") or {}).get("start_ns")), ((lv.get("window") or {}).get("end_ns"))],
    }


def summarize(out: Path) -> dict:
    out = Path(out)
    driver = json.loads((out / "driver.json").read_text()) if (out / "driver.json").is_file() else {"runs": []}
    gpu = _jsonl(out / "gpu_state.jsonl")
    probe = _jsonl(out / "serve_probe.jsonl")
    mem = [r for r in probe if r.get("kind") == "mem"]
    graphs = [r for r in probe if r.get("kind") == "graph"]
    pids = {str(e.get("pid")) for e in driver.get("engines", [])}
    pids |= {str(r.get("pid")) for r in probe if r.get("kind") == "probe_start"}
    rows = []
    for run in driver.get("runs", []):
        if run.get("skipped"):
            rows.append({"run": run["name"], "skipped": run["skipped"]})
            continue
        rf = Path(run["dir"]) / "result.json"
        if not rf.is_file():
            rows.append({"run": run["name"], "rc": run.get("rc"), "error": "no result.json"})
            continue
        r = json.loads(rf.read_text())
        for ph in (r.get("extra") or {}).get("phases", []) or []:
            rows.append({"run": run["name"], "phase": ph})
        for lv in r.get("levels", []):
            f = level_figures(lv)
            a, b = f["window"]
            row = {"run": run["name"], "engine": run.get("engine"), **f}
            if a is not None and b is not None:
                row["state"] = level_state(a, b, gpu, mem, graphs, pids)
            rows.append(row)
    engines = driver.get("engines", [])
    starts = [{"engine": e["index"], "ready_s": (e["ready_t_ns"] - e["start_t_ns"]) / 1e9,
               "graphs_at_ready": sum(1 for g in graphs if g["t_ns"] <= e["ready_t_ns"] and g["t_ns"] >= e["start_t_ns"])}
              for e in engines if e.get("ready_t_ns")]
    summary = {"rows": rows, "engines": starts,
               "probe": [r for r in probe if r.get("kind") in ("probe_start", "probe_error")]}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.txt").write_text(render(summary))
    print(render(summary))
    return summary


def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def render(s: dict) -> str:
    lines = [f"{'run':<10} {'level':<16} {'tr':>2} {'tok/s':>7} {'W':>5} {'tok/s/kW':>8} {'TTFTp50':>7} {'ITLp50':>6} "
             f"{'infl':>5} | {'graphs':>6} {'cap s':>5} {'prefix':>6} {'resGiB':>6} {'srvGiB':>6} {'SM':>5} {'memMHz':>6} "
             f"{'temp':>4} {'util':>4} {'thr':>3} {'cpu%':>4}"]
    for r in s["rows"]:
        if "skipped" in r or "error" in r:
            lines.append(f"{r['run']:<10} {r.get('skipped') or r.get('error')}")
            continue
        if "phase" in r:
            lines.append(f"{r['run']:<10} phase {json.dumps(r['phase'])[:100]}")
            continue
        st = r.get("state") or {}
        lines.append(
            f"{r['run']:<10} {str(r['label'])[:16]:<16} {_f(r['trial'], 'd'):>2} {_f(r['output_tokens_per_s'], '7.0f')} "
            f"{_f(r['accelerator_w'], '5.0f')} {_f(r['tok_s_per_kw'], '8.0f')} {_f(r['ttft_p50_ms'], '7.0f')} "
            f"{_f(r['itl_p50_ms'], '6.1f')} {_f(r['mean_in_flight'], '5.1f')} | {_f(st.get('graphs_captured'), '6d')} "
            f"{_f(st.get('graph_capture_s'), '5.1f')} {_f(st.get('prefix_tokens'), '6d')} "
            f"{_f(st.get('alloc_reserved_gib_end'), '6.2f')} {_f(st.get('server_gpu_mem_gib_end'), '6.2f')} "
            f"{_f(st.get('sm_mhz'), '5.0f')} {_f(st.get('mem_mhz'), '6.0f')} {_f(st.get('temp_c_mean'), '4.0f')} "
            f"{_f(st.get('util_gpu_mean'), '4.0f')} {_f(st.get('throttled_polls'), '3d')} {_f(st.get('server_cpu_pct'), '4.0f')}")
    for e in s.get("engines", []):
        lines.append(f"engine {e['engine']}: ready in {e['ready_s']:.1f} s, {e['graphs_at_ready']} graphs captured by then")
    for p in s.get("probe", []):
        lines.append(f"probe: {json.dumps(p)[:160]}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    summarize(Path(sys.argv[1]))
