"""The tables of docs/validation.md "The server's history and the noise floor", from the raw run
directories of ``benches/gpu/h200_noise.sh`` (docs/validation.md part 11).

    python3 benches/gpu/noise_table.py DIR [DIR ...] [--json OUT.json]

Each DIR is a ``history_runs.py`` directory (``/tmp/noise_orders``, ``/tmp/noise_repeat``, or
those unpacked from ``noise_orders.tgz`` / ``noise_repeat.tgz``); runs are found by name under
``DIR/runs/``:

- ``order1``, ``order2``, ``order3`` (the three level orders on one server, primed): per level the
  tokens/s per kW at the accelerator, the run's history check, and for every load measured by two
  or more orders their spread (largest ÷ smallest − 1) against the within-run noise of a ratio of
  two single levels, ``t(0.975, n-1) · s · sqrt(2)`` with ``s`` the relative sd of one trial of
  the ``within`` run at the nearest load (c=16 or c=64): the orders agree when the spread is
  inside it;
- ``within`` (``--trials 5`` interleaved): the within-run spread per load;
- ``run1`` … ``run5`` (one server, one run after another): the spread across runs;
- ``starts`` (``--trials 5 --restart-engine``: a fresh, primed engine per trial round): the
  spread across engine starts.

Spreads: mean, relative sd of one measurement (ddof 1), the 95% CI half-width of the mean
(``t · s / sqrt(n)``, ``metrics/trials.ci95``) and the range (largest ÷ smallest − 1), each of
tokens/s per kW at the accelerator. Prints Markdown; ``--json`` writes the same numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from wattbench.metrics.trials import ci95, t_ppf  # noqa: E402

BOUNDARY = "accelerator"
FIG = "output_tokens_per_s_per_kw"


def _load(d: Path) -> dict | None:
    f = d / "result.json"
    return json.loads(f.read_text()) if f.is_file() else None


def _conc(lv: dict) -> int | None:
    return (lv.get("load") or {}).get("target_concurrency")


def _per_kw(lv: dict) -> float | None:
    return ((lv.get("energy") or {}).get(BOUNDARY) or {}).get(FIG)


def _trial_values(lv: dict) -> list[float]:
    tr = lv.get("trials") or {}
    f = (tr.get("figures") or {}).get(f"{FIG}@{BOUNDARY}") or {}
    return [v for v in f.get("values") or [] if v is not None]


def spread(values: list[float]) -> dict:
    c = ci95(values)
    m = c["mean"]
    return {"n": c["n"], "values": values, "mean": m,
            "sd_pct": (100 * c["std"] / m) if c["std"] is not None and m else None,
            "ci_half_width_pct": (100 * c["half_width"] / m) if c["half_width"] is not None and m else None,
            "range_pct": (100 * (max(values) / min(values) - 1)) if len(values) > 1 and min(values) > 0 else None}


def find_runs(dirs: list[Path]) -> dict[str, dict]:
    runs = {}
    for d in dirs:
        for rd in sorted((d / "runs").glob("*")):
            if rd.is_dir() and (r := _load(rd)) is not None:
                runs[rd.name] = r
    return runs


def orders_table(runs: dict[str, dict], within: dict[int, dict]) -> tuple[list[str], dict]:
    names = [n for n in ("order1", "order2", "order3") if n in runs]
    if not names:
        return [], {}
    loads = sorted({_conc(lv) for n in names for lv in runs[n]["levels"] if _conc(lv) is not None})
    out = ["| run (level order) | " + " | ".join(f"c={c}" for c in loads) + " | c=64 W | history check |",
           "|---|" + "---:|" * (len(loads) + 1) + "---|"]
    data: dict = {"runs": {}, "agreement": {}}
    for n in names:
        r = runs[n]
        order = ",".join(str(_conc(lv)) for lv in r["levels"])
        cells, row = [], {}
        for c in loads:
            lv = next((x for x in r["levels"] if _conc(x) == c), None)
            v = _per_kw(lv) if lv else None
            row[c] = v
            cells.append(f"{v:,.0f}" if v is not None else "–")
        lv64 = next((x for x in r["levels"] if _conc(x) == 64), None)
        w64 = ((lv64 or {}).get("energy") or {}).get(BOUNDARY, {}).get("avg_power_w") if lv64 else None
        hc = ((r.get("noise") or {}).get("history_check") or {})
        hct = (f"{hc.get('verdict')} {hc['ratio'] - 1:+.1%} (±{hc.get('bound_pct'):.1f}%)"
               if hc.get("ratio") is not None else "–")
        primed = (r.get("noise") or {}).get("priming") or {}
        data["runs"][n] = {"order": order, "per_kw": row, "c64_w": w64, "history_check": hc.get("verdict"),
                           "history_ratio": hc.get("ratio"), "primed_at": primed.get("value"),
                           "primed_requests": primed.get("completed")}
        out.append(f"| {n}: {order} | " + " | ".join(cells) + f" | {w64:,.0f} |" if w64 else
                   f"| {n}: {order} | " + " | ".join(cells) + " | – |")
        out[-1] += f" {hct} |"
    out.append("")
    out.append("| load | orders measuring it | spread (max ÷ min − 1) | within-run noise of a ratio of two levels | agree |")
    out.append("|---|---:|---:|---:|---|")
    for c in loads:
        vals = [data["runs"][n]["per_kw"][c] for n in names if data["runs"][n]["per_kw"].get(c) is not None]
        if len(vals) < 2:
            continue
        sp = 100 * (max(vals) / min(vals) - 1)
        ref = min(within, key=lambda w: abs(math.log(w / c))) if within else None
        bound = None
        if ref is not None and within[ref]["sd_pct"] is not None and within[ref]["n"] >= 2:
            s = within[ref]["sd_pct"] / 100
            bound = 100 * (math.exp(t_ppf(0.975, within[ref]["n"] - 1) * s * math.sqrt(2)) - 1)
        agree = None if bound is None else sp <= bound
        data["agreement"][c] = {"values": vals, "spread_pct": sp, "bound_pct": bound, "bound_from": ref,
                                "agree": agree}
        out.append(f"| c={c} | {len(vals)} | {sp:.1f}% | " + (f"±{bound:.1f}% (from c={ref})" if bound else "–")
                   + f" | {'yes' if agree else 'no' if agree is False else '–'} |")
    return out, data


def repeat_table(runs: dict[str, dict]) -> tuple[list[str], dict, dict[int, dict]]:
    rows: dict[str, dict[int, dict]] = {}
    if "within" in runs:
        rows["within one run (interleaved trials)"] = {
            _conc(lv): spread(_trial_values(lv)) for lv in runs["within"]["levels"] if _trial_values(lv)}
    singles = [n for n in ("run1", "run2", "run3", "run4", "run5") if n in runs]
    if singles:
        loads = sorted({_conc(lv) for n in singles for lv in runs[n]["levels"]})
        rows["across runs, one server"] = {
            c: spread([v for n in singles for lv in runs[n]["levels"] if _conc(lv) == c
                       and (v := _per_kw(lv)) is not None]) for c in loads}
    if "starts" in runs:
        rows["across engine starts (one per trial)"] = {
            _conc(lv): spread(_trial_values(lv)) for lv in runs["starts"]["levels"] if _trial_values(lv)}
    within = rows.get("within one run (interleaved trials)", {})
    if not rows:
        return [], {}, within
    loads = sorted({c for r in rows.values() for c in r})
    out = ["| load | spread of | n | mean tok/s/kW | sd of one | 95% CI of the mean | range |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for c in loads:
        for what, r in rows.items():
            s = r.get(c)
            if not s or not s["n"]:
                continue

            def pct(x):
                return f"{x:.1f}%" if x is not None else "–"
            out.append(f"| c={c} | {what} | {s['n']} | {s['mean']:,.0f} | {pct(s['sd_pct'])} | "
                       f"±{pct(s['ci_half_width_pct'])} | {pct(s['range_pct'])} |")
    return out, {w: {str(c): v for c, v in r.items()} for w, r in rows.items()}, within


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    runs = find_runs([Path(d) for d in a.dirs])
    rep_lines, rep_data, within = repeat_table(runs)
    ord_lines, ord_data = orders_table(runs, within)
    if ord_lines:
        print("### Three level orders on one server, primed\n")
        print("\n".join(ord_lines) + "\n")
    if rep_lines:
        print("### Repeatability (tokens/s per kW at the accelerator)\n")
        print("\n".join(rep_lines) + "\n")
    if not runs:
        print("no run directories found under", ", ".join(a.dirs))
    if a.json:
        Path(a.json).write_text(json.dumps({"orders": ord_data, "repeatability": rep_data,
                                            "runs": sorted(runs)}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
