"""``run/ab.py``: what one side's idle baseline gives the other. Ground truth: two real sessions'
results, one idle measurement made up by hand (its figures known), the other side's own warnings."""

from __future__ import annotations

import pytest

import contextlib

from tests.fakes.results_factory import make_result
from wattbench.accounting.idle import IdlePower
from wattbench.config.run import RunConfig
from wattbench.core.clock import ClockAnchor
from wattbench.core.schema import IdleBaseline, Window
from wattbench.run.ab import _copy_idle
from wattbench.run.session import RunSession


def _session(run_id: str) -> RunSession:
    s = RunSession(config=RunConfig(target="http://127.0.0.1:9", register_run=False, html=False),
                   progress=lambda event: None, anchor=ClockAnchor.take(), run_id=run_id,
                   stack=contextlib.ExitStack())
    s.result = make_result(run_id=run_id, levels=[])
    return s


def test_the_idle_baseline_of_side_a_is_side_bs_and_each_side_keeps_its_own_warnings():
    """Side A's warnings are A's (its prompt lengths, its server): B takes A's idle measurement and
    nothing else. (Before: a warning on A made the copy read a constant the run no longer has, and
    ``wattbench ab`` failed with an AttributeError after measuring the idle baseline.)"""
    sa, sb = _session("run-a"), _session("run-b")
    assert sa.result is not None and sb.result is not None
    idle = IdlePower(boundary="accelerator", power_w=88.5, duration_s=10.0, method="nvml")
    sa.idle_power = {"accelerator": idle}
    sa.result.idle = {"accelerator": IdleBaseline.model_validate(idle.to_dict())}
    sa.result.idle_window = Window(start_ns=1_000, end_ns=10_000_001_000, duration_s=10.0, kind="idle")
    sa.result.warnings.append("the server's /tokenize was not used (404): prompt lengths are approximate")
    sb.result.warnings.append("B's own warning")

    _copy_idle(sa, sb)

    assert sb.idle_power is sa.idle_power
    assert sb.result.idle == sa.result.idle and sb.result.idle["accelerator"].power_w == pytest.approx(88.5, rel=1e-12)
    assert sb.result.idle_window == sa.result.idle_window
    assert sb.result.idle_after_window is None
    assert sb.result.warnings == ["B's own warning"]
