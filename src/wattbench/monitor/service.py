"""``Monitor``: the loop of ``wattbench monitor`` — scrape, sample, account, publish.

Ticks every ``interval_s``: scrapes the server's token counters, lets the sampler thread read the
power sensors into the tracker's bounded log, accounts each interval (``tracker``), serves the
snapshot (``exporter``) and appends the history (``history``). Library use::

    with Monitor("http://127.0.0.1:8000", ["nvml"], listen="127.0.0.1:9464") as m:
        summary = m.run(duration_s=3600)
"""

from __future__ import annotations

import dataclasses
import contextlib
import threading
from pathlib import Path
from typing import Any, Callable

from wattbench.monitor.snapshot import MonitorSnapshot
from wattbench.core.clock import MONOTONIC, Clock, ClockAnchor
from wattbench.core.errors import UserError
from wattbench.config.commands import DEFAULT_IDLE_THRESHOLD_TOK_S, DEFAULT_LISTEN, DEFAULT_MONITOR_INTERVAL_S
from wattbench.monitor.exporter import Exporter
from wattbench.monitor.history import HistoryWriter
from wattbench.monitor.sources import ResilientSensor, ServerScraper
from wattbench.monitor.tracker import DEFAULT_WINDOWS_S, EfficiencyTracker, Segment, Span
from wattbench.telemetry.base import Sensor
from wattbench.core.redact import combine_credentials, redact_url, url_secrets
from wattbench.core.secret_scope import scope
from wattbench.monitor.backoff import Backoff
from wattbench.telemetry.detect import autodetect
from wattbench.telemetry.sampler import Sampler
from wattbench.telemetry.spec import parse_sensor_spec

__all__ = ["Monitor"]

METRICS_SERVERS = "vLLM, SGLang, TGI, llama.cpp with --metrics"


