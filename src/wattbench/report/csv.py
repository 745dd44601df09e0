"""CSV exports: a per-level summary (long form: one row per level × trial × window × boundary shown —
a boundary equal to another, ``host`` = the ``cpu`` estimate, is one row whose ``same_energy_as``
names the other: ``results/headline.py`` rule 5) and one row per request.

A level measured with ``--trials N`` has, per window × boundary, one ``row=trial`` row per trial
(``trial`` counted from 1, as the run prints it) and one ``row=mean`` row: the mean over the trials
that measured something (``trials`` of them) — the figure the answer quotes — with its 95% interval
in the ``*_ci95_low`` / ``*_ci95_high`` columns. A trial row holds what that trial measured: the
figures its trials block keeps for it (the level's last measuring trial, the level itself, holds
all of its own); a figure no trial record holds is left empty, never copied from another trial. A
level measured once has one ``row=trial`` row (``trial`` 1) and no mean row. Column lists are ``SUMMARY_COLUMNS`` and ``REQUEST_COLUMNS`` (documented in
docs/reports.md). Values are copied from ``result.json``; per-request latencies come from
``wattbench.metrics.request_latency``.

Text cells that a spreadsheet would read as a formula (starting with ``=``, ``+``, ``-``, ``@``,
tab or CR) are written with a leading ``'``.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Callable, Iterable

from wattbench.core.errors import UserError
from wattbench.report import format as F
from wattbench.results.headline import boundary_order, shown_boundaries
from wattbench.report.data import RunData
from wattbench.report.labels import cost_currency
from wattbench.report.tables import SERVING_LATENCY, SERVING_STATS
from wattbench.results.headline import same_as
from wattbench.core.schema import BoundaryEnergy, FigureKey, LevelResult, RequestRecord
from wattbench.core.schema.level import TrialFigure, TrialsBlock
from wattbench.metrics.efficiency import AIPERF_TWINS, aiperf_twins
from wattbench.metrics.request_latency import per_request_latencies

SUMMARY_FILE = "levels.csv"
REQUESTS_FILE = "requests.csv"

# latency as `vllm bench serve`, AIPerf and GuideLLM report it: mean, p50, p90, p95, p99 of each
# (report/tables.py SERVING_LATENCY x SERVING_STATS, the one list)
LATENCY_COLUMNS = [f"{kind}_ms_{stat}" for kind in SERVING_LATENCY for stat in SERVING_STATS]
# the figures whose trial mean carries its 95% interval on a ``row=mean`` row
CI_FIGURES = ["output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "ttft_ms_p99", "itl_ms_p99",
              "e2e_ms_p99", "avg_power_w", "j_per_output_token", "j_per_token", "output_tokens_per_s_per_kw"]
CI_COLUMNS = [f"{c}_ci95_{end}" for c in CI_FIGURES for end in ("low", "high")]
LEVEL_COLUMNS = [
    "run_id", "level", "row", "trial", "trials", "label", "mode", "target", "verdict", "validity_reasons", "completed", "failed", "warmup",
    "duration_s", "output_tokens", "input_tokens", "output_tokens_per_s", "input_tokens_per_s",
    "total_tokens_per_s", "requests_per_s", "mean_in_flight", "achieved_rate_rps", *LATENCY_COLUMNS,
]
ENERGY_COLUMNS = [
    "window", "boundary", "energy_label", "method", "energy_j", "avg_power_w", "p95_power_w", "p99_power_w",
    "max_power_w", "idle_power_w", "idle_energy_j", "dynamic_energy_j", "j_per_output_token", "j_per_token",
    "output_tokens_per_s_per_kw", "tokens_per_kwh", "output_tokens_per_kwh", "cost_per_million_output_tokens",
    "uncertainty_pct", "coverage", "largest_gap_s", "energy_unavailable_reason", "same_energy_as",
]
# the same figures under NVIDIA AIPerf's names and units (metrics/efficiency.py AIPERF_TWINS)
AIPERF_COLUMNS = list(AIPERF_TWINS)
# the currency of cost_per_million_output_tokens (the run's --currency)
SUMMARY_COLUMNS = LEVEL_COLUMNS + ENERGY_COLUMNS + CI_COLUMNS + AIPERF_COLUMNS + ["cost_currency"]

REQUEST_COLUMNS = [
    "run_id", "level", "trial", "id", "worker", "warmup", "ok", "error", "http_status", "error_detail", "target",
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


def _trial_name(column: str) -> str:
    """The trials block's name of a CSV figure column (``ttft_ms_p99`` is ``ttft_p99_ms`` there)."""
    for kind in SERVING_LATENCY:
        prefix = f"{kind}_ms_"
        if column.startswith(prefix):
            return f"{kind}_{column[len(prefix):]}_ms"
    return column


