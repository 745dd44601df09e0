"""`transformers serve` with probes, for the history-dependence study (docs/validation.md part 11).

Run in place of ``python -m transformers.cli.transformers`` (``probe_python.sh`` does the swap, so
wattbench's own launcher starts the engine exactly as a run does). In the server's own process it
records, on the run's monotonic clock (``perf_counter_ns``, the clock of every wattbench window),
to ``$WB_PROBE_LOG`` (JSON lines):

- ``graph``: every CUDA graph capture (``torch.cuda.CUDAGraph.capture_end``) with its capture time;
  hypothesis "graphs are captured per batch shape, so a fresh server pays captures inside levels
  and runs shapes it has no graph for eagerly";
- ``prefix``: per 0.5 s, prompt tokens matched in the paged cache's prefix sharing (when the
  installed transformers has ``PagedAttentionCache.search_prefix_match``); hypothesis "the server
  skips prefill for prompts it has seen";
- ``mem``: per 0.5 s, the CUDA caching allocator (allocated, reserved, inactive split bytes, device
  allocs/frees, alloc retries) and the process's CPU time; hypotheses "allocator state /
  fragmentation", "paged-cache growth", "a CPU-bound scheduler".
Transformers' own INFO log (graph keys, cache size) goes to stdout with the same clock.

Reads only; changes no engine setting. Overhead: one small JSON line per capture and one every 0.5 s.
"""

from __future__ import annotations

import json
import logging
import os
import runpy
import sys
import threading
import time

_LOG = open(os.environ.get("WB_PROBE_LOG", "serve_probe.jsonl"), "a", buffering=1)
_LOCK = threading.Lock()
_C = {"graphs": 0, "graph_capture_s": 0.0, "prefix_searches": 0, "prefix_hits": 0, "prefix_tokens": 0}


def emit(kind: str, **kw) -> None:
    line = json.dumps({"t_ns": time.perf_counter_ns(), "kind": kind, **kw})
    with _LOCK:
        _LOG.write(line + "\n")


def _patch_graphs() -> bool:
    import torch

    g = getattr(torch.cuda, "CUDAGraph", None)
    if g is None:
        return False
    begin, end = g.capture_begin, g.capture_end

    def capture_begin(self, *a, **k):
        self._wb_t0 = time.perf_counter_ns()
        return begin(self, *a, **k)

    def capture_end(self, *a, **k):
        r = end(self, *a, **k)
        dt = (time.perf_counter_ns() - getattr(self, "_wb_t0", time.perf_counter_ns())) / 1e9
        with _LOCK:
            _C["graphs"] += 1
            _C["graph_capture_s"] += dt
            n = _C["graphs"]
        emit("graph", n=n, capture_s=round(dt, 6))
        return r

    g.capture_begin, g.capture_end = capture_begin, capture_end
    return True


def _patch_prefix() -> bool:
    try:
        from transformers.generation.continuous_batching.cache import PagedAttentionCache
    except ImportError:
        return False
    orig = getattr(PagedAttentionCache, "search_prefix_match", None)
    if orig is None:
        return False

    def search_prefix_match(self, *a, **k):
        n = orig(self, *a, **k)
        with _LOCK:
            _C["prefix_searches"] += 1
            if n:
                _C["prefix_hits"] += 1
                _C["prefix_tokens"] += int(n)
        return n

    PagedAttentionCache.search_prefix_match = search_prefix_match
    return True


def _sampler(period_s: float = 0.5) -> None:
    import torch

    while True:
        time.sleep(period_s)
        rec: dict = {}
        with _LOCK:
            rec.update(_C)
        t = os.times()
        rec["cpu_user_s"], rec["cpu_sys_s"] = t.user, t.system
        rec["threads"] = threading.active_count()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            s = torch.cuda.memory_stats(0)
            for name, key in (("allocated_bytes", "allocated_bytes.all.current"),
                              ("reserved_bytes", "reserved_bytes.all.current"),
                              ("active_bytes", "active_bytes.all.current"),
                              ("inactive_split_bytes", "inactive_split_bytes.all.current"),
                              ("segments", "segment.all.current"),
                              ("alloc_retries", "num_alloc_retries"), ("device_allocs", "num_device_alloc"),
                              ("device_frees", "num_device_free"), ("ooms", "num_ooms")):
                rec[name] = s.get(key)
        emit("mem", **rec)


class _Stamp(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.mono_ns = time.perf_counter_ns()
        return True


def _log_format() -> None:
    try:
        from transformers.utils import logging as tl

        tl.get_logger("transformers")  # configures the library's handler
        root = logging.getLogger("transformers")
        for h in root.handlers:
            h.addFilter(_Stamp())
            h.setFormatter(logging.Formatter("[%(mono_ns)d] %(levelname)s %(name)s: %(message)s"))
    except Exception as e:  # noqa: BLE001 (a probe never stops the server)
        emit("probe_error", where="log_format", error=repr(e))


def main() -> None:
    argv = sys.argv[1:]
    try:
        import inspect

        from transformers.cli.serve import Serve

        if "serve" in argv and "--log-level" not in argv and "log_level" in inspect.signature(Serve.__init__).parameters:
            argv = argv + ["--log-level", "info"]
    except Exception as e:  # noqa: BLE001
        emit("probe_error", where="log_level", error=repr(e))
    graphs = prefix = False
    try:
        graphs = _patch_graphs()
        prefix = _patch_prefix()
    except Exception as e:  # noqa: BLE001
        emit("probe_error", where="patch", error=repr(e))
    _log_format()
    import transformers

    emit("probe_start", pid=os.getpid(), argv=argv, graphs_patched=graphs, prefix_patched=prefix,
         transformers=transformers.__version__)
    threading.Thread(target=_sampler, name="wb-probe", daemon=True).start()
    sys.argv = ["transformers", *argv]
    runpy.run_module("transformers.cli.transformers", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
