"""Kept for callers of ``wattbench.runner.run_benchmark``: the orchestrator is ``wattbench.run``."""

from __future__ import annotations

from wattbench.run import ProgressFn, new_run_id, run_benchmark
from wattbench.run.plan import DEFAULT_LADDER, OBJECTIVES, SEARCH_MAX_CONCURRENCY

__all__ = ["run_benchmark", "new_run_id", "ProgressFn", "OBJECTIVES", "DEFAULT_LADDER", "SEARCH_MAX_CONCURRENCY"]
