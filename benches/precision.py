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

``paired`` — does the paired design of ``wattbench ab`` cancel a drift both sides share? Two
scripted stream servers: A with TTFT 40 ms and ITL 20 ms, B with TTFT and ITL ``--slower`` times A's
(1.1: every request of B takes 1.1× as long), so at one concurrency B's throughput is A's ÷ 1.1 —
and with a declared constant meter (``-s const:node=500``: the same watts for both) the **true
per-kW ratio B/A is 1 / 1.1 = 0.909×**. Both servers drift together: every request's TTFT and ITL
grow as ``exp(R · t)`` from one origin (the server's ``--log-drift-per-s R --drift-origin S``;
``--drift-per-s R`` here, default 1%/s: about 15% over the seconds a run of six 2 s trials takes).
Each case measures the pair twice, on fresh servers with the same drift from the same start:
``ab`` — ``wattbench ab A B`` (``run.ab.run_ab``): A B B A blocks, each trial after a drain, the
ratio from the pairs; ``independent`` — two ``wattbench run``s with as many ``--trials`` (A's, then
B's), the ratio of their trial means (``compare``): what a user gets from two runs one after the
other. Each row: the truth, both ratios and their errors (%), the paired interval and word, the
order measured, each design's wall seconds (``paired_case``, which
``tests/integration/test_ab_paired.py`` runs once).

Run from the repository root::

    PYTHONPATH=src python benches/precision.py auto --sd 0.02,0.05 --precision 2,5 --repeats 3
    PYTHONPATH=src python benches/precision.py paired --cases 6 --pairs 6
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
    from wattbench.config.run import RunConfig
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


# ---------------------------------------------------------------- paired: wattbench ab against a common drift

TTFT_A_MS, ITL_A_MS = 40.0, 20.0
SLOWER = 1.1
DRIFT_PER_S = 0.01
METER = "const:node=500"


def true_ratio(slower: float = SLOWER) -> float:
    """B/A per kW by construction: B's every request takes ``slower`` times A's, the meter is one
    declared constant for both."""
    return 1.0 / slower


def _servers(stack, slower: float, drift_per_s: float) -> tuple[str, str]:
    """A and B, drifting together from now."""
    from tests.fakes.stream_server_proc import stream_server

    origin = f"{time.monotonic():.6f}"
    common = ["--log-drift-per-s", str(drift_per_s), "--drift-origin", origin]
    a, _ = stack.enter_context(stream_server("--ttft-ms", str(TTFT_A_MS), "--itl-ms", str(ITL_A_MS), *common))
    b, _ = stack.enter_context(stream_server("--ttft-ms", str(TTFT_A_MS * slower), "--itl-ms",
                                             str(ITL_A_MS * slower), *common))
    return a, b


def _run_options(out: Path, *, concurrency: int, duration_s: float, output_tokens: int, db: Path,
                 trials: int = 1) -> dict:
    """The options both designs share: short levels, the declared meter, no idle (a declared
    meter's idle is its load power), no report."""
    return dict(concurrency=[concurrency], duration_s=duration_s, input_tokens="16", output_tokens=str(output_tokens),
                sensors=[METER], idle_s=0.0, html=False, out=str(out), db=str(db), trials=trials,
                history_check=False)


