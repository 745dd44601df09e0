"""Findings against the scripted server (defects found in review, ground truth from its known timing).

* ``--rate 50 --max-concurrency 2`` against a server whose requests last 40 + 15 × 8 = 160 ms: the
  cap allows at most 2 / 0.16 s = 12.5 req/s. The send lag (arrivals waiting for a slot) is the cap
  working, never client saturation: the level carries a ``cap`` note with the achieved rate.
* A three-level ``--optimize`` run with approximate prompt lengths (no tokenizer; the scripted
  server counts 12 input tokens for a 16-token ask, -25 %): the summary at 80 columns gives the
  answer first, then the verdicts and at most eight note lines, one per distinct finding with its
  levels in numeric order, each said once (it once printed 85 lines, 22 of them notes, before
  ``optimize: chose``).
"""

from __future__ import annotations

import pytest
from rich.console import Console

from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig

TTFT_MS, ITL_MS, OUT = 40.0, 8.0, 16
STREAM_S = (TTFT_MS + (OUT - 1) * ITL_MS) / 1e3


def _run(cfg: RunConfig):
    from wattbench.run import run_benchmark

    return run_benchmark(cfg)


def test_a_max_concurrency_cap_is_a_cap_with_its_achieved_rate_not_saturation(tmp_path):
    with stream_server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as (base, _):
        res = _run(RunConfig(target=base, rate=[50.0], max_concurrency=2, arrival="constant", num_requests=40,
                             input_tokens="16", output_tokens=str(OUT), sensors=["const:node=300"], idle_s=0,
                             register_run=False, html=False, out=str(tmp_path / "run"), workers=1))
    lv = res.levels[0]
    ld = lv.load
    # two slots of at least 160 ms each: the 40 sends span at least 19 request lifetimes, so the
    # achieved rate, (n - 1) / span, is at most 39 / (19 × 0.16 s) = 12.8 req/s (the cap's 12.5 req/s
    # measured over n - 1 gaps); the server's timing only lowers it
    n = 40
    most = (n - 1) / ((n / 2 - 1) * STREAM_S)
    assert ld.achieved_rate_rps <= most * 1.001, (ld.achieved_rate_rps, most)
    # however long an arrival waited for a slot (the cap working), it is not a client signal
    assert not any("send lag" in r for r in ld.saturation_reasons)
    kinds = [f.kind for f in lv.validity.findings]
    assert "send_lag" not in kinds and "rate" not in kinds and "send_lag" not in lv.saturation_kinds
    (cap,) = [f for f in lv.validity.findings if f.kind == "cap"]
    assert cap.severity == "note" and cap.figures == ("load",)
    assert f"achieved {ld.achieved_rate_rps:.3g} req/s of 50 asked" in cap.text
    assert cap.effect_pct == pytest.approx(100 * (ld.achieved_rate_rps - 50) / 50, rel=1e-9)
    from wattbench.report.notes import run_notes

    assert any("--max-concurrency 2 held the rate" in n for n in run_notes(res))


def test_a_three_level_optimize_summary_answers_first_in_at_most_eight_note_lines(tmp_path):
    from wattbench.report.terminal import run_summary

    with stream_server("--ttft-ms", "20", "--itl-ms", "4") as (base, _):
        res = _run(RunConfig(target=base, concurrency=[1, 2, 4], optimize="output_tokens_per_s_per_kw",
                             num_requests=24, input_tokens="16", output_tokens="8", sensors=["const:node=300"],
                             idle_s=0, register_run=False, html=False, out=str(tmp_path / "run"), workers=1,
                             calibrate_prompts=False))  # approximate lengths: their note is what is grouped here
    assert len([lv for lv in res.levels if "re-measured" not in lv.label]) == 3 and res.prompt_length_source == "approx"
    c = Console(width=80, record=True, color_system=None)
    c.print(run_summary(res))
    lines = c.export_text().splitlines()
    assert max(len(x) for x in lines) <= 80
    first_table = next(i for i, x in enumerate(lines) if x.startswith("level "))
    head = lines[:first_table]
    answer = next(i for i, x in enumerate(head) if x.startswith("answer: "))
    chose = next(i for i, x in enumerate(head) if x.startswith("optimize: "))
    verdict = next(i for i, x in enumerate(head) if x.startswith("verdict: "))
    assert answer < chose < verdict  # the answer first, then what was chosen and why, then the verdicts
    assert not [x for x in head if x.startswith(("! ", "- ", "✗ "))]  # the figures before any note
    notes = [x for x in lines[first_table:] if x.startswith(("! ", "- ", "✗ "))]  # the notes after the tables
    assert 1 <= len(notes) <= 8, "\n".join(lines)
    # every level's approximate prompt lengths said once, levels in numeric order
    from wattbench.report.labels import levels_text

    every = levels_text(res, sorted(
        (lv.index for lv in res.levels), key=lambda i: (res.levels[i].label.endswith("re-measured"),
                                                          res.levels[i].load.target_concurrency)))
    assert every.startswith("c=1,2,4"), every  # --optimize measured its top two again: "c=2,4 re-measured"
    prompt = [x for x in notes if "prompt lengths" in x]
    assert prompt == [f"! {every}: prompt lengths −25% (no tokenizer)"], prompt
    assert len(set(notes)) == len(notes)
    small = [x for x in notes if "p99 from < 100 requests" in x]
    assert small == [f"- {every}: p99 from < 100 requests (the maximum)"], small
    # the full list is in the result and `report --notes`
    from wattbench.report.notes import notes_full_lines

    full = "\n".join(notes_full_lines(res))
    for lv in res.levels:
        for f in lv.validity.findings:
            assert f.text in full