def _trial_figure(block: TrialsBlock, window: str, column: str, boundary: str | None) -> TrialFigure | None:
    """The block's entry for a CSV column: a level column's over the full window (as the level
    columns of a single measurement's steady row), an energy column's in ``window`` at the
    boundary's own entry (``steady``: the steady-window figures, none where the block keeps none)."""
    if column not in ENERGY_COLUMNS:  # a level column: the full window's, as on a single measurement's row
        return block.figures.get(_trial_name(column))
    if window == "steady" and not block.figures_steady:
        return None  # no steady-window trial figures kept: the full window's are not the steady ones
    figures = block.figures_steady if window == "steady" else block.figures
    return FigureKey(column, boundary).lookup(figures)


_FIGURE_COLUMNS = [c for c in LEVEL_COLUMNS if c not in ("run_id", "level", "row", "trial", "trials", "label",
                                                           "mode", "target", "verdict", "validity_reasons")]
_FIGURE_COLUMNS += [c for c in ENERGY_COLUMNS if c not in ("window", "boundary", "energy_label", "method",
                                                           "energy_unavailable_reason", "same_energy_as")]


def _from_block(row: dict[str, Any], block: TrialsBlock, window: str, boundary: str | None,
                pick: Callable[[TrialFigure], float | None]) -> dict[str, Any]:
    """``row`` with every figure column set from the trials block (``pick`` reads an entry), the
    others emptied: a figure the block does not keep has no value here."""
    out = dict(row)
    for c in _FIGURE_COLUMNS:
        entry = _trial_figure(block, window, c, boundary)
        out[c] = None if entry is None else pick(entry)
    return out


def _level_rows(run_id: str, lv: LevelResult) -> list[dict[str, Any]]:
    """The single-measurement rows of a level: one per window × boundary shown (one row with the
    reason when it has no energy)."""
    base = _level_part(run_id, lv)
    if not lv.energy and not lv.energy_steady:
        return [{**base, **_energy_part("", None, F.energy_unavailable_reason(lv))}]
    rows = []
    for window, energy in (("full", lv.energy), ("steady", lv.energy_steady)):
        twins = same_as(energy)  # a boundary equal to another is one row (results/headline.py rule 5)
        for b in shown_boundaries(energy):
            row = {**base, **_energy_part(window, energy[b], None)}
            row["same_energy_as"] = ";".join(sorted(k for k, v in twins.items() if v == b))
            # the SLO's good requests/s: this measurement's, over its full window
            row[_GOOD] = lv.goodput.requests_per_s if (lv.goodput is not None and window == "full") else None
            rows.append(row)
    return rows


_GOOD = "_good_requests_per_s"  # carried from a level's own row to its AIPerf twins, not written


def _aiperf(row: dict[str, Any]) -> dict[str, Any]:
    """The row's figures under AIPerf's names (``metrics.efficiency.aiperf_twins``). The per-W request
    rates only on one measurement's full-window row: its requests/s and power are over one window
    (a steady row's requests/s is the full window's; a mean of rates over a mean of powers is no mean)."""
    one = row.get("row") == "trial" and row.get("window") == "full"
    return aiperf_twins(j_per_output_token=row.get("j_per_output_token"), j_per_total_token=row.get("j_per_token"),
                        output_tokens_per_s_per_kw=row.get("output_tokens_per_s_per_kw"),
                        requests_per_s=row.get("requests_per_s") if one else None,
                        good_requests_per_s=row.get(_GOOD) if one else None,
                        avg_power_w=row.get("avg_power_w"))


def _value_at(i: int) -> Callable[[TrialFigure], float | None]:
    def pick(entry: TrialFigure) -> float | None:
        return entry.values[i] if i < len(entry.values) else None
    return pick


def _ci_end(entry: TrialFigure, end: str) -> float | None:
    lo, hi = entry.ci_low, entry.ci_high
    if (lo is None or hi is None) and entry.mean is not None and entry.ci_half_width is not None:
        lo, hi = entry.mean - entry.ci_half_width, entry.mean + entry.ci_half_width
    return lo if end == "low" else hi


