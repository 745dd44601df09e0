"""``wattbench tune``: search engine settings and GPU power settings for the most goodput per kW
under an SLO, built on the run pipeline (each trial is a ``run_benchmark`` run). See docs/tune.md."""

from wattbench.results.tune import TrialRecord, TuneResult, load_tune
from wattbench.tune.run import tune

__all__ = ["TrialRecord", "TuneResult", "load_tune", "tune"]
