"""wattbench: how much useful LLM inference a kilowatt buys.

Library entry points are imported lazily so that ``wattbench --help`` stays instant::

    from wattbench import run_benchmark, RunConfig
    result = run_benchmark(RunConfig(target="http://127.0.0.1:8000", concurrency=[1, 8]))

    from wattbench import measure, MeasureConfig, RunConfig   # energy around another load generator
    result = measure(MeasureConfig(command=["vllm", "bench", "serve", ..., "--save-result", "--save-detailed"],
                                   run=RunConfig(sensors=["nvml"])))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names __getattr__ hands out, so a type checker sees each one's own type
    from wattbench.config.run import RunConfig
    from wattbench.config.run_commands import MeasureConfig
    from wattbench.results.rundir import load_result
    from wattbench.run import run_benchmark
    from wattbench.run.measure import measure

__version__ = "0.1.0"

__all__ = ["__version__", "run_benchmark", "RunConfig", "load_result", "measure", "MeasureConfig"]


def __getattr__(name: str) -> object:  # lazy entry points
    if name == "run_benchmark":
        from wattbench.run import run_benchmark

        return run_benchmark
    if name == "RunConfig":
        from wattbench.config.run import RunConfig

        return RunConfig
    if name == "measure":
        from wattbench.run.measure import measure

        return measure
    if name == "MeasureConfig":
        from wattbench.config.run_commands import MeasureConfig

        return MeasureConfig
    if name == "load_result":
        from wattbench.results.rundir import load_result

        return load_result
    raise AttributeError(name)
