"""Scrape a server's Prometheus ``/metrics`` during a run into a server timeline.

``MetricsScraper(url, interval_s).start()`` runs a daemon thread that GETs ``/metrics`` every
``interval_s`` and parses it with ``prometheus_client``'s text parser; each scrape is stamped with
the run's monotonic clock (midpoint of request and response, ``wattbench.core.clock.now_ns``).
``.stop()`` returns a ``ServerTimeline``: canonical series name -> (t_ns list, values).

Canonical series (the engine's own names are mapped; samples with several label sets are summed,
fractions are averaged):

=================  ===========================  =====================  ==========================  ==========================
series             vLLM                         SGLang                 TGI                         llama.cpp
=================  ===========================  =====================  ==========================  ==========================
running            vllm:num_requests_running    sglang:num_running_reqs tgi_batch_current_size     llamacpp:requests_processing
waiting            vllm:num_requests_waiting    sglang:num_queue_reqs  tgi_queue_size              llamacpp:requests_deferred
kv_cache_usage     vllm:kv_cache_usage_perc     sglang:token_usage     –                           llamacpp:kv_cache_usage_ratio
                   (or gpu_cache_usage_perc)
prompt_tokens      vllm:prompt_tokens_total     sglang:prompt_tokens_total tgi_request_input_length_sum llamacpp:prompt_tokens_total
generation_tokens  vllm:generation_tokens_total sglang:generation_tokens_total tgi_request_generated_tokens_sum llamacpp:tokens_predicted_total
preemptions        vllm:num_preemptions_total   –                      –                           –
=================  ===========================  =====================  ==========================  ==========================

``kv_cache_usage`` is a fraction 0..1 (vLLM's ``*_perc`` gauges are fractions despite the name).
A server without ``/metrics`` (``transformers serve``) gives a timeline with ``available=False``
and the reason; that is not an error.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from wattbench.core.redact import authorization_header  # noqa: E402  (one home for Authorization headers)

import http.client
import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
import bisect

from wattbench.core.clock import now_ns
from wattbench.core.errors import TargetError
from wattbench.core import origin
from wattbench.core.secret_scope import registered
from wattbench.core.schema import ServerMetrics

MAX_EXPOSITION_BYTES = 32 << 20  # of one /metrics answer (vLLM's is ~100 KB-1 MB); the rest unread

GAUGES = ("running", "waiting", "kv_cache_usage")
COUNTERS = ("prompt_tokens", "generation_tokens", "preemptions")
FRACTIONS = {"kv_cache_usage"}

# canonical series -> sample names, first present wins (per engine)
ENGINE_METRICS: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "generation_tokens": ("vllm:generation_tokens_total",),
        "preemptions": ("vllm:num_preemptions_total",),
    },
    "sglang": {
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "generation_tokens": ("sglang:generation_tokens_total",),
    },
    "tgi": {
        "running": ("tgi_batch_current_size",),
        "waiting": ("tgi_queue_size",),
        "prompt_tokens": ("tgi_request_input_length_sum",),
        "generation_tokens": ("tgi_request_generated_tokens_sum",),
    },
    "llamacpp": {
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_cache_usage": ("llamacpp:kv_cache_usage_ratio",),
        "prompt_tokens": ("llamacpp:prompt_tokens_total",),
        "generation_tokens": ("llamacpp:tokens_predicted_total",),
    },
}
# canonical series -> samples added to it where present. llama.cpp's prompt_tokens_total counts the
# prompt tokens it *processed*, "excluding cached tokens" (its help text): the tokens it reused from
# a slot's cache are in prompt_tokens_cached_total. Their sum is the prompt tokens served, which is
# what vLLM's counter and the requests' usage count.
ENGINE_ADDENDS: dict[str, dict[str, tuple[str, ...]]] = {
    "llamacpp": {"prompt_tokens": ("llamacpp:prompt_tokens_cached_total",)},
}
_PREFIX = {"vllm:": "vllm", "sglang:": "sglang", "tgi_": "tgi", "llamacpp:": "llamacpp"}


def metrics_url(url: str) -> str:
    """``http://h:p``, ``http://h:p/v1`` or ``http://h:p/metrics`` -> the /metrics URL."""
    u = url.rstrip("/")
    if u.endswith("/metrics"):
        return u
    if u.endswith("/v1"):
        u = u[:-3]
    return u + "/metrics"


