"""Prometheus exposition of the monitor's figures, on its own ``CollectorRegistry``.

Metrics (labels in braces; ``window`` is ``10s``, ``1m``, ``10m`` … or ``total``):

* ``wattbench_power_watts{boundary}`` — average power over the last span
* ``wattbench_energy_joules_total{boundary}`` — energy since the monitor started
* ``wattbench_output_tokens_total``, ``wattbench_prompt_tokens_total``
* ``wattbench_output_tokens_per_second{window}``
* ``wattbench_joules_per_output_token{boundary,window}``
* ``wattbench_output_tokens_per_kwh{boundary,window}``
* ``wattbench_idle_power_watts{boundary}``, ``wattbench_loaded_power_watts{boundary}``
* ``wattbench_dynamic_joules_per_output_token{boundary}`` — loaded energy above idle power, per token
* ``wattbench_model_output_tokens_total{model}``, ``wattbench_model_energy_joules_total{model,boundary}``
  and ``wattbench_model_joules_per_output_token{model,boundary}`` — per served model where the
  server labels its token counters per model (vLLM, SGLang); the energy is an estimate (each
  interval's energy split over the models by their tokens in it). The shipped recording rules
  (``deploy/prometheus/wattbench-rules.yml``: ``tokens_per_second_per_kw``,
  ``joules_per_output_token`` per model and boundary) are built on these
* ``wattbench_state{state}`` — 1 for the current state (idle, loaded, unknown)
* ``wattbench_state_seconds_total{state}``
* ``wattbench_scrape_errors_total{source}`` — failed server scrapes (``server``) and sensor reads
  (the sensor's name); ``wattbench_source_up{source}`` — 1 when the last attempt succeeded
"""

from __future__ import annotations

from collections.abc import Mapping

import socket
import threading
from http.server import ThreadingHTTPServer
from collections.abc import Iterator
from typing import Any, Callable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import MetricsHandler

from wattbench.monitor.snapshot import MonitorSnapshot
from wattbench.config.commands import DEFAULT_LISTEN
from wattbench.core.errors import UserError

