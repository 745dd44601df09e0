"""A scripted clock for the telemetry sampler: its threads run on time that passes only when
they wait, so what a test asserts about deadlines, reads and wall time is exact on any host.

``SamplerClock`` is a clock per thread (each sampler thread owns a sensor and its own time; the
test's thread has one too), started at ``start_ns``; the horizon is ``span_ns`` after it. ``install(monkeypatch, sampler)`` makes the
sampler read it (``telemetry.sampler.now_ns``) and wait on it: a wait of ``t`` seconds advances
the waiting thread's clock by ``t`` and returns at once. A thread's loop ends when its clock
reaches ``horizon_ns`` — ``Sampler.stop()`` joins the threads, which run to it — so every thread
runs the same scripted span however the host schedules it; ``elapse()`` moves the test's own
thread to the horizon (the span it "slept"). A sensor built with ``clock=sc`` stamps its reads on its thread's clock;
``sc.spend(ns)`` inside a read scripts how long that read took."""

from __future__ import annotations

import threading


class SamplerClock:
    def __init__(self, span_ns: int, start_ns: int = 1_000_000_000) -> None:
        self.start_ns, self.horizon_ns = start_ns, start_ns + span_ns
        self._t: dict[threading.Thread, int] = {}  # keyed by the thread itself (an ident is reused)
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return self._t.setdefault(threading.current_thread(), self.start_ns)

    def spend(self, ns: int) -> None:
        """The calling thread's clock moves on by ``ns`` (a read that took that long)."""
        with self._lock:
            k = threading.current_thread()
            self._t[k] = self._t.setdefault(k, self.start_ns) + int(ns)

    def elapse(self) -> None:
        """The calling thread's clock moves on to the horizon."""
        self.spend(self.horizon_ns - self())

    def install(self, monkeypatch, sampler) -> None:
        from wattbench.telemetry import sampler as sampler_module

        monkeypatch.setattr(sampler_module, "now_ns", self)
        sampler._stop = _ClockEvent(self)


class _ClockEvent:
    """``threading.Event`` as the sampler uses it, on the scripted clock."""

    def __init__(self, clock: SamplerClock) -> None:
        self.clock = clock

    def set(self) -> None:  # stop(): the threads end at the horizon, not when stop() is called
        pass

    def clear(self) -> None:
        pass

    def is_set(self) -> bool:
        return self.clock() >= self.clock.horizon_ns

    def wait(self, timeout: float | None = None) -> bool:
        if timeout:
            self.clock.spend(int(round(timeout * 1e9)))
        return self.is_set()
