from typing import Any

import pytest
from pydantic import ValidationError

from tests.fakes.planning_results import make_level, make_result
from wattbench.core.schema import Goodput
from wattbench.core.errors import UserError
from wattbench.config.plan import TcoInputs
from wattbench.planning.tco import TCOResult, tco, tokens_per_kwh_from_result


def _tco(**inputs: Any) -> TCOResult:
    return tco(TcoInputs(**inputs))


def test_worked_example_10mw():
    r = _tco(it_kw=10000, load=0.7, price_per_kwh=0.6, pue=1)
    assert r.electricity_cost_per_year == pytest.approx(10000 * 0.7 * 8760 * 0.6) == 36_792_000
    assert r.total_cost_per_year == pytest.approx(36_792_000)


def test_all_components_and_month_period():
    r = _tco(it_kw=100, price_per_kwh=0.2, load=0.5, pue=1.3, rack_rent_per_month=2000, racks=5,
            maintenance_pct_per_year=8, hardware_cost=3_000_000, amortization_years=4, period="month",
            currency="EUR")
    it_kwh = 100 * 0.5 * 8760
    assert r.it_energy_kwh_per_year == it_kwh
    assert r.electricity_cost_per_year == pytest.approx(it_kwh * 1.3 * 0.2)
    assert r.rack_rent_per_year == 2000 * 12 * 5
    assert r.maintenance_cost_per_year == pytest.approx(240_000)
    assert r.amortization_per_year == pytest.approx(750_000)
    total = it_kwh * 1.3 * 0.2 + 120_000 + 240_000 + 750_000
    assert r.total_cost_per_year == pytest.approx(total)
    assert r.total_cost_per_period == pytest.approx(total / 12)
    assert r.costs_per_period["rack_rent"] == pytest.approx(10_000)
    assert r.currency == "EUR" and not r.warnings


def test_cost_per_million_tokens_from_efficiency_and_throughput():
    r = _tco(it_kw=10, price_per_kwh=0.1, tokens_per_kwh=1_000_000)
    tokens = 10 * 8760 * 1_000_000
    assert r.tokens_per_year == tokens
    assert r.cost_per_million_tokens == pytest.approx(10 * 8760 * 0.1 / tokens * 1e6) == pytest.approx(0.1)
    t = _tco(it_kw=10, price_per_kwh=0.1, load=0.5, tokens_per_s=1000)
    assert t.tokens_per_year == 1000 * 0.5 * 8760 * 3600
    assert t.cost_per_million_tokens == pytest.approx(10 * 0.5 * 8760 * 0.1 / t.tokens_per_year * 1e6)
    # the one number format (core/numbers.py), never 1.02145e+07
    u = _tco(it_kw=10, price_per_kwh=0.1, tokens_per_kwh=10_214_500)
    assert u.tokens_source == "10,214,500 tokens per IT kWh × 87,600 kWh"


def test_cooling_double_count_warning():
    r = _tco(it_kw=10, price_per_kwh=0.1, pue=1.4, cooling_cost_per_kwh=0.02)
    assert r.cooling_cost_per_year == pytest.approx(10 * 8760 * 0.02)
    assert any("twice" in w for w in r.warnings)
    assert not _tco(it_kw=10, price_per_kwh=0.1, pue=1.0, cooling_cost_per_kwh=0.02).warnings


@pytest.mark.parametrize("kw", [
    dict(it_kw=-1), dict(load=0), dict(load=1.5), dict(pue=0.9), dict(price_per_kwh=-0.1),
    dict(hours=9000), dict(amortization_years=0), dict(period="week"),
    dict(tokens_per_kwh=1, tokens_per_s=1),
])
def test_errors(kw):
    args = dict(it_kw=10, price_per_kwh=0.1) | kw
    with pytest.raises((UserError, ValidationError)):  # the ranges are TcoInputs', checked as it is made
        _tco(**args)


def test_tokens_per_kwh_from_result():
    res = make_result("T", [
        make_level(0, out_tps=10, node_p95_w=1000, node_tokens_per_kwh=2e5),
        make_level(1, out_tps=20, node_p95_w=1200, node_tokens_per_kwh=5e5),
        make_level(2, out_tps=30, node_p95_w=1300, node_tokens_per_kwh=9e5, verdict="invalid"),
    ])
    assert tokens_per_kwh_from_result(res, None, "node") == (pytest.approx(5e5, rel=1e-9),
                                                             ["run T: level c=1 (most tokens per kWh; the run has no SLO)"])
    assert tokens_per_kwh_from_result(res, 0, "node")[0] == pytest.approx(2e5, rel=1e-9)
    with pytest.raises(UserError, match="accelerator"):
        tokens_per_kwh_from_result(res, None, "accelerator")


def _slo_levels(met: tuple[bool, ...]):
    """Levels c=1, 4, 16 with tokens per kWh rising with load; ``met[i]``: did level i meet the SLO."""
    out = []
    for i, (c, tpk, ok, frac) in enumerate(zip((1, 4, 16), (2e5, 5e5, 9e5), met, (1.0, 0.975, 0.125))):
        lv = make_level(i, out_tps=100 * c, node_p95_w=1000 + 50 * i, node_tokens_per_kwh=tpk, concurrency=c)
        lv.goodput = Goodput.model_validate({"all_met": ok, "fraction": frac, "output_tokens_per_s": 10.0 * c,
                                             "slos": [{"metric": "ttft", "stat": "p99", "threshold_ms": 200.0}]})
        out.append(lv)
    return make_result("S", out)


def test_tco_takes_the_best_level_meeting_the_slo_and_names_it():
    """A past defect: plan tco --result took c=16 (12.5% of requests met the SLO) silently. It takes the
    most efficient level meeting the SLO and says so; with none meeting it, it says it uses one that
    misses it."""
    value, notes = tokens_per_kwh_from_result(_slo_levels((True, True, False)), None, "node")
    assert value == pytest.approx(5e5, rel=1e-9) and notes[0] == "run S: level c=4 (most tokens per kWh among the levels meeting ttft_p99=200ms)"
    value, notes = tokens_per_kwh_from_result(_slo_levels((False, False, False)), None, "node")
    assert value == pytest.approx(9e5, rel=1e-9)
    assert notes[0] == ("run S: no level meets ttft_p99=200ms; using level c=16 (most tokens per kWh), which misses "
                        "it, 12.5% of its requests met it: pass --level to choose another")
