"""Findings about what a level measured (accounting/level_findings.py), the run verdict without a
meter, and how the searches and the prefill/decode pair treat a level that measured nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fakes.results_factory import make_level, make_result
from wattbench.accounting import level_findings as LF
from wattbench.load.search import auto_sweep, optimize
from wattbench.metrics.level_figures import LevelFigures
from wattbench.core.schema import Requests, RequestRecord


def _empty(level_index=1, value=128, warmup=128, failed=0):
    lv = make_level(index=level_index, value=value)
    lv.requests = Requests(completed=0, failed=failed, warmup=warmup)
    lv.energy = {}
    return lv


def test_no_completed_request_is_invalid_with_what_happened():
    f = LF.no_completed_finding(_empty())
    assert f.severity == "invalid"
    assert "no measured request completed (128 warm-up, 0 failed, 0 completed)" in f.text
    assert "every request sent was a warm-up request" in f.text
    assert LF.no_completed_finding(make_level()) is None


def test_small_sample_is_a_latency_note_not_an_efficiency_warn():
    """The README's first command on the H200 ended ``verdict: warn`` because c=1's p99 came from 32
    requests: a finding about one latency percentile, which says nothing about the efficiency figure."""
    from wattbench.accounting.findings import verdicts

    lv = make_level()
    lv.requests.completed = 32
    f = LF.small_sample_finding(lv)
    assert f.severity == "note" and "from 32 requests" in f.text and "100" in f.text
    assert set(f.figures) == {"ttft", "tpot", "itl", "e2e"}
    v = verdicts([f])
    assert (v.verdict, v.latency) == ("valid", "valid") and v.notes == [f]
    lv.requests.completed = LF.P99_MIN_SAMPLES
    assert LF.small_sample_finding(lv) is None


def test_closed_loop_far_below_its_label_warns_with_the_achieved_figure():
    lv = make_level(value=64)
    lv.load.mean_in_flight = 7.2  # the H200 chat level: think times
    f = LF.in_flight_finding(lv)
    assert f.severity == "warn" and "concurrency asked 64, achieved 7.2 in flight" in f.text
    lv.load.mean_in_flight = 40.0
    assert LF.in_flight_finding(lv) is None


def _rec(asked, got):
    return RequestRecord(id=0, level=0, sent_ns=0, end_ns=1, ok=True, input_tokens=got,
                         requested_input_tokens=asked, output_tokens=4)


def test_approximate_prompt_lengths_far_from_the_asked_length_warn():
    far = [_rec(256, 400), _rec(256, 410)]  # --input-tokens 256 without a tokenizer: ~400 counted
    f = LF.input_length_finding(far, "approx")
    assert f.severity == "warn" and "asked 256, the server counted 405" in f.text and "+58%" in f.text
    assert f.effect_pct == pytest.approx(58.2, abs=0.05) and f.figures == ("prompt_lengths",)
    near = LF.input_length_finding([_rec(256, 260)], "approx")  # within 10%: a note with the difference
    assert near.severity == "note" and near.effect_pct == pytest.approx(1.5625)
    assert LF.input_length_finding(far, "tokenizer") is None  # exact lengths: not this rule's business


def test_calibrated_prompt_lengths_are_checked_against_the_server_count_within_two_percent():
    """Prompts fitted to the server's count (run/prime.calibrate_prompts): within ±2% there is
    nothing to say; beyond it the calibration did not hold (a note, a warn beyond 10%)."""
    assert LF.input_length_finding([_rec(256, 260), _rec(256, 257)], "calibrated") is None  # +1.2%
    off = LF.input_length_finding([_rec(256, 263)], "calibrated")  # +2.7%
    assert off.severity == "note" and "calibrated" in off.text and off.effect_pct == pytest.approx(2.734, abs=0.01)
    assert LF.input_length_finding([_rec(256, 300)], "calibrated").severity == "warn"  # +17%


def test_run_without_energy_says_so_once_in_the_verdict():
    r = make_result()
    for lv in r.levels:
        lv.energy = {}
        lv.validity.findings = []
        lv.validity.verdict = "valid"
    v = LF.run_validity(r, "no power meter could be read on this machine")
    assert v.energy == "unavailable" and v.verdict == "warn"
    assert v.reasons[0].startswith("warn: energy: unavailable (no power meter could be read on this machine)")
    assert sum("energy: unavailable" in x for x in v.reasons) == 1
    measured = LF.run_validity(make_result())
    assert measured.energy == "measured"


def test_a_run_stopped_by_a_failed_write_says_so_first_and_is_at_best_warn():
    import errno

    from wattbench.core.errors import StorageError

    r = make_result()
    for lv in r.levels:
        lv.validity.findings = []
        lv.validity.verdict = "valid"
    assert LF.run_validity(r).verdict == "valid"
    err = StorageError("/x/requests.jsonl", OSError(errno.ENOSPC, "No space left on device"))
    v = LF.run_validity(r, stopped=err)
    assert v.verdict == "warn" and v.findings[0].kind == "run_stopped"
    assert "/x/requests.jsonl: No space left on device" in v.findings[0].text
    assert f"the {len(r.levels)} level(s) listed are complete" in v.findings[0].text
    assert v.findings[0].summary == "the run stopped on a failed write (No space left on device)"


def test_auto_sweep_stops_at_a_failed_level_and_names_it():
    figs = {1: LevelFigures(output_tokens_per_s=100.0), 2: LevelFigures(output_tokens_per_s=190.0),
            4: LevelFigures(output_tokens_per_s=0.0, failed="no measured request completed")}
    res = auto_sweep(lambda v: figs[v], start=1, max_value=64)
    assert res.knee_value == 2 and res.best_value == 2
    assert res.reason.startswith("level 4 failed: no measured request completed")
    assert res.to_dict()["failed"] == [{"value": 4, "reason": "no measured request completed"}]


def test_optimize_scores_a_failed_level_as_failed_not_missing():
    def measure(v):
        if v == 128:
            return LevelFigures(failed="no measured request completed", goodput_per_kw=None)
        return LevelFigures(goodput_per_kw=float(v))  # rising: the failed top level would otherwise look "missing"

    res = optimize(measure, [1, 2, 4, 8, 16, 32, 64, 128], refine=False)
    assert res.best_value == 64
    refined = optimize(measure, [1, 2, 4, 8, 16, 32, 64, 128])  # bisects up to the failed level, never onto it
    assert 64 <= refined.best_value < 128
    d = res.to_dict("goodput_per_kw")
    assert d["failed"] == [{"value": 128, "reason": "no measured request completed"}]


def test_isolating_pair_with_an_empty_level_says_a_sentence(monkeypatch):
    from wattbench.run.plan import prefill_decode_pair

    pre = make_level(index=0, value=8)
    pre.label = "concurrency=8 prefill-heavy"
    dec = _empty(1, 8)
    dec.label = "concurrency=8 decode-heavy"
    dec.validity.verdict = "invalid"
    dec.validity.findings = [LF.no_completed_finding(dec)]
    levels = iter([pre, dec])
    pair = prefill_decode_pair(SimpleNamespace(concurrency=[8]), lambda *a, **k: next(levels))
    assert pair["error"].startswith("the concurrency=8 decode-heavy level has no energy to split (no measured request")
    assert "no measured request completed" in pair["error"] and pair["error"] != "'accelerator'"
    assert pair["failed_levels"] == ["concurrency=8 decode-heavy"]


def test_headline_shows_achieved_beside_asked_and_marks_small_samples():
    from wattbench.report.format import headline_line as headline

    lv = make_level(value=64)
    lv.load.mean_in_flight = 7.2
    lv.requests.completed = 4
    h = headline(lv)
    assert "achieved 7.20 in flight of 64 asked" in h and "(n=4)" in h
    from wattbench.report.labels import short_label

    assert short_label(lv) == "c=64 (got 7.20)"  # the level tables' label too
    ok = make_level(value=8)
    assert short_label(ok) == "c=8"
    ok.requests.completed = 500
    assert "achieved" not in headline(ok) and "(n=" not in headline(ok)


def test_a_level_cut_short_says_so():
    """Interrupted: warn (its figures are what was measured until the signal); a failed load worker:
    invalid (part of the load was never sent); any other way to end adds nothing here."""
    w = LF.stopped_finding("interrupted")
    assert w.severity == "warn" and w.text.startswith("level interrupted (SIGINT/SIGTERM)")
    f = LF.stopped_finding("worker_failed")
    assert f.severity == "invalid" and "a load worker failed mid-level" in f.text
    assert LF.stopped_finding(None) is None and LF.stopped_finding("requests_exhausted") is None
    level = make_level()  # a level with plenty of completed requests: no other finding
    assert LF.level_findings(level, [], stopped_early=None) == []
    assert [x.severity for x in LF.level_findings(level, [], stopped_early="worker_failed")] == ["invalid"]


# ---------------------------------------------------------------- the history check, a finding of the run


def _history_run(first_tok_s: float, repeat_tok_s: float, trials=None):
    from wattbench.core.schema import NoiseInfo
    from wattbench.run.prime import check_history

    first = make_level(0, value=2, output_tokens_per_s=first_tok_s, power_w=700.0, duration_s=20.0, trials=trials)
    r = make_result(levels=[first, make_level(1, value=8, power_w=700.0, duration_s=20.0)])
    r.noise = NoiseInfo()
    r.noise.history_check = check_history(first, make_level(0, value=2, output_tokens_per_s=repeat_tok_s,
                                                            power_w=700.0, duration_s=20.0))
    return r


def test_a_history_check_beyond_noise_is_a_warn_of_the_run_with_its_size():
    """Issue's case: +50% beyond noise left the run valid (a warning line beside it); it is a finding
    judged like any other, and it moves the run's verdict."""
    r = _history_run(1000.0, 1502.0)
    v = LF.run_validity(r)
    (f,) = [f for f in v.findings if f.kind == "history_check"]
    assert f.severity == "warn" and f.effect_pct == pytest.approx(50.2, abs=1e-6)
    assert f.bound_pct == pytest.approx(1.0) and "efficiency" in f.figures
    assert "beyond noise ±3.6%" in f.text and "(+50.2%)" in f.text
    assert v.verdict == "warn"  # the levels alone are valid