def _with_trials(run_id: str, lv: LevelResult) -> list[dict[str, Any]]:
    """A level's rows: each trial's (``row=trial``), then the mean's (``row=mean``) with its 95%
    interval, when it was measured more than once."""
    own = _level_rows(run_id, lv)
    block = lv.trials
    if block is None or block.n <= 1:
        return [{**r, "row": "trial", "trial": 1, "trials": 1} for r in own]
    dead = {u.trial: u for u in block.unmeasured}
    measured = [k for k in range(1, block.n + 1) if k not in dead]  # the order of every entry's values
    last = (lv.trial + 1) if lv.trial is not None else (measured[-1] if measured else block.n)
    ids = {"trials": len(measured)}
    rows: list[dict[str, Any]] = []
    for k in range(1, block.n + 1):
        if k == last:
            rows += [{**r, **ids, "row": "trial", "trial": k, "verdict": None} for r in own]
        elif k in dead:
            rows.append({**_from_block(own[0], block, "", None, lambda e: None), **ids, "row": "trial", "trial": k,
                         "verdict": None, "validity_reasons": dead[k].why, "completed": 0,
                         **{c: None for c in ENERGY_COLUMNS}})
        else:
            pick = _value_at(measured.index(k))
            rows += [{**_from_block(r, block, r["window"] or "full", r["boundary"], pick), **ids,
                      "row": "trial", "trial": k, "verdict": None, "validity_reasons": None}
                     for r in own]
    for r in own:
        window, b = r["window"] or "full", r["boundary"]
        mean = {**_from_block(r, block, window, b, lambda e: e.mean), **ids, "row": "mean", "trial": None}
        for c in CI_FIGURES:
            entry = _trial_figure(block, window, c, b)
            for end in ("low", "high"):
                mean[f"{c}_ci95_{end}"] = None if entry is None else _ci_end(entry, end)
        rows.append(mean)
    return rows


def summary_rows(runs: Iterable[RunData]) -> list[dict[str, Any]]:
    """One row per run × level × trial × window (full, steady) × boundary, and with ``--trials``
    the mean's row per window × boundary (the module's doc); a level without energy gets one row
    (per trial) with empty energy columns and ``energy_unavailable_reason`` set."""
    rows = []
    for run in runs:
        for lv in run.result.levels:
            for r in _with_trials(run.run_id, lv):
                row = {**{c: None for c in CI_COLUMNS}, **r, "cost_currency": cost_currency(run.result)}
                if row.get("row") == "mean" or row.get("trial") != ((lv.trial or 0) + 1 if lv.trials else 1):
                    row[_GOOD] = None  # only the level's own measurement has its goodput
                row.update(_aiperf(row))
                row.pop(_GOOD, None)
                rows.append(row)
    return rows


def request_rows(runs: Iterable[RunData]) -> list[dict[str, Any]]:
    """One row per request record; ``sent_s`` is seconds since the run's clock anchor, ``trial`` which
    trial of its level (from 1), ``target`` the server it went to."""
    rows = []
    for run in runs:
        t0 = run.t0_ns
        # the server the request went to: its own base URL when several targets were driven, the run's otherwise
        run_target = run.result.config.target
        for r in run.requests:
            lat = per_request_latencies(r)
            rows.append({
                "run_id": run.run_id, "level": r.level, "trial": _trial_of(r), "id": r.id, "worker": r.worker, "warmup": r.warmup,
                "ok": r.ok, "error": r.error, "http_status": r.http_status, "error_detail": r.error_detail,
                "target": r.target or run_target, "session_id": r.session_id, "turn": r.turn, "sent_s": (r.sent_ns - t0) / 1e9,
                "ttft_ms": lat["ttft_ms"], "tpot_ms": lat["tpot_ms"], "e2e_ms": lat["e2e_ms"],
                "itl_mean_ms": lat["itl_mean_ms"], "itl_max_ms": lat["itl_max_ms"], "send_lag_ms": lat["send_lag_ms"],
                "chunks": lat["chunks"], "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                "requested_input_tokens": r.requested_input_tokens,
                "requested_output_tokens": r.requested_output_tokens, "token_source": r.token_source,
                **_request_energy(r),
            })
    return rows


def _trial_of(r: RequestRecord) -> int:
    """Which trial of its level a request belongs to, counted from 1 (the record's ``trial`` extra is
    0-based and written only with ``--trials``; a level measured once is trial 1)."""
    k = getattr(r, "trial", None)
    return k + 1 if isinstance(k, int) and not isinstance(k, bool) else 1


def _request_energy(r: RequestRecord) -> dict[str, Any]:
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
