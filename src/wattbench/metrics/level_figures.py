"""Every named figure of one level, as one typed value (``LevelFigures``): what the searches rank a
level by, compare and regress read, and tune shows. Built in one place, ``analysis/figures.py``
(``level_figures``: one measurement's own fields; ``reported_figures``: the trials' means under ``--trials``;
``ranked_figures``: as the answer quotes it, ``run/plan.search_figures`` adding what a search
judges beside the figures). Each figure is a named field with its unit in the name (as vLLM's
``BenchmarkMetrics`` names every figure), None where not measured.

A figure chosen by name at run time (an ``--optimize`` objective, a regress check's metric, compare's
column) is read through the mapping view: ``figures["ttft_p99_ms"]`` or ``figures.get(name)``, over the
names in ``FIGURES`` only (an unknown name is a ``KeyError``, ``get`` gives None); the fields that
are not figures (``boundary``, ``failed``, ``oversaturated``, ``window_s``, ``objective_noise``) are
read as attributes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Mapping

from wattbench.metrics.figure_noise import FigureNoise


@dataclass(frozen=True, eq=True)
class LevelFigures(Mapping[str, "float | None"]):
    """A level's figures at one power boundary (the module docstring)."""

    boundary: str | None = None  # where the energy figures were read (None: the level measured no energy)
    # throughput (tokens/s, requests/s): every boundary's
    output_tokens_per_s: float | None = None
    input_tokens_per_s: float | None = None
    total_tokens_per_s: float | None = None
    requests_per_s: float | None = None
    # latency statistics (ms): time to first token, time per output token, inter-token, end to end
    ttft_mean_ms: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    ttft_max_ms: float | None = None
    tpot_mean_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    tpot_max_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    itl_max_ms: float | None = None
    e2e_mean_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p90_ms: float | None = None
    e2e_p95_ms: float | None = None
    e2e_p99_ms: float | None = None
    e2e_max_ms: float | None = None
    # at ``boundary`` (None where the level has no energy there)
    avg_power_w: float | None = None
    max_power_w: float | None = None
    idle_power_w: float | None = None
    energy_j: float | None = None
    dynamic_energy_j: float | None = None
    j_per_output_token: float | None = None
    j_per_token: float | None = None
    output_tokens_per_s_per_kw: float | None = None
    tokens_per_kwh: float | None = None
    output_tokens_per_kwh: float | None = None
    cost_per_million_output_tokens: float | None = None
    goodput_per_kw: float | None = None
    carbon_g_per_million_output_tokens: float | None = None
    carbon_g_per_request: float | None = None
    carbon_g: float | None = None
    # the requests, goodput under the run's SLOs, the server's queue, the client, the GPUs
    failed_pct: float | None = None
    goodput_rps: float | None = None
    goodput_output_tokens_per_s: float | None = None
    goodput_fraction: float | None = None
    mean_running: float | None = None
    mean_waiting: float | None = None
    client_cpu_pct: float | None = None
    max_temp_c: float | None = None
    sm_clock_mhz: float | None = None
    gpu_utilization_pct: float | None = None
    # what a search judges beside the figures (``run/plan.search_figures``; load/search.py)
    failed: str | None = None  # why the level measured nothing (no measured request completed)
    oversaturated: bool = False  # the queue grew without bound: past the knee
    window_s: float | None = None  # the measured window's length
    objective_noise: Mapping[str, FigureNoise | None] = field(default_factory=dict, compare=False)

    FIGURES: ClassVar[tuple[str, ...]]
    LATENCY: ClassVar[tuple[str, ...]] = ('ttft', 'tpot', 'itl', 'e2e')
    STATS: ClassVar[tuple[str, ...]] = ('mean', 'p50', 'p90', 'p95', 'p99', 'max')

    def __getitem__(self, name: str) -> float | None:
        if name not in _FIGURE_SET:
            raise KeyError(name)
        value: float | None = getattr(self, name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(LevelFigures.FIGURES)

    def __len__(self) -> int:
        return len(LevelFigures.FIGURES)

    def latency_ms(self, kind: str, stat: str) -> float | None:
        """A latency statistic (``ttft``, ``p99``); None for a kind or statistic it does not name."""
        return self.get(f"{kind}_{stat}_ms")

    def with_figures(self, values: Mapping[str, float | None], **fields: Any) -> LevelFigures:
        """A copy with ``values`` (figure names only) and ``fields`` (any field) replaced."""
        unknown = [k for k in values if k not in _FIGURE_SET]
        if unknown:
            raise KeyError(f"not a figure: {', '.join(unknown)}")
        changes: dict[str, Any] = {**values, **fields}
        return dataclasses.replace(self, **changes)


LevelFigures.FIGURES = tuple(f.name for f in dataclasses.fields(LevelFigures)
                             if f.name not in ("boundary", "failed", "oversaturated", "window_s", "objective_noise"))
_FIGURE_SET = frozenset(LevelFigures.FIGURES)
