"""Summary table of a wattbench run against llama.cpp: per level the figures and whether the
run's output tokens equal llama.cpp's own generation counter between the bracketing scrapes.

    python3 benches/gpu/llamacpp_summary.py RUN_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from wattbench.results.rundir import load_result
from wattbench.server.metrics import ServerTimeline


def main(run_dir: str) -> int:
    d = Path(run_dir)
    raw = json.loads((d / "result.json").read_text())
    r = load_result(d)
    tl = ServerTimeline.from_jsonl(d / "server_timeline.jsonl")
    si = raw["server"]
    eff = si.get("effective_config") or {}
    print("server:", si.get("engine"), si.get("version"), "model", si.get("model"),
          {k: eff.get(k) for k in ("n_ctx", "total_slots", "n_gpu_layers", "parallel", "build_info")})
    print(f"{'level':>8} {'out tok/s':>10} {'acc W':>7} {'J/tok':>8} {'tok/s/kW':>9} {'ttft p50':>9} {'tpot p50':>9}"
          f" {'gen=ctr':>8} {'prompt=ctr':>10} {'verdict':>8}")
    bad = 0
    for lv, lj in zip(r.levels, raw["levels"]):
        e = (lj.get("energy") or {}).get("accelerator") or {}
        t, la = lj["throughput"], lj["latency"]
        before = [v for ts, v in tl.scrapes if ts <= lv.window.start_ns]
        after = [v for ts, v in tl.scrapes if ts >= lv.window.end_ns]
        gen = prm = None
        if before and after:
            gen = after[0]["generation_tokens"] - before[-1]["generation_tokens"] == lv.throughput.output_tokens
            prm = after[0]["prompt_tokens"] - before[-1]["prompt_tokens"] == lv.throughput.input_tokens
        bad += gen is not True
        print(f"{lj['label']:>8} {t['output_tokens_per_s']:10.1f} {e.get('avg_power_w') or 0:7.1f} "
              f"{e.get('j_per_output_token') or 0:8.4f} {e.get('output_tokens_per_s_per_kw') or 0:9.0f} "
              f"{la['ttft_ms']['p50'] or 0:9.1f} {la['tpot_ms']['p50'] or 0:9.2f} {str(gen):>8} {str(prm):>10} "
              f"{lj['validity']['verdict']:>8}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
