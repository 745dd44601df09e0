"""Node power from the BMC through IPMI DCMI: ``ipmitool dcmi power reading``.

Local (``/dev/ipmi0``) or remote over ``-I lanplus -H HOST -U USER``. The password never goes
into argv: ipmitool's ``-E`` reads it from the environment variable ``IPMI_PASSWORD`` (passed
to the child only), or ``-f FILE`` reads it from a file. It is never logged. Parses
``Instantaneous power reading: NNN Watts``; boundary ``node``, power kind. BMCs refresh this
about once a second (many average over their own sampling period), so it is polled every 1 s.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Mapping

from wattbench.core.secret_scope import clip
from wattbench.core.clock import now_ns
from wattbench.core.errors import SensorError
from wattbench.telemetry.base import Channel, Reading, Sensor
from wattbench.telemetry.probe import Found, Machine

READING_RE = re.compile(r"Instantaneous power reading:\s*([\d.]+)\s*Watts", re.I)


class IpmiSensor(Sensor):
    name = "ipmi"

    def __init__(self, host: str | None = None, user: str | None = None, password_file: str | None = None,
                 interface: str = "lanplus", ipmitool: str = "ipmitool", timeout_s: float = 5.0,
                 poll_interval_s: float = 1.0, env: Mapping[str, str] | None = None) -> None:
        self.host = host
        self.user = user
        self.password_file = password_file
        self.interface = interface
        self.ipmitool = ipmitool
        self.timeout_s = timeout_s
        self.poll_interval_s = poll_interval_s
        self._env = env
        self.cid = "ipmi.node" if not host else f"ipmi.{host}.node"

    def argv(self) -> list[str]:
        a = [self.ipmitool]
        if self.host:
            a += ["-I", self.interface, "-H", self.host]
            if self.user:
                a += ["-U", self.user]
            a += ["-f", self.password_file] if self.password_file else ["-E"]
        return a + ["dcmi", "power", "reading"]

    def _child_env(self) -> dict[str, str]:
        return dict(os.environ if self._env is None else self._env)

    def _reading(self) -> float:
        env = self._child_env()
        if self.host and not self.password_file and not env.get("IPMI_PASSWORD"):
            raise SensorError(f"ipmi: no password for {self.host}",
                              "set IPMI_PASSWORD in the environment or give `password_file=PATH`")
        try:
            p = subprocess.run(self.argv(), capture_output=True, text=True, timeout=self.timeout_s, env=env)
        except FileNotFoundError:
            raise SensorError("ipmi: ipmitool not found", "install it: `sudo apt-get install ipmitool`") from None
        except subprocess.TimeoutExpired:
            raise SensorError(f"ipmi: ipmitool timed out after {self.timeout_s:g} s",
                              "check the BMC address and that it answers IPMI (UDP 623)") from None
        m = READING_RE.search(p.stdout)
        if p.returncode == 0 and m:
            return float(m.group(1))
        err = (p.stderr.strip() or p.stdout.strip()).splitlines()
        msg = clip(err[-1], 200) if err else f"exit {p.returncode}"
        low = (p.stderr + p.stdout).lower()
        if "could not open device" in low or "/dev/ipmi" in low:
            fix = ("load the drivers (`sudo modprobe ipmi_devintf ipmi_si`) and allow access to /dev/ipmi0 "
                   "(run as root, or `sudo chmod a+rw /dev/ipmi0`)")
        elif "unable to establish" in low or "unauthorized" in low or "password" in low or "rakp" in low:
            fix = "check the BMC address, user and IPMI_PASSWORD / password_file"
        elif "invalid command" in low or "dcmi" in low or "not supported" in low:
            fix = "this BMC does not answer DCMI power readings; try `--sensor redfish:https://BMC`"
        else:
            fix = "run `ipmitool dcmi power reading` by hand to see why"
        raise SensorError(f"ipmi: no power reading ({msg})", fix)

    def open(self) -> list[Channel]:
        self._reading()
        return [Channel(id=self.cid, sensor=self.name, kind="power", quantity="power", unit="W", boundary="node",
                        device=self.host or "local BMC", resolution=1.0, update_period_s=1.0,
                        source="ipmitool dcmi power reading", primary=True)]

    def read(self) -> list[Reading]:
        a = now_ns()
        w = self._reading()
        b = now_ns()
        return [Reading((a + b) // 2, self.cid, w)]


def detect(m: Machine) -> Found:
    """The local BMC through ``ipmitool`` (DCMI node power) where ``ipmi_device`` exists; a problem
    line with the fix where ``ipmitool`` is missing."""
    looked = f"BMC ({m.ipmi_device} absent)"
    if not Path(m.ipmi_device).exists():
        return Found(looked=looked)
    if not m.which("ipmitool"):
        return Found(problems=[f"ipmi: {m.ipmi_device} exists but ipmitool is missing "
                               "(fix: `sudo apt-get install ipmitool`, then node power is read through DCMI)"],
                     looked=looked)
    return Found([IpmiSensor()], looked=looked)