IDLE_TIMEOUT_S = 10.0  # a connection that sends nothing for this long is closed (a half-open one too)
MAX_CONNECTIONS = 16  # connections served at once; one more is closed at once (each holds a thread)
STATES = ("idle", "loaded", "unknown")


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT`` or ``PORT`` -> (host, port); host defaults to 127.0.0.1."""
    v = (value or "").strip()
    host, port = "127.0.0.1", v
    if v.startswith("["):
        h, _, rest = v[1:].partition("]")
        host, port = h, rest.lstrip(":")
    elif ":" in v:
        host, _, port = v.rpartition(":")
        host = host or "127.0.0.1"
    try:
        p = int(port)
    except ValueError:
        raise UserError(f"--listen {value!r}: give HOST:PORT, e.g. 127.0.0.1:9464") from None
    if not 0 <= p <= 65535:
        raise UserError(f"--listen {value!r}: port must be 0..65535")
    return host, p


class MonitorCollector:
    """Builds metric families from the monitor's latest snapshot at each scrape."""

    def __init__(self, snapshot: Callable[[], MonitorSnapshot | None]) -> None:
        self.snapshot = snapshot

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot() or MonitorSnapshot()
        w = s.windows
        total = w.get("total") or {}

        def gauge_b(name: str, doc: str, values: Mapping[str, float | None] | None) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=["boundary"])
            for b, v in sorted((values or {}).items()):
                if v is not None:
                    g.add_metric([b], float(v))
            return g

        yield gauge_b("wattbench_power_watts", "Average power over the last accounted span.", s.power_w)
        c = CounterMetricFamily("wattbench_energy_joules", "Energy since the monitor started.", labels=["boundary"])
        for b, v in sorted(s.energy_total_j.items()):
            c.add_metric([b], float(v))
        yield c
        yield CounterMetricFamily("wattbench_output_tokens", "Output (generated) tokens counted by the server "
                                  "since the monitor started.", value=float(total.get("output_tokens") or 0.0))
        yield CounterMetricFamily("wattbench_prompt_tokens", "Prompt tokens counted by the server since the "
                                  "monitor started.", value=float(total.get("prompt_tokens") or 0.0))
        tps = GaugeMetricFamily("wattbench_output_tokens_per_second", "Output tokens per second.", labels=["window"])
        jpt = GaugeMetricFamily("wattbench_joules_per_output_token", "Energy per output token.",
                                labels=["boundary", "window"])
        tpk = GaugeMetricFamily("wattbench_output_tokens_per_kwh", "Output tokens per kWh.",
                                labels=["boundary", "window"])
        for label, f in w.items():
            if f.get("output_tokens_per_s") is not None:
                tps.add_metric([label], float(f["output_tokens_per_s"]))
            for b, v in (f.get("j_per_output_token") or {}).items():
                if v is not None:
                    jpt.add_metric([b, label], float(v))
            for b, v in (f.get("output_tokens_per_kwh") or {}).items():
                if v is not None:
                    tpk.add_metric([b, label], float(v))
        yield tps
        yield jpt
        yield tpk
        models = s.by_model.get("models") or {}
        mt = CounterMetricFamily("wattbench_model_output_tokens", "Output tokens per served model since the monitor "
                                 "started (the server's per-model counters).", labels=["model"])
        me = CounterMetricFamily("wattbench_model_energy_joules", "Energy per served model since the monitor started "
                                 "(an estimate: each interval's energy split by the models' tokens in it).",
                                 labels=["model", "boundary"])
        mj = GaugeMetricFamily("wattbench_model_joules_per_output_token", "Energy per output token per served model "
                               "since the monitor started (an estimate).", labels=["model", "boundary"])
        for m, d in sorted(models.items()):
            mt.add_metric([m], float(d.get("output_tokens") or 0.0))
            for b, e in sorted((d.get("energy_j") or {}).items()):
                me.add_metric([m, b], float(e))
            for b, v in sorted((d.get("j_per_output_token") or {}).items()):
                if v is not None:
                    mj.add_metric([m, b], float(v))
        yield mt
        yield me
        yield mj
        yield gauge_b("wattbench_idle_power_watts", "Average power while idle.", s.idle_power_w)
        yield gauge_b("wattbench_loaded_power_watts", "Average power while loaded.", s.loaded_power_w)
        seg = s.segmentation
        yield gauge_b("wattbench_dynamic_joules_per_output_token", "Loaded energy above idle power per output token.",
                      (seg.get("loaded") or {}).get("dynamic_j_per_output_token"))
        st = GaugeMetricFamily("wattbench_state", "1 for the current state.", labels=["state"])
        for name in STATES:
            st.add_metric([name], 1.0 if s.state == name else 0.0)
        yield st
        secs = CounterMetricFamily("wattbench_state_seconds", "Time spent in each state.", labels=["state"])
        for name in STATES:
            secs.add_metric([name], float((seg.get(name) or {}).get("duration_s") or 0.0))
        yield secs
        err = CounterMetricFamily("wattbench_scrape_errors", "Failed scrapes and sensor reads.", labels=["source"])
        up = GaugeMetricFamily("wattbench_source_up", "1 when the source's last attempt succeeded.", labels=["source"])
        for src, info in sorted(s.sources.items()):
            err.add_metric([src], float(info.get("errors", 0)))
            up.add_metric([src], 1.0 if info.get("up") else 0.0)
        yield err
        yield up


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once (one more is closed at once);
    the handler's ``timeout`` closes a connection idle that long, so no client — a scraper that
    vanished, a half-open socket — holds a thread for ever."""

    daemon_threads = True

    def __init__(self, addr: tuple[str, int], handler: type, max_connections: int) -> None:
        self.address_family = socket.getaddrinfo(addr[0], addr[1], type=socket.SOCK_STREAM,
                                                 flags=socket.AI_PASSIVE)[0][0]
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(addr, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class Exporter:
    """Serves a ``MonitorCollector`` over HTTP on ``host:port`` (port 0: any free port), each
    connection closed after ``idle_timeout_s`` without a request, at most ``max_connections`` at once."""

    def __init__(self, snapshot: Callable[[], MonitorSnapshot | None], listen: str = DEFAULT_LISTEN, *,
                 idle_timeout_s: float = IDLE_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS) -> None:
        self.host, self.port = parse_listen(listen)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(MonitorCollector(snapshot))
        self.idle_timeout_s = idle_timeout_s
        self.max_connections = max_connections
        self._server: _BoundedServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "Exporter":
        handler = type("Handler", (MetricsHandler.factory(self.registry),), {"timeout": self.idle_timeout_s})
        try:
            self._server = _BoundedServer((self.host, self.port), handler, self.max_connections)
        except OSError as e:
            raise UserError(f"--listen {self.host}:{self.port}: cannot listen ({e.strerror or e}); "
                            "pick another port") from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="wattbench-exporter", daemon=True)
        self._thread.start()
        self.port = self._server.server_port
        return self

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}/metrics"

    def text(self) -> str:
        return generate_latest(self.registry).decode()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
            if self._thread is not None:
                self._thread.join(timeout=5)
