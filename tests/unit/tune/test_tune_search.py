"""The tune's search on a scripted engine whose efficiency surface is known: the search must find
its optimum within the budget, exhaustively and with the optimiser; trials saved and resumable."""

from __future__ import annotations

import json
import math

import pytest

from wattbench.config.run import RunConfig
from wattbench.config.run_commands import TuneConfig
from wattbench.core.errors import UserError
from wattbench.results.tune import TrialFigures
from wattbench.tune import load_tune, tune
from wattbench.tune.space import build_space, engine_args, load_space_file, parse_axis


class ScriptedEngine:
    """Goodput per kW as a known function of max-num-seqs (S) and max-num-batched-tokens (B):
    a peak at S=128, B=8192; configurations with S=512 miss the SLO at the lowest load (pruned).
    It fills a trial the way RunEvaluator does (status, figures, score, chosen level)."""

    def __init__(self, noise=None):
        self.calls = []
        self.noise = noise or {}

    @staticmethod
    def surface(cfg):
        s = cfg.get("max-num-seqs", 256)  # the engine's defaults: 256 / 2048
        b = cfg.get("max-num-batched-tokens", 2048)
        if s == 512:
            return None
        return 3000.0 * math.exp(-((math.log2(s) - 7) ** 2) / 2.0) * math.exp(-((math.log2(b) - 13) ** 2) / 4.0)

    def __call__(self, trial, base, level, objective, boundary, run_dir, tags):
        self.calls.append((dict(trial.config), level))
        v = self.surface(trial.config)
        if v is None:
            trial.status, trial.detail = "pruned", "the lowest load level already misses the SLO"
            return trial
        k = sum(1 for c, _ in self.calls if c == trial.config) - 1
        v *= 1.0 + self.noise.get(json.dumps(trial.config, sort_keys=True), [0.0] * 10)[k]
        trial.status = "done"
        trial.figures = TrialFigures(goodput_per_kw=v, tpot_p99_ms=10.0 + v / 100.0, load_mode="concurrency",
                                     load_value=32, j_per_output_token=1000.0 / v)
        trial.score = trial.figures.objective(objective)
        trial.run_dir = str(run_dir)
        return trial


def _cfg(tmp_path, **kw):
    base = RunConfig(engine="vllm", engine_model="tiny", slo="tpot_p99=50ms")
    kw.setdefault("out", str(tmp_path / "tune"))
    return TuneConfig(base=base, **kw)


AXES = ["max-num-seqs=32,64,128,256,512", "max-num-batched-tokens=2048,4096,8192,16384"]


def test_exhaustive_finds_the_optimum_and_quotes_the_gain(tmp_path):
    eng = ScriptedEngine()
    t = tune(_cfg(tmp_path, axes=AXES[:1] + ["max-num-batched-tokens=2048,8192"]), evaluate=eng)
    assert t.strategy == "exhaustive" and t.status == "complete"
    assert len([c for c, _ in eng.calls]) == 1 + 10  # the defaults, then every configuration once
    rec = t.recommended
    assert rec.config == {"max-num-seqs": 128, "max-num-batched-tokens": 8192}
    base = ScriptedEngine.surface({})
    assert rec.gain_over_defaults_pct == pytest.approx((3000.0 / base - 1) * 100)
    assert rec.serve_command == "vllm serve tiny --max-num-seqs 128 --max-num-batched-tokens 8192"
    assert "vs the engine defaults at the same SLO" in rec.summary
    pruned = [tr for tr in t.trials if tr.config.get("max-num-seqs") == 512]
    assert pruned and all(tr.status == "pruned" and tr.score is None for tr in pruned)
    assert t.pareto.frontier  # goodput per kW vs p99 TPOT
    assert t.by_axis["max-num-seqs"]["128"] == pytest.approx(3000.0)
    on_disk = load_tune(tmp_path / "tune")
    assert on_disk.recommended.config == rec.config and len(on_disk.trials) == len(t.trials)
    assert on_disk == t  # every block reads back as written


