"""Accounting: the only place energy is computed.

The package exports nothing; each name is imported from its module, so importing one module loads
only what it needs. The orchestrator calls::

    idle = measure_idle(log, idle_start_ns, idle_end_ns)                  # accounting.idle
    acc = account_window(log, start_ns, end_ns, output_tokens=..., total_tokens=..., idle=idle,
                         price_per_kwh=cfg.price_per_kwh, pue=cfg.pue, kind="steady")  # .window
    level.energy_steady = acc.energy
    level.validity = level_validity(acc, load=outcome.load, token_source=level.token_source)
    level.thermal = acc.thermal

Modules: ``window`` (one window's energy and efficiency per boundary, a level's verdict),
``counters`` (counter deltas, wrap/reset, edges), ``integrate`` (trapezoid of power), ``sampling``
(gaps, coverage, percentiles), ``boundaries`` (per-boundary totals), ``idle``, ``uncertainty``,
``findings`` (materiality, verdicts), ``validity``, ``level_findings``, ``level`` (one level,
pure), ``steady`` (windows from request times), ``thermal``. The tokens every stream produced
inside a window (every efficiency figure's numerator, and throughput's) are
``metrics.window_tokens``: a count of tokens, no energy, so it sits in the layer below.
The rules and formulas are in docs/accounting.md.
"""
