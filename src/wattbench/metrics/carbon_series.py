"""The one loader of carbon intensity: ``--carbon-intensity`` as a number or a file.

``parse_carbon_intensity(text)``: a number is a constant intensity in gCO2e/kWh; anything else is a
file path, read as

- **CSV** with a header row: the time column is the first whose name contains ``datetime`` or is
  ``time``/``timestamp``/``start``; the intensity column the first whose name contains
  ``carbon intensity``/``carbonintensity``/``carbon_intensity`` or is ``intensity``/``g_per_kwh``
  (Electricity Maps' CSV export: ``Datetime (UTC)``, ``Carbon Intensity gCO₂eq/kWh (direct)``, …);
- **JSON**: a list of objects, or an object holding one under ``history``/``data``/``series``
  (Electricity Maps' API: ``{"history": [{"datetime": …, "carbonIntensity": …}]}``), each with a
  time (``datetime``/``time``/``timestamp``/``start``) and an intensity
  (``carbonIntensity``/``carbon_intensity``/``intensity``/``g_per_kwh``).

Times are ISO-8601 date-times (UTC unless they carry an offset) or numbers of seconds since the
epoch. Rows are sorted by time; a time given twice, a negative or non-numeric intensity, or a file
with no rows is refused with one line naming the file, the row and what to do. Nothing is fetched
from the network: the user exports the series.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from wattbench.core.errors import UserError
from wattbench.metrics.carbon import IntensitySeries
from wattbench.workload.trace import parse_datetime_s

TIME_KEYS = ("datetime", "time", "timestamp", "start")
VALUE_KEYS = ("carbonintensity", "carbon_intensity", "intensity", "g_per_kwh")


def parse_carbon_intensity(text: str | float | None) -> IntensitySeries | None:
    """``None`` → None; a number (gCO2e/kWh) → constant; else a CSV/JSON file (see the module docstring)."""
    if text is None:
        return None
    try:
        g = float(text)
    except (TypeError, ValueError):
        return load_intensity_file(str(text))
    if not math.isfinite(g) or g < 0:
        raise UserError(f"--carbon-intensity must be a number of gCO2e/kWh >= 0 or a CSV/JSON file, got {text!r}")
    return IntensitySeries.constant(g)


def load_intensity_file(path: str) -> IntensitySeries:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--carbon-intensity {path}: neither a number (gCO2e/kWh) nor a readable file")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"--carbon-intensity {path}: cannot read the file ({e})") from None
    stripped = text.lstrip()
    rows = _json_rows(text, path) if stripped[:1] in ("[", "{") else _csv_rows(text, path)
    if not rows:
        raise UserError(f"--carbon-intensity {path}: the file has no rows of time and intensity")
    rows.sort(key=lambda r: r[1])
    for (la, ta, _), (lb, tb, _) in zip(rows, rows[1:]):
        if ta == tb:
            raise UserError(f"--carbon-intensity {path}: rows {la} and {lb} give the same time; keep one")
    return IntensitySeries(tuple(t for _, t, _ in rows), tuple(v for _, _, v in rows), f"file:{p.name}")


def _time_s(v: Any, where: str) -> float:
    """``v``: a CSV cell or a JSON value, whatever the file holds (refused unless a time)."""
    if isinstance(v, bool) or v is None:
        raise UserError(f"{where}: no time (give an ISO-8601 date-time or seconds since the epoch)")
    try:
        t = float(v)
    except (TypeError, ValueError):
        try:
            t = parse_datetime_s(str(v))
        except ValueError:
            raise UserError(f"{where}: {v!r} is neither a date-time nor seconds since the epoch") from None
    if not math.isfinite(t):
        raise UserError(f"{where}: the time {v!r} is not finite")
    return t


def _value(v: Any, where: str) -> float:
    """``v``: a CSV cell or a JSON value, whatever the file holds (refused unless an intensity)."""
    try:
        g = float(v)
    except (TypeError, ValueError):
        raise UserError(f"{where}: the intensity {v!r} is not a number of gCO2e/kWh") from None
    if isinstance(v, bool) or not math.isfinite(g) or g < 0:
        raise UserError(f"{where}: the intensity {v!r} must be a number of gCO2e/kWh >= 0")
    return g


def _norm(name: str) -> str:
    return name.strip().lower()


def _pick_column(names: list[str], which: str) -> int | None:
    normed = [_norm(n) for n in names]
    for i, n in enumerate(normed):
        if which == "time" and ("datetime" in n or n in TIME_KEYS):
            return i
        if which == "value" and ("carbon intensity" in n or n.replace(" ", "") in VALUE_KEYS
                                 or "carbonintensity" in n or "carbon_intensity" in n):
            return i
    return None


def _csv_rows(text: str, path: str) -> list[tuple[int, float, float]]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise UserError(f"--carbon-intensity {path}: the CSV file is empty")
    ti, vi = _pick_column(header, "time"), _pick_column(header, "value")
    if ti is None or vi is None:
        missing = "time column (such as 'datetime')" if ti is None else "intensity column (such as 'carbon_intensity')"
        raise UserError(f"--carbon-intensity {path}: the header has no {missing}; columns are {header[:8]}")
    rows = []
    for line, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        where = f"--carbon-intensity {path}:{line}"
        if len(row) <= max(ti, vi):
            raise UserError(f"{where}: the row has {len(row)} columns, the header {len(header)}")
        rows.append((line, _time_s(row[ti].strip(), where), _value(row[vi].strip(), where)))
    return rows


def _json_rows(text: str, path: str) -> list[tuple[int, float, float]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"--carbon-intensity {path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    if isinstance(data, dict):
        inner = next((data[k] for k in ("history", "data", "series") if isinstance(data.get(k), list)), None)
        if inner is None:
            raise UserError(f"--carbon-intensity {path}: expected a list of rows, or an object with 'history' or "
                            f"'data'; found keys {sorted(data)[:8]}")
        data = inner
    if not isinstance(data, list):
        raise UserError(f"--carbon-intensity {path}: expected a list of rows, got {type(data).__name__}")
    rows = []
    for i, obj in enumerate(data):
        where = f"--carbon-intensity {path}: row {i}"
        if not isinstance(obj, dict):
            raise UserError(f"{where}: expected an object with a time and an intensity, got {type(obj).__name__}")
        keys = list(obj)
        ti, vi = _pick_column(keys, "time"), _pick_column(keys, "value")
        if ti is None or vi is None:
            raise UserError(f"{where}: needs a time ('datetime') and an intensity ('carbonIntensity'); "
                            f"found keys {keys[:8]}")
        rows.append((i, _time_s(obj[keys[ti]], where), _value(obj[keys[vi]], where)))
    return rows
