"""wattbench's accounting energy vs an independent NVML counter, by window length (docs/accounting.md, the steady-state minimum).

Usage: python benches/gpu/window_error.py DIR [--json OUT]
DIR holds run directories ``run-*/`` (each with ``telemetry.jsonl``) and the independent observer's
``meter.jsonl`` (benches/gpu/independent_meter.py: raw pynvml total-energy counter every 20 ms, same
CLOCK_MONOTONIC), as benches/gpu/h200_history.sh leaves them.

For every run, windows of 2, 5, 10 and 20 s are cut every 1 s across the span where the GPU was
under load (each trial's first send to its last end, from requests.jsonl), and for each window:
  * wattbench: ``accounting.boundaries.direct_boundary(log, "accelerator", t0, t1)`` — the same code a
    level's energy goes through (its counter read every 0.9 s, edges split by the 20 ms power shape);
  * independent: the observer's counter interpolated linearly at both edges (20 ms reads).
It prints, per window length, the count and the error's mean, standard deviation, 95th percentile of
|error| and max |error| in percent, and writes them (and every window's error) as JSON.
"""

from __future__ import annotations

import json
import statistics as st
import sys
from pathlib import Path

import numpy as np

from wattbench.accounting.boundaries import direct_boundary
from wattbench.telemetry.jsonl import read_telemetry

LENGTHS_S = (2.0, 5.0, 10.0, 20.0)
STEP_S = 1.0


def meter_series(path: Path) -> tuple[np.ndarray, np.ndarray]:
    t, e = [], []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("src") == "nvml" and rec.get("gpu") == 0:
            t.append(rec["t_ns"])
            e.append(rec["energy_mj"] / 1000.0)
    return np.asarray(t, dtype=np.int64), np.asarray(e, dtype=np.float64)


def loaded_spans(run_dir: Path) -> list[tuple[int, int]]:
    """Each trial's load span: first send to last end of its requests (requests.jsonl)."""
    spans: dict[int, list[int]] = {}
    for line in (run_dir / "requests.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("sent_ns") and r.get("end_ns"):
            s = spans.setdefault(int(r.get("trial") or 0), [r["sent_ns"], r["end_ns"]])
            s[0], s[1] = min(s[0], r["sent_ns"]), max(s[1], r["end_ns"])
    return [(a, b) for a, b in spans.values()]


def main() -> None:
    root = Path(sys.argv[1])
    out = Path(sys.argv[sys.argv.index("--json") + 1]) if "--json" in sys.argv else None
    mt, me = meter_series(root / "meter.jsonl")
    errs: dict[float, list[dict]] = {L: [] for L in LENGTHS_S}
    for tel in sorted(root.glob("run-*/telemetry.jsonl")):
        log = read_telemetry(tel)
        lo_m, hi_m = int(mt[0]), int(mt[-1])
        for a, b in loaded_spans(tel.parent):
            for L in LENGTHS_S:
                n = int(L * 1e9)
                t0 = a
                while t0 + n <= b:
                    t1 = t0 + n
                    if lo_m <= t0 and t1 <= hi_m:
                        bt = direct_boundary(log, "accelerator", t0, t1)
                        ind = float(np.interp(t1, mt, me) - np.interp(t0, mt, me))
                        if bt is not None and bt.energy_j and ind > 0:
                            errs[L].append({"run": tel.parent.name, "t0_ns": int(t0), "t1_ns": int(t1),
                                            "wattbench_j": float(bt.energy_j), "independent_j": ind,
                                            "err_pct": (bt.energy_j - ind) / ind * 100.0})
                    t0 += int(STEP_S * 1e9)
    summary = {}
    print(f"{'window s':>8} {'n':>5} {'mean %':>8} {'sd %':>7} {'p95 |e| %':>9} {'max |e| %':>9}")
    for L, rows in errs.items():
        e = [r["err_pct"] for r in rows]
        if not e:
            continue
        a = sorted(abs(x) for x in e)
        s = {"n": len(e), "mean_pct": st.mean(e), "sd_pct": st.pstdev(e),
             "p95_abs_pct": a[min(len(a) - 1, int(round(0.95 * (len(a) - 1))))], "max_abs_pct": a[-1]}
        summary[str(L)] = s
        print(f"{L:8.0f} {s['n']:5d} {s['mean_pct']:+8.3f} {s['sd_pct']:7.3f} {s['p95_abs_pct']:9.3f} {s['max_abs_pct']:9.3f}")
    if out:
        out.write_text(json.dumps({"summary": summary, "windows": {str(k): v for k, v in errs.items()}}, indent=1))


if __name__ == "__main__":
    main()
