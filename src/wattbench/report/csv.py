"""CSV exports: a per-level summary (long form: one row per level × window × boundary shown — a
boundary equal to another, ``host`` = the ``cpu`` estimate, is one row whose ``same_energy_as``
names the other: ``results/headline.py`` rule 5) and one row per request. Column lists are ``SUMMARY_COLUMNS`` and ``REQUEST_COLUMNS`` (documented in
docs/reports.md). Values are copied from ``result.json``; per-request latencies come from
``wattbench.metrics.request_latency``.

Text cells that a spreadsheet would read as a formula (starting with ``=``, ``+``, ``-``, ``@``,
tab or CR) are written with a leading ``'``.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Iterable

from wattbench.core.errors import UserError
from wattbench.report import format as F
from wattbench.results.headline import boundary_order, shown_boundaries
from wattbench.report.data import RunData
from wattbench.report.tables import SERVING_LATENCY, SERVING_STATS
from wattbench.results.headline import same_as
from wattbench.core.schema import BoundaryEnergy, LevelResult
from wattbench.metrics.request_latency import per_request_latencies

SUMMARY_FILE = "levels.csv"
REQUESTS_FILE = "requests.csv"

# latency as `vllm bench serve`, AIPerf and GuideLLM report it: mean, p50, p90, p95, p99 of each
# (report/tables.py SERVING_LATENCY x SERVING_STATS, the one list)
LATENCY_COLUMNS = [f"{kind}_ms_{stat}" for kind in SERVING_LATENCY for stat in SERVING_STATS]
LEVEL_COLUMNS = [
    "run_id", "level", "label", "mode", "target", "verdict", "validity_reasons", "completed", "failed", "warmup",
    "duration_s", "output_tokens", "input_tokens", "output_tokens_per_s", "input_tokens_per_s",
    "total_tokens_per_s", "requests_per_s", "mean_in_flight", "achieved_rate_rps", *LATENCY_COLUMNS,
]
ENERGY_COLUMNS = [
    "window", "boundary", "energy_label", "method", "energy_j", "avg_power_w", "p95_power_w", "p99_power_w",
    "max_power_w", "idle_power_w", "idle_energy_j", "dynamic_energy_j", "j_per_output_token", "j_per_token",
    "output_tokens_per_s_per_kw", "tokens_per_kwh", "output_tokens_per_kwh", "cost_per_million_output_tokens",
    "uncertainty_pct", "coverage", "largest_gap_s", "energy_unavailable_reason", "same_energy_as",
]
SUMMARY_COLUMNS = LEVEL_COLUMNS + ENERGY_COLUMNS

REQUEST_COLUMNS = [
    "run_id", "level", "id", "worker", "warmup", "ok", "error", "http_status", "error_detail", "target",
    "session_id", "turn", "sent_s", "ttft_ms", "tpot_ms", "e2e_ms", "itl_mean_ms", "itl_max_ms", "send_lag_ms",
    "chunks", "input_tokens", "output_tokens", "requested_input_tokens", "requested_output_tokens", "token_source",
    "tenant", "tags", "model", "energy_boundary", "energy_j_estimate", "carbon_g",
]

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(v: Any) -> Any:
    if isinstance(v, str) and v.startswith(_FORMULA_START):
        return "'" + v
    return v


def _level_part(run_id: str, lv: LevelResult) -> dict[str, Any]:
    L, T = lv.latency, lv.throughput
    return {
        "run_id": run_id, "level": lv.index, "label": lv.label, "mode": lv.load.mode,
        "target": F.level_target_value(lv), "verdict": lv.validity.verdict,
        "validity_reasons": "; ".join(lv.validity.reasons), "completed": lv.requests.completed,
        "failed": lv.requests.failed, "warmup": lv.requests.warmup, "duration_s": T.duration_s,
        "output_tokens": T.output_tokens, "input_tokens": T.input_tokens,
        "output_tokens_per_s": T.output_tokens_per_s, "input_tokens_per_s": T.input_tokens_per_s,
        "total_tokens_per_s": T.total_tokens_per_s, "requests_per_s": T.requests_per_s,
        "mean_in_flight": lv.load.mean_in_flight, "achieved_rate_rps": lv.load.achieved_rate_rps,
        **{f"{kind}_ms_{stat}": getattr(getattr(L, f"{kind}_ms"), stat)
           for kind in SERVING_LATENCY for stat in SERVING_STATS},
    }


def _energy_part(window: str, be: BoundaryEnergy | None, reason: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {c: None for c in ENERGY_COLUMNS}
    row["energy_unavailable_reason"] = reason
    if be is None:
        return row
    row.update(window=window, boundary=be.boundary, energy_label=be.label, method=be.method)
    for c in ENERGY_COLUMNS[4:ENERGY_COLUMNS.index("energy_unavailable_reason")]:
        row[c] = getattr(be, c)
    return row


def summary_rows(runs: Iterable[RunData]) -> list[dict[str, Any]]:
    """One row per run × level × window (full, steady) × boundary; a level without energy gets one
    row with empty energy columns and ``energy_unavailable_reason`` set."""
    rows = []
    for run in runs:
        for lv in run.result.levels:
            base = _level_part(run.run_id, lv)
            if not lv.energy and not lv.energy_steady:
                rows.append({**base, **_energy_part("", None, F.energy_unavailable_reason(lv))})
                continue
            for window, energy in (("full", lv.energy), ("steady", lv.energy_steady)):
                twins = same_as(energy)  # a boundary equal to another is one row (results/headline.py rule 5)
                for b in shown_boundaries(energy):
                    row = {**base, **_energy_part(window, energy[b], None)}
                    row["same_energy_as"] = ";".join(sorted(k for k, v in twins.items() if v == b))
                    rows.append(row)
    return rows


def request_rows(runs: Iterable[RunData]) -> list[dict[str, Any]]:
    """One row per request record; ``sent_s`` is seconds since the run's clock anchor."""
    rows = []
    for run in runs:
        t0 = run.t0_ns
        for r in run.requests:
            lat = per_request_latencies(r)
            rows.append({
                "run_id": run.run_id, "level": r.level, "id": r.id, "worker": r.worker, "warmup": r.warmup,
                "ok": r.ok, "error": r.error, "http_status": r.http_status, "error_detail": r.error_detail,
                "target": r.target, "session_id": r.session_id, "turn": r.turn, "sent_s": (r.sent_ns - t0) / 1e9,
                "ttft_ms": lat["ttft_ms"], "tpot_ms": lat["tpot_ms"], "e2e_ms": lat["e2e_ms"],
                "itl_mean_ms": lat["itl_mean_ms"], "itl_max_ms": lat["itl_max_ms"], "send_lag_ms": lat["send_lag_ms"],
                "chunks": lat["chunks"], "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                "requested_input_tokens": r.requested_input_tokens,
                "requested_output_tokens": r.requested_output_tokens, "token_source": r.token_source,
                **_request_energy(r),
            })
    return rows


def _request_energy(r) -> dict[str, Any]:
    """Who asked and the request's energy estimate at its innermost boundary."""
    energy = getattr(r, "energy_j", None) or {}
    b = boundary_order(energy)[0] if energy else None
    carbon = getattr(r, "carbon_g", None) or {}
    return {"tenant": _cell(getattr(r, "tenant", None)), "tags": _cell(";".join(getattr(r, "tags", None) or [])),
            "model": _cell(getattr(r, "model", None)), "energy_boundary": b,
            "energy_j_estimate": energy.get(b) if b else None, "carbon_g": carbon.get(b) if b else None}


def _write(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="raise")
            w.writeheader()
            for row in rows:
                w.writerow({k: _cell(v) for k, v in row.items()})
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def write_csvs(runs: list[RunData], out_dir: str | Path) -> list[Path]:
    """Write ``levels.csv`` and ``requests.csv`` into ``out_dir``; return their paths."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UserError(f"--csv {out} is a file; give a directory for the CSV files")
    return [
        _write(out / SUMMARY_FILE, SUMMARY_COLUMNS, summary_rows(runs)),
        _write(out / REQUESTS_FILE, REQUEST_COLUMNS, request_rows(runs)),
    ]
