"""Compare a wattbench run's accelerator energy per level with an independent observer's log.

Usage: python crosscheck.py RUN_DIR METER.jsonl [--json OUT]
For every level window [start_ns, end_ns] in RUN_DIR/result.json:
  * independent NVML counter energy: the observer's counter interpolated linearly at both edges;
  * nvidia-smi 1 s poll: trapezoid of the 1 s power samples over the window (edges interpolated);
and the relative differences against wattbench's ``energy.accelerator.energy_j``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def interp(ts, vs, t):
    if not ts or t < ts[0] or t > ts[-1]:
        return None
    lo, hi = 0, len(ts) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ts[mid] <= t:
            lo = mid
        else:
            hi = mid
    if ts[hi] == ts[lo]:
        return vs[lo]
    return vs[lo] + (vs[hi] - vs[lo]) * (t - ts[lo]) / (ts[hi] - ts[lo])


def trapezoid(ts, vs, a, b):
    pts = [(a, interp(ts, vs, a))] + [(t, v) for t, v in zip(ts, vs) if a < t < b] + [(b, interp(ts, vs, b))]
    if pts[0][1] is None or pts[-1][1] is None:
        return None
    return sum((t2 - t1) / 1e9 * (v1 + v2) / 2 for (t1, v1), (t2, v2) in zip(pts, pts[1:]))


def independent_j(nvml: dict, a: int, b: int) -> float | None:
    """Summed counter energy over [a, b]; None when any GPU's log does not bracket an edge (an
    uncovered edge is unknown energy, never 0 J)."""
    total = 0.0
    for g in nvml:
        ea, eb = interp(*nvml[g], a), interp(*nvml[g], b)
        if ea is None or eb is None:
            return None
        total += eb - ea
    return total if nvml else None


def rows(result: dict, meter_lines) -> list[dict]:
    """Per level of ``result`` (a result.json): wattbench's accelerator energy against the
    observer's NVML counter (``meter_lines``: its JSON lines) and nvidia-smi's 1 s poll over the
    level's window. The committed ``crosscheck.json`` files are this, and the doc figures are
    recomputed with it from the raw meter log where that log is committed."""
    nvml: dict[int, tuple[list, list]] = {}
    smi: dict[int, tuple[list, list]] = {}
    for line in meter_lines:
        if not line.strip():
            continue
        r = json.loads(line)
        d = nvml if r["src"] == "nvml" else smi
        ts, vs = d.setdefault(r["gpu"], ([], []))
        ts.append(r["t_ns"])
        vs.append(r["energy_mj"] / 1000.0 if r["src"] == "nvml" else r["power_w"])
    out = []
    for lv in result["levels"]:
        w = lv.get("window")
        acc = (lv.get("energy") or {}).get("accelerator")
        if not w or not acc:
            continue
        a, b = w["start_ns"], w["end_ns"]
        ind = independent_j(nvml, a, b)  # None: an edge the observer's counter did not bracket
        parts = [trapezoid(*smi[g], a, b) for g in smi]
        smi_j = None if (not parts or any(p is None for p in parts)) else sum(parts)  # None: 1 s poll did not bracket the window
        wb = acc["energy_j"]
        out.append(
            {
                "level": lv["label"],
                "duration_s": w["duration_s"],
                "wattbench_j": wb,
                "independent_nvml_j": ind,
                "diff_pct": 100 * (wb - ind) / ind if (ind and wb is not None) else None,
                "nvidia_smi_1s_j": smi_j,
                "smi_diff_pct": 100 * (smi_j - ind) / ind if (ind and smi_j is not None) else None,
            }
        )
    return out


def main() -> None:
    run_dir, meter = Path(sys.argv[1]), Path(sys.argv[2])
    result = json.loads((run_dir / "result.json").read_text())
    rows_ = rows(result, meter.read_text().splitlines())
    for r in rows_:
        ind_txt = (f"independent {r['independent_nvml_j']:10.1f} J  diff {r['diff_pct']:+.3f}%  "
                   if r["independent_nvml_j"] is not None else "independent: window not bracketed by its log  ")
        print(
            f"{r['level']:>18}  {r['duration_s']:7.1f} s  wattbench "
            + (f"{r['wattbench_j']:10.1f} J  " if r["wattbench_j"] is not None else "n/a  ") + ind_txt
            + (f"nvidia-smi 1s {r['nvidia_smi_1s_j']:10.1f} J ({r['smi_diff_pct']:+.2f}%)"
               if r["nvidia_smi_1s_j"] is not None else "nvidia-smi 1s: window not bracketed by its samples")
        )
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(rows_, indent=2))


if __name__ == "__main__":
    main()