def parse_exposition(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)] of a Prometheus text exposition."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def engine_lines(text: str, engine: str) -> str:
    """The lines of an exposition that carry the engine's canonical series (``ENGINE_METRICS``,
    ``ENGINE_ADDENDS``): what ``canonical_values`` reads, the rest dropped before parsing. A vLLM
    exposition is ~650 lines of histograms; parsing all of it cost the scraper thread ~9 ms of CPU
    a scrape, holding the interpreter lock the load generator's event loop needs, against ~0.25 ms
    for these lines (2-core machine, vLLM 0.32 CPU, 2026-12-07)."""
    names = tuple(n for table in (ENGINE_METRICS, ENGINE_ADDENDS)
                  for ns in table.get(engine, {}).values() for n in ns)
    return "\n".join(line for line in text.splitlines() if line.startswith(names))


def guess_engine(samples: dict[str, Any]) -> str | None:
    counts: dict[str, int] = {}
    for name in samples:
        for p, eng in _PREFIX.items():
            if name.startswith(p):
                counts[eng] = counts.get(eng, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else None


def canonical_values(samples: dict[str, list[tuple[dict[str, str], float]]], engine: str) -> dict[str, float]:
    """One value per canonical series present (label sets summed; fractions averaged)."""
    values: dict[str, float] = {}
    for series, names in ENGINE_METRICS.get(engine, {}).items():
        for n in names:
            if n in samples and samples[n]:
                vals = [v for _, v in samples[n]]
                values[series] = sum(vals) / len(vals) if series in FRACTIONS else sum(vals)
                break
    for series, names in ENGINE_ADDENDS.get(engine, {}).items():
        if series in values:
            values[series] += sum(v for n in names for _, v in samples.get(n, ()))
    return values


MODEL_LABELS = ("model_name", "model")  # vLLM and SGLang label their token counters with model_name


def per_model_counters(samples: dict[str, list[tuple[dict[str, str], float]]], engine: str) -> dict[str, dict[str, float]]:
    """The token counters (``prompt_tokens``, ``generation_tokens``) per served model, where the
    server labels them with the model (``model_name``); ``{}`` where it does not."""
    out: dict[str, dict[str, float]] = {}
    for series in ("prompt_tokens", "generation_tokens"):
        for n in ENGINE_METRICS.get(engine, {}).get(series, ()):
            if not samples.get(n):
                continue
            for labels, v in samples[n]:
                model = next((labels[k] for k in MODEL_LABELS if labels.get(k)), None)
                if model is None:
                    return {}
                out.setdefault(model, {})
                out[model][series] = out[model].get(series, 0.0) + v
            break
    return out


# ------------------------------------------------------------------ timeline


@dataclass
class ServerTimeline:
    """Scraped server series on the run's monotonic clock."""

    url: str | None = None
    engine: str | None = None
    available: bool = False
    reason: str | None = None
    interval_s: float | None = None
    scrapes: list[tuple[int, dict[str, float]]] = field(default_factory=list)  # (t_ns, values)
    errors: int = 0
    scrape_duration_ms_max: float | None = None

    @property
    def series(self) -> dict[str, tuple[list[int], list[float]]]:
        out: dict[str, tuple[list[int], list[float]]] = {}
        for t, vals in self.scrapes:
            for k, v in vals.items():
                ts, vs = out.setdefault(k, ([], []))
                ts.append(t)
                vs.append(v)
        return out

    # -- interpolation

    def _points(self, name: str, monotone: bool) -> tuple[list[int], list[float]]:
        ts, vs = self.series.get(name, ([], []))
        if not monotone or not vs:
            return ts, vs
        out, offset, prev = [], 0.0, None
        for v in vs:  # counter reset: the counter restarted from 0, carry what it had
            if prev is not None and v < prev:
                offset += prev
            out.append(v + offset)
            prev = v
        return ts, out

    def value_at(self, name: str, t_ns: int, monotone: bool = False) -> float | None:
        """Linear interpolation between the two scrapes around ``t_ns`` (clamped at the ends)."""
        ts, vs = self._points(name, monotone)
        if not ts:
            return None
        if t_ns <= ts[0]:
            return vs[0]
        if t_ns >= ts[-1]:
            return vs[-1]

        i = bisect.bisect_right(ts, t_ns)
        t0, t1, v0, v1 = ts[i - 1], ts[i], vs[i - 1], vs[i]
        return v0 + (v1 - v0) * (t_ns - t0) / (t1 - t0)

    def covers(self, t0_ns: int, t1_ns: int, name: str | None = None) -> bool:
        ts = self.series.get(name, ([], []))[0] if name else [t for t, _ in self.scrapes]
        return bool(ts) and ts[0] <= t0_ns and ts[-1] >= t1_ns

    def counter_delta(self, name: str, t0_ns: int, t1_ns: int) -> float | None:
        """Increase of counter ``name`` over [t0, t1], interpolated at both edges, resets handled."""
        a = self.value_at(name, t0_ns, monotone=True)
        b = self.value_at(name, t1_ns, monotone=True)
        if a is None or b is None:
            return None
        return b - a

    def counter_edge_error(self, name: str, t0_ns: int, t1_ns: int) -> float | None:
        """How far ``counter_delta(name, t0, t1)`` can be from the true increase: at each edge the
        counter is interpolated between the two scrapes around it, so it can be off by up to the
        increase between them (all of it may have come before the edge, or after). The sum of the
        two; ``None`` when an edge lies outside the scrapes."""
        ts, vs = self._points(name, monotone=True)
        if not ts or t0_ns < ts[0] or t1_ns > ts[-1]:
            return None

        err = 0.0
        for t in (t0_ns, t1_ns):
            i = bisect.bisect_left(ts, t)
            if ts[i] != t:  # strictly inside (ts[i-1], ts[i]): the whole step is uncertain
                err += vs[i] - vs[i - 1]
        return err

    def gauge_stats(self, name: str, t0_ns: int, t1_ns: int) -> tuple[float | None, float | None]:
        """(time-weighted mean, max) of gauge ``name`` over [t0, t1] (linear between scrapes)."""
        ts, vs = self._points(name, False)
        if not ts or t1_ns <= t0_ns:
            return None, None
        v0, v1 = self.value_at(name, t0_ns), self.value_at(name, t1_ns)
        if v0 is None or v1 is None:  # not reached: the series has points (value_at is None only without)
            return None, None
        pts = [(t0_ns, v0)]
        pts += [(t, v) for t, v in zip(ts, vs) if t0_ns < t < t1_ns]
        pts.append((t1_ns, v1))
        area = sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(pts, pts[1:]))
        return area / (t1_ns - t0_ns), max(v for _, v in pts)

    def summary(self, t0_ns: int, t1_ns: int) -> ServerMetrics:
        """Figures for ``LevelResult.server_metrics`` over one window."""
        out: dict[str, Any] = {"available": self.available, "engine": self.engine}
        if not self.available:
            out["reason"] = self.reason
            return ServerMetrics.model_validate(out)
        names = self.series
        for g in GAUGES:
            if g in names:
                mean, mx = self.gauge_stats(g, t0_ns, t1_ns)
                scale = 100.0 if g in FRACTIONS else 1.0
                key = "kv_cache_usage_pct" if g in FRACTIONS else f"{g}_requests"
                out[f"mean_{key}"] = None if mean is None else mean * scale
                out[f"max_{key}"] = None if mx is None else mx * scale
        for c in COUNTERS:
            if c in names:
                out[f"{c}_delta"] = self.counter_delta(c, t0_ns, t1_ns)
        out["samples_in_window"] = sum(1 for t, _ in self.scrapes if t0_ns <= t <= t1_ns)
        out["window_covered"] = self.covers(t0_ns, t1_ns)
        return ServerMetrics.model_validate(out)

    # -- serialisation (server_timeline.jsonl)

    def to_jsonl(self, path: Path | str) -> None:
        meta = {"type": "meta", "url": self.url, "engine": self.engine, "available": self.available,
                "reason": self.reason, "interval_s": self.interval_s, "errors": self.errors,
                "scrape_duration_ms_max": self.scrape_duration_ms_max}
        scrub = registered().json_text  # the run's secrets, wherever a server put them
        with open(path, "w") as f:
            f.write(scrub(json.dumps(meta)) + "\n")
            for t, vals in self.scrapes:
                f.write(scrub(json.dumps({"t_ns": t, **vals})) + "\n")

    @classmethod
    def from_jsonl(cls, path: Path | str) -> "ServerTimeline":
        tl = cls()
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                d = json.loads(line)
                if d.get("type") == "meta":
                    for k in ("url", "engine", "available", "reason", "interval_s", "errors",
                              "scrape_duration_ms_max"):
                        setattr(tl, k, d.get(k))
                else:
                    t = int(d.pop("t_ns"))
                    tl.scrapes.append((t, {k: float(v) for k, v in d.items()}))
        return tl