def test_a_history_check_within_noise_is_no_finding_and_said_in_the_state_line():
    from wattbench.report.summary import answer_lines
    from wattbench.report.notes import note_lines

    r = _history_run(1000.0, 1010.0)
    v = LF.run_validity(r)
    assert not [f for f in v.findings if f.kind == "history_check"] and v.verdict == "valid"
    r.validity = v
    state = [x for x in answer_lines(r) if "history check" in x]
    assert state and "+1.0% within noise (±3.6%)" in state[0]
    assert not [n for n in note_lines(r) if "history check" in n.text]


def test_a_history_check_beyond_noise_is_said_once():
    from wattbench.report.summary import answer_lines
    from wattbench.report.notes import note_lines

    r = _history_run(1000.0, 1502.0)
    r.validity = LF.run_validity(r)
    said = [x for x in answer_lines(r) if "history check" in x] + [n.text for n in note_lines(r)
                                                                  if "history check" in n.text]
    assert len(said) == 1 and "+50.2%" in said[0]


def test_an_inconclusive_history_check_is_a_note_that_says_inconclusive():
    """Two trials give the prediction interval 1 df: inconclusive, never "within noise", and no warn."""
    from tests.fakes.results_factory import trials_block

    tb = trials_block({"output_tokens_per_s_per_kw@accelerator": (1000.0 / 0.7, 10.0)}, n=2)
    tb["figures"]["output_tokens_per_s_per_kw@accelerator"]["values"] = [1000.0 / 0.7, 1010.0 / 0.7]
    r = _history_run(1000.0, 1005.0, trials=tb)
    hc = r.noise.history_check
    assert hc.verdict == "unknown" and "inconclusive" in hc.text
    v = LF.run_validity(r)
    (f,) = [f for f in v.findings if f.kind == "history_check"]
    assert f.severity == "note" and "inconclusive" in f.text and "within noise" not in f.text
    assert v.verdict == "valid"


