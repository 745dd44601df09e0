"""A real run with ``--trials 3`` against the scripted streaming server keeps each trial's steady-window
figures (``TrialsBlock.figures_steady``), and a steady reading of the level (``steady_view``) quotes
their means: tokens/s per kW at the declared 300 W is the steady window's tokens/s over 0.3 kW, in
every trial and in the mean."""

from __future__ import annotations

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.analysis.figures import reported_figures, steady_view
from wattbench.config.run import RunConfig
from wattbench.run import run_benchmark

pytestmark = pytest.mark.slow


def test_a_run_with_trials_keeps_the_steady_figures_a_steady_comparison_reads(tmp_path):
    with stream_server("--ttft-ms", "20", "--itl-ms", "20", "--max-concurrent", "8") as (base, _):
        res = run_benchmark(RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False,
                                      html=False, out=str(tmp_path), input_tokens="16", output_tokens="16",
                                      history_check=False, concurrency=[4], num_requests=24, trials=3))
    lv = res.levels[0]
    assert lv.steady_window is not None and lv.trials is not None and lv.trials.n == 3
    fs = lv.trials.figures_steady
    per_kw, tok_s = fs["output_tokens_per_s_per_kw@node"], fs["output_tokens_per_s"]
    assert len(per_kw.values) == 3 and len(tok_s.values) == 3
    for k, t in zip(per_kw.values, tok_s.values):  # each trial: its steady tokens/s over the declared 0.3 kW
        assert k == pytest.approx(t / 0.3, rel=1e-9)
    h = reported_figures(steady_view(lv), "node")
    assert h["output_tokens_per_s_per_kw"] == pytest.approx(per_kw.mean, rel=1e-12)
    assert h["output_tokens_per_s"] == pytest.approx(tok_s.mean, rel=1e-12)
    assert h["avg_power_w"] == pytest.approx(300.0)
    # the last trial's own steady figures are what a view of it alone reads
    assert lv.energy_steady["node"].output_tokens_per_s_per_kw == pytest.approx(per_kw.values[-1], rel=1e-9)
