"""Power from Prometheus-format sources.

* ``DcgmSensor`` scrapes a DCGM exporter's ``/metrics`` directly (parsed with
  ``prometheus_client.parser.text_string_to_metric_families``): ``DCGM_FI_DEV_POWER_USAGE`` (W,
  power) and ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (mJ -> J, counter, primary). Label
  matchers (``gpu="0"``, ``Hostname="node1"``) pick series; one channel per matched series.
  dcgm-exporter collects every 30 s by default (``-c`` ms): set it to 1000 or lower, or the
  series is coarse. Boundary default ``accelerator``.
* ``PromQuerySensor`` asks a Prometheus server (``/api/v1/query``, instant query) for a PromQL
  expression that gives watts, one channel per result series. Boundary default ``node``.
  The value is stamped with the time of the query (the server's evaluation time is "now";
  the underlying sample may be up to one scrape interval old).

HTTP to these endpoints uses stdlib ``urllib`` (the sampler thread is synchronous).
"""

from __future__ import annotations

import json
import re
import http.client
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable

from prometheus_client.parser import text_string_to_metric_families

from wattbench.core.clock import now_ns
from wattbench.core.errors import SensorError, TargetError
from wattbench.core import origin
from wattbench.telemetry.base import BOUNDARIES, Channel, Kind, Reading, Sensor
from wattbench.core.errors import UserError

LabelKey = tuple[tuple[str, str], ...]  # the labels that name one series, sorted

POWER = "DCGM_FI_DEV_POWER_USAGE"
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", s).strip("_") or "x"


MAX_ANSWER_BYTES = 32 << 20  # of one exporter answer (a DCGM /metrics page is ~50 KB)


def _fetch(url: str, timeout_s: float, what: str, api_errors: bool = False) -> bytes:
    """The body at ``url``; one line on failure. ``api_errors``: an HTTP error whose body is the
    Prometheus API's JSON error (400/422/503 for a bad or failed query) is returned as the body,
    so the caller can say what the server said rather than "HTTP 400"."""
    try:
        with origin.urlopen(urllib.request.Request(url), timeout=timeout_s) as r:  # another host: refused
            return r.read(MAX_ANSWER_BYTES)
    except urllib.error.HTTPError as e:
        if api_errors:
            body = e.read(MAX_ANSWER_BYTES) or b""
            try:
                if json.loads(body).get("status") == "error":
                    return body
            except (ValueError, AttributeError):
                pass
        raise SensorError(f"{what}: {url} answered HTTP {e.code}", "check the URL path") from None
    except TargetError as e:
        raise SensorError(f"{what}: {e}", "give the exporter's final URL") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        raise SensorError(f"{what}: cannot reach {url} ({getattr(e, 'reason', e)})",
                          "check the address and that the endpoint is running") from None


def _check_boundary(b: str) -> str:
    if b not in BOUNDARIES:
        raise UserError(f"unknown boundary {b!r}; use one of {', '.join(BOUNDARIES)}")
    return b


