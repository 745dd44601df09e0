import json
from importlib import resources

import pytest

from wattbench.core.errors import UserError
from wattbench.planning.hardware import (
    HARDWARE_TABLE_VERSION,
    GPUSpec,
    find_gpu,
    load_hardware_table,
    normalize_gpu_name,
)


@pytest.fixture(scope="module")
def table():
    return load_hardware_table(use_user_file=False)


def test_shipped_file_is_versioned_and_every_row_validates_with_a_source():
    raw = json.loads(resources.files("wattbench").joinpath("data", "hardware.json").read_text())
    assert raw["version"] == HARDWARE_TABLE_VERSION
    assert len(raw["gpus"]) >= 15
    for row in raw["gpus"]:
        spec = GPUSpec.model_validate(row)  # extra="forbid": no stray keys, all required fields present
        assert spec.source.url.startswith("https://"), spec.name
        assert len(spec.source.title) > 10, spec.name
        if spec.fp8_dense_flops is not None:
            assert spec.fp8_dense_flops >= spec.bf16_dense_flops, spec.name


def test_required_platforms_present(table):
    names = set(table.names())
    for n in ["H100 SXM", "H100 PCIe", "H100 NVL", "H200 SXM", "H200 NVL", "B200", "GB200", "A100 SXM 80GB",
              "A100 PCIe 80GB", "L40S", "L4", "MI300X", "MI325X", "Gaudi 3", "Jetson AGX Orin 64GB",
              "Jetson Orin Nano 8GB"]:
        assert n in names


def test_dense_not_sparse_figures(table):
    h200 = find_gpu("H200", table)
    assert h200.bf16_dense_flops == pytest.approx(989.5e12)
    assert h200.fp8_dense_flops == pytest.approx(1979e12)
    assert h200.memory_bandwidth_bytes_per_s == pytest.approx(4.8e12, rel=1e-9)
    assert h200.memory_bytes == pytest.approx(141e9, rel=1e-9)
    assert h200.tdp_w == 700
    assert find_gpu("H200 NVL", table).tdp_w == 600
    h100 = find_gpu("H100 SXM", table)
    assert h100.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12, rel=1e-9) and h100.memory_bytes == pytest.approx(80e9, rel=1e-9)
    assert find_gpu("B200", table).bf16_dense_flops == pytest.approx(2.25e15)
    assert find_gpu("A100", table).fp8_dense_flops is None


@pytest.mark.parametrize("query", ["H200", "h200-sxm", "H200 SXM", "NVIDIA H200", "h200_sxm5", "  h200 sxm "])
def test_fuzzy_lookup(table, query):
    assert find_gpu(query, table).name == "H200 SXM"


def test_nvml_style_names(table):
    assert find_gpu("NVIDIA H100 80GB HBM3", table).name == "H100 SXM"
    assert find_gpu("NVIDIA A100-SXM4-80GB", table).name == "A100 SXM 80GB"
    assert find_gpu("mi325", table).name == "MI325X"  # unique prefix


def test_unknown_gpu_lists_known_names(table):
    with pytest.raises(UserError) as e:
        find_gpu("H300", table)
    msg = str(e.value)
    assert "unknown GPU 'H300'" in msg and "H200 SXM" in msg and "MI300X" in msg and "--hardware" in msg


def test_ambiguous_prefix(table):
    with pytest.raises(UserError, match="ambiguous"):
        find_gpu("jetson", table)


def test_normalize():
    assert normalize_gpu_name("NVIDIA H200 NVL") == "h200nvl"
    assert normalize_gpu_name("AMD Instinct MI300X") == "mi300x"


def test_user_file_overrides_fields_and_adds_rows(tmp_path):
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"version": 1, "gpus": [
        {"name": "h200", "tdp_w": 600},  # partial override by alias
        {"name": "Orin Nano Super", "vendor": "NVIDIA", "form_factor": "module", "tdp_w": 25,
         "memory_bytes": 8e9, "memory_bandwidth_bytes_per_s": 102e9, "bf16_dense_flops": 16.75e12,
         "source": {"title": "Jetson Orin Nano Super datasheet", "url": "https://example.org/nano"}},
    ]}))
    t = load_hardware_table(extra_files=[f], use_user_file=False)
    h = find_gpu("H200", t)
    assert h.tdp_w == 600 and h.memory_bandwidth_bytes_per_s == pytest.approx(4.8e12, rel=1e-9)
    assert find_gpu("orin nano super", t).memory_bandwidth_bytes_per_s == pytest.approx(102e9, rel=1e-9)


def test_user_config_file_is_read(tmp_path):
    f = tmp_path / "hardware.json"
    f.write_text(json.dumps({"version": 1, "gpus": [{"name": "L4", "tdp_w": 70}]}))
    t = load_hardware_table(user_file=f)
    assert find_gpu("L4", t).tdp_w == 70


def test_new_row_without_source_is_refused(tmp_path):
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"version": 1, "gpus": [
        {"name": "X1", "vendor": "V", "form_factor": "pcie", "tdp_w": 100, "memory_bytes": 1e9,
         "memory_bandwidth_bytes_per_s": 1e11, "bf16_dense_flops": 1e13}]}))
    with pytest.raises(UserError, match="source"):
        load_hardware_table(extra_files=[f], use_user_file=False)


def test_negative_tdp_refused(tmp_path):
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"version": 1, "gpus": [{"name": "L4", "tdp_w": -1}]}))
    with pytest.raises(UserError, match="tdp_w"):
        load_hardware_table(extra_files=[f], use_user_file=False)


def test_newer_version_refused(tmp_path):
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"version": HARDWARE_TABLE_VERSION + 1, "gpus": []}))
    with pytest.raises(UserError, match="newer"):
        load_hardware_table(extra_files=[f], use_user_file=False)


def test_missing_and_bad_files(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_hardware_table(extra_files=[tmp_path / "nope.json"], use_user_file=False)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        load_hardware_table(extra_files=[bad], use_user_file=False)


def test_fp8_missing_is_a_user_error(table):
    with pytest.raises(UserError, match="FP8"):
        find_gpu("A100", table).peak_flops("fp8")
