"""Request specs: synthetic token-exact prompts, presets, datasets, trace replay, sessions."""

from wattbench.workload.base import RequestSpec

__all__ = ["RequestSpec"]