class DcgmSensor(Sensor):
    name = "dcgm"

    def __init__(self, url: str, matchers: dict[str, str] | None = None, boundary: str = "accelerator",
                 timeout_s: float = 3.0, poll_interval_s: float = 1.0,
                 fetch: Callable[[str, float, str], bytes] | None = None) -> None:
        self.url = url
        self._fetch = fetch or _fetch  # (url, timeout_s, what) -> the body; a test passes scripted text
        self.matchers = dict(matchers or {})
        self.boundary = _check_boundary(boundary)
        self.timeout_s = timeout_s
        self.poll_interval_s = poll_interval_s
        self._series: dict[tuple[str, LabelKey], str] = {}

    def _scrape(self) -> list[tuple[str, dict[str, str], float]]:
        text = self._fetch(self.url, self.timeout_s, "dcgm").decode(errors="replace")
        out = []
        try:
            for fam in text_string_to_metric_families(text):
                for s in fam.samples:
                    name = ENERGY if s.name == ENERGY + "_total" else s.name
                    if name in (POWER, ENERGY) and all(s.labels.get(k) == v for k, v in self.matchers.items()):
                        out.append((name, s.labels, float(s.value)))
        except ValueError as e:
            raise SensorError(f"dcgm: {self.url} is not Prometheus text format ({e})", "point at the exporter's /metrics") from None
        return out

    @staticmethod
    def _key(labels: dict[str, str]) -> LabelKey:
        return tuple(sorted((k, v) for k, v in labels.items() if k in ("gpu", "UUID", "Hostname", "instance", "device")))

    def open(self) -> list[Channel]:
        samples = self._scrape()
        if not samples:
            raise SensorError(f"dcgm: no {POWER} or {ENERGY} series at {self.url}"
                              + (f" matching {self.matchers}" if self.matchers else ""),
                              "check the label matchers and that dcgm-exporter collects these fields")
        have_counter = {self._key(lab) for name, lab, _ in samples if name == ENERGY}
        chans = []
        kind: Kind
        for name, lab, _ in samples:
            key = self._key(lab)
            dev = "/".join(f"{k}={v}" for k, v in key) or "gpu"
            base = "dcgm." + ".".join(_slug(f"{k}{v}") for k, v in key if k in ("Hostname", "gpu")) if key else "dcgm"
            if name == ENERGY:
                cid, kind, q, unit, prim = base + ".energy", "counter", "energy", "J", True
            else:
                cid, kind, q, unit, prim = base + ".power", "power", "power", "W", key not in have_counter
            if (name, key) in self._series:
                continue
            self._series[(name, key)] = cid
            chans.append(Channel(id=cid, sensor=self.name, kind=kind, quantity=q, unit=unit, boundary=self.boundary,
                                 device=dev, source=f"{self.url} {name}", primary=prim,
                                 resolution=0.001 if kind == "counter" else None))
        return chans

    def read(self) -> list[Reading]:
        a = now_ns()
        samples = self._scrape()
        t = (a + now_ns()) // 2
        out = []
        for name, lab, v in samples:
            cid = self._series.get((name, self._key(lab)))
            if cid is not None:
                out.append(Reading(t, cid, v / 1000.0 if name == ENERGY else v))
        return out


class PromQuerySensor(Sensor):
    name = "prom"

    def __init__(self, base_url: str, query: str, boundary: str = "node", timeout_s: float = 5.0,
                 poll_interval_s: float = 1.0) -> None:
        if not query:
            raise UserError("prom: give a PromQL expression that yields watts: prom:http://prom:9090,query=EXPR")
        self.base_url = base_url.rstrip("/")
        self.query = query
        self.boundary = _check_boundary(boundary)
        self.timeout_s = timeout_s
        self.poll_interval_s = poll_interval_s
        self._ids: dict[LabelKey, str] = {}

    def _query(self) -> list[tuple[dict[str, str], float]]:
        url = f"{self.base_url}/api/v1/query?" + urllib.parse.urlencode({"query": self.query})
        body = _fetch(url, self.timeout_s, "prom", api_errors=True)
        try:
            d = json.loads(body)
        except json.JSONDecodeError:
            raise SensorError(f"prom: {self.base_url} did not answer JSON", "give the Prometheus server's base URL") from None
        if d.get("status") != "success":
            raise SensorError(f"prom: query failed: {d.get('error', d.get('status'))}", "check the PromQL expression")
        data = d.get("data", {})
        rtype, result = data.get("resultType"), data.get("result", [])
        if rtype == "scalar":
            return [({}, float(result[1]))]
        if rtype != "vector":
            raise SensorError(f"prom: query gives a {rtype}, not an instant vector", "use an instant expression")
        return [(r.get("metric", {}), float(r["value"][1])) for r in result]

    def open(self) -> list[Channel]:
        res = self._query()
        if not res:
            raise SensorError(f"prom: query {self.query!r} returned no series", "check the expression in the Prometheus UI")
        chans = []
        for metric, _ in res:
            key = tuple(sorted(metric.items()))
            label = ",".join(f"{k}={v}" for k, v in key if k != "__name__")
            cid = "prom." + (_slug(label) if label else "value")
            self._ids[key] = cid
            chans.append(Channel(id=cid, sensor=self.name, kind="power", quantity="power", unit="W",
                                 boundary=self.boundary, device=label or "query", source=f"PromQL {self.query}",
                                 primary=True))
        return chans

    def read(self) -> list[Reading]:
        a = now_ns()
        res = self._query()
        t = (a + now_ns()) // 2
        out = []
        for metric, v in res:
            cid = self._ids.get(tuple(sorted(metric.items())))
            if cid is not None and v == v:  # skip NaN
                out.append(Reading(t, cid, v))
        return out