def paired_case(work: Path, *, pairs: int = 6, concurrency: int = 2, duration_s: float = 2.0,
                output_tokens: int = 16, slower: float = SLOWER, drift_per_s: float = DRIFT_PER_S,
                designs: tuple[str, ...] = ("ab", "independent")) -> dict:
    """One case of ``paired`` (module docstring): each design on fresh servers drifting from their start."""
    from contextlib import ExitStack

    from wattbench.analysis.compare import compare
    from wattbench.config.run import RunConfig
    from wattbench.config.run_commands import AbConfig
    from wattbench.run.ab import run_ab
    from wattbench.run.benchmark import run_benchmark

    truth = true_ratio(slower)
    row: dict = {"truth": truth, "pairs": pairs, "concurrency": concurrency, "duration_s": duration_s,
                 "output_tokens": output_tokens, "slower": slower, "drift_per_s": drift_per_s}
    db = work / "history.sqlite"
    if "ab" in designs:
        with ExitStack() as stack:
            a, b = _servers(stack, slower, drift_per_s)
            opts = _run_options(work / "ab", concurrency=concurrency, duration_s=duration_s,
                                output_tokens=output_tokens, db=db)
            cfg = AbConfig(side_a=a, side_b=b, pairs=pairs, run=RunConfig(**opts))
            t0 = time.monotonic()
            out = run_ab(cfg)
            row["ab_s"] = time.monotonic() - t0
        lv = out.comparison.levels[0]
        d = lv.decomposition
        assert d is not None and d.per_kw_ratio is not None
        row.update(ab=d.per_kw_ratio, ab_low=d.per_kw_ci.low if d.per_kw_ci else None,
                   ab_high=d.per_kw_ci.high if d.per_kw_ci else None, ab_word=lv.noise.word if lv.noise else None,
                   ab_pairs=lv.pairs, sequence=out.comparison.sequence,
                   ab_error_pct=100.0 * (d.per_kw_ratio / truth - 1.0), ab_dirs=[str(out.run_dir_a), str(out.run_dir_b)],
                   ab_run_ids=out.comparison.run_ids)
    if "independent" in designs:
        with ExitStack() as stack:
            a, b = _servers(stack, slower, drift_per_s)
            t0 = time.monotonic()
            results = []
            for side, url in (("A", a), ("B", b)):
                opts = _run_options(work / f"independent-{side}", concurrency=concurrency, duration_s=duration_s,
                                    output_tokens=output_tokens, db=db, trials=pairs)
                results.append(run_benchmark(RunConfig(target=url, **opts)))
            row["independent_s"] = time.monotonic() - t0
        dec = compare(results).levels[0].decompositions[0]
        assert dec.per_kw_ratio is not None
        row.update(independent=dec.per_kw_ratio, independent_error_pct=100.0 * (dec.per_kw_ratio / truth - 1.0),
                   independent_word=dec.noise.word if dec.noise else None)
    return row


def cmd_paired(a: argparse.Namespace, argv: list[str]) -> int:
    if not (math.isfinite(a.slower) and a.slower > 0):
        raise SystemExit("--slower must be a positive number")
    rows = []
    with tempfile.TemporaryDirectory(prefix="wattbench-precision-") as tmp:
        for i in range(a.cases):
            row = paired_case(Path(tmp) / f"case-{i}", pairs=a.pairs, concurrency=a.concurrency,
                              duration_s=a.duration, output_tokens=a.output_tokens, slower=a.slower,
                              drift_per_s=a.drift_per_s)
            row.pop("ab_dirs", None)
            rows.append(row)
            print(f"case {i + 1}/{a.cases}: truth {row['truth']:.4f}  ab {row['ab']:.4f} "
                  f"({row['ab_error_pct']:+.2f}%, {row['ab_s']:.0f} s)  independent {row['independent']:.4f} "
                  f"({row['independent_error_pct']:+.2f}%, {row['independent_s']:.0f} s)", flush=True)
    ab_err = [abs(r["ab_error_pct"]) for r in rows]
    ind_err = [abs(r["independent_error_pct"]) for r in rows]
    summary = {"cases": len(rows), "ab_max_abs_error_pct": max(ab_err), "independent_min_abs_error_pct": min(ind_err),
               "ab_mean_abs_error_pct": sum(ab_err) / len(ab_err),
               "independent_mean_abs_error_pct": sum(ind_err) / len(ind_err)}
    args = {k: v for k, v in vars(a).items() if k not in ("fn", "out", "section")}
    doc = {"part": "paired", "rows": rows, "summary": summary, "args": args}
    _write(a.out, "paired.json", doc, argv)
    print(json.dumps(summary, indent=2))
    return 0


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
    pr = sub.add_parser("paired", help="wattbench ab against two servers drifting together, vs two runs")
    pr.add_argument("--cases", type=int, default=6)
    pr.add_argument("--pairs", type=int, default=6)
    pr.add_argument("--concurrency", type=int, default=2)
    pr.add_argument("--duration", type=float, default=2.0)
    pr.add_argument("--output-tokens", type=int, default=16)
    pr.add_argument("--slower", type=float, default=SLOWER)
    pr.add_argument("--drift-per-s", type=float, default=DRIFT_PER_S)
    pr.add_argument("--out", type=Path, default=OUT)
    pr.set_defaults(fn=cmd_paired)
    args = p.parse_args(argv)
    return args.fn(args, argv)


if __name__ == "__main__":
    sys.exit(main())
