"""Summary table of a wattbench run against llama.cpp: per level the figures and whether llama.cpp's
own /metrics token counters agree with the requests the client recorded.

    python3 benches/gpu/llamacpp_summary.py RUN_DIR

The check (``bracket_check``) is right by design, whenever the server counts a token (per token,
at prompt evaluation, or when a request completes — llama.cpp adds a request's generated tokens
to ``tokens_predicted_total`` when it finishes): take the scrape at or before the window's start
and the one at or after its end. A request whose whole life (sent .. end) lies between them is in
the counters' delta in full; a request alive at either scrape is in it for anything between none
and all of its tokens. So

    tokens of the requests inside <= delta <= that + tokens of the requests straddling a scrape.

A scrape's time is the midpoint of its HTTP exchange, so "inside" and "straddling" are judged
with the longest scrape duration as slack on both sides. When none straddles, the delta must
equal the tokens of the requests inside exactly. The window's own token count
(``throughput.output_tokens``: tokens produced inside the window, warm-up and edge streams'
share included) is printed beside it, not compared: the bracket holds whole streams.

A request the client did not record (a level cut by a timeout leaves the next level's first
streams unrecorded) makes the upper bound uncheckable; the ``running`` gauge at the closing
scrape shows it: more running than recorded requests alive then. Such a level reports
``low-ok`` (the lower bound held) instead of ``ok``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

COUNTERS = {"output": "generation_tokens", "input": "prompt_tokens"}


@dataclass(frozen=True)
class BracketCheck:
    kind: str  # "output" or "input"
    counter_delta: int
    inside_tokens: int  # requests whose whole life lies between the scrapes
    straddle_tokens: int  # requests alive at either scrape
    inside_requests: int
    straddle_requests: int
    unrecorded_streams: int  # running at the closing scrape beyond the recorded requests alive then
    ok: bool | None  # None: no bracketing scrapes

    @property
    def verdict(self) -> str:
        if self.ok is None:
            return "n/a"
        if not self.ok:
            return "FAIL"
        return "low-ok" if self.unrecorded_streams else "ok"


def bracket_check(kind: str, requests: list[dict], scrapes: list[dict], start_ns: int, end_ns: int,
                  slack_ns: int) -> BracketCheck:
    """Counters' delta between the scrapes bracketing [start_ns, end_ns] against the recorded requests."""
    counter = COUNTERS[kind]
    before = [s for s in scrapes if s["t_ns"] <= start_ns]
    after = [s for s in scrapes if s["t_ns"] >= end_ns]
    if not before or not after:
        return BracketCheck(kind, 0, 0, 0, 0, 0, 0, None)
    b, a = before[-1], after[0]
    lo_b, hi_b, lo_a, hi_a = b["t_ns"] - slack_ns, b["t_ns"] + slack_ns, a["t_ns"] - slack_ns, a["t_ns"] + slack_ns
    key = f"{kind}_tokens"
    inside = [r for r in requests if r["sent_ns"] >= hi_b and r["end_ns"] <= lo_a]
    straddle = [r for r in requests if r["sent_ns"] < hi_a and r["end_ns"] > lo_b
                and not (r["sent_ns"] >= hi_b and r["end_ns"] <= lo_a)]
    alive_at_a = sum(1 for r in requests if r["sent_ns"] <= hi_a and r["end_ns"] >= lo_a)
    unrecorded = max(0, int(a.get("running") or 0) - alive_at_a)
    inside_t = sum(r.get(key) or 0 for r in inside)
    straddle_t = sum(r.get(key) or 0 for r in straddle)
    delta = int(round(a[counter] - b[counter]))
    ok = inside_t <= delta and (unrecorded > 0 or delta <= inside_t + straddle_t)
    return BracketCheck(kind, delta, inside_t, straddle_t, len(inside), len(straddle), unrecorded, ok)


def read_timeline(path: Path) -> tuple[list[dict], int]:
    """(scrapes, longest scrape duration in ns) from server_timeline.jsonl."""
    scrapes, slack_ns = [], 0
    for line in path.read_text().splitlines():
        d = json.loads(line)
        if d.get("type") == "meta":
            slack_ns = int((d.get("scrape_duration_ms_max") or 0) * 1e6)
        elif "t_ns" in d:
            scrapes.append(d)
    return sorted(scrapes, key=lambda s: s["t_ns"]), slack_ns


def read_requests(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def level_checks(run_dir: Path) -> list[tuple[dict, BracketCheck, BracketCheck]]:
    """Per level of ``run_dir``'s result.json: (level json, output check, input check)."""
    raw = json.loads((run_dir / "result.json").read_text())
    scrapes, slack_ns = read_timeline(run_dir / "server_timeline.jsonl")
    reqs = [r for r in read_requests(run_dir / "requests.jsonl") if r.get("sent_ns") and r.get("end_ns")]
    out = []
    for lj in raw["levels"]:
        w = lj["window"]
        out.append((lj, *(bracket_check(k, reqs, scrapes, w["start_ns"], w["end_ns"], slack_ns)
                          for k in ("output", "input"))))
    return out


def main(run_dir: str) -> int:
    d = Path(run_dir)
    raw = json.loads((d / "result.json").read_text())
    si = raw["server"]
    eff = si.get("effective_config") or {}
    print("server:", si.get("engine"), si.get("version"), "model", si.get("model"),
          {k: eff.get(k) for k in ("n_ctx", "total_slots", "n_gpu_layers", "parallel", "build_info")})
    print(f"{'level':>14} {'out tok/s':>10} {'acc W':>7} {'J/tok':>8} {'tok/s/kW':>9} {'ttft p50':>9} {'tpot p50':>9}"
          f" {'gen':>7} {'prompt':>7} {'verdict':>8}")
    bad = 0
    checks = level_checks(d)
    for lj, gen, prm in checks:
        e = (lj.get("energy") or {}).get("accelerator") or {}
        t, la = lj["throughput"], lj["latency"]
        bad += gen.verdict not in ("ok", "low-ok")
        print(f"{lj['label']:>14} {t['output_tokens_per_s']:10.1f} {e.get('avg_power_w') or 0:7.1f} "
              f"{e.get('j_per_output_token') or 0:8.4f} {e.get('output_tokens_per_s_per_kw') or 0:9.0f} "
              f"{la['ttft_ms']['p50'] or 0:9.1f} {la['tpot_ms']['p50'] or 0:9.2f} {gen.verdict:>7} "
              f"{prm.verdict:>7} {lj['validity']['verdict']:>8}")
    for lj, *cs in checks:
        for c in cs:
            print(f"  {lj['label']} {c.kind}: counters {c.counter_delta:,} vs requests inside {c.inside_tokens:,}"
                  f" ({c.inside_requests}) .. +{c.straddle_tokens:,} straddling ({c.straddle_requests})"
                  f"{f', {c.unrecorded_streams} unrecorded streams running at the closing scrape' if c.unrecorded_streams else ''}"
                  f"; in window {lj['throughput'][c.kind + '_tokens']:,}: {c.verdict}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
