"""`plan rack` and `plan power-first` accept a tune directory: they plan with the recommended
configuration at the load level the tune chose, not the run's most-throughput level."""

from __future__ import annotations

import pytest
import json
import subprocess
import sys

from tests.fakes.planning_results import make_level, make_result, write_run
from wattbench.planning.measured import load_run_or_tune
from wattbench.results.tune import TrialRecord, TuneResult, write_tune
from wattbench.tune.run import conclude


def _tune_dir(tmp_path):
    d = tmp_path / "tune"
    base_run = write_run(d / "trials" / "000", make_result("r0", [make_level(0, 500.0, acc_p95_w=300.0, goodput_tps=450.0)]))
    # the tuned trial: level 1 (concurrency 48) is the chosen one; level 2 has more throughput but missed the SLO
    lv = [make_level(0, 200.0, acc_p95_w=200.0, goodput_tps=200.0, concurrency=8),
          make_level(1, 1500.0, acc_p95_w=500.0, goodput_tps=1400.0, concurrency=48),
          make_level(2, 1600.0, acc_p95_w=600.0, goodput_tps=300.0, concurrency=64)]
    run = write_run(d / "trials" / "001", make_result("r1", lv))
    t = TuneResult(tune_id="tune-x", created_at="2026-12-01T00:00:00Z", engine="vllm", model="tiny",
                   slo="ttft_p99=300ms", space={"axes": {"max-num-seqs": {"values": [128]}}},
                   trials=[TrialRecord(index=0, config={}, status="done", score=1500.0, run_dir=str(base_run),
                                       figures={"goodput_per_kw": 1500.0, "level_index": 0}),
                           TrialRecord(index=1, config={"max-num-seqs": 128}, engine_args=["--max-num-seqs", "128"],
                                       status="done", score=2800.0, run_dir=str(run),
                                       figures={"goodput_per_kw": 2800.0, "level_index": 1})])
    conclude(t)
    write_tune(d, t)
    return d


def test_planning_reads_the_recommended_configuration(tmp_path):
    d = _tune_dir(tmp_path)
    res = load_run_or_tune(d)
    assert [lv.index for lv in res.levels] == [1] and res.tune.config == {"max-num-seqs": 128}
    assert (res.tune.tune_id, res.tune.trial) == ("tune-x", 1)
    out = subprocess.run([sys.executable, "-m", "wattbench", "plan", "rack", "--rack-kw", "10", "--node", str(d),
                          "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rack = json.loads(out.stdout)
    first = next(iter(v for v in rack.values() if isinstance(v, list) and v and isinstance(v[0], dict)))[0]
    assert first["level_index"] == 1 and first["node_power_w"] == pytest.approx(500.0, rel=1e-9)  # the tuned level, not level 2 (600 W)
    assert first["rack_goodput_output_tokens_per_s"] == pytest.approx(28000.0, rel=1e-9)  # 20 nodes x 1400 goodput tok/s
    out = subprocess.run([sys.executable, "-m", "wattbench", "plan", "power-first", "--site-kw", "100",
                          "--candidates", str(d), "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "concurrency=48" in text and "concurrency=64" not in text and "concurrency=8\"" not in text


def test_tune_and_plan_default_to_the_same_boundary():
    """A past defect: tune scored at the innermost measured boundary, plan read the outermost. Both take
    the headline rule (results/headline.py): a node meter before the board, the board before a
    declared node, never the HBM rail."""
    from tests.fakes.results_factory import make_level, make_result
    from wattbench.planning.measured import planning_boundary
    from wattbench.tune.score import trial_figures

    for watts, labels, want in (({"accelerator": 600, "accelerator_memory": 150, "node": 900}, {}, "node"),
                                ({"accelerator": 600, "node": 900}, {"node": "declared"}, "accelerator"),
                                ({"accelerator": 600, "accelerator_memory": 150}, {}, "accelerator")):
        lv = make_level(0, power_w=watts)
        for b, lab in labels.items():
            lv.energy[b].label = lab
        res = make_result("r", levels=[lv])
        assert trial_figures(lv, None, has_slo=False).boundary == planning_boundary(res) == want
