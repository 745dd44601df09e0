"""How wattbench's window energy error depends on the window's length, on a real GPU (issue 25).

The steady-state minimum's energy term (``accounting.steady.STEADY_MIN_ENERGY_S``) is the shortest
window whose energy stays within ``accounting.findings.EFFICIENCY_MATERIAL_PCT`` (1 %) of an
independent read of the GPU's energy counter. This bench measures that error at steady windows of
about 5, 10 and 20 s:

1. ``benches/gpu/independent_meter.py`` runs in its own process for the whole bench: raw pynvml
   (no wattbench code) reads ``nvmlDeviceGetTotalEnergyConsumption`` of every GPU every 20 ms on
   CLOCK_MONOTONIC, the clock wattbench stamps with (and ``nvidia-smi`` power once a second).
2. For each nominal length D in ``--durations`` (default 5,10,20), one ``wattbench run`` exactly as
   the README's first command starts it on a GPU (no ``--target``: the embedded engine, the
   1B-shape preset on CUDA, NVML read through wattbench's sampler), with three closed-loop levels
   ``--concurrency 6,8,10 --duration D`` (three windows per length; the load level does not matter
   to the meter, three levels give three windows from one engine start) and ``--idle 0``.
3. Every level's full window (``energy.accelerator``) and steady window
   (``energy_steady.accelerator``) is compared with the observer's counter interpolated at the
   same two edges (``crosscheck.independent_j``; an edge the observer did not bracket is unknown,
   never 0 J). Beside each, the accounting's own edge-error estimate for the window (the ``edge``
   term of ``uncertainty_parts``, a bound) and the level's verdicts.

Output under ``$OUT`` (or ``--out DIR``): ``window_error.json`` — ``rows`` (one per window: run,
level, kind full|steady, duration_s, wattbench_j, independent_j, diff_pct, accounting edge bound
%, verdicts) and ``by_length`` (per nominal D and window kind: n, max |diff|, mean diff, the
shortest and longest window) — the run directories and the observer's log as ``runs.tgz``, and
``log.txt``.

Usage (from the repository root on the GPU machine, after the same install step as
``benches/gpu/h200_default.sh``; or ``bash benches/gpu/h200_window_error.sh`` which does both)::

    python3 benches/gpu/window_error.py [--durations 5,10,20] [--concurrency 6,8,10] [--out DIR]

Reads only; never changes a GPU setting.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _crosscheck():
    spec = importlib.util.spec_from_file_location("crosscheck", HERE / "crosscheck.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_meter(path: Path) -> dict[int, tuple[list[int], list[float]]]:
    """The observer's counter per GPU: (t_ns, energy J), in read order."""
    nvml: dict[int, tuple[list[int], list[float]]] = {}
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:  # the last line of a killed observer may be cut
            continue
        if r.get("src") != "nvml":
            continue
        ts, vs = nvml.setdefault(int(r["gpu"]), ([], []))
        ts.append(int(r["t_ns"]))
        vs.append(r["energy_mj"] / 1000.0)
    return nvml


def edge_bound_pct(be: dict) -> float | None:
    """The accounting's edge term for this window (percent of its energy; a bound, summed over devices
    by energy weight as the uncertainty is)."""
    parts = be.get("uncertainty_parts") or {}
    edges = [p.get("edge") for p in parts.values() if p.get("edge") is not None]
    return max(edges) if edges else None


def window_rows(run: str, result: dict, nvml: dict, independent_j) -> list[dict]:
    rows = []
    for lv in result.get("levels", []):
        validity = lv.get("validity") or {}
        for kind, wkey, ekey in (("full", "window", "energy"), ("steady", "steady_window", "energy_steady")):
            w = lv.get(wkey)
            be = (lv.get(ekey) or {}).get("accelerator")
            if not w or not be or be.get("energy_j") is None:
                continue
            ind = independent_j(nvml, w["start_ns"], w["end_ns"])
            wb = be["energy_j"]
            rows.append({
                "run": run, "level": lv["label"], "kind": kind, "duration_s": w["duration_s"],
                "wattbench_j": wb, "independent_j": ind,
                "diff_pct": 100.0 * (wb - ind) / ind if ind else None,
                "accounting_edge_bound_pct": edge_bound_pct(be),
                "method": be.get("method"), "update_period_s": be.get("update_period_s"),
                "efficiency_verdict": validity.get("verdict"), "latency_verdict": validity.get("latency"),
                "findings": [f"{f.get('severity')}: {f.get('text')}" for f in validity.get("findings") or []]
                or validity.get("reasons") or [],
            })
    return rows


