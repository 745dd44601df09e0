"""benches/gpu/crosscheck.py: the independent counter's energy over a window, and an edge its log
does not bracket being unknown (None), never 0 J."""

from __future__ import annotations

from pathlib import Path

import pytest

from benches.gpu import crosscheck  # the repository root is on the tests' path


def test_independent_energy_interpolates_each_gpu_at_both_edges():
    nvml = {0: ([0, 10, 20], [0.0, 100.0, 300.0]), 1: ([0, 20], [50.0, 90.0])}
    assert crosscheck.independent_j(nvml, 5, 15) == pytest.approx((200.0 - 50.0) + (80.0 - 60.0))


@pytest.mark.parametrize("a,b", [(-1, 15), (5, 21)])
def test_an_edge_outside_any_gpus_log_is_unknown(a, b):
    nvml = {0: ([-5, 30], [0.0, 350.0]), 1: ([0, 20], [50.0, 90.0])}
    assert crosscheck.independent_j(nvml, a, b) is None


def _archives_with_raw_meter():
    import tarfile

    root = Path(crosscheck.__file__).resolve().parents[2] / "docs" / "validation-data"
    out = []
    for tgz in sorted(root.rglob("*.tgz")):
        with tarfile.open(tgz) as t:
            names = t.getnames()
        one_run = sum(n.endswith("result.json") for n in names) == 1  # multi-run archives pair per run dir
        if one_run and any(n.endswith("meter.jsonl") for n in names) and any(n.endswith("crosscheck.json") for n in names):
            out.append(tgz)
    return out


@pytest.mark.parametrize("tgz", _archives_with_raw_meter(), ids=lambda p: p.parent.name + "/" + p.name)
def test_committed_crosscheck_is_what_the_raw_meter_log_gives(tgz):
    """The docs' meter figures are recomputed from each archive's raw meter log; the crosscheck.json
    committed beside it must say the same, or one of the two is not what the run produced."""
    import json
    import tarfile

    with tarfile.open(tgz) as t:
        def member(suffix, *, exclude=None):
            found = [m for m in t.getmembers() if m.name.endswith(suffix) and (exclude is None or exclude not in m.name)]
            assert len(found) == 1, f"{tgz}: {len(found)} members ending {suffix}"
            return t.extractfile(found[0]).read().decode()

        result = json.loads(member("result.json"))
        committed = json.loads(member("crosscheck.json"))
        meter = member("meter.jsonl").splitlines()
    again = crosscheck.rows(result, meter)
    assert [r["level"] for r in again] == [r["level"] for r in committed]
    for a, c in zip(again, committed):
        for k in ("wattbench_j", "independent_nvml_j", "diff_pct", "nvidia_smi_1s_j", "smi_diff_pct"):
            assert (a[k] is None) == (c[k] is None), (tgz, a["level"], k)
            if a[k] is not None:
                assert a[k] == pytest.approx(c[k], rel=1e-9, abs=1e-9), (tgz, a["level"], k)
