"""Soak benchmark: does ``wattbench monitor`` keep flat memory however long it runs?

Drives the monitor's update path — ``EfficiencyTracker`` (bounded telemetry log, accounting per
interval, windows, segments), the JSONL ``HistoryWriter`` and the Prometheus ``MonitorCollector``
(rendered as an exposition every 15 simulated seconds) — with synthetic timestamps and values:
two GPUs' energy counters and power channels at ``--hz`` samples/s, a server scrape every
``--interval`` simulated seconds, load alternating idle/loaded every 2 minutes. Simulated time
runs as fast as the CPU allows.

Every ``--report-min`` simulated minutes it records the process RSS (psutil) and the Python heap
(tracemalloc current), and checks the figures against the truth (constant power per phase).

    PYTHONPATH=src python benches/monitor_soak.py --minutes 60 --hz 10
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
import tracemalloc

import psutil

from wattbench.monitor.exporter import MonitorCollector
from wattbench.monitor.history import HistoryWriter
from wattbench.monitor.tracker import EfficiencyTracker
from wattbench.telemetry.base import Channel, Reading

S = 1_000_000_000


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60.0, help="simulated minutes")
    p.add_argument("--hz", type=float, default=10.0, help="sensor samples per simulated second")
    p.add_argument("--interval", type=float, default=1.0, help="simulated seconds between scrapes")
    p.add_argument("--report-min", type=float, default=5.0)
    p.add_argument("--segments-kept", type=int, default=256, help="ring of closed idle/loaded segments")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    chans = []
    for g in range(2):
        chans.append(Channel(id=f"nvml.gpu{g}.energy", sensor="nvml", kind="counter", quantity="energy", unit="J",
                             boundary="accelerator", device=f"gpu{g}", primary=True, update_period_s=0.1))
        chans.append(Channel(id=f"nvml.gpu{g}.power_instant", sensor="nvml", kind="power", quantity="power",
                             unit="W", boundary="accelerator", device=f"gpu{g}", update_period_s=0.1))
    tr = EfficiencyTracker(segments_kept=a.segments_kept)
    tr.add_channels(chans)
    tmp = tempfile.NamedTemporaryFile(prefix="wattbench-soak-", suffix=".jsonl", delete=False)
    tmp.close()
    hist = HistoryWriter(tmp.name, max_bytes=50_000_000)
    from prometheus_client import CollectorRegistry, generate_latest

    reg = CollectorRegistry(auto_describe=False)
    snap_box = {"s": {}}
    reg.register(MonitorCollector(lambda: snap_box["s"]))

    proc = psutil.Process()
    tracemalloc.start()
    t0 = 10_000 * S
    dt = int(S / a.hz)
    n_steps = int(a.minutes * 60 * a.hz)
    per_scrape = int(round(a.interval * a.hz))
    energy = [0.0, 0.0]
    gen = prompt = 0.0
    rows = []
    readings_fed = 0
    first = last = None  # (energy J, output tokens) at the first and last scrape: the exact totals
    wall0 = time.perf_counter()
    next_report = 0.0
    for k in range(1, n_steps + 1):
        sim_s = k / a.hz
        loaded = int(sim_s // 120) % 2 == 1
        watts = (650.0, 640.0) if loaded else (120.0, 115.0)
        t = t0 + k * dt
        rs = []
        for g in range(2):
            energy[g] += watts[g] / a.hz
            rs.append(Reading(t, f"nvml.gpu{g}.energy", energy[g]))
            rs.append(Reading(t, f"nvml.gpu{g}.power_instant", watts[g]))
        tr.add_readings(rs)
        readings_fed += len(rs)
        if loaded:
            gen += 1500.0 / a.hz
            prompt += 3000.0 / a.hz
        if k % per_scrape == 0:
            last = (sum(energy), gen)
            first = first or last
            done = tr.mark(t, {"generation_tokens": gen, "prompt_tokens": prompt, "running": 24.0 if loaded else 0.0,
                               "waiting": 0.0})
            o = tr.t_origin_ns
            for span, closed in done:
                if closed is not None:
                    hist.write({"type": "segment", **closed.to_dict(o)})
                hist.write({"type": "span", "t_s": (span.t1_ns - o) / 1e9, "energy_j": span.energy_j,
                            "output_tokens": span.output_tokens, "state": span.state})
            snap_box["s"] = tr.snapshot()
            if k % (per_scrape * 15) == 0:
                generate_latest(reg)
        if sim_s >= next_report:
            gc.collect()
            cur, _ = tracemalloc.get_traced_memory()
            rows.append({"sim_min": round(sim_s / 60, 2), "rss_mib": proc.memory_info().rss / 2**20,
                         "heap_kib": cur / 1024, "buffered_points": tr.log.points(), "spans": len(tr.spans), "segments_kept": len(tr.closed),
                         "readings_fed": readings_fed, "wall_s": time.perf_counter() - wall0})
            next_report += a.report_min * 60
    wall = time.perf_counter() - wall0
    hist.close()
    snap = tr.snapshot()
    seg = snap.segmentation
    os.unlink(tmp.name)
    for i in range(1, 10):
        if os.path.exists(f"{tmp.name}.{i}"):
            os.unlink(f"{tmp.name}.{i}")
    # truth: the exact energy and tokens between the first and the last scrape (all accounted: the
    # counters are read at the scrape instants); per state, spans that straddle a load change are
    # classed by their end, so the per-state powers are blurred by one scrape interval per change
    true_e, true_n = last[0] - first[0], last[1] - first[1]
    tot = snap.windows["total"]
    check = {
        "total_energy_j": snap.energy_total_j["accelerator"], "true_energy_j": true_e,
        "total_output_tokens": tot["output_tokens"], "true_output_tokens": true_n,
        "j_per_output_token": tot["j_per_output_token"]["accelerator"], "true_j_per_output_token": true_e / true_n,
        "idle_power_w": seg["idle"]["power_w"]["accelerator"], "idle_power_w_set": 235.0,
        "loaded_power_w": seg["loaded"]["power_w"]["accelerator"], "loaded_power_w_set": 1290.0,
    }
    after_warm = [r for r in rows if r["sim_min"] >= 10] or rows
    out = {
        "command": "PYTHONPATH=src python benches/monitor_soak.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "simulated_minutes": a.minutes, "hz": a.hz, "interval_s": a.interval, "wall_s": wall,
        "speedup": a.minutes * 60 / wall, "readings_fed": readings_fed, "rows": rows,
        "rss_growth_after_10min_mib": after_warm[-1]["rss_mib"] - after_warm[0]["rss_mib"],
        "heap_growth_after_10min_kib": after_warm[-1]["heap_kib"] - after_warm[0]["heap_kib"],
        "check": check, "segments_closed": seg["segments_closed"], "counter_resets": snap.counter_resets,
    }
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{out['command']}\n{out['machine']}  {out['date']}")
        print(f"{a.minutes:g} simulated min at {a.hz:g} Hz in {wall:.1f} s wall ({out['speedup']:.0f}x)")
        print(f"{'sim min':>8} {'RSS MiB':>9} {'heap KiB':>9} {'buffered':>9} {'spans':>6} {'segments':>9} {'readings fed':>13}")
        for r in rows:
            print(f"{r['sim_min']:>8.1f} {r['rss_mib']:>9.1f} {r['heap_kib']:>9.1f} {r['buffered_points']:>9} "
                  f"{r['spans']:>6} {r['segments_kept']:>9} {r['readings_fed']:>13}")
        print(f"growth after minute 10: RSS {out['rss_growth_after_10min_mib']:+.2f} MiB, "
              f"heap {out['heap_growth_after_10min_kib']:+.1f} KiB")
        print("check:", json.dumps(check))
    return 0


if __name__ == "__main__":
    sys.exit(main())
