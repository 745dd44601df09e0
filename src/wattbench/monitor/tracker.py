"""The monitor's arithmetic core: streaming efficiency from power readings and server counters.

Feed it the sensors' channels and readings (``add_channels``, ``add_readings``) and, every
interval, a reference point (``mark(t_ns, server_values)``): the time of a server scrape and the
scraped canonical series (``prompt_tokens``, ``generation_tokens``, ``running``, ``waiting``), or
``None`` when the scrape failed. Between two consecutive points is an **interval**; its energy per
boundary is computed by ``wattbench.accounting.boundaries.boundary_totals`` over exactly that
interval, once the sensor data covers its end (or, when a sensor stalls, after ``max_lag_s``).

Tokens are the increase of the server's counters between two **successful** scrapes (a counter
that went down was reset by a server restart: the new value is what was counted since). When a
scrape fails, the intervals until the next success are merged into one **span** whose energy is
their sum, so tokens and energy always cover the same time. Spans are the unit of everything
downstream:

* cumulative totals (energy per boundary, tokens, time);
* sliding windows (e.g. 10 s, 1 min, 10 min): sums over the spans that lie inside the window;
* idle/loaded segmentation: a span is ``loaded`` when the server had running requests at its end
  or its output token rate exceeds ``idle_threshold_tok_s``, ``idle`` otherwise, ``unknown``
  when its tokens are unknown; consecutive spans of one state form a segment.

Per served model (where the server labels its token counters with the model): each span's energy
is split over the models by their tokens in it (an estimate). At most ``models_kept`` models are
kept by name, the ones with the most output tokens; a model pushed out, and every model that is
not kept, adds up under ``OTHER_MODELS``, so the models' figures always sum to the whole. A model's
tokens in a span are its counters' increase since the last scrape that listed it; what the
per-model increases leave of the server's total (a model first seen, a label that churns) is
``OTHER_MODELS``'s too.

Memory is flat: readings are trimmed to the next window's needs, spans are kept only for the
longest window, closed segments in a ring of ``segments_kept``, models in ``models_kept`` + 1
entries whatever labels a server invents (the scrape itself is bounded by
``server.metrics.MAX_EXPOSITION_BYTES``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from wattbench.monitor.snapshot import MonitorSnapshot
from wattbench.accounting.boundaries import contains_work
from wattbench.config.commands import DEFAULT_IDLE_THRESHOLD_TOK_S
from wattbench.monitor.store import DEFAULT_MAX_POINTS, BoundedTelemetryLog
from wattbench.telemetry.base import Channel, Reading
from wattbench.accounting.boundaries import boundary_totals
from wattbench.accounting.request_energy import split_by_tokens
from wattbench.metrics import efficiency as eff

# One scrape of the server as monitor.sources.ServerScraper.poll gives it: a float per canonical
# name (server.metrics.canonical_values) and, where the server labels its token counters by model,
# "by_model": model -> counter -> value.
ServerValues = dict[str, Any]
# An accounted interval not yet closed into a span: (t0_ns, t1_ns, energy_j and coverage by boundary).
_Pending = tuple[int, int, dict[str, float], dict[str, float]]

DEFAULT_WINDOWS_S = (10.0, 60.0, 600.0)
MAX_PENDING = 64
REBUILD_EVERY = 1000
MODELS_KEPT = 32  # served models kept by name; the rest add up under OTHER_MODELS
OTHER_MODELS = "(other models)"  # not a valid model id on any engine (spaces, parentheses)


def window_label(seconds: float) -> str:
    s = float(seconds)
    if s >= 3600 and s % 3600 == 0:
        return f"{int(s // 3600)}h"
    if s >= 60 and s % 60 == 0:
        return f"{int(s // 60)}m"
    return f"{s:g}s"


@dataclass
class Span:
    """Time between two successful scrapes (or two marks when tokens are unknown)."""

    t0_ns: int
    t1_ns: int
    energy_j: dict[str, float]  # boundaries whose energy is known over the whole span
    output_tokens: float | None = None
    prompt_tokens: float | None = None
    running: float | None = None
    waiting: float | None = None
    state: str = "unknown"
    coverage: dict[str, float] = field(default_factory=dict)
    counter_reset: bool = False
    # per served model where the server labels its token counters (prompt, output tokens)
    tokens_by_model: dict[str, tuple[float, float]] | None = None

    @property
    def duration_s(self) -> float:
        return (self.t1_ns - self.t0_ns) / 1e9


@dataclass
class _Acc:
    """Streaming sums over spans: time, energy per boundary, tokens, and energy over token-known time."""

    duration_s: float = 0.0
    energy_j: dict[str, float] = field(default_factory=dict)
    energy_s: dict[str, float] = field(default_factory=dict)  # time over which each boundary's energy is known
    tok_duration_s: float = 0.0
    output_tokens: float = 0.0
    prompt_tokens: float = 0.0
    tok_energy_j: dict[str, float] = field(default_factory=dict)  # energy over spans with known tokens

    def add(self, s: Span) -> None:
        d = s.duration_s
        self.duration_s += d
        for b, e in s.energy_j.items():
            self.energy_j[b] = self.energy_j.get(b, 0.0) + e
            self.energy_s[b] = self.energy_s.get(b, 0.0) + d
        if s.output_tokens is not None:
            self.tok_duration_s += d
            self.output_tokens += s.output_tokens
            self.prompt_tokens += s.prompt_tokens or 0.0
            for b, e in s.energy_j.items():
                self.tok_energy_j[b] = self.tok_energy_j.get(b, 0.0) + e

    def sub(self, s: Span) -> None:
        """Remove a span added before (sliding windows)."""
        d = s.duration_s
        self.duration_s -= d
        for b, e in s.energy_j.items():
            self.energy_j[b] -= e
            self.energy_s[b] -= d
            if self.energy_s[b] <= 1e-9:
                del self.energy_j[b], self.energy_s[b]
        if s.output_tokens is not None:
            self.tok_duration_s -= d
            self.output_tokens -= s.output_tokens
            self.prompt_tokens -= s.prompt_tokens or 0.0
            for b, e in s.energy_j.items():
                self.tok_energy_j[b] -= e
                if self.tok_duration_s <= 1e-9:
                    self.tok_energy_j.pop(b, None)

    def figures(self) -> dict[str, Any]:
        bounds = sorted(self.energy_j)
        work = [b for b in bounds if contains_work(b, bounds)]  # per token only where the work is
        return {
            "duration_s": self.duration_s,
            "output_tokens": self.output_tokens if self.tok_duration_s > 0 else None,
            "prompt_tokens": self.prompt_tokens if self.tok_duration_s > 0 else None,
            "output_tokens_per_s": (self.output_tokens / self.tok_duration_s) if self.tok_duration_s > 0 else None,
            "energy_j": dict(self.energy_j),
            "power_w": {b: eff.avg_power_w(self.energy_j[b], self.energy_s[b]) for b in bounds},
            "j_per_output_token": {b: eff.j_per_token(self.tok_energy_j.get(b), self.output_tokens) for b in work},
            "output_tokens_per_kwh": {b: eff.tokens_per_kwh(self.output_tokens, self.tok_energy_j.get(b))
                                      for b in work},
        }


@dataclass
class Segment:
    state: str
    t0_ns: int
    t1_ns: int
    acc: _Acc = field(default_factory=_Acc)
    spans: int = 0

    def to_dict(self, t_origin_ns: int) -> dict[str, Any]:
        f = self.acc.figures()
        return {"state": self.state, "start_s": (self.t0_ns - t_origin_ns) / 1e9,
                "end_s": (self.t1_ns - t_origin_ns) / 1e9, "spans": self.spans, **f}


class EfficiencyTracker:
    def __init__(
        self,
        windows_s: tuple[float, ...] = DEFAULT_WINDOWS_S,
        idle_threshold_tok_s: float = DEFAULT_IDLE_THRESHOLD_TOK_S,
        *,
        pue: float = 1.0,
        context_s: float = 5.0,
        max_lag_s: float = 5.0,
        stale_s: float = 10.0,
        segments_kept: int = 256,
        max_points: int = DEFAULT_MAX_POINTS,
        models_kept: int = MODELS_KEPT,
    ) -> None:
        if not windows_s or any(w <= 0 for w in windows_s):
            raise ValueError("windows must be positive durations in seconds")
        if idle_threshold_tok_s < 0:
            raise ValueError("idle threshold must be >= 0 tokens/s")
        if models_kept < 1:
            raise ValueError("models_kept must be >= 1")
        self.models_kept = int(models_kept)
        self.windows_s = tuple(sorted(float(w) for w in windows_s))
        self.idle_threshold_tok_s = float(idle_threshold_tok_s)
        self.pue = pue
        self.context_ns = int(context_s * 1e9)
        self.max_lag_ns = int(max_lag_s * 1e9)
        self.stale_ns = int(stale_s * 1e9)
        self.log = BoundedTelemetryLog(max_points=max_points)
        self.t_origin_ns: int | None = None
        self._points: deque[tuple[int, ServerValues | None]] = deque()  # marks not yet accounted (after the last)
        self._last: tuple[int, ServerValues | None] | None = None  # last accounted mark
        self._good: tuple[int, ServerValues] | None = None  # last successful scrape accounted
        self._pending: list[_Pending] = []  # intervals since _good
        self.spans: deque[Span] = deque()  # spans inside the longest window
        # per window: spans inside it and their running sums (rebuilt every REBUILD_EVERY spans)
        self._win: list[tuple[float, deque[Span], _Acc]] = [(w, deque(), _Acc()) for w in self.windows_s]
        self._since_rebuild = 0
        self.total = _Acc()
        self.states: dict[str, _Acc] = {}
        self.segment: Segment | None = None
        self.closed: deque[Segment] = deque(maxlen=segments_kept)
        self.segments_closed = 0
        self.counter_resets = 0
        self.forced = 0  # intervals accounted before the sensor data covered their end
        self.intervals = 0
        self.last_span: Span | None = None
        self.energy_total_j: dict[str, float] = {}  # every accounted interval, tokens known or not
        self.by_model: dict[str, dict[str, Any]] = {}  # model -> energy per boundary (estimate) and tokens
        self.models_folded = 0  # kept models later folded into OTHER_MODELS (to make room)

    # -- input ------------------------------------------------------------------------------
    def add_channels(self, channels: list[Channel]) -> None:
        self.log.add_channels(channels)

    def add_readings(self, readings: list[Reading]) -> None:
        self.log.add(readings)

    def _energy_channels(self) -> list[str]:
        chans = [c for c in self.log.channels.values() if c.boundary and c.kind in ("counter", "power")]
        prim = [c.id for c in chans if c.primary]
        return prim or [c.id for c in chans]

    def horizon_ns(self, now_ns: int) -> int | None:
        """Time up to which every live energy channel has data (stale channels ignored)."""
        lat = [self.log.latest_t(c) for c in self._energy_channels()]
        live = [t for t in lat if t is not None and t >= now_ns - self.stale_ns]
        return min(live) if live else None

    def mark(self, t_ns: int, server: ServerValues | None) -> list[tuple[Span, Segment | None]]:
        """Add a reference point (a scrape's time and values, or None when it failed) and account
        what the data allows. Returns the spans completed (each with the segment it closed, if any)."""
        if self.t_origin_ns is None:
            self.t_origin_ns = t_ns
        if self._last is None:
            self._last = (t_ns, server)
            if server is not None:
                self._good = (t_ns, server)
            return []
        self._points.append((t_ns, server))
        return self.account(t_ns)

    def account(self, now_ns: int) -> list[tuple[Span, Segment | None]]:
        out: list[tuple[Span, Segment | None]] = []
        hz = self.horizon_ns(now_ns)
        while self._points:
            t1, srv = self._points[0]
            ready = hz is not None and t1 <= hz
            if not ready and t1 > now_ns - self.max_lag_ns:
                break
            self._points.popleft()
            if not ready:
                self.forced += 1
            assert self._last is not None  # a point is queued only after the first mark set it
            t0 = self._last[0]
            energy: dict[str, float] = {}
            cov: dict[str, float] = {}
            if t1 > t0:
                for b, tot in boundary_totals(self.log, t0, t1, pue=self.pue).items():
                    if tot.energy_j is not None:
                        energy[b] = tot.energy_j
                        cov[b] = tot.coverage if tot.coverage is not None else 0.0
            self.intervals += 1
            for b, e in energy.items():
                self.energy_total_j[b] = self.energy_total_j.get(b, 0.0) + e
            self._last = (t1, srv)
            self._pending.append((t0, t1, energy, cov))
            span = self._close_span(t1, srv)
            if span is not None:
                out.append((span, self._segment(span)))
        if self._last is not None:
            self.log.trim_before(self._last[0] - self.context_ns)
        return out

    def _close_span(self, t1: int, srv: ServerValues | None) -> Span | None:
        prev = self._good[1] if self._good is not None else None
        tokens_known = srv is not None and prev is not None and "generation_tokens" in srv \
            and "generation_tokens" in prev
        if srv is not None and self._good is None:
            tokens_known = False
        if srv is None and self._good is not None:
            if len(self._pending) > MAX_PENDING:  # a long outage: keep one merged interval, not one per tick
                self._pending = [_merge(self._pending)]
            return None  # wait for the next successful scrape: tokens over the gap are unknown until then
        t0, _, energy, cov = _merge(self._pending)
        self._pending = []
        span = Span(t0, t1, energy, coverage=cov)
        if srv is not None:
            span.running = srv.get("running")
            span.waiting = srv.get("waiting")
        if tokens_known and srv is not None and prev is not None:
            span.output_tokens, r1 = _delta(prev.get("generation_tokens"), srv.get("generation_tokens"))
            span.prompt_tokens, r2 = _delta(prev.get("prompt_tokens"), srv.get("prompt_tokens"))
            span.counter_reset = r1 or r2
            self.counter_resets += int(span.counter_reset)
            self._by_model(span, prev.get("by_model"), srv.get("by_model"))
        if srv is not None:
            self._good = (t1, srv)
        span.state = self._state(span)
        self.total.add(span)
        self.states.setdefault(span.state, _Acc()).add(span)
        self.spans.append(span)
        self.last_span = span
        longest = int(self.windows_s[-1] * 1e9)
        while self.spans and self.spans[0].t0_ns < t1 - longest:
            self.spans.popleft()
        self._slide(span)
        return span

    def _by_model(self, span: Span, prev: dict[str, dict[str, float]] | None,
                  cur: dict[str, dict[str, float]] | None) -> None:
        """Split the span's energy over the models by their token counters' increase (an estimate).

        A kept model's tokens are its counters' increase since ``prev`` (from 0 where ``prev`` did
        not list it); what the kept models' increases leave of the span's total (models not kept,
        a label that churns) is ``OTHER_MODELS``'s."""
        if not prev or not cur:
            return
        seen: dict[str, tuple[float, float]] = {}
        for m, c in cur.items():
            p = prev.get(m, {})
            out, _ = _delta(p.get("generation_tokens", 0.0), c.get("generation_tokens"))
            inp, _ = _delta(p.get("prompt_tokens", 0.0), c.get("prompt_tokens"))
            seen[m] = (inp or 0.0, out or 0.0)
        toks: dict[str, tuple[float, float]] = {}
        other_in = other_out = 0.0
        kept = {m for m in self.by_model if m != OTHER_MODELS}
        # the busiest first: a kept model stays; a new one takes a free place, or the place of the
        # kept model (not in this span) with the fewest output tokens so far if it produced more now
        for m, (inp, out) in sorted(seen.items(), key=lambda kv: -kv[1][1]):
            if m == OTHER_MODELS:
                other_in, other_out = other_in + inp, other_out + out
                continue
            if m not in kept and len(kept) >= self.models_kept:
                idle = [k for k in kept if k not in toks]
                least = min(idle, key=lambda k: self.by_model[k]["output_tokens"]) if idle else None
                if least is None or out <= self.by_model[least]["output_tokens"]:
                    other_in, other_out = other_in + inp, other_out + out
                    continue
                self._fold(least)
                kept.discard(least)
            kept.add(m)
            toks[m] = (inp, out)
        # what no kept model accounts for: models not kept, and any part of the server's total the
        # per-model counters do not explain (a churning label counted from 0 is capped by the total)
        total_out = span.output_tokens
        total_in = span.prompt_tokens
        kept_out = sum(o for _, o in toks.values())
        kept_in = sum(i for i, _ in toks.values())
        if total_out is not None:
            other_out = max(0.0, total_out - kept_out)
        if total_in is not None:
            other_in = max(0.0, total_in - kept_in)
        if other_in > 0 or other_out > 0:
            toks[OTHER_MODELS] = (other_in, other_out)
        span.tokens_by_model = toks
        shares = split_by_tokens(span.energy_j, {m: a + b for m, (a, b) in toks.items()})
        for m, (inp, out) in toks.items():
            d = self.by_model.setdefault(m, _model_entry())
            d["output_tokens"] += out
            d["prompt_tokens"] += inp
            for b, e in shares.get(m, {}).items():
                d["energy_j"][b] = d["energy_j"].get(b, 0.0) + e

    def _fold(self, model: str) -> None:
        """Fold a kept model's figures into ``OTHER_MODELS`` (to make room for a busier one)."""
        gone = self.by_model.pop(model)
        o = self.by_model.setdefault(OTHER_MODELS, _model_entry())
        o["output_tokens"] += gone["output_tokens"]
        o["prompt_tokens"] += gone["prompt_tokens"]
        for b, e in gone["energy_j"].items():
            o["energy_j"][b] = o["energy_j"].get(b, 0.0) + e
        self.models_folded += 1

    def models(self) -> dict[str, Any]:
        """Energy per served model since the start (an estimate: each span's energy split by the
        models' prompt + output tokens in it), with J per output token and the share per boundary."""
        if not self.by_model:
            return {}
        totals: dict[str, float] = {}
        for d in self.by_model.values():
            for b, e in d["energy_j"].items():
                totals[b] = totals.get(b, 0.0) + e
        out: dict[str, Any] = {"label": "estimate",
                               "method": "each interval's energy split over the models by their prompt + output "
                                         "tokens in it (the server's per-model counters)", "models": {},
                               "models_kept": self.models_kept, "models_folded": self.models_folded}
        for m, d in sorted(self.by_model.items()):
            out["models"][m] = {
                "energy_j": dict(d["energy_j"]), "output_tokens": d["output_tokens"], "prompt_tokens": d["prompt_tokens"],
                "j_per_output_token": {b: eff.j_per_token(e, d["output_tokens"]) for b, e in d["energy_j"].items()
                                       if contains_work(b, d["energy_j"])},
                "share": {b: e / totals[b] if totals[b] > 0 else None for b, e in d["energy_j"].items()},
            }
        return out

    def _slide(self, span: Span) -> None:
        self._since_rebuild += 1
        rebuild = self._since_rebuild >= REBUILD_EVERY  # bound floating-point drift of the running sums
        if rebuild:
            self._since_rebuild = 0
        for i, (w, dq, acc) in enumerate(self._win):
            start = span.t1_ns - int(w * 1e9)
            dq.append(span)
            acc.add(span)
            while dq and dq[0].t0_ns < start:
                acc.sub(dq.popleft())
            if rebuild:
                fresh = _Acc()
                for x in dq:
                    fresh.add(x)
                self._win[i] = (w, dq, fresh)

    def _state(self, span: Span) -> str:
        if span.output_tokens is None:
            return "unknown"
        busy = (span.running or 0) > 0
        rate = span.output_tokens / span.duration_s if span.duration_s > 0 else 0.0
        return "loaded" if busy or rate > self.idle_threshold_tok_s else "idle"

    def _segment(self, span: Span) -> Segment | None:
        closed = None
        seg = self.segment
        if seg is not None and seg.state != span.state:
            self.closed.append(seg)
            self.segments_closed += 1
            closed = seg
            seg = None
        if seg is None:
            seg = self.segment = Segment(span.state, span.t0_ns, span.t1_ns)
        seg.t1_ns = span.t1_ns
        seg.acc.add(span)
        seg.spans += 1
        return closed

    # -- output -----------------------------------------------------------------------------
    def windows(self) -> dict[str, dict[str, Any]]:
        """Figures over each sliding window (the spans that lie fully inside it), plus ``total``."""
        out = {window_label(w): acc.figures() for w, _, acc in self._win}
        out["total"] = self.total.figures()
        return out

    def idle_power_w(self) -> dict[str, float]:
        a = self.states.get("idle")
        return {} if a is None else {b: a.energy_j[b] / a.energy_s[b] for b in a.energy_j if a.energy_s[b] > 0}

    def loaded_power_w(self) -> dict[str, float]:
        a = self.states.get("loaded")
        return {} if a is None else {b: a.energy_j[b] / a.energy_s[b] for b in a.energy_j if a.energy_s[b] > 0}

    def segmentation(self) -> dict[str, Any]:
        """Idle vs loaded over the whole run: time, energy, power and J/token per state; the
        loaded state's dynamic J/token (loaded energy minus idle power × loaded time)."""
        out: dict[str, Any] = {}
        idle_w = self.idle_power_w()
        for st, a in self.states.items():
            f = a.figures()
            if st == "loaded" and idle_w and a.output_tokens > 0:
                f["dynamic_j_per_output_token"] = {
                    b: eff.j_per_token(a.tok_energy_j[b] - idle_w[b] * a.tok_duration_s, a.output_tokens)
                    for b in a.tok_energy_j if b in idle_w and contains_work(b, a.tok_energy_j)
                }
            out[st] = f
        out["segments_closed"] = self.segments_closed
        return out

    def snapshot(self) -> MonitorSnapshot:
        """The figures so far (the service adds its sources, problems and ticks)."""
        o = self.t_origin_ns or 0
        ls = self.last_span
        return MonitorSnapshot(
            t_s=(ls.t1_ns - o) / 1e9 if ls else 0.0,
            state=ls.state if ls else None,
            power_w={b: e / ls.duration_s for b, e in ls.energy_j.items()} if ls and ls.duration_s > 0 else {},
            running=ls.running if ls else None,
            waiting=ls.waiting if ls else None,
            windows=self.windows(),
            idle_power_w=self.idle_power_w(),
            loaded_power_w=self.loaded_power_w(),
            segmentation=self.segmentation(),
            segment=self.segment.to_dict(o) if self.segment else None,
            energy_total_j=dict(self.energy_total_j),
            by_model=self.models(),
            counter_resets=self.counter_resets,
            intervals=self.intervals,
            forced_intervals=self.forced,
            buffered_points=self.log.points(),
        )


def _model_entry() -> dict[str, Any]:
    return {"energy_j": {}, "output_tokens": 0.0, "prompt_tokens": 0.0}


def _merge(parts: list[_Pending]) -> _Pending:
    bounds = set(parts[0][2])
    for p in parts[1:]:
        bounds &= set(p[2])
    return (parts[0][0], parts[-1][1], {b: sum(p[2][b] for p in parts) for b in bounds},
            {b: min(p[3][b] for p in parts) for b in bounds})


def _delta(prev: float | None, cur: float | None) -> tuple[float | None, bool]:
    if prev is None or cur is None:
        return None, False
    if cur < prev:  # the server restarted: its counter began again from 0
        return cur, True
    return cur - prev, False
