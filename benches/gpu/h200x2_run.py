"""Two GPUs (docs/validation.md part 5): one embedded-engine replica per GPU, benchmarked with the multi-target run
while NVML reads both GPUs. Writes the run under OUT and prints per-target and per-GPU figures.

Usage (device tool, nvidia-h200-x2): python benches/gpu/h200x2_run.py OUT_DIR
Reads only; never changes a GPU setting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from wattbench.engines.registry import launch
from wattbench.engines.presets import ensure_preset


def main() -> None:
    out = Path(sys.argv[1])
    ensure_preset("llama-1b")
    handles = []
    try:
        for g in (0, 1):  # the child inherits CUDA_VISIBLE_DEVICES at start: one GPU per replica
            os.environ["CUDA_VISIBLE_DEVICES"] = str(g)
            handles.append(launch("transformers", "llama-1b", "cuda", [], Path(f"/tmp/eng{g}")))
            print(f"replica {g}: {handles[-1].base_url}", flush=True)
        os.environ.pop("CUDA_VISIBLE_DEVICES")
        meter = subprocess.Popen([sys.executable, "benches/gpu/independent_meter.py", str(out / "meter2.jsonl")])
        args = [sys.executable, "-m", "wattbench", "run", "--concurrency", "32,128", "--num-requests", "128",
                "--input-tokens", "256", "--output-tokens", "128", "--sensor", "nvml", "--idle", "3",
                "--no-register", "--no-html", "--quiet", "--out", "/tmp/x2run"]
        for h in handles:
            args += ["--target", h.base_url]
        rc = subprocess.run(args).returncode
        meter.terminate()
        meter.wait()
        print("run rc", rc, flush=True)
        subprocess.run([sys.executable, "benches/gpu/crosscheck.py", "/tmp/x2run", str(out / "meter2.jsonl"),
                        "--json", str(out / "crosscheck2.json")])
        r = json.loads(Path("/tmp/x2run/result.json").read_text())
        (out / "x2-result.json").write_text(json.dumps(r))
        for lv in r["levels"]:
            acc = lv["energy"].get("accelerator", {})
            per_gpu = {d: v["counter_j"] for d, v in ((acc.get("cross_check") or {}).get("devices") or {}).items()}
            print(lv["label"], "total out tok/s %.0f" % lv["throughput"]["output_tokens_per_s"],
                  "acc J %.1f" % (acc.get("energy_j") or 0), "sum per-GPU J %.1f" % sum(per_gpu.values()),
                  "W %.1f" % (acc.get("avg_power_w") or 0), "tok/s/kW %.0f" % (acc.get("output_tokens_per_s_per_kw") or 0),
                  {t: round(v["throughput"]["output_tokens_per_s"]) for t, v in lv.get("per_target", {}).items()},
                  lv["validity"]["verdict"], flush=True)
    finally:
        for h in handles:
            h.stop()


if __name__ == "__main__":
    main()
