"""Trace replay timing: how closely an asyncio sender on this host keeps a trace's deadlines.

The replay's *logic* (offsets and gaps exactly the trace's, ``--speedup``) is tested
deterministically in ``tests/unit/workload/test_workload_trace.py``. How late a sender wakes for
a deadline depends on the host (other processes on the CPUs, cgroup quotas), so that figure is a
benchmark, reported with the machine's load, not a test assertion.

The sender sleeps to absolute deadlines on the monotonic clock (``perf_counter_ns``), spinning
for the last 2 ms, and 'sends' at each offset of a Mooncake-style trace; for every replay it
reports the worst absolute offset error and the worst gap error, and, for comparison, how late a
plain 2 ms ``time.sleep`` woke (the host's own wake-up lateness).

Run from the repository root::

    PYTHONPATH=src python benches/trace_replay_timing.py --replays 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from wattbench.workload.tokenizer import ApproxTokenizer  # noqa: E402
from wattbench.workload.trace import TraceWorkload  # noqa: E402

STAMPS_MS = (0, 3, 3, 17, 60, 61, 140, 141.5, 230, 400)


async def replay(offsets_s: list[float]) -> list[int]:
    """Sleep to absolute deadlines on the monotonic clock, then 'send'; ns after t0 per send."""
    t0 = time.perf_counter_ns() + 20_000_000
    sent = []
    for off in offsets_s:
        deadline = t0 + int(round(off * 1e9))
        while True:
            left = (deadline - time.perf_counter_ns()) / 1e9
            if left <= 0:
                break
            await asyncio.sleep(left - 0.002 if left > 0.003 else 0)
        sent.append(time.perf_counter_ns() - t0)
    return sent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replays", type=int, default=8)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "trace.jsonl"
        p.write_text("".join(json.dumps({"timestamp": ms, "input_length": 8, "output_length": 2}) + "\n"
                             for ms in STAMPS_MS))
        offsets = [s.arrival_s for s in TraceWorkload(p, ApproxTokenizer()).specs()]
    rows = []
    for _ in range(a.replays):
        sent = asyncio.run(replay(offsets))
        err = max(abs(s / 1e9 - o) for s, o in zip(sent, offsets))
        gap = max(abs((sent[i] - sent[i - 1]) / 1e9 - (offsets[i] - offsets[i - 1])) for i in range(1, len(sent)))
        over = 0.0
        for _ in range(10):
            t = time.perf_counter_ns()
            time.sleep(0.002)
            over = max(over, (time.perf_counter_ns() - t) / 1e9 - 0.002)
        rows.append((err * 1e3, gap * 1e3, over * 1e3))
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"] * 3
    print(f"loadavg {' '.join(load)}")
    print(f"{'replay':>6} {'offset_err_ms':>14} {'gap_err_ms':>11} {'sleep_overrun_ms':>17}")
    for i, (e, g, o) in enumerate(rows):
        print(f"{i:>6} {e:>14.3f} {g:>11.3f} {o:>17.3f}")
    print(f"best replay: worst error {min(max(e, g) for e, g, _ in rows):.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