def test_optimizer_finds_the_optimum_within_budget(tmp_path):
    pytest.importorskip("optuna")
    space = tmp_path / "space.yaml"
    space.write_text("axes:\n  max-num-seqs: {min: 16, max: 512, factor: 2}\n"
                     "  max-num-batched-tokens: {min: 1024, max: 32768, factor: 2}\n")
    eng = ScriptedEngine()
    t = tune(_cfg(tmp_path, space_file=str(space), max_trials=24, seed=1), evaluate=eng)
    assert t.strategy == "optuna"
    assert build_space("vllm", space_file=str(space)).size() == 36
    assert len({json.dumps(c, sort_keys=True) for c, _ in eng.calls}) == len(eng.calls) <= 24  # never twice
    assert t.recommended.score >= 0.95 * 3000.0, t.recommended


def test_resume_continues_without_rerunning(tmp_path):
    eng = ScriptedEngine()
    t1 = tune(_cfg(tmp_path, axes=AXES, max_trials=5), evaluate=eng)
    assert len(t1.trials) == 5
    eng2 = ScriptedEngine()
    t2 = tune(_cfg(tmp_path, axes=AXES, resume=str(tmp_path / "tune"), out=None), evaluate=eng2)
    assert len(eng2.calls) == 20 - 4  # the rest of the space; the defaults already measured
    assert t2.recommended.config == {"max-num-seqs": 128, "max-num-batched-tokens": 8192}
    with pytest.raises(UserError, match="another engine, space or objective"):
        tune(_cfg(tmp_path, axes=AXES[:1], resume=str(tmp_path / "tune"), out=None), evaluate=eng2)


def test_close_scores_are_measured_again(tmp_path):
    # 128/8192 (3000) vs 128/4096 (3000*e^-0.25=2336) are far apart; make two close by noise:
    # with only max-num-seqs=128,181 they differ by ~1%; repeats separate them
    key_a = json.dumps({"max-num-seqs": 128}, sort_keys=True)
    eng = ScriptedEngine(noise={key_a: [0.0, 0.002, -0.002]})
    t = tune(_cfg(tmp_path, axes=["max-num-seqs=128,120"], baseline=False, max_repeats=2), evaluate=eng)
    repeats = [tr for tr in t.trials if tr.repeat_of is not None]
    assert repeats and all(lv == ("concurrency", 32) for c, lv in eng.calls[2:])
    assert t.recommended.config == {"max-num-seqs": 128}
    assert t.recommended.score_ci.n >= 2


def test_space_grammar(tmp_path):
    assert parse_axis("max-num-seqs=64,128").values == [64, 128]
    assert parse_axis("--enforce-eager=true,false").values == [True, False]
    assert engine_args({"enforce-eager": True, "max-num-seqs": 64, "cb-use-cuda-graph": False,
                        "cb-max-memory-percent": 0.5, "power-limit": 400}) == [
        "--enforce-eager", "--max-num-seqs", "64", "--no-cb-use-cuda-graph", "--cb-max-memory-percent", "0.5"]
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"axes": {"cb-use-cuda-graph": [False, True],
                                      "cb-max-batch-tokens": {"values": [2048, 8192], "when": {"cb-use-cuda-graph": True}},
                                      "cb-max-memory-percent": {"min": 0.3, "max": 0.7, "step": 0.2}}}))
    sp = load_space_file(f)
    cfgs = sp.configurations()
    assert len(cfgs) == 3 * 3  # graphs off: 3 memory shares; on: 2 batch sizes x 3
    assert all("cb-max-batch-tokens" not in c for c in cfgs if c["cb-use-cuda-graph"] is False)
    for bad, msg in [("x", "NAME=V1"), ("power-limit=-5", "positive"), ("a b=1", "flag name")]:
        with pytest.raises(UserError, match=msg):
            parse_axis(bad)
    f.write_text(json.dumps({"axes": {"a": {"values": [1], "when": {"b": 1}}}}))
    with pytest.raises(UserError, match="not an axis listed before it"):
        load_space_file(f)
    with pytest.raises(UserError, match="--allow-gpu-settings"):
        tune(_cfg(tmp_path, axes=["max-num-seqs=64"], power_limits_w=[400.0]), evaluate=ScriptedEngine())
    with pytest.raises(UserError, match="--objective"):
        tune(_cfg(tmp_path, axes=["max-num-seqs=64"], objective="speed"), evaluate=ScriptedEngine())
    assert not (tmp_path / "tune").exists()  # nothing written before the input is validated
    with pytest.raises(UserError, match="invalid SLO"):
        tune(TuneConfig(base=RunConfig(engine="vllm", slo="ttft_p99=3"), axes=["a=1"]), evaluate=ScriptedEngine())