def _streamed(i: int, chunks: int, **kw) -> RequestRecord:
    from wattbench.core.schema import build_record

    base = dict(id=i, level=0, sent_ns=i * 1000, chunk_ns=[i * 1000 + k + 1 for k in range(chunks)], output_tokens=chunks)
    base.update(kw)
    return build_record(**base)


def test_bad_usage_is_sized_by_the_share_of_content_it_leaves_uncounted_and_judged_by_materiality():
    """The requests whose usage was refused did work in the window with no token counted: the
    level's per-token efficiency is understated by about their share of the content chunks. At or
    above the efficiency bound (1%) a warn, below a note — sized from the records, not a fixed answer."""
    from wattbench.accounting.findings import EFFICIENCY_MATERIAL_PCT

    bad = dict(ok=False, error="bad_usage", output_tokens=None)
    recs = [_streamed(i, 10) for i in range(98)] + [_streamed(98, 10, **bad), _streamed(99, 10, **bad)]
    f = LF.bad_usage_finding(recs)  # 20 of 1000 chunks: 2%
    assert f.kind == "bad_usage" and f.severity == "warn" and f.effect_pct == pytest.approx(-2.0)
    assert "2 request(s)" in f.text and f.bound_pct == EFFICIENCY_MATERIAL_PCT
    recs = [_streamed(i, 10) for i in range(199)] + [_streamed(199, 10, **bad)]
    f = LF.bad_usage_finding(recs)  # 10 of 2000 chunks: 0.5%
    assert f.severity == "note" and f.effect_pct == pytest.approx(-0.5)
    warm = [_streamed(0, 10), _streamed(1, 10, warmup=True, **bad)]
    assert LF.bad_usage_finding(warm) is None  # a warm-up request is not the level's
    assert LF.bad_usage_finding([_streamed(0, 5), _streamed(1, 5, ok=False, error="http_500")]) is None


