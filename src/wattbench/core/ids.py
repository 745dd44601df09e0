"""The one run-id format: ``YYYYMMDD-HHMMSS-xxxxxx`` (UTC wall time of the start, 3 random bytes).

``wattbench run`` ids are exactly this; ``agree`` ids are ``agree-`` + this, so the history
sorts and reads both the same way.
"""

from __future__ import annotations

import datetime as _dt
import secrets
import time


def new_run_id(wall_ns: int | None = None) -> str:
    ns = time.time_ns() if wall_ns is None else wall_ns  # a timestamp, not an interval
    stamp = _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"