class Monitor:
    def __init__(
        self,
        target: str | None,
        sensors: list[Sensor | str] | None = None,
        interval_s: float = DEFAULT_MONITOR_INTERVAL_S,
        listen: str | None = DEFAULT_LISTEN,
        history_path: str | Path | None = None,
        idle_threshold_tok_s: float = DEFAULT_IDLE_THRESHOLD_TOK_S,
        *,
        windows_s: tuple[float, ...] = DEFAULT_WINDOWS_S,
        api_key: str | None = None,
        sample_interval_s: float = 0.1,
        backoff_cap_s: float = 60.0,
        pue: float = 1.0,
        history_max_bytes: int | None = None,
        nvml: Any = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        if not interval_s > 0:
            raise UserError(f"--interval {interval_s}: must be > 0 seconds")
        if idle_threshold_tok_s < 0:
            raise UserError("--idle-threshold must be >= 0 tokens/s")
        if pue < 1:
            raise UserError(f"PUE must be >= 1.0 (got {pue:g})")

        # credentials in the URL become the Authorization header (an API key as well: one line); the
        # key, the URL's credentials and query never appear in the output, the exporter or the history:
        # registered from here until the monitor is closed
        with contextlib.ExitStack() as stack:  # a refused configuration leaves nothing registered
            stack.enter_context(scope(api_key, *url_secrets(target)))
            self.target_shown = redact_url(target)  # as given, credentials and query masked
            if target:
                target, api_key = combine_credentials(target, api_key)
            self.interval_s = float(interval_s)
            self.clock = clock  # scrapes, sensor reads, backoff and the tick schedule (a scripted one in tests)
            self.scraper = ServerScraper(target, api_key=api_key, timeout_s=min(2.0, max(0.2, self.interval_s)),
                                         backoff=Backoff(base_s=self.interval_s, cap_s=max(backoff_cap_s, self.interval_s)),
                                         clock=clock.now_ns) if target else None
            self.target = target
            self._sensor_args = list(sensors or [])
            self._nvml = nvml
            self.sample_interval_s = sample_interval_s
            self.backoff_cap_s = backoff_cap_s
            self.tracker = EfficiencyTracker(windows_s, idle_threshold_tok_s, pue=pue,
                                             max_lag_s=max(5.0, 3 * self.interval_s), stale_s=max(10.0, 5 * self.interval_s))
            self.listen = listen
            self.history_path = history_path
            self.history_max_bytes = history_max_bytes
            self.exporter: Exporter | None = None
            self.history: HistoryWriter | None = None
            self.sampler: Sampler | None = None
            self.sensors: list[ResilientSensor] = []
            self.problems: list[str] = []
            self._scrape_reported = False
            self.anchor: ClockAnchor | None = None
            self._snapshot: MonitorSnapshot | None = None
            self._lock = threading.Lock()
            self._stop = clock.event()
            self._started = False
            self.ticks = 0
            self._scope = stack.pop_all()

    # -- lifecycle ----------------------------------------------------------------------------
    def _build_sensors(self) -> list[Sensor]:
        if self._sensor_args:
            return [parse_sensor_spec(s) if isinstance(s, str) else s for s in self._sensor_args]

        sensors, problems = autodetect(nvml=self._nvml)
        self.problems.extend(problems)
        return sensors

    def start(self) -> "Monitor":
        if self._started:
            return self
        raw = self._build_sensors()
        base = max(0.5, self.sample_interval_s)
        self.sensors = [ResilientSensor(s, self.sample_interval_s, Backoff(base_s=base, cap_s=max(base, self.backoff_cap_s)),
                                        clock=self.clock.now_ns) for s in raw]
        sampler = self.sampler = Sampler(self.sensors, interval_s=self.sample_interval_s, clock=self.clock)
        sampler.log = self.tracker.log  # bounded: the sampler's own log would grow forever
        self.problems.extend(sampler.open())
        if not sampler.opened:
            why = "; ".join(self.problems) or "no sensor found on this machine"
            sampler.stop()
            raise UserError(f"no power sensor could be opened ({why}); pass --sensor, e.g. --sensor nvml "
                            "or --sensor const:node=WATTS")
        self.anchor = ClockAnchor.take(self.clock.now_ns)
        try:
            if self.history_path is not None:  # the user's own path is checked before the target is asked
                self.history = HistoryWriter(self.history_path, max_bytes=self.history_max_bytes, anchor=self.anchor)
            self._check_target()
            if self.history is not None:
                self.history.write({"type": "meta", "wall": self.history.wall(self.anchor.mono_ns),
                                    "target": self.target_shown, "interval_s": self.interval_s,
                                    "windows_s": list(self.tracker.windows_s),
                                    "idle_threshold_tok_s": self.tracker.idle_threshold_tok_s,
                                    "channels": [c.to_dict() for c in sampler.channels],
                                    "problems": self.problems})
            if self.listen:
                self.exporter = Exporter(self.snapshot, self.listen).start()
        except BaseException:
            self._teardown()
            if self.history is not None:
                self.history.discard_if_new_and_empty()  # a refused start leaves no file behind
            raise
        sampler.start()
        self._started = True
        self._publish()
        return self

    def _check_target(self) -> None:
        """Refuse a target that answers but has no token counters to read (an HTTP error status at
        ``/metrics``, or no counter of a known engine): the monitor could only show dashes. One
        that does not answer yet is watched and retried (a server starting up)."""
        if self.scraper is None:
            return
        self.scraper.poll()
        if self.scraper.refusal is not None:
            raise UserError(f"no token counters at --target: {self.scraper.refusal}; point --target at a server "
                            f"that exposes /metrics ({METRICS_SERVERS})")

    def stop(self) -> None:
        """Ask a running ``run()`` to return (thread-safe)."""
        self._stop.set()

    def close(self) -> dict[str, Any]:
        summary = self.summary()
        if self.history is not None and self._started:
            self.history.write({"type": "summary", **summary})
        self._teardown()
        self._scope.close()  # its secrets: no longer registered
        return summary

    def _teardown(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        if self.exporter is not None:
            self.exporter.stop()
        if self.history is not None:
            self.history.close()
        self._started = False

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop -----------------------------------------------------------------------------
    def tick(self) -> MonitorSnapshot:
        """One interval: scrape the server, account what the sensor data allows, publish."""
        if self.scraper is not None:
            t, vals = self.scraper.poll()
            if vals is None and self.scraper.scrapes == 0 and not self._scrape_reported:
                # said at the first failed scrape, not after the whole window
                self._scrape_reported = True
                st = self.scraper.status()
                self.problems.append(
                    f"no token counters from {st['url']} ({st['last_error'] or 'no answer'}): tokens cannot be "
                    f"counted; point --target at a server that exposes /metrics ({METRICS_SERVERS})")
        else:
            t, vals = self.clock.now_ns(), None
        self._record(self.tracker.mark(t, vals))
        self.ticks += 1
        return self._publish()

    def _record(self, done: list[tuple[Span, Segment | None]]) -> None:
        history = self.history
        if history is None or history.failed is not None:
            return
        o = self.tracker.t_origin_ns or 0
        for span, closed in done:
            if closed is not None:
                history.write({"type": "segment", "wall": history.wall(closed.t1_ns), **closed.to_dict(o)})
            history.write(self._span_line(history, span, o))
        if history.failed is not None:  # a full disk: stop, the figures so far kept in the summary
            self.problems.append(f"{history.failed}; the monitor stopped (its figures so far are in the "
                                 "summary); free space or give another --history")
            self._stop.set()

    def _span_line(self, history: HistoryWriter, span: Span, origin: int) -> dict[str, Any]:
        win = self.tracker.windows()
        return {
            "type": "span", "wall": history.wall(span.t1_ns), "t_s": (span.t1_ns - origin) / 1e9,
            "dt_s": span.duration_s, "state": span.state,
            "energy_j": span.energy_j,
            "power_w": {b: e / span.duration_s for b, e in span.energy_j.items()} if span.duration_s > 0 else {},
            "output_tokens": span.output_tokens, "prompt_tokens": span.prompt_tokens,
            "running": span.running, "waiting": span.waiting, "coverage": span.coverage,
            "counter_reset": span.counter_reset or None,
            "windows": {k: {"output_tokens_per_s": f["output_tokens_per_s"],
                            "j_per_output_token": f["j_per_output_token"]} for k, f in win.items()},
            "errors": {k: v["errors"] for k, v in self.sources().items() if v["errors"]},
        }

    def sources(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        if self.scraper is not None:
            out["server"] = self.scraper.status()
        for s in self.sensors:
            if self.sampler is not None and s in self.sampler.opened:
                out[s.name] = s.status()
        return out

    def _publish(self) -> MonitorSnapshot:
        snap = dataclasses.replace(self.tracker.snapshot(), sources=self.sources(), problems=tuple(self.problems),
                                   ticks=self.ticks, exporter=self.exporter.url if self.exporter else None)
        with self._lock:
            self._snapshot = snap
        return snap

    def snapshot(self) -> MonitorSnapshot | None:
        """The latest published snapshot; None before the first tick."""
        with self._lock:
            return self._snapshot

    def latest(self) -> MonitorSnapshot:
        """The latest published snapshot, else the tracker's figures so far."""
        return self.snapshot() or self.tracker.snapshot()

    def summary(self) -> dict[str, Any]:
        """The JSON summary: the latest snapshot's ``to_dict``, the closed segments, the history path."""
        snap = self.latest().to_dict()
        snap["segments"] = [s.to_dict(self.tracker.t_origin_ns or 0) for s in self.tracker.closed]
        snap["history"] = str(self.history_path) if self.history_path else None
        return snap

    def run(self, duration_s: float | None = None, on_tick: Callable[[MonitorSnapshot], None] | None = None
            ) -> dict[str, Any]:
        """Tick every ``interval_s`` (absolute deadlines) until ``duration_s`` passes, ``stop()`` is
        called, or Ctrl-C. Returns the summary; the caller closes (or use ``with``)."""
        if duration_s is not None and duration_s <= 0:
            raise UserError(f"--duration {duration_s}: must be > 0 seconds")
        self.start()
        now_ns = self.clock.now_ns
        t0 = now_ns()
        period = int(self.interval_s * 1e9)
        end = t0 + int(duration_s * 1e9) if duration_s is not None else None
        k = 0
        try:
            snap = self.tick()
            if on_tick is not None:
                on_tick(snap)
            while not self._stop.is_set():
                k += 1
                due = t0 + k * period
                if end is not None and due > end:
                    due = end
                wait = (due - now_ns()) / 1e9
                if wait > 0 and self._stop.wait(wait):
                    break
                snap = self.tick()
                if on_tick is not None:
                    on_tick(snap)
                if end is not None and now_ns() >= end:
                    break
                if now_ns() - due > period:  # fell behind by more than one interval: skip, don't burst
                    k = (now_ns() - t0) // period
        except KeyboardInterrupt:
            pass
        self.flush()
        return self.summary()

    def flush(self) -> None:
        """Let the sampler cover the last mark (up to a few sample periods), then account it."""
        if not self.tracker._points:
            return
        now_ns = self.clock.now_ns
        last = self.tracker._points[-1][0]
        deadline = now_ns() + int(max(3 * self.sample_interval_s, 0.3) * 1e9)
        while now_ns() < deadline:
            hz = self.tracker.horizon_ns(now_ns())
            if hz is not None and hz >= last:
                break
            self.clock.sleep(self.sample_interval_s / 2)
        self._record(self.tracker.account(now_ns()))
        self._publish()
