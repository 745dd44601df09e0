import math

import numpy as np
import pytest
from scipy import stats

from wattbench.metrics.trials import ci95, headline_figures, summarize_trials, t_ppf


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 15, 29, 120])
def test_t_quantile_matches_scipy(df):
    assert t_ppf(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-9)
    assert t_ppf(0.01, df) == pytest.approx(stats.t.ppf(0.01, df), rel=1e-8)


def test_ci_arithmetic():
    v = [10.0, 12.0, 11.0, 13.0]
    c = ci95(v)
    mean = 11.5
    s = math.sqrt(((10 - mean) ** 2 + (12 - mean) ** 2 + (11 - mean) ** 2 + (13 - mean) ** 2) / 3)
    hw = 3.182446305284263 * s / 2
    assert c["mean"] == pytest.approx(mean)
    assert c["std"] == pytest.approx(s)
    assert c["ci95_low"] == pytest.approx(mean - hw) and c["ci95_high"] == pytest.approx(mean + hw)
    assert c["n"] == 4 and c["values"] == v


def test_ci_single_and_empty():
    assert ci95([5.0])["ci95_low"] is None and ci95([5.0])["mean"] == pytest.approx(5.0, rel=1e-9)
    assert ci95([])["n"] == 0
    assert ci95([1.0, None, float("nan"), 3.0])["n"] == 2


def test_ci_coverage_is_about_95_percent():
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(2000):
        c = ci95(rng.normal(3.0, 1.0, 5))
        hits += c["ci95_low"] <= 3.0 <= c["ci95_high"]
    assert 0.93 < hits / 2000 < 0.97


def level(tp, p99, j):
    return {"label": "c=8", "throughput": {"output_tokens_per_s": tp, "requests_per_s": tp / 100},
            "latency": {"ttft_ms": {"mean": p99 / 2, "p50": p99 / 3, "p90": p99 * 0.9, "p99": p99, "max": 2 * p99}},
            "requests": {"completed": 100, "failed": 0},
            "energy": {"accelerator": {"energy_j": j, "avg_power_w": 300.0, "j_per_output_token": j / 1000,
                                       "method": "counter"}},
            "goodput": {"requests_per_s": 1.0, "per_kw": {"accelerator": {"output_tokens_per_s_per_kw": 7.0}}}}


def test_summarize_trials_over_level_dumps():
    s = summarize_trials([level(1000, 200, 500), level(1100, 220, 520), level(900, 180, 480)])
    assert s["throughput.output_tokens_per_s"]["mean"] == pytest.approx(1000)
    assert s["throughput.output_tokens_per_s"]["values"] == [1000, 1100, 900]
    hw = stats.t.ppf(0.975, 2) * 100 / math.sqrt(3)
    assert s["throughput.output_tokens_per_s"]["ci95_high"] == pytest.approx(1000 + hw)
    assert s["latency.ttft_ms.p99"]["mean"] == pytest.approx(200)
    assert "latency.ttft_ms.max" not in s  # max is not a headline figure
    assert s["energy.accelerator.j_per_output_token"]["mean"] == pytest.approx(0.5)
    assert s["goodput.per_kw.accelerator.output_tokens_per_s_per_kw"]["std"] == 0
    assert "energy.accelerator.method" not in s
    assert set(headline_figures(level(1, 2, 3))) <= set(s)


def test_summarize_flat_dicts():
    s = summarize_trials([{"a": 1.0, "b": 2.0}, {"a": 3.0}])
    assert s["a"]["mean"] == pytest.approx(2.0, rel=1e-9) and s["b"]["n"] == 1
