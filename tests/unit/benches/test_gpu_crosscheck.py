"""benches/gpu/crosscheck.py: the independent counter's energy over a window, and an edge its log
does not bracket being unknown (None), never 0 J."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[3] / "benches" / "gpu" / "crosscheck.py"
spec = importlib.util.spec_from_file_location("crosscheck", PATH)
crosscheck = importlib.util.module_from_spec(spec)
spec.loader.exec_module(crosscheck)


def test_independent_energy_interpolates_each_gpu_at_both_edges():
    nvml = {0: ([0, 10, 20], [0.0, 100.0, 300.0]), 1: ([0, 20], [50.0, 90.0])}
    assert crosscheck.independent_j(nvml, 5, 15) == pytest.approx((200.0 - 50.0) + (80.0 - 60.0))


@pytest.mark.parametrize("a,b", [(-1, 15), (5, 21)])
def test_an_edge_outside_any_gpus_log_is_unknown(a, b):
    nvml = {0: ([-5, 30], [0.0, 350.0]), 1: ([0, 20], [50.0, 90.0])}
    assert crosscheck.independent_j(nvml, a, b) is None
