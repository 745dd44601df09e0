"""Aggregate request rate against the number of Ray load actors.

Starts the scripted streaming server (tests/fakes/stream_server.py) with tiny outputs and no
scripted delay, a local Ray instance, and runs one closed-loop level per actor count; prints one
JSON line per point (completed requests/s over the level window, per-actor client CPU) and a
single-process ``run_level`` baseline.

    PYTHONPATH=src:. python benches/ray_scaling.py --actors 1 2 4 --concurrency 16 --duration 6

What it measures is the whole loop on this machine: the load actors, the server and Ray share
the same cores, so on a small machine the figure saturates at what the machine can do, not at
what the actors could do on separate nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--duration", type=float, default=6.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--output-tokens", type=int, default=2)
    p.add_argument("--ray-cpus", type=int, default=4, help="logical CPUs of the local Ray instance")
    p.add_argument("--server-loop", choices=["asyncio", "uvloop"], default="uvloop")
    a = p.parse_args(argv)

    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from tests.fakes.distributed_servers import FixedRequests, scripted_server
    from wattbench.distributed.run import RayCluster
    from wattbench.load.level import run_level
    from wattbench.core.load_types import LevelSpec
    from wattbench.core.target import TargetSpec
    from wattbench.metrics.latency import summarize_level

    factory = FixedRequests(max_tokens=a.output_tokens, prompt="x")
    spec = LevelSpec(index=0, mode="concurrency", value=a.concurrency, duration_s=a.duration, warmup_s=a.warmup)
    rows = []
    with scripted_server("--ttft-ms", "0", "--itl-ms", "0", "--output-tokens", str(a.output_tokens),
                         "--loop", a.server_loop) as url:
        target = TargetSpec(base_url=url, model="fake-model")

        def baseline(when: str) -> None:
            out = run_level(LevelSpec(**{**spec.__dict__, "workers": 1}), target, factory)
            req, _, thr = summarize_level(out.records, out.start_ns, out.end_ns)
            rows.append({"actors": 0, "mode": f"single process (run_level, 1 worker), {when}",
                         "completed": req.completed, "requests_per_s": round(thr.requests_per_s, 1),
                         "client_cpu_pct": round(out.load.client_cpu_pct or 0, 1)})
            print(json.dumps(rows[-1]), flush=True)

        baseline("before")
        ray.init(num_cpus=a.ray_cpus, include_dashboard=False, log_to_driver=False)
        try:
            for n in a.actors:
                with RayCluster("auto", n_actors=n, actor_cpus=a.ray_cpus / max(a.actors)) as cl:
                    out = cl.run_level(spec, target, factory)
                req, _, thr = summarize_level(out.records, out.start_ns, out.end_ns)
                rows.append({"actors": n, "mode": "ray", "completed": req.completed,
                             "requests_per_s": round(thr.requests_per_s, 1),
                             "client_cpu_pct_per_actor": [round(x.cpu_pct or 0, 1) for x in out.load.actors],
                             "clock_uncertainty_us": [round(x.clock_uncertainty_ns / 1e3) for x in out.load.actors]})
                print(json.dumps(rows[-1]), flush=True)
        finally:
            ray.shutdown()
        baseline("after")
    print(json.dumps({"machine": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
                      "ray": ray.__version__, "date": time.strftime("%Y-%m-%d"), "args": vars(a)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
