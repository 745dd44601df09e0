"""What a decisive answer costs: measurements against scripted servers with a known jitter (and,
in later sections, a known drift and a known true ratio), one section per design, each a
subcommand writing its own file under ``benches/data/precision/`` with its part of the directory's
PROVENANCE.json (script, arguments, commit, machine, load average).

``auto`` — ``run --trials auto``: how many trials, and how many seconds, it takes to reach a 95%
half-width of ±2% / ±5% on tokens/s per kW when every trial's speed is jittered by a known amount.
The scripted streaming server (``tests/fakes/stream_server.py``, its own process) multiplies its
TTFT and ITL by ``exp(N(0, SD))``, a new factor every 8 requests (``--speed-noise SD
--noise-every 8``; a level is 8 measured requests at ``-c 4``, so each trial runs at about one
draw), and the meter is a declared 300 W node (``--sensor const:node=300``): tokens/s per kW moves
only with the scripted speed. For each jitter and precision the run is repeated with other noise
seeds; each record keeps what the run said (why it stopped, rounds, trials, seconds, the
precision each level reached, how many more trials it said would reach the one asked) and the
trials' own figures, and ``expected_trials`` is what a trial spread of exactly SD would need (the
smallest n >= 3 with t(0.975, n-1) · SD / sqrt(n) <= precision).

``paired`` — reserved for the paired A/B design (``wattbench ab``): lands with that command.

Run from the repository root::

    PYTHONPATH=src python benches/precision.py auto --sd 0.02,0.05 --precision 2,5 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from benches.gpu import provenance  # noqa: E402  (the repository root is on the path above)

OUT = ROOT / "benches" / "data" / "precision"
NODE_W = 300.0
FIG = "output_tokens_per_s_per_kw@node"


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def expected_trials(sd: float, precision: float) -> int:
    """Trials whose mean has a 95% half-width within ``precision`` when one trial's relative sd is
    exactly ``sd`` (at least 3: the stop rule's least)."""
    from wattbench.metrics.trials import t_ppf

    n = 3
    while t_ppf(0.975, n - 1) * sd / math.sqrt(n) > precision:
        n += 1
    return n


def _auto_once(sd: float, precision_pct: float, seed: int, max_trials: int) -> dict:
    from tests.fakes.stream_server_proc import stream_server
    from wattbench.config import RunConfig
    from wattbench.run import run_benchmark

    args = ("--ttft-ms", "20", "--itl-ms", "20", "--speed-noise", f"{sd:g}", "--noise-seed", str(seed),
            "--noise-every", "8")
    with stream_server(*args) as (base, stats), tempfile.TemporaryDirectory() as tmp:
        cfg = RunConfig(target=base, sensors=[f"const:node={NODE_W:g}"], idle_s=0, register_run=False, html=False,
                        out=str(Path(tmp) / "run"), input_tokens="16", output_tokens="16", concurrency=[4],
                        num_requests=8, history_check=False, trials="auto", precision_pct=precision_pct,
                        max_trials=max_trials)
        t0 = time.monotonic()
        res = run_benchmark(cfg)
        wall_s = time.monotonic() - t0
        factors = stats()["speed_factors"]
    auto = res.noise.auto_trials
    levels = []
    for lv in res.levels:
        p = lv.precision
        tf = lv.trials.figures.get(FIG) if lv.trials else None
        levels.append({"label": lv.label, "reached_pct": p.reached_pct if p else None, "met": p.met if p else None,
                       "more_trials": p.more_trials if p else None, "trials": p.trials if p else None,
                       "values": list(tf.values) if tf else []})
    return {"sd": sd, "precision_pct": precision_pct, "seed": seed, "max_trials": max_trials,
            "stopped": auto.stopped if auto else None, "rounds": auto.rounds if auto else None,
            "trials": auto.trials if auto else None, "seconds": auto.seconds if auto else None,
            "run_wall_s": wall_s, "expected_trials": expected_trials(sd, precision_pct / 100.0),
            "speed_factors": factors, "levels": levels}


def _summary(records: list[dict]) -> list[dict]:
    out = []
    for key in sorted({(r["sd"], r["precision_pct"]) for r in records}):
        rs = [r for r in records if (r["sd"], r["precision_pct"]) == key]
        out.append({"sd": key[0], "precision_pct": key[1], "runs": len(rs),
                    "reached": sum(r["stopped"] == "reached" for r in rs),
                    "median_trials": statistics.median(r["trials"] for r in rs),
                    "median_seconds": statistics.median(r["seconds"] for r in rs),
                    "max_reached_pct": max((lv["reached_pct"] for r in rs for lv in r["levels"]
                                            if r["stopped"] == "reached" and lv["reached_pct"] is not None),
                                           default=None),
                    "expected_trials": rs[0]["expected_trials"]})
    return out


def cmd_auto(a: argparse.Namespace, argv: list[str]) -> int:
    started = _provenance(argv)  # the checkout as it starts, before anything is imported or run
    records = []
    for sd in _floats(a.sd):
        for prec in _floats(a.precision):
            for r in range(a.repeats):
                rec = _auto_once(sd, prec, seed=a.seed + r, max_trials=a.max_trials)
                records.append(rec)
                print(f"sd {sd:g} precision {prec:g}% seed {a.seed + r}: {rec['stopped']} after {rec['trials']} "
                      f"trials, {rec['seconds']:.1f} s (expected {rec['expected_trials']}); reached "
                      + ", ".join(f"±{lv['reached_pct']:.2f}%" if lv["reached_pct"] is not None else "none"
                                  for lv in rec["levels"]), flush=True)
    doc = {"section": "auto", "about": __doc__.split("``auto``", 1)[1].split("``paired``", 1)[0].strip(),
           "records": records, "summary": _summary(records)}
    _write(a.out, "auto.json", doc, started)
    for s in doc["summary"]:
        print(json.dumps(s))
    return 0


def _provenance(argv: list[str]) -> dict:
    """The run's provenance as it starts (commit, date, machine, load average); ``_write`` adds the
    load average at its end."""
    here = provenance.build(os.path.relpath(__file__, ROOT), argv, str(ROOT))
    here["cpu"] = f"{platform.machine()} x{os.cpu_count()}"
    here["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return here


def _write(out: Path, name: str, doc: dict, here: dict) -> None:
    """``name`` under ``out`` and its part of ``out``/PROVENANCE.json (other sections' parts kept);
    ``here``: the run's provenance taken as it started."""
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(json.dumps(doc, indent=1) + "\n")
    prov_path = out / "PROVENANCE.json"
    here = {**here, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    parts = []
    if prov_path.is_file():
        parts = [p for p in json.loads(prov_path.read_text()).get("parts", []) if name not in p.get("files", [])]
    parts.append({"files": [name], "script": here["script"], "args": here["args"], "command": here["command"],
                  "date": here["date"], "commit": here["commit"], "dirty": here["dirty"],
                  "load_average": here["load_average"], "load_average_at_end": here["load_average_at_end"],
                  "cpu": here["cpu"], "env": here["env"]})
    prov_path.write_text(json.dumps({**here, "parts": parts}, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="section", required=True)
    a = sub.add_parser("auto", help="run --trials auto: trials and seconds to reach a precision")
    a.add_argument("--sd", default="0.02,0.05", help="per-trial speed jitter (relative sd), comma list")
    a.add_argument("--precision", default="2,5", help="precisions asked, percent, comma list")
    a.add_argument("--repeats", type=int, default=3, help="runs per jitter and precision (noise seeds)")
    a.add_argument("--seed", type=int, default=1, help="first noise seed")
    a.add_argument("--max-trials", type=int, default=40)
    a.add_argument("--out", type=Path, default=OUT)
    a.set_defaults(fn=cmd_auto)
    args = p.parse_args(argv)
    return args.fn(args, argv)


if __name__ == "__main__":
    sys.exit(main())
