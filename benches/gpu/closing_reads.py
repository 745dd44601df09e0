"""Did a level's accounting see a counter reading after the window's end? (session 5, the closing reads)

For each level of the given run directories: when the NVML counter was next read after the window's
end, the ``update_period_s`` the run recorded for the accelerator (0.1 s: both edges apportioned by
the power samples' shape; 0.9 s: an edge extrapolated, the counter not yet read past it), and the
run-time energy against the same window accounted afterwards from the complete telemetry
(``accounting.boundaries.direct_boundary``, every reading present).

Usage: python benches/gpu/closing_reads.py NAME=RUN_DIR ... [--json OUT.json]
"""

from __future__ import annotations

import bisect
import json
import sys

from wattbench.accounting.boundaries import direct_boundary
from wattbench.telemetry.jsonl import read_telemetry


def rows(name: str, run_dir: str) -> list[dict]:
    r = json.load(open(f"{run_dir}/result.json"))
    log = read_telemetry(f"{run_dir}/telemetry.jsonl")
    t, _ = log.series("nvml.gpu0.energy")
    t = list(t)
    out = []
    for lv in r["levels"]:
        w = lv["window"]
        i = bisect.bisect_right(t, w["end_ns"])
        after = direct_boundary(log, "accelerator", w["start_ns"], w["end_ns"])
        acc = lv["energy"]["accelerator"]
        out.append({
            "run": name, "level": lv["label"], "window_s": w["duration_s"],
            "next_counter_read_after_end_s": (t[i] - w["end_ns"]) / 1e9 if i < len(t) else None,
            "recorded_update_period_s": acc["update_period_s"],
            "run_time_j": acc["energy_j"], "afterwards_j": after.energy_j,
            "afterwards_update_period_s": after.update_period_s,
            "diff_pct": 100.0 * (acc["energy_j"] / after.energy_j - 1.0),
            "verdict": lv["validity"]["verdict"],
            "short_window_warn": any(f["kind"] == "short_window" and f["severity"] != "note"
                                     for f in lv["validity"]["findings"]),
        })
    return out


def main(argv: list[str]) -> int:
    out_json = None
    if "--json" in argv:
        k = argv.index("--json")
        out_json = argv[k + 1]
        argv = argv[:k] + argv[k + 2:]
    table = [x for a in argv for x in rows(*a.split("=", 1))]
    print(f"{'run':<10} {'level':<15} {'window s':>8} {'next read +s':>12} {'period s':>8} "
          f"{'run-time J':>11} {'afterwards J':>12} {'diff %':>7}  verdict")
    for x in table:
        print(f"{x['run']:<10} {x['level']:<15} {x['window_s']:>8.1f} {x['next_counter_read_after_end_s']:>12.3f} "
              f"{x['recorded_update_period_s']:>8.2f} {x['run_time_j']:>11.1f} {x['afterwards_j']:>12.1f} "
              f"{x['diff_pct']:>+7.3f}  {x['verdict']}{' (short_window warn)' if x['short_window_warn'] else ''}")
    if out_json:
        with open(out_json, "w") as f:
            json.dump(table, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
