"""The tune's rendering shows what tune.json holds, escaped."""

from __future__ import annotations

from wattbench.core.numbers import MISSING
from wattbench.report.tune import rows, tune_html
from wattbench.results.tune import TrialRecord, TuneResult
from wattbench.tune.run import conclude


def _t():
    t = TuneResult(tune_id="tune-x", created_at="2026-12-01T00:00:00Z", engine="vllm", model="<m>",
                   slo="tpot_p99=50ms", space={"axes": {"max-num-seqs": {"values": [64, 128]}}})
    for i, (cfg, s, gpu) in enumerate([({}, 1000.0, {}), ({"max-num-seqs": 64}, 1300.0, {"power_limit_w": 400.0}),
                                       ({"max-num-seqs": 128}, None, {})]):
        t.trials.append(TrialRecord(index=i, config=cfg, label="<b>x</b>" if i == 2 else str(cfg), score=s,
                                    gpu_settings=gpu, status="done" if s else "pruned",
                                    figures={} if s is None else {"goodput_per_kw": s, "tpot_p99_ms": 40.0 - i,
                                                                  "load_mode": "concurrency", "load_value": 16}))
    conclude(t)
    return t


def test_rows_and_html():
    t = _t()
    r = rows(t)
    assert r[1][1] == "{'max-num-seqs': 64} [power_limit_w=400]" and r[1][3] == "c=16" and r[1][4] == "1,300"
    assert r[2][2] == "pruned" and r[2][4] == MISSING
    assert abs(t.recommended.gain_over_defaults_pct - 30.0) < 1e-9
    page = tune_html(t)
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page and "&lt;m&gt;" in page
    assert "+30% goodput per kW vs the engine defaults" in page
    assert page.count("<circle") == 2  # the two scored trials on the Pareto plot


def test_small_gain_keeps_a_decimal():
    """A gain of +0.5% reads +0.5%, not +1% (the H200 validation's winner was +0.50%)."""
    t = _t()
    t.trials[1].score = t.trials[1].figures.goodput_per_kw = 1005.0
    conclude(t)
    assert abs(t.recommended.gain_over_defaults_pct - 0.5) < 1e-9
    assert t.recommended.summary.startswith("+0.5% goodput per kW vs the engine defaults")
