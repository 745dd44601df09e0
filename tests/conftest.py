"""Suite-wide collection rules.

`.ci/run` runs the suite on as many pytest-xdist workers as the machine has cores. A test marked
`heavy` starts a real engine, a Ray cluster or a real load generator and takes most of the machine's
cores while it runs: every heavy test shares one xdist group, so no two of them run at once (their
throughput and latency checks keep the CPU they were written for), while the other workers run the
rest of the suite beside one of them. Outside xdist the marker changes nothing. A test marked
`serial` judges client timings against a scripted truth at millisecond precision: `.ci/run` runs
those after the parallel phase, one at a time, with nothing else on the machine.
"""
from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("heavy") is not None:
            item.add_marker(pytest.mark.xdist_group(name="heavy"))
