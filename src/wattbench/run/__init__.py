"""The run orchestrator (docs/architecture.md, "The run"): ``run_benchmark(config, progress) -> Result``.

``benchmark`` (the phases) · ``session`` (``RunSession``: resources, run directory, progress) ·
``targets`` (given or launched servers → target specs) · ``telemetry`` (sensors → sampler) ·
``plan`` (ladder, sweep, optimize, prefill/decode pair) · ``level`` (one level with its trials) ·
``analyses`` (per-request energy and carbon, trials, Pareto, prefill/decode regression).
"""

from __future__ import annotations

from wattbench.run.benchmark import new_run_id, run_benchmark
from wattbench.run.events import ProgressFn
from wattbench.run.session import RunSession

__all__ = ["run_benchmark", "new_run_id", "RunSession", "ProgressFn"]
