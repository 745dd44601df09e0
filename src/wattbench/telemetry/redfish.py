"""Node power from a BMC over Redfish (HTTPS, stdlib ``urllib`` with an ``ssl`` context).

Chassis discovery: ``/redfish/v1/Chassis`` members (or the one given). For a chassis, the
reading comes from, in order:

1. ``EnvironmentMetrics`` -> ``PowerWatts.Reading`` (newer schema);
2. legacy ``Power`` -> ``PowerControl[0].PowerConsumedWatts``;
3. ``PowerSubsystem/PowerSupplies/*`` -> each supply's ``Metrics`` ``InputPowerWatts.Reading``, summed.

The links are taken from the chassis resource itself when it has them. Without a chassis id
the first chassis that yields a reading is used (others are listed in ``warnings``: adding a
GPU-baseboard chassis to the node chassis would count power twice). Boundary ``node``.
Credentials: ``REDFISH_USER``/``REDFISH_PASSWORD`` from the environment, or a file with
``user:password`` on its first line; never logged. ``verify_tls=False`` (spec ``insecure``) or
``ca_file`` for self-signed BMC certificates. BMCs refresh power readings every ~1-10 s.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Mapping

from wattbench.core.clock import now_ns
from wattbench.core.errors import SensorError, TargetError
from wattbench.core import origin
from wattbench.core.redact import redact_url

from wattbench.telemetry.base import Channel, Reading, Sensor

MAX_ANSWER_BYTES = 16 << 20  # of one Redfish resource (they are a few KB)


def load_credentials(cred_file: str | None = None, env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    if cred_file:
        try:
            first = Path(cred_file).read_text().splitlines()[0].strip()
        except (OSError, IndexError):
            raise SensorError(f"redfish: cannot read credentials file {cred_file}", "give a file with `user:password`") from None
        if ":" not in first:
            raise SensorError(f"redfish: credentials file {cred_file} has no `user:password` line")
        u, p = first.split(":", 1)
        return u, p
    names: Mapping[str, str] = os.environ if env is None else env
    if names.get("REDFISH_USER"):
        return names["REDFISH_USER"], names.get("REDFISH_PASSWORD", "")
    return None


class RedfishSensor(Sensor):
    name = "redfish"

    def __init__(self, base_url: str, chassis: str | None = None, verify_tls: bool = True, ca_file: str | None = None,
                 cred_file: str | None = None, timeout_s: float = 5.0, poll_interval_s: float = 1.0,
                 env: Mapping[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        if not self.base_url.startswith(("https://", "http://")):
            self.base_url = "https://" + self.base_url
        self.chassis = chassis
        self.verify_tls = verify_tls
        self.ca_file = ca_file
        self.cred_file = cred_file
        self.timeout_s = timeout_s
        self.poll_interval_s = poll_interval_s
        self._env = env
        self.warnings: list[str] = []
        self._auth: str | None = None
        self._ctx: ssl.SSLContext | None = None
        self._reader: Callable[[], float] | None = None  # the first of _readers that answered, once open
        self.cid = "redfish.node"

    def _context(self) -> ssl.SSLContext | None:
        if not self.base_url.startswith("https://"):
            return None
        if not self.verify_tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return ctx
        return ssl.create_default_context(cafile=self.ca_file)

    @staticmethod
    def _fatal(message: str, fix: str = "") -> SensorError:
        """An error no other chassis or resource would avoid (auth, TLS, unreachable)."""
        e = SensorError(message, fix)
        e.fatal = True  # type: ignore[attr-defined]
        return e

    def get(self, path: str) -> dict[str, Any]:
        url = path if path.startswith("http") else self.base_url + path
        if not origin.same_origin(url, self.base_url):  # a link to another host: the password stays home
            raise self._fatal(f"redfish: {self.base_url} links to another host ({redact_url(url)}); "
                              "wattbench sends the BMC's credentials only to the address it was given",
                              "give the BMC's own address")
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with origin.urlopen(req, timeout=self.timeout_s, context=self._ctx) as r:
                resource: dict[str, Any] = json.loads(r.read(MAX_ANSWER_BYTES))  # a Redfish resource is an object
                return resource
        except TargetError as e:  # a redirect to another host: refused, nothing sent there
            raise self._fatal(f"redfish: {e}", "give the BMC's own address (https:// if it redirects there)") from None
        except http.client.HTTPException as e:
            raise SensorError(f"redfish: {url} broke its answer off ({type(e).__name__})") from None
        except urllib.error.HTTPError as e:
            if e.code in (401, 403):
                raise self._fatal(f"redfish: {url} answered {e.code}",
                                  "set REDFISH_USER/REDFISH_PASSWORD or give `creds=FILE` with `user:password`") from None
            raise SensorError(f"redfish: {url} answered HTTP {e.code}") from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise self._fatal(f"redfish: TLS certificate of {self.base_url} not trusted ({reason.verify_message})",
                                  "give `ca=FILE` with the BMC's CA, or `insecure` to skip verification") from None
            raise self._fatal(f"redfish: cannot reach {url} ({reason})", "check the BMC address and that HTTPS is enabled") from None
        except (TimeoutError, OSError) as e:
            raise self._fatal(f"redfish: cannot reach {url} ({e})", "check the BMC address") from None
        except json.JSONDecodeError:
            raise SensorError(f"redfish: {url} did not return JSON", "is this a Redfish service? try /redfish/v1") from None

    @staticmethod
    def _link(res: dict[str, Any], key: str) -> str | None:
        v = res.get(key)
        return v.get("@odata.id") if isinstance(v, dict) else None

    def _readers(self, chassis_path: str) -> list[tuple[str, Callable[[], float]]]:
        """Reading functions for one chassis, in order of preference."""
        try:
            ch = self.get(chassis_path)
        except SensorError as e:
            if getattr(e, "fatal", False):
                raise
            ch = {}
        env_path = self._link(ch, "EnvironmentMetrics") or chassis_path + "/EnvironmentMetrics"
        power_path = self._link(ch, "Power") or chassis_path + "/Power"
        sub_path = self._link(ch, "PowerSubsystem") or chassis_path + "/PowerSubsystem"

        def env_metrics() -> float:
            return float(self.get(env_path)["PowerWatts"]["Reading"])

        def legacy() -> float:
            return float(self.get(power_path)["PowerControl"][0]["PowerConsumedWatts"])

        def supplies() -> float:
            sub = self.get(sub_path)
            ps_path = self._link(sub, "PowerSupplies") or sub_path + "/PowerSupplies"
            total, n = 0.0, 0
            for m in self.get(ps_path).get("Members", []):
                psu = self.get(m["@odata.id"])
                mpath = self._link(psu, "Metrics") or m["@odata.id"] + "/Metrics"
                total += float(self.get(mpath)["InputPowerWatts"]["Reading"])
                n += 1
            if n == 0:
                raise KeyError("no power supply")
            return total

        return [("EnvironmentMetrics.PowerWatts", env_metrics), ("Power.PowerControl.PowerConsumedWatts", legacy),
                ("PowerSubsystem.PowerSupplies.InputPowerWatts", supplies)]

    def open(self) -> list[Channel]:
        self._ctx = self._context()
        creds = load_credentials(self.cred_file, self._env)
        if creds:
            self._auth = "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
        if self.chassis:
            paths = [self.chassis if self.chassis.startswith("/") else f"/redfish/v1/Chassis/{self.chassis}"]
        else:
            paths = [m["@odata.id"] for m in self.get("/redfish/v1/Chassis").get("Members", [])]
            if not paths:
                raise SensorError(f"redfish: {self.base_url} lists no chassis", "give `chassis=ID`")
        for path in paths:
            for source, fn in self._readers(path):
                try:
                    fn()
                except SensorError as e:
                    if getattr(e, "fatal", False):
                        raise
                    continue
                except (KeyError, IndexError, TypeError, ValueError):
                    continue
                self._reader = fn
                others = [p for p in paths if p != path]
                if others:
                    self.warnings.append(f"redfish: using chassis {path}; not adding {', '.join(others)} "
                                         "(give chassis=ID to pick another)")
                chassis_id = path.rstrip("/").rsplit("/", 1)[-1]
                self.cid = f"redfish.{chassis_id}.node"
                return [Channel(id=self.cid, sensor=self.name, kind="power", quantity="power", unit="W",
                                boundary="node", device=f"{self.base_url}{path}", resolution=1.0,
                                source=f"redfish {source}", primary=True)]
        raise SensorError(f"redfish: no power reading under {', '.join(paths)}",
                          "this BMC exposes neither EnvironmentMetrics, Power nor PowerSubsystem readings; try ipmi")

    def read(self) -> list[Reading]:
        assert self._reader is not None, "open() first"
        a = now_ns()
        try:
            w = self._reader()
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise SensorError(f"redfish: reading vanished ({type(e).__name__}: {e})") from None
        b = now_ns()
        return [Reading((a + b) // 2, self.cid, w)]
