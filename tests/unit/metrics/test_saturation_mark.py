"""The client's signals and the judgement of what they do to the figures, whatever the machine's load.

A level is assembled from scripted worker results (records and the worker's loop-lag probe
samples, CPU share), so nothing here depends on timing. The worker's signals are recorded
(``load.saturation_reasons``); whether the client biased a figure is judged by effect
(``accounting.validity.client_findings`` then ``mark_saturated``): an event loop 12 ms late at p99
against 50 ms TTFTs and 10 ms ITLs biases the latencies it stamps (``warn``, the level saturated for
its latency figures, not its efficiency ones); a prompt loop is nothing; a busy worker is a note
(what it does shows in the loop lag).
"""

from __future__ import annotations

from wattbench.accounting.findings import verdicts
from wattbench.accounting.validity import client_findings, load_findings
from wattbench.load.level import assemble_outcome
from wattbench.load.link import WorkerResult
from wattbench.metrics.saturation import SAT_LOOP_LAG_MIN_PROBES, SAT_LOOP_LAG_MS
from wattbench.metrics.saturation import mark_saturated, saturated_figures, saturation_kinds
from wattbench.core.load_types import LevelSpec
from wattbench.metrics.latency import summarize_level
from wattbench.core.schema import LevelResult, RequestRecord

MS = 1_000_000


