"""``LevelFigures``: every figure of a level a named field, read by name only over the figures'
names, and built in one place (``analysis.figures.level_figures``) from the level's own fields."""

from __future__ import annotations

import pytest

from tests.fakes.results_factory import make_level
from wattbench.analysis.figures import all_metric_names, level_figures
from wattbench.metrics.level_figures import LevelFigures
from wattbench.metrics.slo import figures_meet, parse_slos


def test_the_figures_are_the_names_compare_and_regress_know() -> None:
    assert sorted(LevelFigures.FIGURES) == sorted(all_metric_names())
    assert len(LevelFigures()) == len(LevelFigures.FIGURES)
    assert "boundary" not in LevelFigures() and "failed" not in LevelFigures()


def test_a_figure_is_read_by_field_and_by_name_and_an_unknown_name_is_not_a_figure() -> None:
    f = LevelFigures(boundary="accelerator", ttft_p99_ms=120.0, output_tokens_per_s_per_kw=950.0)
    assert f["ttft_p99_ms"] == f.ttft_p99_ms == f.latency_ms("ttft", "p99") == pytest.approx(120.0, rel=1e-12)
    assert f.get("output_tokens_per_s_per_kw") == pytest.approx(950.0, rel=1e-12) and f.get("tpot_p99_ms") is None
    with pytest.raises(KeyError):
        f["throughput.output_tokens_per_s"]  # a dotted path of a dump is no figure's name
    assert f.get("boundary") is None  # the boundary is an attribute, not a figure
    with pytest.raises(KeyError, match="not a figure: failed"):
        f.with_figures({"failed": 1.0})
    g = f.with_figures({"ttft_p99_ms": 80.0}, failed="no request completed")
    assert (g.failed, g.boundary) == ("no request completed", "accelerator")
    assert (g.ttft_p99_ms, f.ttft_p99_ms) == pytest.approx((80.0, 120.0), rel=1e-12)


def test_level_figures_reads_the_levels_own_fields_at_the_boundary() -> None:
    lv = make_level(value=8, output_tokens_per_s=1000.0, power_w=500.0)
    f = level_figures(lv, "accelerator")
    e = lv.energy["accelerator"]
    assert f.boundary == "accelerator"
    assert f.output_tokens_per_s == pytest.approx(1000.0, rel=1e-12) and f.avg_power_w == e.avg_power_w == pytest.approx(500.0, rel=1e-12)
    assert f.output_tokens_per_s_per_kw == e.output_tokens_per_s_per_kw
    assert f.ttft_p99_ms == lv.latency.ttft_ms.p99 and f.tpot_p50_ms == lv.latency.tpot_ms.p50
    none = level_figures(lv, "wall")  # a boundary the level has no energy at: no energy figure
    assert none.avg_power_w is None and none.output_tokens_per_s == pytest.approx(1000.0, rel=1e-12)


def test_an_slo_is_met_on_the_named_statistic() -> None:
    slos = parse_slos("ttft_p99=300ms,tpot_p50=50ms")
    assert figures_meet(LevelFigures(ttft_p99_ms=300.0, tpot_p50_ms=49.0), slos)
    assert not figures_meet(LevelFigures(ttft_p99_ms=300.1, tpot_p50_ms=49.0), slos)
    assert not figures_meet(LevelFigures(ttft_p99_ms=100.0), slos)  # a missing figure fails
