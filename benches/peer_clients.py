"""How wattbench's client compares with the peers' clients: TTFT/ITL error against the server's log.

Runs wattbench, ``vllm bench serve``, NVIDIA AIPerf and GuideLLM (each from its own venv; a tool
whose executable is missing is skipped, and the output says so) against

- the scripted streaming server (``tests/fakes/stream_server.py --log-writes``), which logs on
  ``perf_counter_ns`` (CLOCK_MONOTONIC) when it read every request and when it wrote every token.
  Per request, **true TTFT** = first token written − request read, **true gaps** = the intervals
  between its token writes. A tool's **TTFT error** = the TTFT it reports − true TTFT (so it
  contains what any client's TTFT contains beyond the server's own: loopback both ways, the
  client's queueing and its late stamping); **ITL error** = each inter-token gap it reports −
  the server's gap between the same two token writes. Mean and p99 of both over the requests
  (gaps) of the level. The TTFT error is also split in two on the shared clock: the tool's start
  stamp -> the server's read of the request (send path and queueing, plus the server waiting for
  a CPU), and the server's first write -> the tool's first-token stamp (late arrival stamps);
- vLLM on the CPU (the tiny preset, dummy weights, ``/work/venv-vllm``): there is no per-request
  log, so the truth is vLLM's own ``/metrics`` histograms over the same requests
  (``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``: sum/count deltas),
  and the error is of the mean only (engine-measured TTFT excludes the API server's HTTP path,
  which every client also sees).

Requests are matched to the server's log by the ``X-Request-ID`` header (vllm bench serve with
``--request-id-prefix``, AIPerf's per-request UUID), by the first prompt word (wattbench: the
benchmark gives it tagged prompts) or, for GuideLLM (which sends no request id), by send order
(its k-th request start ↔ the server's k-th request read; exact for the mean, near-exact for the
p99 where two requests start within the same loop turn).

Client CPU: user+system CPU of the tool's whole process tree (its own ``/proc`` files, every 0.5 s)
within the load window (first request read to last token written by the server), as % of one
core; start-up (imports, tokenizer loading) is outside the window.

Every tool runs closed loop at the same concurrency with the same request count. Against the
scripted server, one warm-up request per stream where the tool has a warm-up (wattbench, vllm
``--num-warmups``, AIPerf ``--warmup-request-count``; GuideLLM's first requests are measured);
against vLLM none at all, so that the engine's histograms cover the same requests as the tool's
figures (``vllm bench serve`` adds one test request of its own before it starts); instead the
engine is warmed once, before the first tool, by an unmeasured level. Run from the repository root::

    PYTHONPATH=src:. python benches/peer_clients.py --streams 8,64,256,512 --json /tmp/peers.json
    PYTHONPATH=src:. python benches/peer_clients.py --target vllm-cpu --streams 8 --per-stream 12

Load held and figures, interleaved (``--rounds N``): each streams level is measured N times and
round k runs the tools in an order rotated by k, so a server (or host) that drifts does not favour
the tool that always runs first. Every run gets, from its own per-request stamps and by one
definition for every tool: output tokens per second (the requests' output tokens over first start
to last end), TPOT (mean over requests of (end − first token) / (output tokens − 1)), and the mean
number of requests in flight (start to last token) over the full window and over the steady window
(``accounting/steady.py``'s rule: the target first reached → the first end after the last send that
left the target in flight), and, against vLLM, the engine's view of the load: its requests'
end-to-end seconds (``vllm:e2e_request_latency_seconds``, arrival at the API server to the last
token) over the tool's window, by Little's law — blind to where each tool stamps its start
(``vllm bench serve`` and AIPerf before they ask for a connection, wattbench when the request's
bytes are written, so a pause of the client between the two counts as in flight for the first two
and not for wattbench); beside them each tool's own reported tok/s and TPOT where it reports them. ``wattbench-run`` is the
whole ``wattbench run`` command (its sampler and ``/metrics`` scraper threads, the record spool,
progress; ``--no-prime``, so the engine's histograms cover the measured requests only), where
``wattbench`` is one ``run_level`` in its own process. ``--report-load`` prints the per-round table
and the ratios to ``vllm bench serve`` of the same round::

    PYTHONPATH=src:. python benches/peer_clients.py --target vllm-cpu --streams 8 --min-requests 100 \
        --output-tokens 64 --tools wattbench-run,vllm,aiperf --rounds 4 --json benches/data/peer_clients/RUN.json.gz
    PYTHONPATH=src:. python benches/peer_clients.py --report-load benches/data/peer_clients/RUN.json.gz

At the same time (``--together``): each round runs every tool at once, each at ``--streams``
against the one server (which then holds their sum), the peers first and wattbench once the
server holds the peers' streams (``vllm:num_requests_running`` + ``waiting``); each tool's figures
are then read over the window they all held their load in (the overlap of their steady windows):
output tokens arriving in it per second (a request's tokens at start + TTFT and its own gaps),
TPOT over the requests that began streaming and ended in it, and the mean of its requests in
flight. Every figure of a round is read on one server state, so the ratios to ``vllm bench serve``
compare the clients, not the server's moves between runs. The engine's histograms then cover every
tool's requests (``server_*`` fields). Keep it to two tools on two cores: three overload them.

Tools: ``--vllm`` (env PEER_VLLM, default /work/venv-vllm/bin/vllm), ``--aiperf`` (PEER_AIPERF,
/work/venv-peers-aiperf/bin/aiperf), ``--guidellm`` (PEER_GUIDELLM,
/work/venv-peers-guidellm/bin/guidellm); wattbench runs from this checkout in its own process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

TOOLS = ("wattbench", "vllm", "aiperf", "guidellm", "wattbench-run")
DEFAULT_EXE = {
    "vllm": ("PEER_VLLM", "/work/venv-vllm/bin/vllm"),
    "aiperf": ("PEER_AIPERF", "/work/venv-peers-aiperf/bin/aiperf"),
    "guidellm": ("PEER_GUIDELLM", "/work/venv-peers-guidellm/bin/guidellm"),
}


# ------------------------------------------------------------------ CPU of a process tree


class TreeCpu:
    """Samples the user+system CPU seconds of a process and its descendants every ``period_s``.

    It reads only the tree's own ``/proc/PID/stat`` files and finds the descendants through
    ``/proc/PID/task/TID/children``: no scan of every process on the host. A 10 Hz sampler that
    scanned ``/proc`` (psutil's ``children(recursive=True)``) was itself the largest disturbance
    of the tools it watched beside vLLM on the 2-core machine: with it, wattbench's event loop
    waited for a CPU up to 1.5 s (loop-lag p99 110-1,495 ms), without it 1-5 ms
    (docs/benchmarks.md, "What stalls a client beside a CPU-bound server")."""

    _TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, pid: int, period_s: float = 0.5):
        self.root = pid
        self.period_s = period_s
        self.samples: list[tuple[int, float]] = []  # (perf_counter_ns, cpu seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tasks:
                try:
                    todo += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
                except (OSError, ValueError):
                    pass
        return out

    def _cpu_s(self, pid: int) -> float | None:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        # utime, stime, cutime, cstime (fields 14-17): a reaped child's time is in its parent's c*
        return sum(int(x) for x in f[11:15]) / self._TICK

    def _total(self) -> float:
        """The tree's CPU seconds now: each process's own and its reaped children's (``c*time``), so
        a child that ended and was reaped by its parent in the tree is counted once, in the parent."""
        return sum(c for c in map(self._cpu_s, self._tree()) if c is not None)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter_ns(), self._total()))
            self._stop.wait(self.period_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def pct_between(self, t0_ns: int, t1_ns: int) -> float | None:
        """CPU used between two instants (linear between samples), % of one core."""
        s = self.samples
        if len(s) < 2 or t1_ns <= t0_ns:
            return None

        def at(t: int) -> float:
            if t <= s[0][0]:
                return s[0][1]
            for (ta, ca), (tb, cb) in zip(s, s[1:]):
                if ta <= t <= tb:
                    return ca + (cb - ca) * (t - ta) / max(1, tb - ta)
            return s[-1][1]

        return 100.0 * (at(t1_ns) - at(t0_ns)) / ((t1_ns - t0_ns) / 1e9)


def run_tool(cmd: list[str], log: Path, env: dict | None = None, timeout_s: float = 600) -> tuple[int, TreeCpu, float]:
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=log.parent)
        cpu = TreeCpu(proc.pid)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        cpu.stop()
    return rc, cpu, time.perf_counter() - t0


# ------------------------------------------------------------------ per-tool runners
# Each returns a list of {"key": str | None, "start_ns": int | None (perf_counter), "ttft_ms",
# "gaps_ms": list | None (per content gap), "itl_ms": per-request ITL as the tool defines it}.


def wattbench_child(a) -> int:
    """Runs inside the wattbench subprocess: one closed-loop level, tagged prompts, records out."""
    from wattbench.load.level import run_level
    from wattbench.core.load_types import LevelSpec
    from wattbench.core.target import TargetSpec
    from wattbench.workload.base import RequestSpec

    words = " ".join(["token"] * max(0, a.input_tokens - 1))

    def req(i: int) -> RequestSpec:
        return RequestSpec(prompt=f"wb{i} {words}", max_tokens=a.output_tokens, input_tokens=a.input_tokens)

    target = TargetSpec(base_url=a.base_url, model=a.model, extra_body=json.loads(a.extra_body))
    spec = LevelSpec(index=0, mode="concurrency", value=a.streams, num_requests=a.num_requests,
                     warmup_requests=a.streams if a.warmup else 0, workers=a.workers or None)
    out = run_level(spec, target, req)
    rows = []
    for r in out.records:
        if r.warmup or not r.ok or r.first_token_ns is None:
            continue
        ch = r.chunk_ns
        rows.append({"key": f"wb{r.id}", "start_ns": r.sent_ns, "end_ns": r.end_ns, "out_tokens": r.output_tokens,
                     "ttft_ms": (r.first_token_ns - r.sent_ns) / 1e6,
                     "gaps_ms": [(b - x) / 1e6 for x, b in zip(ch, ch[1:])],
                     "itl_ms": ((ch[-1] - ch[0]) / (len(ch) - 1) / 1e6) if len(ch) > 1 else None})
    load = out.load
    Path(a.child_out).write_text(json.dumps({
        "rows": rows, "failed": sum(1 for r in out.records if not r.warmup and not r.ok),
        "workers": load.workers, "saturated": load.saturated, "saturation_reasons": load.saturation_reasons,
        "loop_lag_p99_ms": load.client_loop_lag_ms.p99, "loop_lag_max_ms": load.client_loop_lag_ms.max,
        "client_cpu_pct": load.client_cpu_pct,
    }))
    return 0


def run_wattbench(ctx, conc, n, work: Path):
    out = work / "wattbench.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--wattbench-child", "--child-out", str(out),
           "--base-url", ctx["base_url"] + "/v1", "--model", ctx["model"], "--streams", str(conc),
           "--num-requests", str(n), "--input-tokens", str(ctx["input_tokens"]),
           "--output-tokens", str(ctx["output_tokens"]), "--extra-body", json.dumps(ctx["extra_body"]),
           "--workers", str(ctx["wattbench_workers"]), *(["--warmup"] if ctx["warmup"] else [])]
    # this checkout first, then whatever the caller's path held (a --target'ed site of wheels on the device)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src"), str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    rc, cpu, wall = run_tool(cmd, work / "wattbench.log", env)
    if rc != 0 or not out.exists():
        return None, cpu, wall, f"exit {rc}: " + (work / "wattbench.log").read_text()[-400:]
    data = json.loads(out.read_text())
    extra = {k: data[k] for k in ("workers", "saturated", "saturation_reasons", "loop_lag_p99_ms", "loop_lag_max_ms",
                                  "client_cpu_pct", "failed")}
    return data["rows"], cpu, wall, extra


def run_wattbench_run(ctx, conc, n, work: Path):
    """The whole ``wattbench run`` command of this checkout: one closed-loop level, its sampler (a
    declared meter: no meter on this machine) and ``/metrics`` scraper, the record spool, plain
    progress lines; ``--keep-chunks`` for the per-gap ITL; its rows from ``requests.jsonl``."""
    out = work / "wattbench-run"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "wattbench", "run", "--target", ctx["base_url"] + "/v1", "--model", ctx["model"],
           "-c", str(conc), "-n", str(n), "--input-tokens", str(ctx["input_tokens"]),
           "--output-tokens", str(ctx["output_tokens"]), "--tokenizer", ctx["tokenizer"],
           "--extra-body", json.dumps(ctx["extra_body"]), "--sensor", "const:accelerator=100", "--idle", "0",
           "--no-prime", "--no-register", "--no-html", "--keep-chunks", "--out", str(out),
           *(["--warmup", str(conc)] if ctx["warmup"] else [])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    rc, cpu, wall = run_tool(cmd, work / "wattbench-run.log", env)
    if rc != 0 or not (out / "result.json").exists():
        return None, cpu, wall, f"exit {rc}: " + (work / "wattbench-run.log").read_text()[-400:]
    res = json.loads((out / "result.json").read_text())
    lv = res["levels"][0]
    rows, failed = [], 0
    for line in (out / "requests.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("warmup"):
            continue
        if not r.get("ok") or r.get("first_token_ns") is None:
            failed += 1
            continue
        ch = r.get("chunk_ns") or []
        # a request ends at its last token, as wattbench's own figures and vllm bench serve's latency end it
        # (the stream's end, after the usage chunk and [DONE], is ~1 ms later on the CPU server)
        end = r.get("last_token_ns") or r["end_ns"]
        rows.append({"key": None, "start_ns": r["sent_ns"], "end_ns": end, "out_tokens": r.get("output_tokens"),
                     "ttft_ms": (r["first_token_ns"] - r["sent_ns"]) / 1e6,
                     "gaps_ms": [(b - x) / 1e6 for x, b in zip(ch, ch[1:])],
                     "itl_ms": ((ch[-1] - ch[0]) / (len(ch) - 1) / 1e6) if len(ch) > 1 else None})
    load = lv["load"]
    lag = load.get("client_loop_lag_ms") or {}
    return rows, cpu, wall, {
        "failed": failed, "workers": load.get("workers"), "saturated": load.get("saturated"),
        "saturation_reasons": load.get("saturation_reasons"), "loop_lag_p99_ms": lag.get("p99"),
        "loop_lag_max_ms": lag.get("max"), "client_cpu_pct": load.get("client_cpu_pct"),
        "own_out_tok_s": (lv.get("throughput") or {}).get("output_tokens_per_s"),
        "own_tpot_ms": ((lv.get("latency") or {}).get("tpot_ms") or {}).get("mean"),
        "own_mean_in_flight": load.get("mean_in_flight")}


def run_vllm(ctx, conc, n, work: Path):
    res = work / "vllm"
    cmd = [ctx["exe"]["vllm"], "bench", "serve", "--backend", "openai", "--base-url", ctx["base_url"],
           "--endpoint", "/v1/completions", "--model", ctx["model"], "--tokenizer", ctx["tokenizer"],
           "--dataset-name", "random", "--random-input-len", str(ctx["input_tokens"]),
           "--random-output-len", str(ctx["output_tokens"]), "--num-prompts", str(n),
           "--max-concurrency", str(conc), "--request-rate", "inf", "--ignore-eos",
           "--num-warmups", str(conc if ctx["warmup"] else 0),
           "--save-result", "--save-detailed", "--result-dir", str(res), "--result-filename", "r.json",
           "--request-id-prefix", "vb-", "--disable-tqdm"]
    rc, cpu, wall = run_tool(cmd, work / "vllm.log")
    f = res / "r.json"
    if rc != 0 or not f.exists():
        return None, cpu, wall, f"exit {rc}: " + (work / "vllm.log").read_text()[-400:]
    d = json.loads(f.read_text())
    rows = []
    for i, (ttft, itls, st, err) in enumerate(zip(d["ttfts"], d["itls"], d["start_times"], d["errors"])):
        if err or not ttft:
            continue
        lat = d["latencies"][i]
        rows.append({"key": f"vb-{i}", "start_ns": int(st * 1e9), "end_ns": int((st + lat) * 1e9),
                     "out_tokens": (d.get("output_lens") or [None] * (i + 1))[i], "ttft_ms": ttft * 1e3,
                     "gaps_ms": [x * 1e3 for x in itls],
                     "itl_ms": (sum(itls) / len(itls) * 1e3) if itls else None})
    return rows, cpu, wall, {"failed": d.get("failed"), "own_out_tok_s": d.get("output_throughput"),
                             "own_tpot_ms": d.get("mean_tpot_ms")}


def run_aiperf(ctx, conc, n, work: Path):
    res = work / "aiperf"
    extra = [x for k, v in ctx["extra_body"].items() for x in ("--extra-inputs", f"{k}:{json.dumps(v)}")]
    cmd = [ctx["exe"]["aiperf"], "profile", "--model", ctx["model"], "--url", ctx["base_url"],
           "--endpoint-type", "completions", "--streaming", "--tokenizer", ctx["tokenizer"],
           "--prompt-input-tokens-mean", str(ctx["input_tokens"]), "--prompt-input-tokens-stddev", "0",
           "--prompt-output-tokens-mean", str(ctx["output_tokens"]), "--concurrency", str(conc),
           "--request-count", str(n), *(["--warmup-request-count", str(conc)] if ctx["warmup"] else []),
           "--use-server-token-count",
           "--output-artifact-dir", str(res), "--ui-type", "none", *extra]
    rc, cpu, wall = run_tool(cmd, work / "aiperf.log")
    f = res / "profile_export.jsonl"
    if rc != 0 or not f.exists():
        return None, cpu, wall, f"exit {rc}: " + (work / "aiperf.log").read_text()[-400:]
    rows, failed = [], 0
    for line in f.read_text().splitlines():
        rec = json.loads(line)
        md, m = rec.get("metadata", {}), rec.get("metrics", {})
        if md.get("benchmark_phase", "profiling") != "profiling":
            continue
        if rec.get("error") or "time_to_first_token" not in m:
            failed += 1
            continue
        gaps = m.get("inter_chunk_latency", {}).get("value")
        itl = m.get("inter_token_latency", {}).get("value")
        off = ctx["wall_minus_mono_ns"]
        osl = (m.get("output_sequence_length") or m.get("output_token_count") or {}).get("value")
        rows.append({"key": md.get("x_request_id"), "start_ns": md["request_start_ns"] - off,
                     "end_ns": md["request_end_ns"] - off, "out_tokens": osl, "ttft_ms": m["time_to_first_token"]["value"],
                     "gaps_ms": gaps, "itl_ms": itl})
    own: dict = {}
    agg = res / "profile_export_aiperf.json"
    if agg.exists():
        a = json.loads(agg.read_text())
        a = a.get("records", a)  # the aggregate figures, at the top or under "records"
        own = {"own_out_tok_s": (a.get("output_token_throughput") or {}).get("avg"),
               "own_tpot_ms": (a.get("inter_token_latency") or {}).get("avg")}
    return rows, cpu, wall, {"failed": failed, **own}


def run_guidellm(ctx, conc, n, work: Path):
    res = work / "guidellm" / "benchmarks.json"
    scenario = {"spec": {
        "backend": {"kind": "openai_http", "target": ctx["base_url"], "model": ctx["model"],
                    "request_format": "/v1/completions"},
        "profile": {"kind": "concurrent", "streams": conc},
        "tokenizer": {"kind": "huggingface_auto", "model": ctx["tokenizer"]},
        "data": [{"kind": "synthetic_text", "prompt_tokens": ctx["input_tokens"],
                  "output_tokens": ctx["output_tokens"]}],
        "constraints": [{"kind": "max_requests", "count": n}],
        "outputs": [{"kind": "json", "path": str(res)}],
    }, "benchmarks": [None]}
    sc = work / "guidellm-scenario.json"
    sc.write_text(json.dumps(scenario))
    cmd = [ctx["exe"]["guidellm"], "run", "--scenario", str(sc), "--disable-console-interactive"]
    rc, cpu, wall = run_tool(cmd, work / "guidellm.log")
    if rc != 0 or not res.exists():
        return None, cpu, wall, f"exit {rc}: " + (work / "guidellm.log").read_text()[-400:]
    d = json.loads(res.read_text())
    reqs = d["benchmarks"][0]["requests"]
    off = ctx["wall_minus_mono_ns"]
    rows = []
    for r in reqs["successful"]:
        t = r["info"]["timings"]
        if t.get("first_token_iteration") is None:
            continue
        ntok = t.get("token_iterations") or 0
        itl = ((t["last_token_iteration"] - t["first_token_iteration"]) / (ntok - 1) * 1e3) if ntok > 1 else None
        rows.append({"key": None, "start_ns": int(t["request_start"] * 1e9) - off,
                     "end_ns": int(t["request_end"] * 1e9) - off,
                     "ttft_ms": (t["first_token_iteration"] - t["request_start"]) * 1e3, "gaps_ms": None,
                     "itl_ms": itl})
    return rows, cpu, wall, {"failed": len(reqs.get("errored") or []) + len(reqs.get("incomplete") or [])}


RUNNERS = {"wattbench": run_wattbench, "wattbench-run": run_wattbench_run, "vllm": run_vllm, "aiperf": run_aiperf,
           "guidellm": run_guidellm}


# ------------------------------------------------------------------ truth and errors


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    import numpy as np

    return float(np.percentile(np.asarray(xs, dtype=float), q))


def mean(xs) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def pair_rows(rows: list[dict], writes: dict[str, list[int]]) -> list[tuple[dict, list[int]]]:
    """Match each tool request to the server's record of it: by key, else by send order."""
    if rows and all(r["key"] is not None for r in rows):
        return [(r, writes[r["key"]]) for r in rows if r["key"] in writes]
    srv = sorted(writes.values(), key=lambda w: w[0])
    out, j = [], 0
    for r in sorted(rows, key=lambda r: r["start_ns"]):
        while j < len(srv) and srv[j][0] < r["start_ns"] - 2_000_000:  # a read before this send: not ours
            j += 1
        if j >= len(srv):
            break
        out.append((r, srv[j]))
        j += 1
    return out


def errors_vs_log(rows: list[dict], writes: dict[str, list[int]]) -> dict:
    pairs = pair_rows(rows, writes)
    for r, w in pairs:  # kept beside the tool's figures in the raw data
        r["true_ttft_ms"] = (w[1] - w[0]) / 1e6
        r["true_gaps_ms"] = [(b - a) / 1e6 for a, b in zip(w[1:], w[2:])]
    ttft_err = [r["ttft_ms"] - (w[1] - w[0]) / 1e6 for r, w in pairs]
    # The same error in two parts, on the shared clock: the tool's start stamp -> the server read
    # the request (the client's send path, plus the server process waiting for a CPU), and the
    # server wrote the first token -> the tool's first-token stamp (how late the client stamps
    # an arrival). They add up to the TTFT error.
    timed = [(r, w) for r, w in pairs if r.get("start_ns")]
    send_ms = [(w[0] - r["start_ns"]) / 1e6 for r, w in timed]
    stamp_ms = [(r["start_ns"] + r["ttft_ms"] * 1e6 - w[1]) / 1e6 for r, w in timed]
    gap_err, itl_err, true_itl, tool_itl = [], [], [], []
    for r, w in pairs:
        true_gaps = [(b - a) / 1e6 for a, b in zip(w[1:], w[2:])]
        if not true_gaps:
            continue
        tmean = sum(true_gaps) / len(true_gaps)
        if r["gaps_ms"]:
            # the content gaps only: vllm bench serve also times the finish/usage event after the
            # last token (a ~0 ms gap on this server), which is not an inter-token interval
            gap_err += [g - t for g, t in zip(r["gaps_ms"], true_gaps)]
        if r["itl_ms"] is not None:
            itl_err.append(r["itl_ms"] - tmean)
            true_itl.append(tmean)
            tool_itl.append(r["itl_ms"])
    per_gap = bool(gap_err)
    errs = gap_err if per_gap else itl_err
    return {
        "matched": len(pairs), "reported": len(rows),
        "true_ttft_ms_mean": mean((w[1] - w[0]) / 1e6 for _, w in pairs),
        "ttft_ms_mean": mean(r["ttft_ms"] for r, _ in pairs),
        "ttft_err_ms_mean": mean(ttft_err), "ttft_err_ms_p50": pct(ttft_err, 50), "ttft_err_ms_p99": pct(ttft_err, 99),
        "start_to_server_read_ms_mean": mean(send_ms), "start_to_server_read_ms_p99": pct(send_ms, 99),
        "first_token_stamp_late_ms_mean": mean(stamp_ms), "first_token_stamp_late_ms_p99": pct(stamp_ms, 99),
        "itl_err_ms_mean": mean(errs), "itl_err_ms_p99": pct(errs, 99),
        "itl_err_basis": "per gap" if per_gap else "per request mean",
        "itl_reported_ms_mean": mean(tool_itl), "true_itl_ms_mean": mean(true_itl),
    }


def scrape_vllm(base_url: str) -> dict[str, float]:
    import urllib.request

    text = urllib.request.urlopen(base_url + "/metrics", timeout=30).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(vllm:(?:time_to_first_token|inter_token_latency|time_per_output_token|e2e_request_latency)"
                     r"_seconds_(?:sum|count))"
                     r"(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def running_requests(base_url: str) -> float:
    """vLLM's requests running and waiting now (``/metrics``), 0 where it cannot say."""
    import urllib.request

    try:
        text = urllib.request.urlopen(base_url + "/metrics", timeout=5).read().decode()
    except OSError:
        return 0.0
    return sum(float(m.group(1)) for m in re.finditer(
        r"^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$", text, re.M))


def errors_vs_vllm_metrics(rows: list[dict], before: dict, after: dict) -> dict:
    def delta_mean(name: str) -> float | None:
        s, c = f"vllm:{name}_seconds_sum", f"vllm:{name}_seconds_count"
        if c not in after:
            return None
        dc = after[c] - before.get(c, 0.0)
        return (after[s] - before.get(s, 0.0)) / dc * 1e3 if dc > 0 else None

    eng_ttft = delta_mean("time_to_first_token")
    eng_itl = delta_mean("inter_token_latency") or delta_mean("time_per_output_token")
    ttft = mean(r["ttft_ms"] for r in rows)
    # the engine's own view of the load: its requests' end-to-end seconds (arrival at the API
    # server to the last token) over the tool's window, first start to last end (Little's law): one
    # definition for every tool, blind to where each tool stamps its start
    starts = [r["start_ns"] for r in rows if r.get("start_ns")]
    ends = [r["end_ns"] for r in rows if r.get("end_ns")]
    e2e = "vllm:e2e_request_latency_seconds_sum"
    engine_in_flight = ((after[e2e] - before.get(e2e, 0.0)) / ((max(ends) - min(starts)) / 1e9)
                        if e2e in after and starts and ends and max(ends) > min(starts) else None)
    gaps = [g for r in rows for g in (r["gaps_ms"] or [])]
    itl = mean(gaps) if gaps else mean(r["itl_ms"] for r in rows if r["itl_ms"] is not None)
    return {
        "matched": None, "reported": len(rows), "true_ttft_ms_mean": eng_ttft, "ttft_ms_mean": ttft,
        "ttft_err_ms_mean": (ttft - eng_ttft) if ttft is not None and eng_ttft is not None else None,
        "ttft_err_ms_p50": None, "ttft_err_ms_p99": None,
        "itl_err_ms_mean": (itl - eng_itl) if itl is not None and eng_itl is not None else None,
        "itl_err_ms_p99": None, "itl_err_basis": "mean vs engine histogram", "itl_reported_ms_mean": itl,
        "true_itl_ms_mean": eng_itl, "engine_in_flight": engine_in_flight,
        "engine_requests": after.get("vllm:time_to_first_token_seconds_count", 0.0)
        - before.get("vllm:time_to_first_token_seconds_count", 0.0),
    }


# ------------------------------------------------------------------ orchestration


def wall_minus_mono_ns() -> int:
    best = None
    for _ in range(50):
        a = time.perf_counter_ns()
        w = time.time_ns()
        b = time.perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, w - (a + b) // 2)
    return best[1]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def one(ctx, tool: str, conc: int, n: int, work: Path, truth) -> dict:
    row = {"target": ctx["target"], "tool": tool, "streams": conc, "requests": n, "loadavg_before": loadavg()}
    before = truth("begin")
    rows, cpu, wall, extra = RUNNERS[tool](ctx, conc, n, work)
    row["loadavg_after"] = loadavg()
    row["wall_s"] = round(wall, 2)
    if rows is None:
        row["error"] = extra
        return row
    row.update(extra)
    starts = [r["start_ns"] for r in rows if r.get("start_ns")]
    ends = [r["end_ns"] for r in rows if r.get("end_ns")]
    row["client_cpu_pct"] = cpu.pct_between(min(starts), max(ends)) if starts and ends else None
    row["tool_reported_cpu_pct"] = extra.get("client_cpu_pct") if isinstance(extra, dict) else None
    row.update(truth("end", rows=rows, before=before))
    row.update(load_figures(rows, conc))
    row["per_request"] = rows
    return row


def load_figures(rows: list[dict], conc: int) -> dict:
    """The load a run held and what it read, by one definition for every tool (module doc)."""
    import numpy as np

    from wattbench.accounting.steady import steady_window_ns

    timed = [r for r in rows if r.get("start_ns") and r.get("end_ns")]
    if not timed:
        return {}
    start = np.array([r["start_ns"] for r in timed], dtype=np.int64)
    end = np.array([r["end_ns"] for r in timed], dtype=np.int64)

    def held(a: int, b: int) -> float | None:
        d = np.minimum(end, b) - np.maximum(start, a)
        return float(d[d > 0].sum()) / (b - a) if b > a else None

    a, b = int(start.min()), int(end.max())
    sw = steady_window_ns(start, end, "concurrency", conc, start_ns=a)
    out_tok = [r.get("out_tokens") for r in timed]
    tpots = [((r["end_ns"] - r["start_ns"]) / 1e6 - r["ttft_ms"]) / (r["out_tokens"] - 1) for r in timed
             if r.get("out_tokens") and r["out_tokens"] > 1 and r.get("ttft_ms") is not None]
    return {
        "out_tok_s": sum(out_tok) / ((b - a) / 1e9) if all(x is not None for x in out_tok) and b > a else None,
        "tpot_ms_mean": mean(tpots),
        "in_flight_full": held(a, b),
        "in_flight_steady": held(sw.start_ns, sw.end_ns) if sw is not None else None,
        "steady_s": (sw.end_ns - sw.start_ns) / 1e9 if sw is not None else None,
    }


def token_times_ns(r: dict) -> list[int]:
    """A request's output token arrival times: the first at start + TTFT, the rest after the tool's
    own gaps where it gave one per token, else spread evenly to the end."""
    n = r.get("out_tokens") or 0
    if not n or r.get("ttft_ms") is None:
        return []
    first = r["start_ns"] + int(r["ttft_ms"] * 1e6)
    gaps = r.get("gaps_ms") or []
    if len(gaps) == n - 1:
        out, t = [first], float(first)
        for g in gaps:
            t += g * 1e6
            out.append(int(t))
        return out
    step = (r["end_ns"] - first) / (n - 1) if n > 1 else 0
    return [int(first + i * step) for i in range(n)]


def together_figures(by_tool: dict[str, list[dict]], conc: int) -> tuple[dict[str, dict], tuple[int, int] | None]:
    """Tools measured at the same time on one server: each tool's figures over the one window they
    all held their load in (the overlap of their steady windows), so every tool sees the same
    server state and the figures are comparable pair by pair. Per tool: output tokens arriving in
    the window per second, TPOT over the requests that began streaming and ended in it, and the
    mean number of its requests in flight over it."""
    import numpy as np

    from wattbench.accounting.steady import steady_window_ns

    wins = []
    for rows in by_tool.values():
        timed = [r for r in rows if r.get("start_ns") and r.get("end_ns")]
        if not timed:
            return {}, None
        start = np.array([r["start_ns"] for r in timed], dtype=np.int64)
        end = np.array([r["end_ns"] for r in timed], dtype=np.int64)
        sw = steady_window_ns(start, end, "concurrency", conc, start_ns=int(start.min()))
        if sw is None:
            return {}, None
        wins.append((sw.start_ns, sw.end_ns))
    a, b = max(w[0] for w in wins), min(w[1] for w in wins)
    if b <= a:
        return {}, None
    out = {}
    for tool, rows in by_tool.items():
        toks = sum(1 for r in rows if r.get("start_ns") and r.get("end_ns") for t in token_times_ns(r) if a <= t < b)
        tpots = [((r["end_ns"] - r["start_ns"]) / 1e6 - r["ttft_ms"]) / (r["out_tokens"] - 1) for r in rows
                 if r.get("out_tokens") and r["out_tokens"] > 1 and r.get("ttft_ms") is not None
                 and r["start_ns"] + r["ttft_ms"] * 1e6 >= a and r["end_ns"] <= b]
        held = sum(max(0, min(r["end_ns"], b) - max(r["start_ns"], a)) for r in rows
                   if r.get("start_ns") and r.get("end_ns"))
        out[tool] = {"out_tok_s": toks / ((b - a) / 1e9), "tpot_ms_mean": mean(tpots), "tpot_requests": len(tpots),
                     "in_flight_steady": held / (b - a)}
    return out, (a, b)


def run_together(ctx, tools: list[str], conc: int, n: int, work_root: Path, rnd: int, truth) -> list[dict]:
    """One round of ``--together``: every tool at ``conc`` streams against the server at the same
    time (the server holds ``len(tools) × conc``); then each tool's figures over the common window."""
    before = truth("begin")
    rows_by: dict[str, dict] = {}

    def go(tool: str) -> None:
        work = work_root / f"{ctx['target']}-{conc}-{tool}-r{rnd}-together"
        work.mkdir(parents=True, exist_ok=True)
        row = {"target": ctx["target"], "tool": tool, "streams": conc, "requests": n, "loadavg_before": loadavg()}
        rows, cpu, wall, extra = RUNNERS[tool](ctx, conc, n, work)
        row["loadavg_after"], row["wall_s"] = loadavg(), round(wall, 2)
        if rows is None:
            row["error"] = extra
        else:
            row.update(extra)
            starts = [r["start_ns"] for r in rows if r.get("start_ns")]
            ends = [r["end_ns"] for r in rows if r.get("end_ns")]
            row["client_cpu_pct"] = cpu.pct_between(min(starts), max(ends)) if starts and ends else None
            row["tool_reported_cpu_pct"] = extra.get("client_cpu_pct") if isinstance(extra, dict) else None
            own = load_figures(rows, conc)  # over the tool's own windows, kept beside
            row.update({(f"own_window_{k}" if k in ("out_tok_s", "tpot_ms_mean", "in_flight_steady") else k): v
                        for k, v in own.items()})
            row["per_request"] = rows
        rows_by[tool] = row

    # The peers' clients take 10-30 s to start sending here (they import torch, load a tokenizer and
    # send a test request), wattbench 2-3 s: the peers go first, and wattbench starts when the server
    # holds their load, so that the common window is most of every run.
    first = [t for t in tools if not t.startswith("wattbench")]
    threads = {t: threading.Thread(target=go, args=(t,)) for t in tools}
    for t in first:
        threads[t].start()
    if first and ctx["target"] != "scripted":
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and running_requests(ctx["base_url"]) < conc * len(first):
            time.sleep(0.5)
    for t in tools:
        if t not in first:
            threads[t].start()
    for th in threads.values():
        th.join()
    ok = {t: r for t, r in rows_by.items() if "error" not in r}
    figs, win = together_figures({t: r["per_request"] for t, r in ok.items()}, conc)
    shared = truth("end", rows=[x for r in ok.values() for x in r["per_request"]], before=before)
    out = []
    for tool in tools:
        row = rows_by[tool]
        row.update({"round": rnd, "together": True, "window_s": (win[1] - win[0]) / 1e9 if win else None})
        if "error" not in row:
            row.update(figs.get(tool, {}))
            # the engine's figures cover every tool's requests of the round: the server's, not one tool's
            row.update({f"server_{k}": v for k, v in shared.items() if k in ("true_ttft_ms_mean", "true_itl_ms_mean",
                                                                              "engine_in_flight", "engine_requests")})
        out.append(row)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", choices=["scripted", "vllm-cpu"], default="scripted")
    p.add_argument("--streams", default="8,64,256,512")
    p.add_argument("--per-stream", type=int, default=2, help="measured requests per stream")
    p.add_argument("--min-requests", type=int, default=64, help="at least this many measured requests per level")
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=50.0)
    p.add_argument("--input-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=32)
    p.add_argument("--wattbench-workers", type=int, default=0, help="0 = wattbench's auto rule")
    for t, (env, default) in DEFAULT_EXE.items():
        p.add_argument(f"--{t}", default=os.environ.get(env, default), help=f"{t} executable (env {env})")
    p.add_argument("--json", default=None, help="write every run (per-request rows included) here")
    p.add_argument("--keep-work", default=None, help="keep the tools' output files in this folder")
    # the wattbench child process
    p.add_argument("--wattbench-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    p.add_argument("--base-url", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--num-requests", type=int, help=argparse.SUPPRESS)
    p.add_argument("--extra-body", default="{}", help=argparse.SUPPRESS)
    p.add_argument("--workers", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--warmup", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--report", nargs="+", metavar="JSON", help="print a Markdown table of earlier --json runs")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure each streams level this many times, the tools' order rotated each round")
    p.add_argument("--together", action="store_true",
                   help="each round, run every tool at the same time (each at --streams) and compare them over "
                        "the window they all held their load in: one server state for all")
    p.add_argument("--report-load", nargs="+", metavar="JSON",
                   help="print the load held and the figures of earlier --json runs, per round")
    a = p.parse_args(argv)
    if a.report:
        print(report(a.report))
        return 0
    if a.report_load:
        print(report_load(a.report_load))
        return 0
    if a.wattbench_child:
        a.streams = int(a.streams)
        return wattbench_child(a)

    from wattbench.engines.presets import ensure_preset

    tools = [t for t in a.tools.split(",") if t]
    bad = [t for t in tools if t not in TOOLS]
    if bad:
        print(f"unknown tool(s) {', '.join(bad)}: choose from {', '.join(TOOLS)}", file=sys.stderr)
        return 2
    exe = {}
    for t in tools:
        if t.startswith("wattbench"):
            continue
        path = getattr(a, t)
        if not (path and (Path(path).is_file() or shutil.which(path))):
            print(f"SKIP {t}: no executable at {path!r} (set --{t} or ${DEFAULT_EXE[t][0]})", flush=True)
            continue
        exe[t] = path
    tools = [t for t in tools if t.startswith("wattbench") or t in exe]
    streams = [int(x) for x in a.streams.split(",")]
    work_root = Path(a.keep_work or tempfile.mkdtemp(prefix="peer-clients-"))
    work_root.mkdir(parents=True, exist_ok=True)
    ctx = {"target": a.target, "exe": exe, "tokenizer": str(ensure_preset("tiny", weights=False)),
           "input_tokens": a.input_tokens, "output_tokens": a.output_tokens,
           "wattbench_workers": a.wattbench_workers, "wall_minus_mono_ns": wall_minus_mono_ns(),
           # vLLM: no warm-up anywhere, so the engine's histograms cover exactly the tool's requests
           "warmup": a.target == "scripted"}
    results = []
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host_cpus": os.cpu_count(),
            "python": platform.python_version(), "args": {k: v for k, v in vars(a).items() if v is not None},
            "loadavg_start": loadavg()}
    if a.target == "scripted":
        from tests.fakes.stream_server_proc import stream_server

        cm = stream_server("--ttft-ms", str(a.ttft_ms), "--itl-ms", str(a.itl_ms), "--output-tokens",
                           str(a.output_tokens), "--token-text", " token", "--log-writes")
    else:
        cm = _vllm_cpu()
    with cm as (base, stats):
        ctx["base_url"] = base
        if a.target == "scripted":
            ctx["model"], ctx["extra_body"] = "fake-model", {}

            def truth(phase, rows=None, before=None):
                if phase == "begin":
                    return stats(reset=True)
                return errors_vs_log(rows, stats.writes())
        else:
            ctx["model"], ctx["extra_body"] = stats["model"], {"ignore_eos": True}
            ctx["tokenizer"] = stats["tokenizer"]

            def truth(phase, rows=None, before=None):
                if phase == "begin":
                    return scrape_vllm(base)
                return errors_vs_vllm_metrics(rows, before, scrape_vllm(base))
        if a.target != "scripted":
            # vLLM's first requests pay one-time costs (kernel set-up, thread pools) that starve
            # every process on a small host: take them with an unmeasured level first, so that
            # no tool's figures carry them (the first tool would otherwise).
            warm = work_root / "engine-warmup"
            warm.mkdir(parents=True, exist_ok=True)
            run_wattbench(ctx, max(streams), 2 * max(streams), warm)
        for conc in streams:
            n = max(a.min_requests, conc * a.per_stream)
            for rnd in range(a.rounds):
                if a.together:
                    for row in run_together(ctx, tools, conc, n, work_root, rnd, truth):
                        results.append(row)
                        print(together_line(row), flush=True)
                    if a.json:
                        _write_json(a.json, meta, results)
                    continue
                k = rnd % len(tools)
                for tool in tools[k:] + tools[:k]:  # interleaved: the order rotates every round
                    work = work_root / f"{a.target}-{conc}-{tool}-r{rnd}"
                    work.mkdir(parents=True, exist_ok=True)
                    row = one(ctx, tool, conc, n, work, truth)
                    row["round"] = rnd
                    results.append(row)
                    print(summary_line(row), flush=True)
                    if a.json:  # what is measured so far is kept, whatever ends the bench
                        _write_json(a.json, meta, results)
    meta["loadavg_end"] = loadavg()
    print(json.dumps({"meta": meta}, indent=1))
    if a.json:
        _write_json(a.json, meta, results)
    if not a.keep_work:
        shutil.rmtree(work_root, ignore_errors=True)
    return 0


def _write_json(path: str, meta: dict, results: list[dict]) -> None:
    out = json.dumps({"meta": meta, "runs": _rounded(results)})
    if path.endswith(".gz"):
        import gzip

        Path(path).write_bytes(gzip.compress(out.encode(), 9))
    else:
        Path(path).write_text(out)


def _rounded(x):
    """Floats to 0.1 µs (ms with 4 decimals): the raw data stays small and loses nothing measured."""
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    return x


def _load_json(path: str) -> dict:
    raw = Path(path).read_bytes()
    if path.endswith(".gz"):
        import gzip

        raw = gzip.decompress(raw)
    return json.loads(raw)


def together_line(r: dict) -> str:
    if "error" in r:
        return f"{r['target']} {r['tool']:13s} streams={r['streams']} round {r['round']} FAILED {r['error']}"
    w = r.get("window_s")
    return (f"{r['target']} {r['tool']:13s} streams={r['streams']} round {r['round']} together, window "
            f"{'-' if w is None else format(w, '.1f')} s: out tok/s {r.get('out_tok_s') or 0:.0f} TPOT "
            f"{r.get('tpot_ms_mean') or 0:.2f} ms in flight {r.get('in_flight_steady') or 0:.2f} of {r['streams']}")


def summary_line(r: dict) -> str:
    def f(k, fmt="+.2f"):
        v = r.get(k)
        return "-" if v is None else format(v, fmt)

    if "error" in r:
        return f"{r['target']} {r['tool']:9s} streams={r['streams']:4d} FAILED {r['error']}"
    sat = ""
    if r.get("saturated") is not None:
        sat = f" saturated={r['saturated']} loop_lag_p99={f('loop_lag_p99_ms', '.1f')}"
    return (f"{r['target']} {r['tool']:9s} streams={r['streams']:4d} n={r['reported']} matched={r['matched']} "
            f"ttft_err mean={f('ttft_err_ms_mean')} p99={f('ttft_err_ms_p99')} ms "
            f"(send {f('start_to_server_read_ms_mean')}, stamp {f('first_token_stamp_late_ms_mean')}/"
            f"{f('first_token_stamp_late_ms_p99', '+.1f')}) "
            f"itl_err mean={f('itl_err_ms_mean', '+.3f')} p99={f('itl_err_ms_p99', '+.3f')} ms ({r['itl_err_basis']})  "
            f"cpu={f('client_cpu_pct', '.0f')}% failed={r.get('failed')} load={r['loadavg_before']}->{r['loadavg_after']}"
            f"{sat} | out tok/s {f('out_tok_s', '.0f')} (own {f('own_out_tok_s', '.0f')}) tpot {f('tpot_ms_mean', '.2f')}"
            f" (own {f('own_tpot_ms', '.2f')}) ms in flight steady {f('in_flight_steady', '.2f')}"
            f" full {f('in_flight_full', '.2f')} of {r['streams']}")


def report(paths: list[str]) -> str:
    """A Markdown table over one or more ``--json`` files: per target, streams and tool, the
    figure of each run, runs separated by ``/`` (so the spread between runs is in plain view)."""
    runs = [_load_json(x) for x in paths]
    cells: dict[tuple, list[dict]] = {}
    for d in runs:
        for r in d["runs"]:
            cells.setdefault((r["target"], r["streams"], TOOLS.index(r["tool"])), []).append(r)

    def col(rs, k, fmt):
        return " / ".join("–" if r.get(k) is None else format(r[k], fmt) for r in rs)

    lines = ["| target | streams | tool | TTFT error mean (ms) | TTFT error p99 (ms) | of which: start → server read, "
             "mean (ms) | of which: first-token stamp late, mean / p99 (ms) | ITL error mean (ms) "
             "| ITL error p99 (ms) | client CPU (% of a core) | load average (1 min, before) | notes |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for (target, streams, ti), rs in sorted(cells.items()):
        notes = []
        if any("error" in r for r in rs):
            notes.append("failed: " + "; ".join(r["error"][:80] for r in rs if "error" in r))
        ok = [r for r in rs if "error" not in r]
        if any(r.get("saturated") for r in ok):
            notes.append("marked saturated in " + "/".join("yes" if r.get("saturated") else "no" for r in ok))
        if ok and ok[0].get("itl_err_basis") not in (None, "per gap"):
            notes.append("ITL " + ok[0]["itl_err_basis"])
        if target != "scripted" and ok:
            notes.append("mean TTFT tool / engine " + ", ".join(
                f"{r['ttft_ms_mean']:.1f} / {r['true_ttft_ms_mean']:.1f} ms" for r in ok
                if r.get("ttft_ms_mean") is not None and r.get("true_ttft_ms_mean") is not None))
        if any(r.get("failed") for r in ok):
            notes.append("failed requests " + "/".join(str(r.get("failed")) for r in ok))
        lines.append(f"| {target} | {streams} | {TOOLS[ti]} | {col(ok, 'ttft_err_ms_mean', '+.2f')} "
                     f"| {col(ok, 'ttft_err_ms_p99', '+.1f')} | {col(ok, 'start_to_server_read_ms_mean', '+.2f')} "
                     f"| {col(ok, 'first_token_stamp_late_ms_mean', '+.2f')} ; "
                     f"{col(ok, 'first_token_stamp_late_ms_p99', '+.1f')} | {col(ok, 'itl_err_ms_mean', '+.3f')} "
                     f"| {col(ok, 'itl_err_ms_p99', '+.1f')} | {col(ok, 'client_cpu_pct', '.0f')} "
                     f"| {' / '.join(r['loadavg_before'].split()[0] for r in ok)} | {'; '.join(notes)} |")
    return "\n".join(lines)


def round_ratios(runs: list[dict], tool: str, key: str, base: str = "vllm") -> list[float]:
    """``tool``'s figure over ``base``'s in the same round and streams level, one per round where
    both measured it (a paired ratio: the server's drift between rounds cancels)."""
    by = {(r["streams"], r.get("round", 0), r["tool"]): r for r in runs if "error" not in r}
    out = []
    for (conc, rnd, t), r in sorted(by.items()):
        other = by.get((conc, rnd, base))
        if t == tool and other is not None and r.get(key) is not None and other.get(key):
            out.append(r[key] / other[key])
    return out


def report_load(paths: list[str]) -> str:
    """Per streams level and tool, every round (``/``-separated, in round order) of: output tok/s
    and TPOT (one definition for every tool, and the tool's own), mean in flight (steady window and
    full, from the tool's own start stamps; and the engine's view: its requests' end-to-end seconds
    over the tool's window, where the server is vLLM); then each tool's ratio to ``vllm bench
    serve`` of the same round, per round and their median, and whether the medians of tok/s and
    TPOT agree within ±3%."""
    import statistics

    runs = [r for path in paths for r in _load_json(path)["runs"]]
    cells: dict[tuple, list[dict]] = {}
    for r in runs:
        cells.setdefault((r["streams"], TOOLS.index(r["tool"])), []).append(r)

    def col(rs, k, fmt):
        return " / ".join("–" if r.get(k) is None else format(r[k], fmt) for r in rs)

    lines = ["| streams | tool | out tok/s | own out tok/s | TPOT mean (ms) | own TPOT (ms) | in flight, steady "
             "| in flight, full | in flight, engine | client loop lag p99 (ms) | load average (1 min, before) |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (conc, ti), rs in sorted(cells.items()):
        ok = sorted((r for r in rs if "error" not in r), key=lambda r: r.get("round", 0))
        lines.append(f"| {conc} | {TOOLS[ti]} | {col(ok, 'out_tok_s', ',.0f')} | {col(ok, 'own_out_tok_s', ',.0f')} "
                     f"| {col(ok, 'tpot_ms_mean', '.2f')} | {col(ok, 'own_tpot_ms', '.2f')} "
                     f"| {col(ok, 'in_flight_steady', '.2f')} | {col(ok, 'in_flight_full', '.2f')} "
                     f"| {col(ok, 'engine_in_flight', '.2f')} "
                     f"| {col(ok, 'loop_lag_p99_ms', '.0f')} | {' / '.join(r['loadavg_before'].split()[0] for r in ok)} |")
    keys = ("out_tok_s", "tpot_ms_mean", "in_flight_steady", "engine_in_flight", "own_out_tok_s", "own_tpot_ms")
    lines += ["", "Ratio to vllm bench serve of the same round (per round; median in brackets):", "",
              "| tool | out tok/s | TPOT | in flight, steady | in flight, engine | own out tok/s ÷ vllm's own "
              "| own TPOT ÷ vllm's own | tok/s and TPOT within ±3% (medians) |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for tool in TOOLS:
        if tool == "vllm" or not any(r["tool"] == tool for r in runs):
            continue
        cells_r, med = [], {}
        for k in keys:
            xs = round_ratios(runs, tool, k)
            med[k] = statistics.median(xs) if xs else None
            cells_r.append((" / ".join(f"{x:.3f}" for x in xs) + f" [{med[k]:.3f}]") if xs else "–")
        both = [med["out_tok_s"], med["tpot_ms_mean"]]
        agree = ("–" if None in both else
                 ("yes" if all(abs(x - 1) <= 0.03 for x in both) else "no") +  # type: ignore[operator]
                 f" ({(both[0] - 1) * 100:+.1f}%, {(both[1] - 1) * 100:+.1f}%)")  # type: ignore[operator]
        lines.append(f"| {tool} | " + " | ".join(cells_r) + f" | {agree} |")
    return "\n".join(lines)


class _vllm_cpu:
    """vLLM (CPU build) on the tiny preset with dummy weights, as the integration test starts it."""

    def __enter__(self):
        from wattbench.engines.registry import launch
        from wattbench.engines.presets import ensure_preset
        from wattbench.engines.vllm import VLLM

        py = os.environ.get("WATTBENCH_VLLM_PYTHON", "/work/venv-vllm/bin/python")
        self.run_dir = Path(tempfile.mkdtemp(prefix="peer-vllm-"))
        self.h = launch(VLLM(python=py), "tiny", "cpu", ["--enforce-eager", "--max-model-len", "2048"],
                        self.run_dir, timeout_s=900)
        base = self.h.base_url.rstrip("/")
        base = base[:-3] if base.endswith("/v1") else base
        return base, {"model": self.h.server_info.model, "tokenizer": str(ensure_preset("tiny", weights=False))}

    def __exit__(self, *exc):
        self.h.stop()
        shutil.rmtree(self.run_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
