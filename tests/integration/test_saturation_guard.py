"""Client saturation guard: a load generator that cannot keep up is reported, and the figures it
biases are marked (level.saturated_figures, the headline's mark, the verdict's warn). Whether the
client's signals bias a figure is judged by their effect (accounting.validity.client_findings).

The overload is deliberate and deterministic: a seam in the client (``StreamClient.send``)
burns CPU before each request, so one in-process worker can send at most ~1/(burn) requests/s
and spends ~100% of its thread's CPU. A control level with the same server, no burn and the host's
share of the delay signals taken out must not be flagged."""

from __future__ import annotations

import time

import pytest

from tests.fakes.reliability_procs import server
from wattbench.config.run import RunConfig
from wattbench.metrics.saturation import (EFFICIENCY_FIELDS, SAT_CPU_PCT, SAT_LOOP_LAG_MIN_PROBES, saturated_figures,
                                       saturation_kinds)
from wattbench.report.format import SATURATION_MARK, headline_line as headline
from wattbench.core.schema import LevelResult, LoadStats, Stats


def _burn(ms: float) -> None:
    end = time.thread_time() + ms / 1e3
    while time.thread_time() < end:
        pass


@pytest.fixture
def hog(monkeypatch):
    import wattbench.load.client as client

    real = client.StreamClient.send

    async def send(self, *a, **kw):
        _burn(8.0)  # ~125 sends/s at most from this worker
        return await real(self, *a, **kw)

    monkeypatch.setattr(client.StreamClient, "send", send)


def _run(base, out, rate, n=60):
    from wattbench.run import run_benchmark

    cfg = RunConfig(target=base, rate=[rate], arrival="constant", num_requests=n, workers=1, input_tokens="16",
                    output_tokens="8", sensors=["const:accelerator=100"], idle_s=0, register_run=False, html=False,
                    out=str(out))
    return run_benchmark(cfg)


def test_overloaded_client_is_flagged_and_figures_marked(tmp_path, hog):
    with server("--ttft-ms", "2", "--itl-ms", "1") as s:
        res = _run(s.base, tmp_path / "run", rate=400.0)
    lv = res.levels[0]
    ld = lv.load
    assert ld.saturated
    # 60 sends at 400/s are due within 150 ms; burning 8 ms each, the last leaves ~330 ms late
    assert ld.send_lag_ms.p99 > 200.0
    kinds = lv.saturation_kinds
    assert "send_lag" in kinds, (kinds, ld.saturation_reasons)
    assert lv.validity.verdict == "warn"
    (f,) = [f for f in lv.validity.findings if f.kind == "send_lag"]
    assert f.severity == "warn" and f.figures == ("load",) and "arrivals went out late" in f.text
    figs = lv.saturated_figures
    assert "latency.*" in figs and "throughput.*" in figs
    assert "energy.accelerator.output_tokens_per_s_per_kw" in figs and "energy.accelerator.j_per_output_token" in figs
    assert not any(f.endswith((".energy_j", ".avg_power_w")) for f in figs)  # measured right, not marked
    assert headline(lv).startswith(SATURATION_MARK)
    from wattbench.results.rundir import load_result

    on_disk = load_result(tmp_path / "run").levels[0]
    assert on_disk.saturated_figures == figs


@pytest.fixture
def quiet_host(monkeypatch):
    """Take the host out of the two delay signals a loaded machine moves (the guard's thresholds
    on scripted values are test_kinds_follow_the_guards_thresholds' and
    tests/unit/load/test_saturation_mark.py's): the loop-lag probe records every wake-up on time,
    and each request counts as sent when it was due (send lag 0). The client's CPU stays real."""
    import asyncio

    import wattbench.load.client as client
    import wattbench.load.worker as worker

    async def probe(lags_ns):
        while True:
            await asyncio.sleep(worker.LOOP_PROBE_S)
            lags_ns.append(0)

    real = client.StreamClient.send

    async def send(self, *a, **kw):
        rec = await real(self, *a, **kw)
        if rec.scheduled_ns is not None:
            rec.scheduled_ns = rec.sent_ns
        return rec

    monkeypatch.setattr(worker, "probe_loop_lag", probe)
    monkeypatch.setattr(client.StreamClient, "send", send)


