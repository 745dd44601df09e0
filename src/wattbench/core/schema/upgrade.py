"""Older ``result.json`` files in today's form: version 1's run analyses, and keys of ``extra``
typed since, moved to their fields (pure dict code, run before validation)."""

from __future__ import annotations

from typing import Any

from wattbench.core.schema.base import SCHEMA_VERSION

_V1_RUN_KEYS = ("sweep", "optimize", "pareto")
_V1_WINDOWS = {"idle_window": "idle", "idle_after_window": "idle_after"}
_V1_LEVEL_KEYS = ("trials", "power_split", "saturated_figures", "saturation_kinds")
# typed in version 2 after the first version-2 files were written: moved from ``extra``
# in files of either version
_EXTRA_RUN_KEYS = ("prefill_decode", "workload", "prompt_length_source", "tune")
_EXTRA_LEVEL_KEYS = ("trial", "timing", "thermal_before", "oversaturation", "stopped_early", "target_down")
# written per level but the same for every level of a run: moved to the run's field (the first
# level's, when the run has none) and dropped from the levels
_LEVEL_TO_RUN_KEYS = ("prompt_length_source",)


def _typed_from_extra(data: dict[str, Any]) -> dict[str, Any]:
    """Keys of ``extra`` typed since (``_EXTRA_*_KEYS``) moved to their fields; an empty carbon
    dict (what version 2 wrote without ``--carbon-intensity``) becomes ``None``. Not modified in place."""
    extra = data.get("extra") or {}
    levels = data.get("levels") or []
    level_keys = _EXTRA_LEVEL_KEYS + _LEVEL_TO_RUN_KEYS
    moves = any(k in extra for k in _EXTRA_RUN_KEYS) or data.get("carbon") == {} or any(
        isinstance(lv, dict) and any(k in (lv.get("extra") or {}) for k in level_keys) for lv in levels)
    if not moves:
        return data
    out = dict(data)
    if out.get("carbon") == {}:
        out["carbon"] = None
    extra = dict(extra)
    for key in _EXTRA_RUN_KEYS:
        if key in extra and out.get(key) is None:
            out[key] = extra.pop(key)
    out["extra"] = extra
    out["levels"] = [_level_from_extra(lv) for lv in levels]
    for key in _LEVEL_TO_RUN_KEYS:
        per_level = [lv[key] for lv in out["levels"] if isinstance(lv, dict) and key in lv]
        for lv in out["levels"]:
            if isinstance(lv, dict):
                lv.pop(key, None)
        if per_level and out.get(key) is None:
            out[key] = per_level[0]
    return out


def _level_from_extra(lv: Any) -> Any:
    if not isinstance(lv, dict):
        return lv
    lv = dict(lv)
    lx = dict(lv.get("extra") or {})
    for key in _EXTRA_LEVEL_KEYS + _LEVEL_TO_RUN_KEYS:
        if key in lx and lv.get(key) is None:
            lv[key] = lx.pop(key)
    lv["extra"] = lx
    return lv


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 ``result.json`` (a dict) in version-2 form; the input is not modified."""
    out = dict(data)
    extra = dict(out.get("extra") or {})
    for key in _V1_RUN_KEYS:
        if key in extra and out.get(key) is None:
            out[key] = extra.pop(key)
    for key, kind in _V1_WINDOWS.items():
        if isinstance(extra.get(key), dict) and out.get(key) is None:
            out[key] = {"kind": kind, **extra.pop(key)}
    levels = []
    for lv in out.get("levels") or []:
        if isinstance(lv, dict):
            lv = dict(lv)
            lx = dict(lv.get("extra") or {})
            for key in _V1_LEVEL_KEYS:
                if key in lx and not lv.get(key):
                    lv[key] = lx.pop(key)
            lv["extra"] = lx
        levels.append(lv)
    out["levels"] = levels
    out["extra"] = extra
    out["schema_version"] = SCHEMA_VERSION
    return _typed_from_extra(out)
