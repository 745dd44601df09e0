"""Fuzz benchmark: >= 100k cases per parser, no crash, no hang.

    PYTHONPATH=src:. python benches/fuzz.py [--cases 100000] [--seed 0] [--only sse,slo] [--json]

Feeds the property functions of ``tests/fakes/reliability_fuzz.py`` (the same ones the quick
hypothesis tests in tests/unit/fuzz/ use) with a plain seeded generator — grammar tokens plus
random mutations — which is far faster per case than hypothesis. Each case runs under an
interval timer (``--case-timeout-s``, default 2 s): a case that takes longer counts as a hang.
Prints, per target: cases, failures (first few with their input), cases/s, the slowest case.
Exit 1 when any case failed or hung. Figures go to docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import sys
import time
import traceback
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "src"), str(Path(__file__).resolve().parents[1])]

from tests.fakes import reliability_fuzz as F  # noqa: E402


class Hang(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise Hang()


def targets(ffs: dict) -> dict:
    return {
        "sse": (F.gen_sse, lambda x: F.prop_sse(*x)),
        "stream_answer": (F.gen_stream_answer, lambda x: F.prop_stream_answer(*x)),
        "prometheus_exposition": (F.gen_prom, F.prop_exposition),
        "dcgm_sensor": (F.gen_prom, F.prop_dcgm),
        "sensor_spec": (F.gen_sensor_spec, F.prop_sensor_spec),
        "slo_spec": (F.gen_slo, F.prop_slo),
        "distribution": (F.gen_distribution, F.prop_distribution),
        "dataset_file": (F.gen_dataset, lambda d: F.prop_dataset(ffs["dataset"], d)),
        "trace_file": (F.gen_trace, lambda d: F.prop_trace(ffs["trace"], d)),
        # `measure`: the load generators' result files (vLLM, AIPerf, GuideLLM) and --window-from
        "measure_tool_file": (F.gen_tool_file, lambda x: F.prop_tool_file(ffs["tools"], *x)),
        "measure_markers": (F.gen_markers, lambda d: F.prop_markers(ffs["markers"], d)),
        # `tune --space`
        "tune_space_file": (F.gen_space, lambda x: F.prop_space(ffs, *x)),
        # a server's identity probes (server.detect.classify) and the prompt calibration's fit
        "identity_probes": (F.gen_identity_probes, lambda x: F.prop_identity(*x)),
        "calibration_fit": (F.gen_calibration, lambda x: F.prop_calibration(*x)),
        # `monitor`: a sequence of /metrics answers through the scrape, the tracker and the exporter
        "monitor_scrapes": (F.gen_monitor_scrapes, F.prop_monitor_scrapes),
    }


def run_target(name: str, gen, prop, cases: int, seed: int, case_timeout_s: float) -> dict:
    rng = random.Random(f"{seed}:{name}")
    failures: list[dict] = []
    kinds: dict[str, int] = {}  # distinct failure (exception type at file:line) -> count
    n_fail = 0
    slowest = (0.0, None)
    signal.signal(signal.SIGALRM, _alarm)
    try:  # one untimed case first: the imports it pulls in are not a case's time
        prop(gen(random.Random(f"warm:{name}")))
    except Exception:  # noqa: BLE001 - counted when the timed loop meets it
        pass
    t0 = time.perf_counter()
    for i in range(cases):
        x = gen(rng)
        c0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, case_timeout_s)
        try:
            prop(x)
        except Hang:
            n_fail += 1
            kinds["hang"] = kinds.get("hang", 0) + 1
            if kinds["hang"] == 1:
                failures.append({"case": i, "kind": "hang", "input": repr(x)[:400]})
        except Exception as e:  # noqa: BLE001 - this is what the fuzzer looks for
            n_fail += 1
            tb = [f for f in traceback.extract_tb(e.__traceback__) if "/wattbench/" in f.filename]
            where = (tb[-1].filename.split("/src/")[-1] + ":" + str(tb[-1].lineno)) if tb else "?"
            key = f"{type(e).__name__} at {where}"
            kinds[key] = kinds.get(key, 0) + 1
            if kinds[key] == 1:
                failures.append({"case": i, "kind": key, "error": str(e)[:200], "input": repr(x)[:300]})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        dt = time.perf_counter() - c0
        if dt > slowest[0]:
            slowest = (dt, repr(x)[:120])
    wall = time.perf_counter() - t0
    return {"target": name, "cases": cases, "failures": n_fail, "wall_s": round(wall, 2),
            "cases_per_s": round(cases / wall), "slowest_case_ms": round(slowest[0] * 1e3, 2),
            "failure_kinds": kinds, "examples": failures}


def _commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default="", help="comma list of targets")
    p.add_argument("--case-timeout-s", type=float, default=2.0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    ffs = {"dataset": F.FileFuzz(".jsonl"), "trace": F.FileFuzz(".trace"), "tools": F.ToolFuzz(),
           "markers": F.FileFuzz(".marks"), ".yaml": F.FileFuzz(".yaml"), ".json": F.FileFuzz(".json")}
    try:
        all_t = targets(ffs)
        names = [n for n in a.only.split(",") if n] or list(all_t)
        out = []
        for n in names:
            gen, prop = all_t[n]
            r = run_target(n, gen, prop, a.cases, a.seed, a.case_timeout_s)
            out.append(r)
            if not a.json:
                print(f"{n:24s} {r['cases']:>8,d} cases  {r['failures']:>6,d} failures  "
                      f"{r['cases_per_s']:>8,d} cases/s  slowest {r['slowest_case_ms']:.1f} ms", flush=True)
                for ex in r["examples"]:
                    print("    ", ex, flush=True)
    finally:
        for ff in ffs.values():
            ff.close()
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()} {os.cpu_count()} CPU(s), "
            f"{platform.processor() or platform.platform()}", "python": platform.python_version(), "seed": a.seed,
            "args": list(sys.argv[1:] if argv is None else argv), "commit": _commit(),
            "load_average": [round(x, 1) for x in os.getloadavg()]}
    if a.json:
        print(json.dumps({"meta": meta, "results": out}, indent=2))
    return 1 if any(r["failures"] for r in out) else 0


if __name__ == "__main__":
    sys.exit(main())