def summarize(rows: list[dict], nominal: dict[str, float]) -> list[dict]:
    out = []
    for run, d in nominal.items():
        for kind in ("full", "steady"):
            xs = [r for r in rows if r["run"] == run and r["kind"] == kind and r["diff_pct"] is not None]
            if not xs:
                continue
            diffs = [r["diff_pct"] for r in xs]
            out.append({"nominal_s": d, "kind": kind, "n": len(xs), "max_abs_diff_pct": max(abs(x) for x in diffs),
                        "mean_diff_pct": sum(diffs) / len(diffs),
                        "shortest_s": min(r["duration_s"] for r in xs), "longest_s": max(r["duration_s"] for r in xs),
                        "max_accounting_edge_bound_pct": max((r["accounting_edge_bound_pct"] or 0.0) for r in xs)})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--durations", default="5,10,20", help="nominal --duration of each run, seconds")
    ap.add_argument("--concurrency", default="6,8,10", help="the levels of each run (one window each)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "window-error-out")
    ap.add_argument("--timeout", type=float, default=240.0, help="per wattbench run, seconds")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "window-error"
    work.mkdir(parents=True, exist_ok=True)
    log = open(out / "log.txt", "a", buffering=1)

    def say(msg: str) -> None:
        print(msg, flush=True)
        log.write(msg + "\n")

    say(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,power.limit,pstate,temperature.gpu",
                          "--format=csv"], capture_output=True, text=True)
    say(smi.stdout.strip() or smi.stderr.strip())
    head = subprocess.run(["git", "-C", str(REPO), "log", "--oneline", "-1"], capture_output=True, text=True)
    say(f"repository: {head.stdout.strip() or 'unknown'}")
    meter_log = work / "meter.jsonl"
    meter = subprocess.Popen([sys.executable, str(HERE / "independent_meter.py"), str(meter_log)])
    time.sleep(1.0)  # the observer's first reads before the first window
    nominal: dict[str, float] = {}
    rcs = {}
    try:
        for d in [float(x) for x in args.durations.split(",") if x.strip()]:
            name = f"d{d:g}s"
            run_dir = work / name
            cmd = [sys.executable, "-m", "wattbench", "run", "--concurrency", args.concurrency, "--duration", f"{d:g}",
                   "--idle", "0", "--no-register", "--out", str(run_dir)]
            say("$ " + " ".join(cmd[1:]))
            t0 = time.monotonic()
            with open(work / f"{name}.stdout.txt", "w") as so, open(work / f"{name}.stderr.txt", "w") as se:
                try:
                    rc = subprocess.run(cmd, stdout=so, stderr=se, timeout=args.timeout, cwd=work).returncode
                except subprocess.TimeoutExpired:
                    rc = 124
            rcs[name] = rc
            nominal[name] = d
            say(f"{name}: rc {rc}, {time.monotonic() - t0:.0f} s")
            say((work / f"{name}.stdout.txt").read_text()[-3000:])
            if rc not in (0,):
                say((work / f"{name}.stderr.txt").read_text()[-2000:])
    finally:
        time.sleep(0.5)  # the observer brackets the last window's end
        meter.send_signal(signal.SIGTERM)
        try:
            meter.wait(timeout=10)
        except subprocess.TimeoutExpired:
            meter.kill()
    cc = _crosscheck()
    nvml = read_meter(meter_log)
    rows: list[dict] = []
    for name in nominal:
        res = work / name / "result.json"
        if res.exists():
            rows += window_rows(name, json.loads(res.read_text()), nvml, cc.independent_j)
    by_length = summarize(rows, nominal)
    doc = {"what": "wattbench accelerator energy vs an independent NVML counter read, by window length",
           "durations_s": list(nominal.values()), "concurrency": args.concurrency, "rc": rcs,
           "rows": rows, "by_length": by_length}
    (out / "window_error.json").write_text(json.dumps(doc, indent=2))
    for r in rows:
        diff = "unbracketed" if r["diff_pct"] is None else f"{r['diff_pct']:+.3f}%"
        bound = r["accounting_edge_bound_pct"]
        say(f"{r['run']:>6} {r['level']:>15} {r['kind']:>6} {r['duration_s']:6.2f} s  wattbench "
            f"{r['wattbench_j']:9.1f} J  independent {r['independent_j'] or 0:9.1f} J  {diff:>9}  "
            f"edge bound {bound if bound is None else round(bound, 3)}%  {r['efficiency_verdict']}/"
            f"{r['latency_verdict']}")
    for s in by_length:
        say(f"~{s['nominal_s']:g} s {s['kind']:>6}: n={s['n']} max |diff| {s['max_abs_diff_pct']:.3f}% mean "
            f"{s['mean_diff_pct']:+.3f}% ({s['shortest_s']:.1f}-{s['longest_s']:.1f} s; accounting edge bound up to "
            f"{s['max_accounting_edge_bound_pct']:.2f}%)")
    with tarfile.open(out / "runs.tgz", "w:gz") as tar:
        tar.add(work, arcname="window-error")
    return 0 if rows and all(rc == 0 for rc in rcs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
