"""Carbon per boundary of a level: the figures of ``metrics/carbon.py`` applied to accounted energy.

``apply_carbon(level, series, anchor_wall_ns, anchor_mono_ns, energy_fn_for, pue)`` sets, on each
of the level's boundaries (full and steady windows), the window's energy-weighted intensity
(``carbon_intensity_g_per_kwh``), ``carbon_g`` (gross energy × PUE × intensity; PUE not applied
again to ``facility``), ``carbon_g_per_million_output_tokens`` and ``carbon_g_per_request`` (these two only on a boundary
that contains the work: ``accounting.boundaries`` rule 10); and
on every record with an energy estimate, its ``carbon_g`` per boundary (on a ``RecordSet`` an
``annotate_entry``-d entry beside the energy's) and on every roll-up group its ``carbon_g``. Where the series does not cover the window the figures stay None and the reason
is added to the boundary's notes.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from wattbench.accounting.boundaries import contains_work
from wattbench.metrics import carbon as co2
from wattbench.core.recordset import RecordSet
from wattbench.core.schema import LevelResult, RequestRecord


def apply_carbon(level: LevelResult, records: Sequence[RequestRecord] | RecordSet, series: co2.IntensitySeries,
                 anchor_wall_ns: int, anchor_mono_ns: int,
                 energy_fn_for: Callable[[str], Callable[[int, int], float | None]], pue: float) -> None:
    done = level.requests.completed
    for energies, window in ((level.energy, level.window), (level.energy_steady, level.steady_window)):
        if window is None:
            continue
        out_tok = level.throughput.output_tokens if window is level.window else None
        for b, be in energies.items():
            g, why = co2.window_intensity(series, window.start_ns, window.end_ns, anchor_wall_ns, anchor_mono_ns,
                                          energy_fn_for(b))
            if g is None:
                be.notes.append(f"no carbon figure: {why}")
                continue
            p = 1.0 if b == "facility" else pue
            be.carbon_intensity_g_per_kwh = g
            be.carbon_g = co2.carbon_g(be.energy_j, g, p)
            if not contains_work(b, energies):  # per token and per request only where the work is
                continue
            tokens = out_tok if out_tok is not None else (
                be.output_tokens_per_kwh * be.energy_j / co2.J_PER_KWH
                if be.output_tokens_per_kwh and be.energy_j else None)
            be.carbon_g_per_million_output_tokens = co2.carbon_g_per_million_tokens(be.energy_j, tokens, g, p)
            if window is level.window:
                be.carbon_g_per_request = co2.carbon_g_per_request(be.energy_j, done, g, p)
    for b, att in level.attribution.items():
        full = level.energy.get(b)
        g = full.carbon_intensity_g_per_kwh if full is not None else None
        if g is None:
            continue
        p = 1.0 if b == "facility" else pue
        for groups in (att.by_tenant, att.by_tag, att.by_model, att.by_target):
            for share in groups.values():
                share.carbon_g = co2.carbon_g(share.energy_j, g, p)
        if isinstance(records, RecordSet):
            _annotate_carbon(records, b, g, p)
        else:
            for r in records:
                if b in r.energy_j:
                    # None only for a negative energy or intensity, which cannot reach here: a request's
                    # energy is >= 0 (a positive total split by >= 0 shares) and --carbon-intensity
                    # refuses a negative intensity (metrics/carbon_series.py)
                    c = co2.carbon_g(r.energy_j[b], g, p)
                    if c is not None:
                        r.carbon_g[b] = c


def _annotate_carbon(rs: RecordSet, boundary: str, g: float, pue: float) -> None:
    """Each record's carbon at ``boundary`` from its ``energy_j`` entry (``annotate_entry``-d by
    ``request_energy.attribute_level``), as an entry of its own: one float per record, no object."""
    entry = rs.entry("energy_j", boundary)
    if entry is None:
        return
    energy, present = entry
    out = np.full(len(rs), np.nan)
    for k in np.flatnonzero(present):
        v = co2.carbon_g(float(energy[k]), g, pue)
        out[k] = np.nan if v is None else v
    rs.annotate_entry("carbon_g", boundary, out, present)