def test_the_recommendation_quotes_its_margins_with_intervals_and_the_top_of_its_ladder(tmp_path):
    class TopOfLadder(ScriptedEngine):
        def __call__(self, trial, *a):
            trial = super().__call__(trial, *a)
            if trial.status == "done":
                trial.figures.top_of_ladder = trial.config.get("max-num-seqs") == 128
                trial.figures.ladder, trial.figures.window_s = [4, 16, 32], 20.0
            return trial

    t = tune(_cfg(tmp_path, axes=["max-num-seqs=64,128"], max_repeats=0), evaluate=TopOfLadder())
    rec = t.recommended
    assert rec.config == {"max-num-seqs": 128}
    # 128 (batched tokens default 2048): 3000·e^-1 = 1103.6; 64 and the defaults (256): 3000·e^-1.5
    # = 669.4 each, so the runner-up is the defaults (the lower index of equal scores);
    # single 20 s levels: w = sqrt(2) x 2.527% = 0.035736
    ru = rec.margin_over_runner_up
    assert ru.trial == 0 and ru.ratio == pytest.approx(math.exp(0.5)) and ru.within_noise is False
    assert ru.low == pytest.approx(math.exp(0.5) * math.exp(-0.035736), rel=1e-4)
    d = rec.margin_over_defaults
    assert d.trial == 0 and d.ratio == pytest.approx(math.exp(0.5)) and d.within_noise is False
    assert any("top of the ladder it searched" in w and "concurrency 32" in w for w in t.warnings)
    from wattbench.report.tune import margin_lines
    lines = margin_lines(rec)
    assert lines[0].startswith("over the runner-up (trial 0): 1.65× beyond noise (interval 1.59–1.71×")
    assert lines[1].startswith("over the defaults (trial 0): 1.65×")


def test_precision_measures_the_best_two_until_each_is_known_within_it(tmp_path):
    # 128 reads v x (1, 1.01, 0.99, 1): three measurements give ±2.48% (4.3027 x 1% / sqrt(3)), four
    # ±1.30% (3.1824 x 0.8165% / 2); 120 reads v x (1, 1.005, 0.995, 1): ±1.24% at three. Both within
    # 2% needs the third round of repeats (four measurements each): run --trials auto's rule
    noise = {json.dumps({"max-num-seqs": 128}): [0.0, 0.01, -0.01, 0.0, 0.0, 0.0],
             json.dumps({"max-num-seqs": 120}): [0.0, 0.005, -0.005, 0.0, 0.0, 0.0]}
    eng = ScriptedEngine(noise)
    t = tune(_cfg(tmp_path, axes=["max-num-seqs=128,120"], baseline=False, max_repeats=5, precision_pct=2.0),
             evaluate=eng)
    assert sum(tr.repeat_of is not None for tr in t.trials) == 6
    p = t.precision
    assert p.stopped == "reached" and p.asked_pct == pytest.approx(2.0)
    f = p.finalists
    assert {v.measurements for v in f.values()} == {4} and all(v.met for v in f.values())
    reached = sorted(v.reached_pct for v in f.values())
    # 120: sd 0.4082% -> 3.1824 x 0.4082 / 2 = 0.6496%; 128: sd 0.8165% -> 1.2992%
    assert reached == pytest.approx([0.6496, 1.2992], rel=2e-3)


def test_precision_says_what_a_spent_budget_left(tmp_path):
    noise = {json.dumps({"max-num-seqs": 128}): [0.0, 0.05, -0.05, 0.0], json.dumps({"max-num-seqs": 120}): [0.0] * 4}
    t = tune(_cfg(tmp_path, axes=["max-num-seqs=128,120"], baseline=False, max_repeats=1, precision_pct=2.0),
             evaluate=ScriptedEngine(noise))
    assert t.precision.stopped == "max trials"
    assert any(w.startswith("the best two configurations are not known within ±2% (max trials)") for w in t.warnings)
