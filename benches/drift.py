"""How often the drift rule names a drifting level, and how often it names a steady one
(``accounting/drift.py``: the Theil–Sen change over a level's trials' per-second steady series,
its 99% interval excluding 0, at or above the 1% materiality bound: docs/accounting.md
"Stationarity").

Two parts:

* **synthetic** (``--synthetic N``): N seeded levels per condition, each three trials of 20 s
  with 5 s between them (the H200 runs' shape), whose per-second output tokens/s carry a
  lognormal noise of sd ``--noise`` (per condition) and change linearly by ``--drifts`` (a
  fraction, from the level's first second to its last; 0 = steady). Each level goes through the
  rule as the run applies it (``accounting.drift.stationarity`` over ``SteadySeries`` trials);
  ``drifting`` counts the levels named (a ``drift`` warning on output tokens/s), ``moves`` those
  whose interval excluded 0 at all (a note below the bound). Steady conditions give the
  false-alarm rate, drifting ones the detection rate.
* **real** (``--real K``): K runs per ``--real-drifts`` value of ``wattbench run -c C --duration D
  --trials 3`` (a declared 300 W meter) against the scripted server (``tests/fakes/stream_server.py``
  with ``--drift-per-s F``: its tokens/s fall by F per second from its first stream). Each row: the
  true change over the level's steady series (from the server's first stream, on the same monotonic
  clock), the fitted change with its interval, and whether the level was named drifting.

Run from the repository root::

    PYTHONPATH=src:. python benches/drift.py --synthetic 200 --real 3 --json benches/data/drift/drift.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from wattbench.accounting.drift import stationarity  # noqa: E402
from wattbench.core.schema import LevelResult, SteadySeries  # noqa: E402

TRIALS, SECONDS, GAP_S = 3, 20, 5.0


def _level(rng: np.random.Generator, change: float, sd: float) -> list[LevelResult]:
    t_all = [k * (SECONDS + GAP_S) + np.arange(SECONDS) + 0.5 for k in range(TRIALS)]
    first, last = t_all[0][0], t_all[-1][-1]
    out = []
    for k, t in enumerate(t_all):
        y = 1000.0 * (1.0 + change * (t - first) / (last - first)) * np.exp(rng.normal(0.0, sd, t.size))
        lv = LevelResult(index=0, label="concurrency=8", trial=k)
        lv.series = SteadySeries(bucket_s=1.0, t_s=t.tolist(), output_tokens_per_s=y.tolist(),
                                 power_w={"accelerator": [500.0] * t.size})
        out.append(lv)
    return out


def synthetic(n: int, noises: list[float], drifts: list[float], seed: int) -> list[dict]:
    rows = []
    for sd in noises:
        for change in drifts:
            rng = np.random.default_rng([seed, int(sd * 1e4), int(abs(change) * 1e4)])
            named = moves = 0
            fitted = []
            for _ in range(n):
                st = stationarity(_level(rng, change, sd))
                tok = next(f for f in st.trends if f.figure == "output_tokens_per_s")
                named += tok.drifting
                moves += tok.moves
                fitted.append(tok.change_pct)
            rows.append({"noise_sd": sd, "true_change": change, "levels": n, "drifting": named, "moves": moves,
                         "rate": named / n, "median_fitted_pct": float(np.median(fitted))})
            print(f"synthetic noise {sd:.1%} change {change:+.1%}: named {named}/{n}, moves {moves}/{n}",
                  file=sys.stderr)
    return rows


def real(k: int, drifts: list[float], concurrency: int, duration_s: float) -> list[dict]:
    from tests.fakes.stream_server_proc import stream_server
    from wattbench.config.run import RunConfig
    from wattbench.run import run_benchmark

    rows = []
    for f in drifts:
        for i in range(k):
            with tempfile.TemporaryDirectory() as tmp, stream_server(
                    "--ttft-ms", "20", "--itl-ms", "40", "--drift-per-s", str(f)) as (base, stats):
                t = time.time()
                res = run_benchmark(RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False,
                                              html=False, out=tmp, input_tokens="16", output_tokens="16",
                                              history_check=False, concurrency=[concurrency], duration_s=duration_s,
                                              trials=TRIALS))
                st0 = stats().get("drift_t0_ns")
            lv = res.levels[0]
            tok = next(x for x in lv.stationarity.trends if x.figure == "output_tokens_per_s")
            truth = None
            if st0 is not None and lv.series is not None and tok.span_s:
                t0 = st0 / 1e9
                t_last = lv.series.t_s[-1]
                t_first = t_last - tok.span_s
                truth = ((1.0 + f * (t_last - t0)) / (1.0 + f * (t_first - t0)) - 1.0) * 100.0
            rows.append({"drift_per_s": f, "run": i, "true_change_pct": truth, "fitted_pct": tok.change_pct,
                         "ci_low_pct": tok.ci_low_pct, "ci_high_pct": tok.ci_high_pct, "span_s": tok.span_s,
                         "points": tok.points, "trials_change_pct": tok.trials_change_pct, "moves": tok.moves,
                         "drifting": tok.drifting, "wall_s": time.time() - t,
                         "loop_lag_p99_ms": lv.load.client_loop_lag_ms.p99})
            print(f"real F={f:+.4f}/s run {i}: truth {truth if truth is None else round(truth, 2)}% fitted "
                  f"{tok.change_pct:+.2f}% [{tok.ci_low_pct:+.2f}, {tok.ci_high_pct:+.2f}] drifting {tok.drifting}",
                  file=sys.stderr)
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--synthetic", type=int, default=200)
    p.add_argument("--noises", default="0.005,0.01,0.02")
    p.add_argument("--drifts", default="0,-0.03,-0.05")
    p.add_argument("--seed", type=int, default=40)
    p.add_argument("--real", type=int, default=3)
    p.add_argument("--real-drifts", default="0,-0.001,-0.004")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--json", default="")
    a = p.parse_args()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    out = {
        "meta": {"script": "benches/drift.py", "args": sys.argv[1:], "commit": commit or None,
                 "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                 "cpu": f"{platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
                 "python": platform.python_version(), "trials": TRIALS, "seconds": SECONDS, "gap_s": GAP_S},
        "synthetic": synthetic(a.synthetic, [float(x) for x in a.noises.split(",")],
                               [float(x) for x in a.drifts.split(",")], a.seed) if a.synthetic else [],
        "real": real(a.real, [float(x) for x in a.real_drifts.split(",")], a.concurrency, a.duration)
        if a.real else [],
    }
    text = json.dumps(out, indent=1)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
