"""Each diagnosis rule fires on the pattern it names (and not on its near misses).

The results go through result.json on disk first, as recorded runs do.
"""

from __future__ import annotations

import pytest

from tests.fakes.results_factory import make_level, make_result
from wattbench.analysis import diagnose as dg
from wattbench.analysis.compare import compare
from wattbench.results.rundir import load_result, write_result


def _recorded(tmp_path, r):
    write_result(tmp_path / r.run_id, r)
    return load_result(tmp_path / r.run_id)


def _run(tmp_path, base_kw, cand_kw, run_kw_a=None, run_kw_b=None):
    a = _recorded(tmp_path, make_result("base", levels=[make_level(0, value=8, **base_kw)], **(run_kw_a or {})))
    b = _recorded(tmp_path, make_result("cand", levels=[make_level(0, value=8, **cand_kw)], **(run_kw_b or {})))
    return dg.diagnose(a, b, [(a.levels[0], b.levels[0])], "accelerator")


def ids(findings):
    return [f.id for f in findings]


def test_efficiency_not_improved(tmp_path):
    fs = _run(tmp_path, dict(output_tokens_per_s=1000, power_w=500), dict(output_tokens_per_s=1100, power_w=600))
    f = next(x for x in fs if x.id == "efficiency_not_improved")
    assert f.evidence["throughput_change"] == pytest.approx(0.10)
    assert f.evidence["power_change"] == pytest.approx(0.20)
    assert f.evidence["per_kw_ratio"] == pytest.approx(1.1 / 1.2)
    assert "throughput +10.0% but power +20.0%" in f.message
    # power up less than throughput: efficiency improved, no finding
    ok = _run(tmp_path, dict(output_tokens_per_s=1000, power_w=500), dict(output_tokens_per_s=1200, power_w=550))
    assert "efficiency_not_improved" not in ids(ok)


def test_throughput_and_power_down_shows_clocks_and_throttle(tmp_path):
    fs = _run(tmp_path,
              dict(output_tokens_per_s=1000, power_w=650, sm_clock_mhz=1980),
              dict(output_tokens_per_s=800, power_w=540, sm_clock_mhz=1410, throttle_reasons=["sw_power_cap"],
                   max_temp_c=84),
              run_kw_b=dict(power_limit_w=550))
    f = next(x for x in fs if x.id == "throughput_and_power_down")
    assert f.severity == "invalid"
    assert "throttle reasons sw_power_cap" in f.message
    assert "SM clock 1980 -> 1410 MHz" in f.message
    assert "power limit 700 -> 550 W" in f.message
    assert f.evidence["candidate_thermal"]["max_temp_c"] == 84
    assert f.evidence["throughput_change"] == pytest.approx(-0.2)


def test_j_per_token_following_power_is_diagnosed(tmp_path):
    """J/token up 9.9% with power up 10% and throughput flat: the same work at more power."""
    fs = _run(tmp_path, dict(output_tokens_per_s=1000, power_w=500, sm_clock_mhz=1980),
              dict(output_tokens_per_s=1001, power_w=550, sm_clock_mhz=1755))
    f = next(x for x in fs if x.id == "j_per_token_follows_power")
    assert f.severity == "warn" and f.evidence["power_change"] == pytest.approx(0.10)
    assert f.evidence["j_per_output_token_change"] == pytest.approx(550 / 1001 / (500 / 1000) - 1)
    assert "moved with power +10.0%" in f.message and "SM clock 1980 -> 1755 MHz" in f.message
    # throughput moved too: a change in the work, not this rule's
    moved = _run(tmp_path, dict(output_tokens_per_s=1000, power_w=500), dict(output_tokens_per_s=1100, power_w=550))
    assert "j_per_token_follows_power" not in ids(moved)
    # power down with the same work: an improvement, said as info
    down = _run(tmp_path, dict(output_tokens_per_s=1000, power_w=500), dict(output_tokens_per_s=1000, power_w=450))
    assert next(x for x in down if x.id == "j_per_token_follows_power").severity == "note"


def test_low_utilization_high_power(tmp_path):
    fs = _run(tmp_path, dict(power_w=600), dict(power_w=600, gpu_utilization_pct=40))
    f = next(x for x in fs if x.id == "data_movement_bound")
    assert f.evidence["power_fraction"] == pytest.approx(600 / 700)
    assert "GPU utilization 40%" in f.message
    # low utilization at low power: idle-ish, not this rule
    assert "data_movement_bound" not in ids(_run(tmp_path, dict(power_w=300), dict(power_w=300,
                                                                                   gpu_utilization_pct=40)))


def test_latency_up_queue_growing_batch_limits(tmp_path):
    fs = _run(tmp_path, dict(ttft_p99_ms=100, waiting_mean=0.5, running_mean=8),
              dict(ttft_p99_ms=400, waiting_mean=12, running_mean=8))
    f = next(x for x in fs if x.id == "latency_up_queue_growing")
    assert "waiting 0.5 -> 12.0" in f.message
    assert "batch limits" in f.message
    assert f.evidence["latency_change"]["ttft_p99_ms"] == pytest.approx(3.0)


def test_latency_up_queue_growing_client_cpu(tmp_path):
    fs = _run(tmp_path, dict(ttft_p99_ms=100, waiting_mean=0.0),
              dict(ttft_p99_ms=200, waiting_mean=5, client_cpu_pct=97, saturated=True))
    f = next(x for x in fs if x.id == "latency_up_queue_growing")
    assert "client is saturated (CPU 97% of a core)" in f.message
    assert f.evidence["client_cpu_pct"] == pytest.approx([30.0, 97.0], rel=1e-9)
    # latency up but no queue growth: not this rule
    assert "latency_up_queue_growing" not in ids(_run(tmp_path, dict(ttft_p99_ms=100),
                                                      dict(ttft_p99_ms=200)))


def test_failures_rising(tmp_path):
    fs = _run(tmp_path, dict(), dict(failed=20, errors={"http_503": 15, "timeout": 5}))
    f = next(x for x in fs if x.id == "failures_rising")
    completed = make_level(0, value=8).requests.completed
    assert f.evidence["failed_pct"][1] == pytest.approx(100 * 20 / (completed + 20))
    assert "http_503: 15, timeout: 5" in f.message


def test_driver_engine_package_changes(tmp_path):
    fs = _run(tmp_path, dict(), dict(),
              run_kw_a=dict(driver="570.86", engine_version="0.10.0", packages={"torch": "2.8.0"}),
              run_kw_b=dict(driver="580.65", engine_version="0.11.0", packages={"torch": "2.9.0"}))
    by = {f.id: f for f in fs}
    assert by["driver_changed"].message == "GPU driver changed: 570.86 -> 580.65"
    assert by["engine_changed"].message == "engine changed: vllm 0.10.0 -> vllm 0.11.0"
    assert by["packages_changed"].evidence["packages"] == {"torch": ["2.8.0", "2.9.0"]}


def test_no_findings_for_identical_runs(tmp_path):
    assert _run(tmp_path, dict(), dict()) == []


def test_compare_carries_findings(tmp_path):
    a = make_result("a", levels=[make_level(0, value=8, output_tokens_per_s=1000, power_w=500)])
    b = make_result("b", levels=[make_level(0, value=8, output_tokens_per_s=1100, power_w=600)])
    c = compare([a, b])
    assert [f.id for f in c.findings] == ["efficiency_not_improved"]
    assert c.findings[0].evidence["candidate"] == "b"
