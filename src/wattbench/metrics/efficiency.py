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