def test_control_level_is_not_flagged(tmp_path, quiet_host):
    """No burn and a quiet host: the client did nothing but send 15 requests at 10/s, so it is not
    saturated — no reason, no kind, no marked figure, no mark on the headline, no warn for it."""
    with server("--ttft-ms", "2", "--itl-ms", "1") as s:
        res = _run(s.base, tmp_path / "run", rate=10.0, n=15)
    lv = res.levels[0]
    ld = lv.load
    # the signals the guard reads: the client's own CPU (real), and the two scripted delays
    assert ld.client_cpu_pct is not None and ld.client_cpu_pct < SAT_CPU_PCT, ld.client_cpu_pct
    assert ld.send_lag_ms.count == 15 and ld.send_lag_ms.p99 == pytest.approx(0.0, abs=1e-9)
    assert ld.client_loop_lag_ms.count >= SAT_LOOP_LAG_MIN_PROBES and ld.client_loop_lag_ms.p99 == pytest.approx(0.0, abs=1e-9)
    assert not ld.saturated and ld.saturation_reasons == [], ld.saturation_reasons
    assert lv.saturation_kinds == [] and lv.saturated_figures == []
    assert not headline(lv).startswith(SATURATION_MARK)
    assert not [f for f in lv.validity.findings if f.kind in ("loop_lag", "send_lag")], lv.validity.findings


def _level(latency=None, **load) -> LevelResult:
    from wattbench.accounting.findings import verdicts
    from wattbench.accounting.validity import client_findings
    from wattbench.metrics.saturation import mark_saturated
    from wattbench.core.schema import Latency

    ld = LoadStats(**load)
    lat = latency or Latency(ttft_ms=Stats(count=50, p50=400.0), itl_ms=Stats(count=500, p99=40.0))
    lv = LevelResult(index=0, label="x", load=ld, latency=lat)
    lv.validity = verdicts(client_findings(ld, lat, 20.0))
    return mark_saturated(lv)


def test_kinds_follow_the_guards_thresholds_and_their_effect():
    cpu = _level(mode="concurrency", target_concurrency=8, client_cpu_pct=97.0)
    assert saturation_kinds(cpu) == [] and [f.kind for f in cpu.validity.findings] == ["client_cpu"]
    lag = _level(mode="rate", target_rate_rps=10.0, achieved_rate_rps=9.9,
                 send_lag_ms=Stats(count=5, p99=12.0))  # limit max(5, 10% of 100 ms) = 10 ms
    assert saturation_kinds(lag) == ["send_lag"] and lag.load.saturated
    # the case: a 2.4-3.7 ms loop lag against a 400 ms TTFT is under 1% of it: a note
    from wattbench.core.schema import Latency

    slow = Latency(ttft_ms=Stats(count=50, p50=400.0), itl_ms=Stats(count=500, p99=100.0))
    quiet = _level(slow, mode="concurrency", target_concurrency=1, client_loop_lag_ms=Stats(count=50, p99=3.7))
    (f,) = quiet.validity.findings
    assert (f.kind, f.severity) == ("loop_lag", "note") and f.effect_pct == pytest.approx(3.7)  # of ITL p99
    assert "0.93% of TTFT p50 400 ms" in f.basis and not quiet.load.saturated
    assert (quiet.validity.verdict, quiet.validity.latency) == ("valid", "valid")
    # the same lag against 40 ms gaps between tokens is 9% of them: the ITL percentiles are biased
    fast = _level(mode="concurrency", target_concurrency=1, client_loop_lag_ms=Stats(count=50, p99=3.7))
    (g,) = fast.validity.findings
    assert g.severity == "warn" and g.effect_pct == pytest.approx(9.25) and "ITL p99" in g.text
    assert (fast.validity.verdict, fast.validity.latency) == ("valid", "warn")
    assert saturation_kinds(fast) == ["loop_lag"] and "latency.itl_ms" in fast.saturated_figures
    assert not any(x.startswith(("energy", "throughput")) for x in fast.saturated_figures)
    assert saturation_kinds(_level(mode="rate", target_rate_rps=10.0, achieved_rate_rps=9.0)) == []


def test_figures_cover_every_boundary_and_window_when_the_load_is_biased():
    from wattbench.core.schema import BoundaryEnergy

    lv = _level(mode="rate", target_rate_rps=10.0, achieved_rate_rps=9.9, send_lag_ms=Stats(count=5, p99=50.0))
    lv.energy = {"accelerator": BoundaryEnergy(boundary="accelerator", method="counter"), "node": BoundaryEnergy(boundary="node", method="counter")}
    lv.energy_steady = {"accelerator": BoundaryEnergy(boundary="accelerator", method="counter")}
    figs = saturated_figures(lv)
    assert len(figs) == 2 + 3 * len(EFFICIENCY_FIELDS)
    assert "energy.node.tokens_per_kwh" in figs and "energy_steady.accelerator.j_per_token" in figs
    assert saturated_figures(_level()) == []
