"""What every part of the result schema shares: the version, the verdict words, the base model."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

SCHEMA_VERSION = 2

# ``estimate``: no finding beyond a note, but the figures rest on a model of power, not a meter
# (accounting/findings.py); ``valid`` is kept for measured (or declared) figures
Verdict = Literal["valid", "estimate", "warn", "invalid"]

Num = int | float  # an int stays an int in result.json (concurrency 4, not 4.0)


class _M(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _Sparse(_M):
    """A block whose writer sets only the keys it has a value for (a thermal summary without a
    clock channel has no clock key): it is written back with the keys that were set (given, read
    or assigned) and its extras, never a declared field's default — the file keeps the shape its
    writer gave it, and a field added later does not appear as ``null`` in older blocks."""

    @model_serializer(mode="wrap")
    def _set_keys_only(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if not isinstance(out, dict):
            return out
        keep = set(self.model_fields_set) | set(self.model_extra or {})
        return {k: v for k, v in out.items() if k in keep}
