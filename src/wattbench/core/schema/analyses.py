"""The run's analyses over its levels: the auto sweep's or optimiser's search, the Pareto
frontiers, the prefill/decode split, and the carbon intensity the run used."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from wattbench.core.schema.base import _M, Num, _Sparse


class SearchOutcome(_M):
    """An auto sweep's or an optimiser's search (``load/search.py``): what it measured and chose."""

    best_value: Num | None = None
    knee_value: Num | None = None
    reason: str = ""
    measured_values: list[Num] = Field(default_factory=list)
    n_measured: int = 0
    failed: list[Any] = Field(default_factory=list)
    objective: str | None = None
    scores: list[float | None] = Field(default_factory=list)
    candidates: list[Num] | None = None  # optimize: the ladder searched
    ladder_size: int | None = None
    # optimize: the best two candidates measured again, the plateau (every value whose
    # score is within noise of the best, metrics/noise.py) and the value recommended from it
    remeasured: list[Num] = Field(default_factory=list)
    plateau: list[Num] = Field(default_factory=list)
    recommended_value: Num | None = None
    best_score: float | None = None  # the best value's score, the mean of its measurements
    recommended_score: float | None = None
    recommend_reason: str | None = None
    noise_basis: str | None = None
    top_of_ladder: bool | None = None  # the best value is the ladder's highest: a higher one may be better



class ParetoPoint(_M):
    label: str
    efficiency: float | None = None
    latency: float | None = None
    on_frontier: bool | None = None


class ParetoFront(_M):
    """Efficiency vs a latency figure over the run's levels (``analysis/pareto.py``)."""

    boundary: str | None = None
    efficiency: str = "output_tokens_per_s_per_kw"
    latency: str = ""
    points: list[ParetoPoint] = Field(default_factory=list)
    frontier: list[ParetoPoint] = Field(default_factory=list)
    excluded: list[Any] = Field(default_factory=list)


class Pareto(_M):
    boundary: str | None = None
    tpot_p99: ParetoFront | None = None
    ttft_p99: ParetoFront | None = None
    goodput_tpot_p99: ParetoFront | None = None  # with SLOs only


class PrefillDecodeFit(_Sparse):
    """One estimate of the joules per prefill and per decode token (``accounting/attribution.py``):
    the regression over the run's intervals (``fit_intervals``: ``method`` the fit's, with standard
    errors, R², ``status`` and ``reasons``; an unreliable fit's coefficients are None and kept under
    ``unreliable_fit``) or the isolating pair (``isolating_pair``: ``method`` ``isolating_pair``, the
    system's ``condition`` and the naive ratios); ``error`` instead when it could not be made. Written
    with the keys its writer set."""

    method: str | None = None
    j_per_prefill_token: Num | None = None
    j_per_decode_token: Num | None = None
    idle_power_w: Num | None = None
    se_j_per_prefill_token: Num | None = None
    se_j_per_decode_token: Num | None = None
    se_idle_power_w: Num | None = None
    r2: Num | None = None
    residual_std_j: Num | None = None
    n_intervals: int | None = None
    collinearity: Num | None = None
    prefill_tokens: Num | None = None
    decode_tokens: Num | None = None
    energy_j: Num | None = None
    prefill_energy_j: Num | None = None
    decode_energy_j: Num | None = None
    idle_energy_j: Num | None = None
    status: str | None = None  # ok | unreliable (the regression)
    reasons: list[str] = Field(default_factory=list)
    unreliable_fit: dict[str, Num | None] | None = None  # the coefficients an unreliable fit had
    condition: Num | None = None  # the isolating pair's 2x2 system
    naive_j_per_prefill_token: Num | None = None
    naive_j_per_decode_token: Num | None = None
    boundary: str | None = None
    token_source: str | None = None  # server counters | client timing
    error: str | None = None  # why there is no estimate


class CoefficientCheck(_Sparse):
    """One coefficient of the regression against the isolating pair's (``attribution.cross_check``)."""

    regression: Num | None = None
    pair: Num | None = None
    rel_diff: Num | None = None  # (regression - pair) / |pair|


class PrefillDecode(_M):
    """The run's prefill/decode energy split: the regression over its levels, the isolating pair
    (``--prefill-decode-pair``) and their cross-check (coefficient name -> ``CoefficientCheck``); each
    as ``accounting/attribution.py`` returns it (an older file's dicts load into these models)."""

    regression: PrefillDecodeFit | None = None
    isolating_pair: PrefillDecodeFit | None = None
    cross_check: dict[str, CoefficientCheck] | None = None


class CarbonIntensity(_M):
    """The grid carbon intensity a run used (``--carbon-intensity``): a constant or a series."""

    source: str
    g_per_kwh: float | None = None  # constant
    points: int | None = None  # series
    start_wall_s: float | None = None
    end_wall_s: float | None = None
    min_g_per_kwh: float | None = None
    max_g_per_kwh: float | None = None
    unit: str = "gCO2e/kWh"
    pue: float = 1.0


