"""The monitor's sources, each retried with exponential backoff when it fails.

``ServerScraper`` GETs the server's ``/metrics`` and maps the engine's series onto canonical
names with ``wattbench.server.metrics`` (``parse_exposition``, ``guess_engine``,
``canonical_values``). ``ResilientSensor`` wraps a sensor so that after a failed read it is not
read again until its backoff expires (the sampler sees no readings meanwhile, and the failure is
counted once per attempt).
"""

from __future__ import annotations

from wattbench.core.redact import authorization_header  # noqa: E402  (one home for Authorization headers)
from wattbench.core.secret_scope import clip

import http.client
import urllib.error
import urllib.request
from typing import Any, Callable

from wattbench.core.clock import now_ns
from wattbench.core.errors import TargetError
from wattbench.core import origin
from wattbench.server.metrics import MAX_EXPOSITION_BYTES
from wattbench.monitor.backoff import Backoff
from wattbench.telemetry.base import Channel, Reading, Sensor
from wattbench.server.metrics import canonical_values, guess_engine, metrics_url, parse_exposition, per_model_counters
from wattbench.server.openai import normalize_base_url
from wattbench.telemetry.sampler import period_of


class NoCounters(ValueError):
    """The server's ``/metrics`` answered, with no token counter of a known engine."""


class ServerScraper:
    def __init__(self, target: str, *, api_key: str | None = None, timeout_s: float = 2.0,
                 backoff: Backoff | None = None, clock: Callable[[], int] = now_ns) -> None:
        self.url = metrics_url(normalize_base_url(target))
        self.timeout_s = timeout_s
        self.headers = authorization_header(api_key)
        self.backoff = backoff or Backoff()
        self.clock = clock  # monotonic ns: the scrape's time and the backoff's
        self.engine: str | None = None
        self.scrapes = 0
        self.skipped = 0
        # the last scrape's answer, where the server answered but exposes no token counters (an HTTP
        # error status, or no counter of a known engine); None after a success or a scrape that got
        # no answer (refused, timed out: a server not up yet is retried, not refused)
        self.refusal: str | None = None

    def poll(self) -> tuple[int, dict[str, Any] | None]:
        """One scrape if due: (t_ns, canonical values) or (t_ns, None) when it failed or is backing off.

        Where the server labels its token counters per model, ``by_model`` holds them per model."""
        t_a = self.clock()
        if not self.backoff.ready(t_a):
            self.skipped += 1
            return t_a, None
        try:
            req = urllib.request.Request(self.url, headers=self.headers)
            with origin.urlopen(req, timeout=self.timeout_s) as r:  # noqa: S310 - another host never followed
                text = r.read(MAX_EXPOSITION_BYTES).decode("utf-8", "replace")
            t_b = self.clock()
            samples = parse_exposition(text)
            if self.engine is None:
                self.engine = guess_engine(samples)
            engine = self.engine
            # floats by canonical name, and "by_model" (model -> its counters) where the server has them
            vals: dict[str, Any] = canonical_values(samples, engine) if engine else {}
            if engine is None or "generation_tokens" not in vals:  # no engine: no values
                raise NoCounters(f"{self.url} has no generation token counter of a known engine")
            by_model = _scrubbed_models(per_model_counters(samples, engine))
            if by_model:
                vals["by_model"] = by_model
        except urllib.error.HTTPError as e:
            self.backoff.failure(self.clock(), f"HTTP {e.code} from {self.url}")
            self.refusal = f"{self.url} answered HTTP {e.code}"
            return t_a, None
        except NoCounters as e:
            self.backoff.failure(self.clock(), str(e))
            self.refusal = str(e)
            return t_a, None
        except (urllib.error.URLError, OSError, TimeoutError, ValueError, http.client.HTTPException,
                TargetError) as e:
            self.backoff.failure(self.clock(), f"{type(e).__name__}: {getattr(e, 'reason', e)}")
            return t_a, None
        self.backoff.success()
        self.scrapes += 1
        self.refusal = None
        return (t_a + t_b) // 2, vals

    def status(self) -> dict[str, Any]:
        b = self.backoff
        return {"url": self.url, "engine": self.engine, "errors": b.errors, "up": b.up, "last_error": b.last_error,
                "retry_in_s": b.delay_s() if not b.up else 0.0, "scrapes": self.scrapes}


MAX_MODEL_CHARS = 128  # of a model name as the monitor keeps, exports and writes it


def model_name(label: str) -> str:
    """A served model's name as the monitor keeps it: scrubbed of the registered secrets (a server
    that echoes the key in a ``model_name`` label), then cut to ``MAX_MODEL_CHARS`` (a 1 MiB label
    value would otherwise be written into every history line and exporter page). Scrub first: a
    cut secret no longer matches."""
    return clip(label, MAX_MODEL_CHARS, "…")


def _scrubbed_models(by_model: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per-model counters under ``model_name``'s names (the exporter, the history and the output
    show ``***`` for a secret); two names that come out alike add up."""
    out: dict[str, dict[str, float]] = {}
    for model, series in by_model.items():
        d = out.setdefault(model_name(model), {})
        for k, v in series.items():
            d[k] = d.get(k, 0.0) + v
    return out


class ResilientSensor(Sensor):
    """A sensor whose failing reads are retried with backoff instead of on every poll."""

    def __init__(self, inner: Sensor, default_interval_s: float, backoff: Backoff | None = None,
                 clock: Callable[[], int] = now_ns) -> None:
        self.inner = inner
        self.name = inner.name
        self.poll_interval_s = period_of(inner, default_interval_s)
        self.backoff = backoff or Backoff(base_s=max(0.5, self.poll_interval_s), cap_s=60.0)
        self.clock = clock  # monotonic ns, for the backoff
        self.warnings = getattr(inner, "warnings", [])

    def open(self) -> list[Channel]:
        chans = self.inner.open()
        self.warnings = getattr(self.inner, "warnings", [])
        return chans

    def read(self) -> list[Reading]:
        t = self.clock()
        if not self.backoff.ready(t):
            return []
        try:
            out = self.inner.read()
        except Exception as e:
            self.backoff.failure(self.clock(), f"{type(e).__name__}: {e}")
            raise
        self.backoff.success()
        return out

    def close(self) -> None:
        self.inner.close()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def status(self) -> dict[str, Any]:
        b = self.backoff
        return {"errors": b.errors, "up": b.up, "last_error": b.last_error,
                "retry_in_s": b.delay_s() if not b.up else 0.0}
