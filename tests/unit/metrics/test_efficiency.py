import pytest

from wattbench.metrics import efficiency as eff


def test_identities():
    # 7350 J over 10.5 s (700 W), 21000 output tokens, 42000 total
    assert eff.avg_power_w(7350.0, 10.5) == pytest.approx(700.0)
    assert eff.j_per_token(7350.0, 21000) == pytest.approx(0.35)
    assert eff.tokens_per_s_per_kw(21000, 10.5, 700.0) == pytest.approx(2000 / 0.7)
    assert eff.tokens_per_kwh(42000, 7350.0) == pytest.approx(42000 / (7350 / 3.6e6))
    assert eff.energy_kwh(3.6e6) == pytest.approx(1.0, rel=1e-9)
    # tok/s/kW is tokens per kJ
    assert eff.tokens_per_s_per_kw(21000, 10.5, 700.0) == pytest.approx(1000 * 21000 / 7350)


def test_cost():
    # 1 kWh for 1e6 tokens at 0.15/kWh, PUE 1.4 -> 0.21 per million
    assert eff.cost_per_million_tokens(3.6e6, 1_000_000, 0.15, 1.4) == pytest.approx(0.21)
    assert eff.cost_per_million_tokens(3.6e6, 500_000, 0.15) == pytest.approx(0.30)
    assert eff.cost_per_million_tokens(3.6e6, 500_000, 0.0) == pytest.approx(0.0, rel=1e-9)


@pytest.mark.parametrize("fn,args", [
    (eff.j_per_token, (None, 10)), (eff.j_per_token, (5.0, 0)),
    (eff.tokens_per_s_per_kw, (10, 0.0, 100.0)), (eff.tokens_per_s_per_kw, (10, 1.0, 0.0)),
    (eff.tokens_per_kwh, (0, 5.0)), (eff.tokens_per_kwh, (10, 0.0)),
    (eff.cost_per_million_tokens, (5.0, 0, 0.1)), (eff.cost_per_million_tokens, (5.0, 10, None)),
    (eff.avg_power_w, (5.0, 0.0)), (eff.energy_kwh, (None,)),
])
def test_not_computable_is_none(fn, args):
    assert fn(*args) is None


def test_aiperf_twins_are_wattbenchs_figures_in_aiperfs_units():
    from wattbench.metrics.efficiency import AIPERF_TWINS, aiperf_twins

    # 600 J over 2 s (300 W): 120 output and 200 total tokens, 10 requests, 6 of them meeting the SLO
    e, t, out, total = 600.0, 2.0, 120, 200
    got = aiperf_twins(j_per_output_token=e / out, j_per_total_token=e / total,
                       output_tokens_per_s_per_kw=(out / t) / (e / t / 1000), requests_per_s=10 / t,
                       good_requests_per_s=6 / t, avg_power_w=e / t)
    assert set(got) == set(AIPERF_TWINS)
    assert got["output_tokens_per_joule"] == pytest.approx(0.2)  # 120 tokens / 600 J
    assert got["output_tps_per_watt"] == pytest.approx(0.2)  # 60 tokens/s / 300 W
    assert got["energy_per_output_token"] == pytest.approx(5000.0)  # mJ: 600 J / 120
    assert got["energy_per_total_token"] == pytest.approx(3000.0)  # mJ: 600 J / 200
    assert got["performance_per_watt"] == pytest.approx(5 / 300)
    assert got["goodput_per_watt"] == pytest.approx(3 / 300)
    assert AIPERF_TWINS["energy_per_total_token"] == "mJ/token" and AIPERF_TWINS["goodput_per_watt"] == "good-req/s/W"


def test_aiperf_twins_are_none_where_undefined():
    from wattbench.metrics.efficiency import aiperf_twins

    got = aiperf_twins(j_per_output_token=None, j_per_total_token=None, output_tokens_per_s_per_kw=None,
                       requests_per_s=5.0, good_requests_per_s=None, avg_power_w=0.0)
    assert all(v is None for v in got.values())