# ------------------------------------------------------------------ the scraper thread


class MetricsScraper:
    """Background scraper. ``start()``, then ``stop() -> ServerTimeline``. Never raises on a
    server without ``/metrics``: the timeline says ``available=False`` and why."""

    def __init__(self, url: str, interval_s: float = 1.0, engine: str | None = None,
                 api_key: str | None = None, timeout_s: float | None = None):
        self.url = metrics_url(url)
        self.interval_s = float(interval_s)
        self.timeout_s = timeout_s if timeout_s is not None else max(2.0, self.interval_s)
        self._headers = authorization_header(api_key)
        self.timeline = ServerTimeline(url=self.url, engine=engine, interval_s=self.interval_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._first = threading.Event()  # set once the thread's first scrape is in

    def scrape_once(self) -> bool:
        """One scrape into the timeline. False when the endpoint is absent (stop scraping)."""
        tl = self.timeline
        t_a = now_ns()
        try:
            req = urllib.request.Request(self.url, headers=self._headers)
            with origin.urlopen(req, timeout=self.timeout_s) as r:  # noqa: S310
                text = r.read(MAX_EXPOSITION_BYTES).decode("utf-8", "replace")
        except origin.CrossOriginRedirect as e:  # never followed (the key would go along): no /metrics
            tl.available = False
            tl.reason = str(e)
            return False
        except urllib.error.HTTPError as e:
            if not tl.scrapes and e.code in (404, 405, 501):
                tl.available = False
                tl.reason = f"{self.url} answered HTTP {e.code}: the server exposes no Prometheus metrics"
                return False
            tl.errors += 1
            return True
        except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException, TargetError) as e:
            tl.errors += 1
            if not tl.scrapes:
                tl.reason = f"{self.url} unreachable: {getattr(e, 'reason', e)}"
            return True
        t_b = now_ns()
        try:
            # once the engine is known, only its series are parsed (engine_lines)
            samples = parse_exposition(engine_lines(text, tl.engine) if tl.engine in ENGINE_METRICS else text)
        except ValueError as e:
            tl.errors += 1
            tl.reason = f"unparsable exposition: {e}"
            return True
        if tl.engine is None:
            tl.engine = guess_engine(samples)
        vals = canonical_values(samples, tl.engine) if tl.engine else {}
        if not vals and not tl.scrapes:
            tl.reason = f"{self.url} has none of the known engine metrics"
        dur_ms = (t_b - t_a) / 1e6
        with self._lock:
            tl.scrape_duration_ms_max = max(tl.scrape_duration_ms_max or 0.0, dur_ms)
            if vals:
                tl.available = True
                tl.reason = None
                tl.scrapes.append(((t_a + t_b) // 2, vals))
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = now_ns()
            if not self.scrape_once():
                return
            self._first.set()
            spent = (now_ns() - t0) / 1e9
            self._stop.wait(max(0.0, self.interval_s - spent))

    def start(self) -> "MetricsScraper":
        """Start the thread and return once its first scrape has been answered (or has failed, or
        timed out): whatever is measured after ``start()`` has a scrape before it, on any load."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="wattbench-metrics-scraper", daemon=True)
            self._thread.start()
            while not self._first.wait(0.05) and self._thread.is_alive():
                pass
        return self

    def scrape_after(self, t_ns: int) -> None:
        """Make sure the timeline holds a scrape taken after ``t_ns`` (a window's end): when the
        thread has not taken one yet, take it now, here. Nothing to do when the endpoint is absent."""
        if self.timeline.available is False:
            return
        scrapes = self.timeline.scrapes
        if not (scrapes and scrapes[-1][0] > t_ns):
            self.scrape_once()

    def stop(self, final_scrape: bool = True) -> ServerTimeline:
        """Stop the thread; take one last scrape so the window's end is bracketed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 5)
            if final_scrape and self.timeline.available:
                self.scrape_once()
        return self.timeline

    def __enter__(self) -> "MetricsScraper":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
