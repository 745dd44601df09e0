"""Per-phase table of benches/gpu/h200_history.sh's runs (where the history dependence lives, docs/validation.md part 11).

Usage: python benches/gpu/history_table.py DIR   (DIR = the extracted history.tgz's ``h`` folder)
For every run directory ``run-<server>-<phase>``: each trial's output tok/s per kW and W at the accelerator
boundary, output tok/s, TTFT p50, ITL p50, HBM (memory-rail) W, GPU utilisation and the peak temperature,
from ``result.json`` (its trials block where there are trials); then nvidia-smi's 200 ms log over the
same phase (utilisation, memory utilisation, SM clock, temperature, memory used).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import statistics as st
import sys
from pathlib import Path


def trial_rows(result: dict) -> list[dict]:
    rows = []
    for lv in result.get("levels", []):
        tb = (lv.get("trials") or {}).get("figures")
        if tb:
            n = len(tb["output_tokens_per_s"]["values"])
            for i in range(n):
                g = lambda k: ((tb.get(k) or {}).get("values") or [])[i] if i < len((tb.get(k) or {}).get("values") or []) else None
                rows.append({"trial": i, "tpkw": g("output_tokens_per_s_per_kw@accelerator"), "w": g("avg_power_w@accelerator"),
                             "tps": g("output_tokens_per_s"), "ttft": g("ttft_p50_ms"), "itl": g("itl_p50_ms"),
                             "hbm_w": g("avg_power_w@accelerator_memory"), "util": g("gpu_utilization_pct"),
                             "temp": g("max_temp_c")})
        else:
            en = (lv.get("energy") or {}).get("accelerator") or {}
            mem = (lv.get("energy") or {}).get("accelerator_memory") or {}
            lat = lv.get("latency") or {}
            th = lv.get("thermal") or [{}]
            th = th[0] if isinstance(th, list) and th else (th if isinstance(th, dict) else {})
            rows.append({"trial": 0, "tpkw": en.get("output_tokens_per_s_per_kw"), "w": en.get("avg_power_w"),
                         "tps": (lv.get("throughput") or {}).get("output_tokens_per_s"),
                         "ttft": (lat.get("ttft_ms") or {}).get("p50"), "itl": (lat.get("itl_ms") or {}).get("p50"),
                         "hbm_w": mem.get("avg_power_w"), "util": th.get("mean_gpu_utilization_pct"),
                         "temp": th.get("max_temperature_c")})
    return rows


def smi_window(smi: list[list[str]], a: dt.datetime, b: dt.datetime) -> dict:
    sel = [r for r in smi if a <= dt.datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S.%f") <= b]
    if not sel:
        return {}
    col = lambda i: [float(r[i]) for r in sel if r[i].strip() not in ("", "[N/A]")]
    return {"n": len(sel), "w": st.mean(col(1)), "sm_mhz": st.mean(col(2)), "temp": max(col(4)),
            "util": st.mean(col(6)), "mem_util": st.mean(col(7)), "mem_mib": max(col(8))}


def main() -> None:
    root = Path(sys.argv[1])
    smi = [[c.strip() for c in r] for r in list(csv.reader(open(root / "smi.csv")))[1:]]
    fmt = lambda v, f: (f % v) if isinstance(v, (int, float)) else "-"
    print(f"{'phase':20} {'#':>1} {'tok/s/kW':>8} {'W':>5} {'out tok/s':>9} {'TTFT p50':>8} {'ITL p50':>7} {'HBM W':>5} "
          f"{'util%':>5} {'°C':>3} | smi: {'util%':>5} {'mem%':>4} {'SM MHz':>6} {'MiB':>6}")
    for d in sorted(root.glob("run-*/result.json")):
        r = json.loads(d.read_text())
        anchor_wall, anchor_mono = r["clock"]["anchor_wall_ns"], r["clock"]["anchor_mono_ns"]
        wall = lambda ns: dt.datetime.fromtimestamp((anchor_wall + ns - anchor_mono) / 1e9, dt.timezone.utc).replace(tzinfo=None)
        label = d.parent.name[4:]
        win = [lv["window"] for lv in r.get("levels", []) if lv.get("window")]
        s = smi_window(smi, wall(win[0]["start_ns"]), wall(win[-1]["end_ns"])) if win else {}
        for row in trial_rows(r):
            print(f"{label:20} {row['trial']:>1} {fmt(row['tpkw'], '%8.0f')} {fmt(row['w'], '%5.0f')} {fmt(row['tps'], '%9.0f')} "
                  f"{fmt(row['ttft'], '%8.0f')} {fmt(row['itl'], '%7.1f')} {fmt(row['hbm_w'], '%5.1f')} {fmt(row['util'], '%5.0f')} "
                  f"{fmt(row['temp'], '%3.0f')} | {fmt(s.get('util'), '%10.0f')} {fmt(s.get('mem_util'), '%4.0f')} "
                  f"{fmt(s.get('sm_mhz'), '%6.0f')} {fmt(s.get('mem_mib'), '%6.0f')}")


if __name__ == "__main__":
    main()
