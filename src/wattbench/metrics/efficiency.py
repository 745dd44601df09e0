"""Efficiency arithmetic: the few formulas that turn energy, time and tokens into figures.

Pure functions, no I/O, reused by accounting, reports and planning. Each returns ``None`` when
its figure is not computable (no tokens, no energy, zero duration) rather than inventing zero or
infinity.

Identities used (E in J, T in s, N tokens, P = E / T the average power in W)::

    J per token            = E / N
    tokens/s per kW        = (N / T) / (P / 1000) = 1000 * N / E
    tokens per kWh         = N / (E / 3.6e6)
    cost per 1e6 tokens    = (E / 3.6e6) * pue * price_per_kwh / N * 1e6
"""

from __future__ import annotations

from typing import TypeGuard

J_PER_KWH = 3.6e6


def _pos(x: float | None) -> TypeGuard[float]:
    """``x`` is a number above zero (so it can divide)."""
    return x is not None and x > 0


def energy_kwh(energy_j: float | None) -> float | None:
    return None if energy_j is None else energy_j / J_PER_KWH


def avg_power_w(energy_j: float | None, duration_s: float | None) -> float | None:
    if energy_j is None or not _pos(duration_s):
        return None
    return energy_j / duration_s


def j_per_token(energy_j: float | None, tokens: int | float | None) -> float | None:
    """Joules per token (output tokens or total tokens, as the caller passes)."""
    if energy_j is None or not _pos(tokens):
        return None
    return energy_j / tokens


def tokens_per_s_per_kw(tokens: int | float | None, duration_s: float | None, avg_power_w: float | None) -> float | None:
    """Token throughput per kW of average power: ``(tokens / duration_s) / (avg_power_w / 1000)``."""
    if not _pos(tokens) or not _pos(duration_s) or not _pos(avg_power_w):
        return None
    return (tokens / duration_s) / (avg_power_w / 1000.0)


def tokens_per_kwh(tokens: int | float | None, energy_j: float | None) -> float | None:
    if not _pos(tokens) or not _pos(energy_j):
        return None
    return tokens / (energy_j / J_PER_KWH)


def tokens_per_s_from_per_kw(tokens_per_s_per_kw: float | None, avg_power_w: float | None) -> float | None:
    """The token throughput a per-kW figure was computed from (the inverse of
    :func:`tokens_per_s_per_kw`): ``tokens_per_s_per_kw * avg_power_w / 1000``."""
    if tokens_per_s_per_kw is None or not _pos(avg_power_w):
        return None
    return tokens_per_s_per_kw * avg_power_w / 1000.0


def tokens_per_s_from_per_kwh(tokens_per_kwh: float | None, avg_power_w: float | None) -> float | None:
    """The token throughput a per-kWh figure was computed from over a window of average power
    ``avg_power_w``: ``tokens_per_kwh * avg_power_w / 3.6e6`` (N / E × E / T)."""
    if tokens_per_kwh is None or not _pos(avg_power_w):
        return None
    return tokens_per_kwh * avg_power_w / J_PER_KWH


def cost_per_million_tokens(
    energy_j: float | None, tokens: int | float | None, price_per_kwh: float | None, pue: float = 1.0
) -> float | None:
    """Electricity cost of one million tokens: ``energy_kwh * pue * price / tokens * 1e6``.

    ``pue`` multiplies the energy to reach what the facility buys; pass 1.0 when ``energy_j``
    already is a facility figure.
    """
    if energy_j is None or not _pos(tokens) or price_per_kwh is None or price_per_kwh < 0:
        return None
    return energy_j / J_PER_KWH * pue * price_per_kwh / tokens * 1e6


# NVIDIA AIPerf's names for the same figures (its ``power_efficiency_metrics``, the vendor prefix
# ``nvidia_``/``amd_`` dropped: wattbench names the boundary instead of the vendor), with AIPerf's
# units. Each is wattbench's own figure in other units, over the same window and tokens.
AIPERF_TWINS: dict[str, str] = {
    "output_tokens_per_joule": "tokens/J",  # output tokens / E
    "output_tps_per_watt": "tokens/sec/W",  # (output tokens / T) / P: equal to tokens/J over one window
    "energy_per_output_token": "mJ/token",  # 1000 · E / output tokens
    "energy_per_total_token": "mJ/token",  # 1000 · E / (input + output tokens)
    "performance_per_watt": "requests/sec/W",  # (requests / T) / P
    "goodput_per_watt": "good-req/s/W",  # (requests meeting the SLO / T) / P
}


def per_watt(rate_per_s: float | None, avg_power_w: float | None) -> float | None:
    """A rate per W of average power (AIPerf's ``…_per_watt``): ``rate_per_s / avg_power_w``."""
    if rate_per_s is None or rate_per_s < 0 or not _pos(avg_power_w):
        return None
    return rate_per_s / avg_power_w


def aiperf_twins(*, j_per_output_token: float | None, j_per_total_token: float | None,
                 output_tokens_per_s_per_kw: float | None, requests_per_s: float | None = None,
                 good_requests_per_s: float | None = None, avg_power_w: float | None = None
                 ) -> dict[str, float | None]:
    """wattbench's figures at one boundary under AIPerf's names and units (``AIPERF_TWINS``).

    ``output_tokens_per_joule`` and ``output_tps_per_watt`` are ``output_tokens_per_s_per_kw /
    1000`` (N/E = (N/T)/(E/T)) and the energies per token ``1000 · J/token``: linear in wattbench's
    figures, so a mean of trials maps onto the mean of the twins. The per-W request rates divide
    a rate by the average power; they need one measurement's ``requests_per_s`` (or the SLO's
    ``good_requests_per_s``) and ``avg_power_w`` over the same window, else None."""
    per_kw = output_tokens_per_s_per_kw
    tok_per_j = None if per_kw is None or per_kw < 0 else per_kw / 1000.0
    return {
        "output_tokens_per_joule": tok_per_j,
        "output_tps_per_watt": tok_per_j,
        "energy_per_output_token": None if j_per_output_token is None else 1000.0 * j_per_output_token,
        "energy_per_total_token": None if j_per_total_token is None else 1000.0 * j_per_total_token,
        "performance_per_watt": per_watt(requests_per_s, avg_power_w),
        "goodput_per_watt": per_watt(good_requests_per_s, avg_power_w),
    }
