"""Checks the headline rule on the outputs of benches/gpu/h200_headline.sh (docs/validation.md part 13).

Usage: python benches/gpu/headline_check.py DIR   (DIR holds a/, b/, compare.json, regress.json,
report.json, history.json, a.html). Prints one PASS/FAIL line per claim; exit 1 on any FAIL."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

PER_TOKEN = ("j_per_output_token", "output_tokens_per_s_per_kw", "tokens_per_kwh", "output_tokens_per_kwh")
failed = 0


def check(ok: bool, what: str) -> None:
    global failed
    print(("PASS " if ok else "FAIL ") + what)
    failed += 0 if ok else 1


def main(d: Path) -> int:
    raw = {n: json.loads((d / n / "result.json").read_text()) for n in ("a", "b")}
    for n, r in raw.items():
        for lv in r["levels"]:
            bs = set(lv["energy"])
            check("accelerator" in bs and "accelerator_memory" in bs,
                  f"run {n} {lv['label']}: board and HBM rail measured ({sorted(bs)})")
            for b in bs - {"accelerator", "node", "wall", "cluster", "facility"}:
                got = {k: lv["energy"][b].get(k) for k in PER_TOKEN if lv["energy"][b].get(k) is not None}
                check(not got, f"run {n} {lv['label']}: no per-token figure at {b} ({got or 'none'})")
            t = (lv.get("trials") or {}).get("figures", {}).get("output_tokens_per_s_per_kw@accelerator")
            check(t is not None and t.get("ci_low") is not None, f"run {n} {lv['label']}: trials CI at the board")
    cmp = json.loads((d / "compare.json").read_text())
    check(cmp.get("boundary") == "accelerator", f"compare boundary = {cmp.get('boundary')} (want accelerator)")
    for row in cmp.get("levels", []):
        for i, n in enumerate(("a", "b")):
            lv = next(x for x in raw[n]["levels"] if x["label"] == row["labels"][i])
            t = lv["trials"]["figures"]["output_tokens_per_s_per_kw@accelerator"]
            pt = row["figures"][i]["output_tokens_per_s_per_kw"]
            lo, hi = row["cis"][i].get("output_tokens_per_s_per_kw", [None, None])
            check(abs(pt - t["mean"]) <= 1e-9 * abs(t["mean"]),
                  f"compare {row['key']} run {n}: point {pt:.1f} = trial mean {t['mean']:.1f} "
                  f"(last trial {lv['energy']['accelerator']['output_tokens_per_s_per_kw']:.1f})")
            check(lo is not None and lo <= pt <= hi, f"compare {row['key']} run {n}: point inside its CI [{lo}, {hi}]")
    reg = json.loads((d / "regress.json").read_text())
    check(reg.get("boundary") == "accelerator", f"regress boundary = {reg.get('boundary')}")
    for o in reg.get("outcomes", []):
        lv = next((x for x in raw["a"]["levels"] if x["label"] == o["level"]), None)  # exact: c=1 is a prefix of c=16
        if lv is None or o["baseline"] is None:
            continue
        m = o["check"]["metric"]
        key = f"{m}@accelerator" if f"{m}@accelerator" in lv["trials"]["figures"] else m
        want = lv["trials"]["figures"].get(key, {}).get("mean")
        check(want is not None and abs(o["baseline"] - want) <= 1e-9 * abs(want),
              f"regress {o['level']} {m}: baseline value {o['baseline']} = trial mean {want}")
    hist = json.loads((d / "history.json").read_text())
    for row in hist.get("levels", []):
        lv = next(x for x in raw["a"]["levels"] if x["label"] == row["label"])
        t = lv["trials"]["figures"]["output_tokens_per_s_per_kw@accelerator"]["mean"]
        check(row["boundary"] == "accelerator" and abs(row["output_tokens_per_s_per_kw"] - t) <= 1e-9 * t,
              f"history {row['label']}: {row['boundary']} {row['output_tokens_per_s_per_kw']:.1f} = trial mean {t:.1f}")
    page = (d / "a.html").read_text()
    specs = [json.loads(m) for m in re.findall(
        r'<script type="application/json" class="plot-data"[^>]*>(.*?)</script>', page, re.S)]
    names = [str(t.get("name", "")) for s in specs for t in s["data"]
             if "tok/s/kW" in str(t.get("hovertemplate", ""))]
    check(bool(names) and not any(x in " ".join(names) for x in ("accelerator_memory", "host", "cpu")),
          f"HTML tokens-per-kW traces: {names}")
    check('<div class="hero' in page and page.index('<div class="hero') < page.index('class="plot-data"'),
          "HTML first screen leads with the headline figure")
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
