import pytest

from tests.fakes.planning_results import make_level, make_result
from wattbench.core.errors import UserError
from wattbench.planning.roofline import roofline, roofline_for_result

W8B = 8_030_261_248 * 2  # bytes


def test_worked_example_llama8b_bf16_h200_batch1_is_299():
    r = roofline("llama-8b", "H200", "bf16", batch=1, context=0)
    assert r.weight_bytes == W8B
    assert r.memory_bound_tokens_per_s == pytest.approx(4.8e12 / W8B)
    assert r.bound_tokens_per_s == pytest.approx(298.87, abs=0.05)
    assert r.limited_by == "memory"
    assert r.kv_bytes_per_token == 131072


def test_context_adds_kv_reads():
    r = roofline("llama-8b", "h200-sxm", "bf16", batch=4, context=1024)
    kv = 4 * 1024 * 131072
    assert r.kv_bytes_per_step == kv
    assert r.memory_bound_tokens_per_s == pytest.approx(4 * 4.8e12 / (W8B + kv))


def test_flops_and_compute_bound():
    r = roofline("llama-8b", "H200", "bf16", batch=1, context=2048)
    matmul = 8_030_261_248 - 128256 * 4096  # blocks + final norm + output head; input embedding has no FLOPs
    expected = 2 * matmul + 4 * 32 * 2048 * 4096
    assert r.flops_per_token == expected
    assert r.compute_bound_tokens_per_s == pytest.approx(989.5e12 / expected)


def test_crossover_batch_is_where_both_bounds_meet():
    r = roofline("llama-8b", "H200", "bf16", batch=1, context=0)
    b = r.crossover_batch
    assert b == pytest.approx(220.6, abs=0.1)
    below = roofline("llama-8b", "H200", "bf16", batch=int(b), context=0)
    above = roofline("llama-8b", "H200", "bf16", batch=int(b) + 1, context=0)
    assert below.limited_by == "memory" and above.limited_by == "compute"
    assert above.bound_tokens_per_s == pytest.approx(above.compute_bound_tokens_per_s)


def test_long_context_never_compute_bound():
    r = roofline("llama-8b", "H200", "bf16", batch=64, context=32768)
    assert r.crossover_batch is None and r.limited_by == "memory"


def test_strict_embedding_reads_only_batch_rows():
    r = roofline("llama-8b", "H200", "bf16", batch=1, context=0, count_input_embedding=False)
    expected_bytes = W8B - (128256 * 4096 - 4096) * 2
    assert r.weight_bytes == expected_bytes
    assert r.bound_tokens_per_s == pytest.approx(4.8e12 / expected_bytes)  # ~320
    tied = roofline("llama-1b", "H200", "bf16", batch=1, count_input_embedding=False)
    assert tied.weight_bytes == 1_235_814_400 * 2  # tied table is read by the output head anyway


def test_fp8_and_int4_and_gpus():
    fp8 = roofline("llama-8b", "H200", "fp8", batch=1)
    assert fp8.weight_bytes == W8B / 2 and fp8.peak_flops == pytest.approx(1979e12, rel=1e-9) and fp8.kv_dtype == "fp8"
    int4 = roofline("llama-8b", "H200", "int4", batch=1)
    assert int4.weight_bytes == W8B / 4 and int4.compute_dtype == "bf16" and int4.kv_dtype == "bf16"
    tp = roofline("llama-70b", "H200", "bf16", batch=1, gpus=4)
    assert tp.memory_bound_tokens_per_s == pytest.approx(4 * 4.8e12 / (70_553_706_496 * 2))
    assert tp.fits_in_memory


def test_memory_warning_when_model_does_not_fit():
    r = roofline("llama-70b", "H200", "bf16", batch=1, context=0)
    assert not r.fits_in_memory and "GB" in r.warnings[0]


def test_errors():
    with pytest.raises(UserError, match="unknown GPU"):
        roofline("llama-8b", "H300")
    with pytest.raises(UserError, match="FP8"):
        roofline("llama-8b", "A100", "fp8")
    with pytest.raises(UserError, match="batch"):
        roofline("llama-8b", "H200", batch=0)
    with pytest.raises(UserError, match="context"):
        roofline("llama-8b", "H200", context=-1)


def test_measured_vs_bound_from_result():
    # 100 requests, 1000 input and 200 output tokens each -> context = 1000 + 100 = 1100
    res = make_result("r1", [make_level(0, out_tps=150.0, concurrency=1),
                             make_level(1, out_tps=2400.0, concurrency=16)], gpu="NVIDIA H200")
    r = roofline_for_result(res, 1, "llama-8b")
    assert (r.gpu, r.batch, r.context) == ("H200 SXM", 16, 1100)
    bound = 16 * 4.8e12 / (W8B + 16 * 1100 * 131072)
    assert r.bound_tokens_per_s == pytest.approx(bound)
    assert r.measured_tokens_per_s == pytest.approx(2400.0, rel=1e-9)
    assert r.measured_pct_of_bound == pytest.approx(100 * 2400 / bound)
    assert "level 1" in r.measured_from
    r0 = roofline_for_result(res, 0, "llama-8b", batch=1, context=0)
    assert r0.measured_pct_of_bound == pytest.approx(100 * 150 / (4.8e12 / W8B))  # ~50.2 %


def test_measured_above_bound_warns():
    res = make_result("r2", [make_level(0, out_tps=400.0)])
    r = roofline_for_result(res, 0, "llama-8b", context=0)
    assert r.measured_pct_of_bound > 100 and any("exceeds" in w for w in r.warnings)


def test_run_with_more_gpus_than_bound_warns():
    res = make_result("r3", [make_level(0, out_tps=1000.0, concurrency=8)], gpus=4)
    r = roofline_for_result(res, 0, "llama-8b")
    assert any("--gpus 4" in w for w in r.warnings)
    r4 = roofline_for_result(res, 0, "llama-8b", gpus=4)
    assert not any("--gpus" in w for w in r4.warnings)
    assert r4.memory_bandwidth_bytes_per_s == 4 * 4.8e12
