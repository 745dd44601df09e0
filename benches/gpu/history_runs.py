"""Several wattbench runs against one engine start (or one start each), with the server's and the
GPU's state logged beside them: the driver of the history-dependence and repeatability studies
(docs/validation.md, "The server's history").

    python3 benches/gpu/history_runs.py --out DIR [--model llama-1b] [--device cuda] \
        [--common "--duration 12 --warmup 3s ..."] --run NAME="-c 16,32,64" [--run ...] \
        [--restart NAME ...] [--budget-s S] [--no-probe]

The engine is started with wattbench's own launcher (the same plan, flags and warm-up request as a
run without --target; on CUDA the tuned flags), through ``probe_python.sh`` unless ``--no-probe``
(``serve_probe.py``: CUDA graph captures, prefix-cache hits, allocator state, all on the monotonic
clock of the level windows). ``gpu_state_log.py`` polls NVML every 0.5 s for the whole call and
``nvidia-smi`` writes its own 0.5 s CSV beside it. Each ``--run`` is one ``wattbench run --target``
(``{tokenizer}`` in its arguments or ``--common`` becomes the served model's tokenizer directory)
against the server, in the order given; ``--restart NAME`` starts a fresh engine before that run.
A run that would start after ``--budget-s`` seconds is skipped (said in summary.json).

Writes under DIR: runs/NAME/ (each run directory, stdout, stderr), engine-K/server.log,
serve_probe.jsonl, gpu_state.jsonl, smi.csv, driver.json (the plan, each run's command, start, end,
rc and engine), summary.json and summary.txt (``summarize``: per level, the figures and the state
inside the level's window). Reads only; changes no GPU setting.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SMI_FIELDS = ("timestamp,memory.used,temperature.gpu,temperature.memory,clocks.sm,clocks.mem,power.draw,"
              "utilization.gpu,utilization.memory,clocks_event_reasons.active,pstate")


def _hub_layout(path: Path, repo_id: str) -> None:
    """Expose the model directory ``path`` as ``repo_id`` in ``$HF_HUB_CACHE`` (symlinks): transformers
    5.17's ``/v1/models`` lists only what a scan of the hub cache finds, never a directory given on
    the command line, and ``run --target`` checks that the model is listed (shared/engines.md)."""
    hub = Path(os.environ["HF_HUB_CACHE"])
    top = hub / ("models--" + repo_id.replace("/", "--"))
    snap = top / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True, exist_ok=True)
    for f in Path(path).iterdir():
        link = snap / f.name
        if not link.exists():
            link.symlink_to(f.resolve())
    (top / "refs").mkdir(exist_ok=True)
    (top / "refs" / "main").write_text("0" * 40)


def _start_engine(args, out: Path, k: int):
    """wattbench's own launcher (same argv, env, tuned flags, readiness and warm-up request), the
    model served by a hub id (``--serve-as``) instead of its directory."""
    from wattbench.engines.registry import get_engine
    from wattbench.engines.base import start

    eng = get_engine(args.engine)
    if args.serve_as:
        plan0 = eng.plan

        def plan(model, device, engine_args, host, port, scratch):
            p = plan0(model, device, engine_args, host, port, scratch)
            _hub_layout(Path(p.model_path), args.serve_as)
            p.argv = [args.serve_as if a == p.model_path else a for a in p.argv]
            p.served_model = args.serve_as
            p.env["HF_HUB_CACHE"] = os.environ["HF_HUB_CACHE"]
            return p

        eng.plan = plan
    d = out / f"engine-{k}"
    t0 = time.perf_counter_ns()
    h = start(eng, args.model, args.device, list(args.engine_arg), d, timeout_s=600.0)
    return h, {"index": k, "dir": str(d), "pid": h.pid, "base_url": h.base_url, "model": h.model,
               "start_t_ns": t0, "ready_t_ns": time.perf_counter_ns(), "argv": list(h.plan.argv),
               "tokenizer": h.plan.tokenizer_source()}


def _run_until(cmd: list[str], so, se, limit_s: float) -> int:
    """Run ``cmd``; past ``limit_s`` send SIGTERM (wattbench stops as on Ctrl-C and writes what it
    measured), then SIGKILL 20 s later. Returns the exit code (130 after a SIGTERM stop)."""
    p = subprocess.Popen(cmd, stdout=so, stderr=se)
    try:
        return p.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        try:
            return p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            return p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--engine", default="transformers")
    ap.add_argument("--model", default="llama-1b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--engine-arg", action="append", default=[])
    ap.add_argument("--common", default="--duration 12 --warmup 3s --input-tokens 256 --output-tokens 128 --idle 3")
    ap.add_argument("--run", action="append", default=[], help="NAME=ARGS (wattbench run arguments)")
    ap.add_argument("--restart", action="append", default=[], help="start a fresh engine before run NAME")
    ap.add_argument("--budget-s", type=float, default=None)
    ap.add_argument("--no-probe", action="store_true")
    ap.add_argument("--serve-as", default="wattbench/model",
                    help="hub id the model is served (and listed) as; '' serves the directory")
    ap.add_argument("--run-timeout-s", type=float, default=300)
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="stop a run (SIGTERM: it keeps what it measured) so the call ends by this many seconds")
    a = ap.parse_args()
    out = Path(a.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    t_call = time.perf_counter()
    if not os.environ.get("HF_HUB_CACHE"):
        os.environ["HF_HUB_CACHE"] = str(out / "hfcache")
    Path(os.environ["HF_HUB_CACHE"]).mkdir(parents=True, exist_ok=True)
    if not a.no_probe:
        os.environ["WATTBENCH_TRANSFORMERS_PYTHON"] = str(HERE / "probe_python.sh")
        os.environ["WB_PROBE_LOG"] = str(out / "serve_probe.jsonl")
        os.environ.setdefault("WB_PROBE_PYTHON", sys.executable)
    runs = []
    for spec in a.run:
        name, _, rest = spec.partition("=")
        runs.append((name.strip(), shlex.split(rest)))
    procs = [subprocess.Popen([sys.executable, str(HERE / "gpu_state_log.py"), str(out / "gpu_state.jsonl")])]
    try:
        procs.append(subprocess.Popen(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv", "-lms", "500",
                                       "-f", str(out / "smi.csv")]))
    except OSError:
        pass
    plan = {"anchor": {"t_ns": time.perf_counter_ns(), "wall_ns": time.time_ns()}, "args": vars(a),
            "engines": [], "runs": []}
    handle = None
    try:
        for name, extra in runs:
            elapsed = time.perf_counter() - t_call
            if a.budget_s is not None and elapsed > a.budget_s:
                plan["runs"].append({"name": name, "skipped": f"budget: {elapsed:.0f} s > {a.budget_s:.0f} s"})
                print(f"[driver] skip {name}: {elapsed:.0f} s elapsed", flush=True)
                continue
            if handle is None or name in a.restart:
                if handle is not None:
                    handle.stop()
                    plan["engines"][-1]["stop_t_ns"] = time.perf_counter_ns()
                handle, info = _start_engine(a, out, len(plan["engines"]))
                plan["engines"].append(info)
                print(f"[driver] engine {info['index']} ready in {(info['ready_t_ns'] - info['start_t_ns']) / 1e9:.1f} s "
                      f"pid {info['pid']}", flush=True)
            rdir = out / "runs" / name
            cmd = [sys.executable, "-m", "wattbench", "run", "--target", handle.base_url, "--model", handle.model,
                   *shlex.split(a.common), *extra, "--out", str(rdir), "--no-register", "--no-html", "--quiet"]
            tok = plan["engines"][-1].get("tokenizer") or ""
            cmd = [x.replace("{tokenizer}", tok) for x in cmd]
            rdir.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter_ns()
            limit = a.run_timeout_s
            if a.deadline_s is not None:
                limit = min(limit, a.deadline_s - (time.perf_counter() - t_call) - 20)
            with open(rdir / "stdout.txt", "w") as so, open(rdir / "stderr.txt", "w") as se:
                rc = _run_until(cmd, so, se, max(limit, 1.0))
            t1 = time.perf_counter_ns()
            plan["runs"].append({"name": name, "cmd": cmd, "rc": rc, "start_t_ns": t0, "end_t_ns": t1,
                                 "engine": plan["engines"][-1]["index"], "dir": str(rdir)})
            print(f"[driver] {name}: rc {rc} in {(t1 - t0) / 1e9:.0f} s", flush=True)
            (out / "driver.json").write_text(json.dumps(plan, indent=1))
    finally:
        if handle is not None:
            handle.stop()
            if plan["engines"]:
                plan["engines"][-1]["stop_t_ns"] = time.perf_counter_ns()
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        (out / "driver.json").write_text(json.dumps(plan, indent=1))
    from history_summary import summarize  # noqa: E402 (beside this file)

    summarize(out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
