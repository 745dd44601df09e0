"""What every part of the result schema shares: the version, the verdict words, the base model."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

SCHEMA_VERSION = 2

# ``estimate``: no finding beyond a note, but the figures rest on a model of power, not a meter
# (accounting/findings.py); ``valid`` is kept for measured (or declared) figures
Verdict = Literal["valid", "estimate", "warn", "invalid"]

Num = int | float  # an int stays an int in result.json (concurrency 4, not 4.0)


class _M(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
