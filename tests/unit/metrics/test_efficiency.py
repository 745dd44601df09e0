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