def test_an_effect_between_one_and_two_percent_is_material_for_efficiency():
    """The efficiency materiality bound is 1%, and it is the one findings are judged by: effects of
    1.5% measured from their ground truth are warns, 0.5% notes. (A test that pinned the constant
    caught a 2% bound; these judge by it: at 2% both 1.5% cases read as notes.)"""
    from wattbench.core.schema.noise import HistoryCheck

    bad = dict(ok=False, error="bad_usage", output_tokens=None)
    recs = [_streamed(i, 10) for i in range(197)] + [_streamed(197 + k, 5, **bad) for k in range(3)]
    f = LF.bad_usage_finding(recs)  # 15 of 1,985 content chunks: 0.76% — immaterial
    assert f.severity == "note" and f.effect_pct == pytest.approx(-100 * 15 / 1985)
    recs = [_streamed(i, 10) for i in range(197)] + [_streamed(197 + k, 10, **bad) for k in range(3)]
    f = LF.bad_usage_finding(recs)  # 30 of 2,000: 1.5%
    assert f.severity == "warn" and f.effect_pct == pytest.approx(-1.5)
    # the history check: the first level measured again 1.5% off, beyond its noise: a warn
    hc = HistoryCheck(level="c=1", figure="output_tokens_per_s_per_kw@accelerator", first=1000.0, repeated=1015.0,
                      ratio=1.015, verdict="warn", text="c=1 measured again: +1.5%, beyond noise")
    assert LF.history_finding(hc).severity == "warn"
    assert LF.history_finding(hc.model_copy(update={"repeated": 1005.0, "ratio": 1.005})).severity == "note"