def _records(n: int = 16, conc: int = 4) -> list[RequestRecord]:
    out = []
    for i in range(n):
        sent = (i // conc) * 100 * MS + i * MS
        chunks = [sent + 50 * MS + k * 10 * MS for k in range(8)]
        out.append(RequestRecord(id=i, level=0, sent_ns=sent, first_token_ns=chunks[0], last_token_ns=chunks[-1],
                                 end_ns=chunks[-1] + MS, chunk_ns=chunks, input_tokens=16, output_tokens=8))
    return out


def _level(lags_ms: list[float], cpu_pct: float = 20.0) -> LevelResult:
    spec = LevelSpec(index=0, mode="concurrency", value=4, num_requests=16)
    res = WorkerResult(records=_records(), cpu_pct=cpu_pct, stop_ns=None, interrupted=False,
                        loop_lag_ns=[int(x * MS) for x in lags_ms])
    out = assemble_outcome(spec, [res], 0, None, 1)
    _, latency, _ = summarize_level(out.records, out.start_ns, out.end_ns)
    lv = LevelResult(index=0, label="concurrency=4", load=out.load, latency=latency)
    lv.validity = verdicts(client_findings(out.load, latency, (out.end_ns - out.start_ns) / 1e9))
    return mark_saturated(lv)


def test_late_event_loop_biases_the_latencies_it_stamps_not_the_efficiency():
    lags = [0.1] * 90 + [SAT_LOOP_LAG_MS * 6] * 10  # one probe in ten woke 12 ms late
    lv = _level(lags)
    assert lv.load.client_loop_lag_ms.p99 > SAT_LOOP_LAG_MS
    (reason,) = lv.load.saturation_reasons  # the signal, as the worker saw it
    assert "event loop lag p99" in reason and "late" in reason
    (f,) = lv.validity.findings
    assert f.kind == "loop_lag" and f.severity == "warn"
    # 12 ms against a TTFT p50 of 50 ms (24%) and an ITL p99 of 10 ms (120%): ITL is the most hit
    assert f.effect_pct > 100 and "ITL p99" in f.text
    assert lv.validity.latency == "warn"
    # this scripted level lasts 0.37 s: 2 × 12 ms of edges is 6.5% of it, so efficiency is hit too
    assert lv.validity.verdict == "warn" and "efficiency" in f.figures and "window's edges" in f.text
    assert lv.load.saturated and saturation_kinds(lv) == ["loop_lag"] == lv.saturation_kinds
    assert "latency.ttft_ms" in lv.saturated_figures == saturated_figures(lv)


def test_prompt_event_loop_is_nothing():
    lv = _level([0.2] * 100)
    assert not lv.load.saturated and lv.load.saturation_reasons == []
    assert lv.validity.findings == [] and saturation_kinds(lv) == [] and lv.saturated_figures == []


def test_too_few_probes_give_no_loop_lag_verdict():
    lv = _level([50.0] * (SAT_LOOP_LAG_MIN_PROBES - 1))  # a level shorter than 20 probes
    assert not lv.load.saturated and lv.validity.findings == []


def test_busy_worker_is_a_note_beside_the_loop_lag_that_judges_it():
    lv = _level([0.3] * 100, cpu_pct=97.0)  # busy, but its loop answers within 0.3 ms (3% of a 10 ms ITL)
    assert len(lv.load.saturation_reasons) == 1 and "CPU" in lv.load.saturation_reasons[0]
    assert [(f.kind, f.severity) for f in lv.validity.findings] == [("client_cpu", "note")]
    assert not lv.load.saturated and lv.validity.verdict == "valid" and lv.validity.latency == "valid"


def test_the_kinds_the_module_doc_lists_are_the_kinds_mark_saturated_produces():
    """``metrics/saturation.py``'s doc names what ``level.saturation_kinds`` can hold; every client
    signal and load shortfall fired one at a time (a busy worker, late sends, a late event loop
    against short token gaps, a rate shortfall, a --max-concurrency cap) gives exactly those."""
    import re

    import wattbench.metrics.saturation as sat
    from wattbench.core.schema import Latency, LoadStats, Stats

    doc = re.search(r"``level\.saturation_kinds`` \(([^:)]*)", sat.__doc__).group(1)
    documented = set(re.findall(r"``(\w+)``", doc))
    lat = Latency(ttft_ms=Stats(count=50, p50=400.0), itl_ms=Stats(count=500, p99=40.0))
    loads = [
        LoadStats(mode="concurrency", target_concurrency=8, client_cpu_pct=97.0),
        LoadStats(mode="rate", target_rate_rps=10.0, achieved_rate_rps=9.9, send_lag_ms=Stats(count=5, p99=12.0)),
        LoadStats(mode="concurrency", target_concurrency=1, client_loop_lag_ms=Stats(count=50, p99=3.7)),
        LoadStats(mode="rate", target_rate_rps=10.0, achieved_rate_rps=5.0, arrival="constant"),
        LoadStats(mode="rate", target_rate_rps=10.0, achieved_rate_rps=5.0, max_in_flight=2),
    ]
    produced, fired = set(), set()
    for ld in loads:
        lv = LevelResult(index=0, label="x", load=ld, latency=lat)
        lv.validity = verdicts(load_findings(ld, n_requests=200) + client_findings(ld, lat, 20.0))
        fired |= {f.kind for f in lv.validity.findings}
        produced |= set(mark_saturated(lv).saturation_kinds)
    assert fired == {"client_cpu", "send_lag", "loop_lag", "rate", "cap"}, fired  # every case did fire
    assert produced == documented == {"loop_lag", "send_lag"}, (produced, documented)


def test_a_figure_the_client_biased_is_never_judged_within_or_beyond_noise():
    """``client_bias`` reads the level's marks: the late loop above biases throughput (its window's
    edges) and the latencies it stamps, not the power; a prompt loop biases nothing. A ratio whose
    side carries the mark is inconclusive whatever its interval (``judge``), naming the side."""
    from wattbench.metrics.figure_noise import FigureNoise, with_client
    from wattbench.metrics.noise import judge
    from wattbench.metrics.saturation import CLIENT_BIAS_TODO, client_bias

    held = _level([0.1] * 90 + [SAT_LOOP_LAG_MS * 6] * 10)
    prompt = _level([0.1] * 100)
    assert prompt.saturated_figures == [] and client_bias(prompt, "output_tokens_per_s", None) is None
    words, todo = client_bias(held, "output_tokens_per_s", None)
    assert "throughput.*" in held.saturated_figures and todo == CLIENT_BIAS_TODO
    assert words.startswith("load generator biased the figure (client event-loop lag p99")
    assert client_bias(held, "ttft_ms", None) is not None  # a latency it stamps
    assert client_bias(held, "avg_power_w", "node") is None  # measured correctly whatever the load
    # an efficiency figure at a boundary: marked there, not at another
    held.saturated_figures = held.saturated_figures + ["energy.node.output_tokens_per_s_per_kw"]
    assert client_bias(held, "output_tokens_per_s_per_kw", "node") is not None
    assert client_bias(held, "output_tokens_per_s_per_kw", "accelerator") is None

    n = FigureNoise(0.02, "trials", 5, "within-run trials (5 trials, 4 df)", 4)
    assert judge(1.13, n, n).word == "beyond noise" and judge(1.0, n, n).word == "within noise"
    for ratio in (1.13, 1.0):
        j = judge(ratio, n, with_client(n, (words, todo)))
        assert j.inconclusive and not j.within and j.basis == "client", j
        assert j.why == "B's " + words and j.todo == CLIENT_BIAS_TODO
    # no noise known on the held side: still named, never "noise unknown"
    j = judge(0.9, None, with_client(None, (words, todo)), sides=("the baseline", "the run"))
    assert j.word == "inconclusive" and j.why.startswith("the run's load generator biased")
