"""The saturation mark follows the client's own signals, whatever the machine's load.

A level is assembled from scripted worker results (records and the worker's loop-lag probe
samples, CPU share), so nothing here depends on timing: a client whose event loop waited longer
than the bar (on a shared host, other processes held the CPUs) is marked saturated with the
``loop_lag`` kind and a reason that says how late its stamps may be; the same level with a
prompt loop is not marked; a busy worker is marked ``cpu``.
"""

from __future__ import annotations

from wattbench.load.level import assemble_outcome
from wattbench.load.link import WorkerResult
from wattbench.load.saturation import SAT_LOOP_LAG_MIN_PROBES, SAT_LOOP_LAG_MS
from wattbench.load.saturation import mark_saturated, saturated_figures, saturation_kinds
from wattbench.load.types import LevelSpec
from wattbench.results.schema import LevelResult, RequestRecord

MS = 1_000_000


def _records(n: int = 16, conc: int = 4) -> list[RequestRecord]:
    out = []
    for i in range(n):
        sent = (i // conc) * 100 * MS + i * MS
        chunks = [sent + 50 * MS + k * 10 * MS for k in range(8)]
        out.append(RequestRecord(id=i, level=0, sent_ns=sent, first_token_ns=chunks[0], last_token_ns=chunks[-1],
                                 end_ns=chunks[-1] + MS, chunk_ns=chunks, input_tokens=16, output_tokens=8))
    return out


def _level(lags_ms: list[float], cpu_pct: float = 20.0):
    spec = LevelSpec(index=0, mode="concurrency", value=4, num_requests=16)
    res = WorkerResult(records=_records(), cpu_pct=cpu_pct, stop_ns=None, interrupted=False,
                        loop_lag_ns=[int(x * MS) for x in lags_ms])
    return assemble_outcome(spec, [res], 0, None, 1)


def test_late_event_loop_marks_the_level_with_its_reason():
    lags = [0.1] * 90 + [SAT_LOOP_LAG_MS * 6] * 10  # one probe in ten woke 12 ms late
    load = _level(lags).load
    assert load.saturated
    assert load.client_loop_lag_ms.p99 > SAT_LOOP_LAG_MS
    (reason,) = load.saturation_reasons
    assert "event loop lag p99" in reason and "late" in reason
    assert saturation_kinds(load) == ["loop_lag"]
    lv = mark_saturated(LevelResult(index=0, label="concurrency=4", load=load))
    assert lv.saturation_kinds == ["loop_lag"]
    assert "latency.*" in lv.saturated_figures == saturated_figures(lv)


def test_prompt_event_loop_is_not_marked():
    load = _level([0.2] * 100).load
    assert not load.saturated and load.saturation_reasons == []
    assert saturation_kinds(load) == []
    lv = mark_saturated(LevelResult(index=0, label="concurrency=4", load=load))
    assert lv.saturation_kinds == []


def test_too_few_probes_give_no_loop_lag_verdict():
    load = _level([50.0] * (SAT_LOOP_LAG_MIN_PROBES - 1)).load  # a level shorter than 20 probes
    assert not load.saturated


def test_busy_worker_is_marked_cpu_beside_loop_lag():
    load = _level([SAT_LOOP_LAG_MS * 3] * 100, cpu_pct=97.0).load
    assert load.saturated and len(load.saturation_reasons) == 2
    assert saturation_kinds(load) == ["cpu", "loop_lag"]
