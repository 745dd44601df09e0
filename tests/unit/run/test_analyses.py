"""``run/analyses.py``: energy and carbon per request, the trials' mean and CI, and the run-level
analyses filled from given levels — the Pareto frontiers and the prefill/decode regression with its
cross-check. Ground truth: levels made with known figures (``results_factory``), and a telemetry log
and ``/metrics`` counters built from a known energy model (``E = idle·t + e_p·prefill + e_d·decode``
per interval)."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import pytest

from tests.fakes.results_factory import make_level, make_result
from tests.fakes.scripted_sensor import build_log, counter_channel
from wattbench.accounting.attribution import isolating_pair
from wattbench.config.run import RunConfig
from wattbench.core.clock import ClockAnchor
from wattbench.core.schema import PrefillDecode, RequestRecord, Requests, Thermal
from wattbench.metrics.carbon_series import parse_carbon_intensity
from wattbench.metrics.slo import parse_slos
from wattbench.run.analyses import attribute, measuring_trials, run_analyses, trials_block
from wattbench.run.session import RunSession
from wattbench.server.metrics import MetricsScraper
from wattbench.telemetry.base import TelemetryLog

T_975_2 = 4.302652729911275  # Student t, 97.5th percentile, 2 degrees of freedom (3 trials)
IDLE_W, J_PREFILL, J_DECODE = 100.0, 0.002, 0.05  # the energy model the regression must recover
N_INTERVALS = 40  # 1 s each, from t = 1 s (the made levels' windows start there)


@dataclass
class FinishedSampler:
    """What the analyses read of a sampler: its telemetry log."""

    log: TelemetryLog


def _session(tmp_path, levels, **cfg) -> RunSession:
    cfg.setdefault("target", "http://127.0.0.1:9")
    s = RunSession(config=RunConfig(**cfg), progress=lambda event: None, anchor=ClockAnchor.take(),
                   run_id="20261202-000000-abcd", stack=contextlib.ExitStack())
    s.run_dir, s.result = tmp_path, make_result(levels=levels)
    return s


def _ladder(duration_s: float = 60.0):
    """c=1 and c=8 on the frontier; c=16 less efficient and slower than c=8 (dominated)."""
    return [make_level(0, value=1, output_tokens_per_s=150.0, power_w=350.0, tpot_p99_ms=20.0, ttft_p99_ms=80.0,
                       duration_s=duration_s),
            make_level(1, value=8, output_tokens_per_s=1000.0, power_w=600.0, tpot_p99_ms=30.0, ttft_p99_ms=100.0,
                       duration_s=duration_s),
            make_level(2, value=16, output_tokens_per_s=1100.0, power_w=700.0, tpot_p99_ms=45.0, ttft_p99_ms=150.0,
                       duration_s=duration_s)]


def _log_interval(values, t):
    """The 95% interval of positive values on the log scale, written out: the mean of the logs ±
    t · their sd / sqrt(n), exponentiated."""
    logs = [math.log(v) for v in values]
    m = sum(logs) / len(logs)
    s = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
    w = t * s / math.sqrt(len(logs))
    return math.exp(m - w), math.exp(m + w)


def test_trials_give_each_figure_its_mean_and_log_scale_interval_boundary_free_figures_once():
    trials = [make_level(0, value=8, output_tokens_per_s=tok, power_w={"accelerator": 700.0, "node": 1000.0})
              for tok in (1000.0, 1100.0, 1200.0)]
    for k, t in enumerate(trials):
        t.thermal_before = Thermal(max_temperature_c=60.0 + k)
    tb = trials_block(trials)
    assert tb.n == 3 and tb.confidence == pytest.approx(0.95, rel=1e-12)
    assert [t.max_temperature_c for t in tb.thermal_before] == pytest.approx([60.0, 61.0, 62.0], rel=1e-12)
    f = tb.figures
    acc = f["output_tokens_per_s_per_kw@accelerator"]
    assert acc.values == pytest.approx([1000 / 0.7, 1100 / 0.7, 1200 / 0.7], rel=1e-12)
    lo, hi = _log_interval([1000 / 0.7, 1100 / 0.7, 1200 / 0.7], T_975_2)  # 1273.6–1876.2
    assert acc.mean == pytest.approx(1100 / 0.7, rel=1e-12) and acc.n == 3 and acc.scale == "log"
    assert (acc.ci_low, acc.ci_high) == (pytest.approx(lo, rel=1e-9), pytest.approx(hi, rel=1e-9))
    assert f["output_tokens_per_s_per_kw@node"].mean == pytest.approx(1100.0, rel=1e-12)
    # throughput is the same at every boundary: once, from three trials, not once per boundary
    assert f["output_tokens_per_s"].n == 3 and f["output_tokens_per_s"].mean == pytest.approx(1100.0)
    assert "output_tokens_per_s@accelerator" not in f and "output_tokens_per_s@node" not in f


def test_each_trials_own_figure_counts_not_the_block_it_carried_as_the_levels_last():
    # the runner records a level as its latest trial with the block of the trials so far, so an
    # earlier trial object carries the block it had when it was last: its value is its own figure,
    # never that block's mean (was: 1000, mean(1000, 1100) = 1050, mean(1000, 1050, 1200) = 1083.3)
    trials = []
    for tok in (1000.0, 1100.0, 1200.0):
        trials.append(make_level(0, value=8, output_tokens_per_s=tok, power_w=500.0))
        if len(trials) > 1:
            trials[-1].trials = trials_block(trials)
    f = trials_block(trials).figures
    assert f["output_tokens_per_s"].values == pytest.approx([1000.0, 1100.0, 1200.0], rel=1e-12)
    assert f["output_tokens_per_s_per_kw@accelerator"].values == pytest.approx([2000.0, 2200.0, 2400.0], rel=1e-12)
    assert f["output_tokens_per_s"].ci_high == pytest.approx(_log_interval([1000.0, 1100.0, 1200.0], T_975_2)[1],
                                                                rel=1e-9)
def test_each_trial_counts_its_own_figure_and_a_trial_that_measured_nothing_none():
    """Trial 2 carries the trials block it had when it was the level's latest (its mean with trial 1):
    the block over three trials reads its own figure, never that mean; trial 3 measured nothing (8
    requests, all 500) though an older accounting left it energy and a throughput: no value of it
    is in any mean, its values are None, and it is named with what happened."""
    t1, t2 = (make_level(0, value=8, output_tokens_per_s=tok, power_w=500.0) for tok in (1000.0, 900.0))
    t2.trials = trials_block([t1, t2])  # what trial 2 carried as the level
    dead = make_level(0, value=8, output_tokens_per_s=450.0, power_w=500.0)
    dead.requests = Requests(completed=0, failed=8, errors={"http_500": 8})
    for k, t in enumerate((t1, t2, dead)):
        t.trial = k
    tb = trials_block([t1, t2, dead])
    per_kw = tb.figures["output_tokens_per_s_per_kw@accelerator"]
    assert per_kw.values == [pytest.approx(2000.0, rel=1e-12), pytest.approx(1800.0, rel=1e-12), None]
    assert per_kw.n == 2 and per_kw.mean == pytest.approx(1900.0, rel=1e-12)
    # t(0.975, 1) · sd of the two logs / sqrt(2) = 12.706 · ln(2000 / 1800) / 2, about the geometric mean
    w = 12.706204736174707 * math.log(2000.0 / 1800.0) / 2
    g = math.sqrt(2000.0 * 1800.0)
    assert (per_kw.ci_low, per_kw.ci_high) == (pytest.approx(g * math.exp(-w), rel=1e-9),
                                               pytest.approx(g * math.exp(w), rel=1e-9))
    assert tb.figures["output_tokens_per_s"].values[2] is None
    assert tb.n == 3 and [u.model_dump() for u in tb.unmeasured] == [
        {"trial": 3, "requests": 8, "why": "8 of 8 requests failed: http_500 8"}]
    assert measuring_trials([t1, t2, dead]) == [t1, t2]


def test_the_pareto_frontiers_come_from_the_measured_levels(tmp_path):
    s = _session(tmp_path, _ladder())
    run_analyses(s)
    p = s.result.pareto
    assert p.boundary == "accelerator"
    for front, latency in ((p.tpot_p99, "tpot_ms.p99"), (p.ttft_p99, "ttft_ms.p99")):
        assert front.latency == latency and front.boundary == "accelerator"
        assert {pt.label for pt in front.frontier} == {"concurrency=1", "concurrency=8"}
        on = {pt.label: pt.on_frontier for pt in front.points}
        assert on == {"concurrency=1": True, "concurrency=8": True, "concurrency=16": False}
        eff = {pt.label: pt.efficiency for pt in front.points}
        assert eff["concurrency=8"] == pytest.approx(1000.0 / 0.6, rel=1e-12)
    assert p.goodput_tpot_p99 is None  # goodput only with SLOs
    assert s.result.prefill_decode is None  # no meter: no regression


def test_with_slos_the_goodput_frontier_is_added(tmp_path):
    s = _session(tmp_path, _ladder())
    s.slos = parse_slos("tpot_p99=40ms")
    run_analyses(s)
    assert s.result.pareto.goodput_tpot_p99 is not None
    assert s.result.pareto.goodput_tpot_p99.efficiency == "goodput_per_kw"


def test_no_levels_or_no_energy_leave_the_analyses_empty(tmp_path):
    s = _session(tmp_path, [])
    s.result.levels = []
    run_analyses(s)
    assert s.result.pareto is None and s.result.prefill_decode is None
    lv = make_level(0, value=1)
    lv.energy = {}
    s = _session(tmp_path, [lv])
    run_analyses(s)
    assert s.result.pareto is None and s.result.prefill_decode is None


def _metered(tmp_path, seed: int = 7):
    """A session whose meter and /metrics counters follow the energy model exactly."""
    rng = np.random.default_rng(seed)
    d_prompt = rng.integers(0, 4000, N_INTERVALS).astype(float)
    d_gen = rng.integers(100, 2000, N_INTERVALS).astype(float)
    power_w = IDLE_W + J_PREFILL * d_prompt + J_DECODE * d_gen  # each 1 s interval's mean power
    t_s = np.round(np.arange(0.5, 1.0 + N_INTERVALS + 0.5 + 1e-9, 0.1), 6)
    energy = np.array([IDLE_W * min(t, 1.0) + sum(power_w[i] * min(max(t - 1.0 - i, 0.0), 1.0)
                                                   for i in range(N_INTERVALS))
                       + IDLE_W * max(t - 1.0 - N_INTERVALS, 0.0) for t in t_s])
    s = _session(tmp_path, _ladder(duration_s=float(N_INTERVALS)))
    s.sampler = FinishedSampler(build_log((counter_channel("gpu.energy"), t_s, energy)))
    s.scraper = MetricsScraper("http://127.0.0.1:9", engine="vllm")
    tl = s.scraper.timeline
    tl.available = True
    p = np.concatenate([[0.0], np.cumsum(d_prompt)])
    g = np.concatenate([[0.0], np.cumsum(d_gen)])
    tl.scrapes.extend((int((1 + i) * 1e9), {"prompt_tokens": p[i], "generation_tokens": g[i]})
                      for i in range(N_INTERVALS + 1))
    return s, d_prompt, d_gen


def test_the_prefill_decode_regression_recovers_the_energy_model_from_the_servers_counters(tmp_path):
    s, d_prompt, d_gen = _metered(tmp_path)
    run_analyses(s)
    reg = s.result.prefill_decode.regression
    assert reg.status == "ok" and reg.token_source == "server counters" and reg.boundary == "accelerator"
    assert reg.n_intervals == N_INTERVALS
    assert reg.j_per_prefill_token == pytest.approx(J_PREFILL, rel=1e-6)
    assert reg.j_per_decode_token == pytest.approx(J_DECODE, rel=1e-6)
    assert reg.idle_power_w == pytest.approx(IDLE_W, rel=1e-6)
    assert reg.prefill_tokens == d_prompt.sum() and reg.decode_tokens == d_gen.sum()
    assert s.result.prefill_decode.cross_check is None  # no isolating pair measured


def test_the_regression_is_cross_checked_against_the_isolating_pair(tmp_path):
    s, _, _ = _metered(tmp_path)
    # a pair that measured 10% more per prefill token and the model's decode cost
    pair = isolating_pair({"dynamic_energy_j": 1.1 * J_PREFILL * 50_000 + J_DECODE * 1_000, "input_tokens": 50_000,
                           "output_tokens": 1_000},
                          {"dynamic_energy_j": 1.1 * J_PREFILL * 2_000 + J_DECODE * 40_000, "input_tokens": 2_000,
                           "output_tokens": 40_000})
    s.result.prefill_decode = PrefillDecode(isolating_pair=pair)
    run_analyses(s)
    cc = s.result.prefill_decode.cross_check
    assert cc is not None
    assert cc["j_per_prefill_token"].rel_diff == pytest.approx(1 / 1.1 - 1, rel=1e-5)
    assert cc["j_per_decode_token"].rel_diff == pytest.approx(0.0, abs=1e-6)
    assert cc["j_per_decode_token"].pair == pytest.approx(J_DECODE, rel=1e-6)
    kept = s.result.prefill_decode.isolating_pair
    assert kept is not None and kept.model_dump(mode="json") == pair  # kept as measured, key for key


def test_a_failed_isolating_pair_is_not_cross_checked(tmp_path):
    s, _, _ = _metered(tmp_path)
    s.result.prefill_decode = PrefillDecode(isolating_pair={"error": "the pair did not separate"})
    run_analyses(s)
    assert s.result.prefill_decode.regression.status == "ok"
    assert s.result.prefill_decode.cross_check is None


def test_a_regression_that_cannot_be_fitted_says_why_and_the_run_goes_on(tmp_path):
    s, _, _ = _metered(tmp_path)
    del s.scraper.timeline.scrapes[1:]  # one scrape in the run: no interval to fit
    run_analyses(s)
    reg = s.result.prefill_decode.regression
    assert reg.boundary == "accelerator" and "status" not in reg.model_fields_set
    assert "at least two scrapes" in reg.error


S = 1_000_000_000


def _two_requests() -> list[RequestRecord]:
    """Two requests inside the window [1 s, 21 s] of a made level (duration 20 s)."""
    return [RequestRecord(id=0, level=0, sent_ns=int(1.5 * S), first_token_ns=int(1.6 * S), last_token_ns=10 * S,
                          end_ns=10 * S, input_tokens=100, output_tokens=400),
            RequestRecord(id=1, level=0, sent_ns=2 * S, first_token_ns=int(2.1 * S), last_token_ns=20 * S,
                          end_ns=20 * S, input_tokens=50, output_tokens=900)]


def _metered_level(tmp_path, **cfg):
    """A level at 500 W for 20 s (idle 100 W: ``make_energy``), metered by a log at that power."""
    lv = make_level(0, value=2, power_w=500.0, duration_s=20.0)
    s = _session(tmp_path, [lv], **cfg)
    t = np.arange(0.0, 22.0 + 1e-9, 0.1)
    s.sampler = FinishedSampler(build_log((counter_channel("gpu.energy"), t, 500.0 * t)))
    return s, lv


def test_each_requests_energy_splits_the_levels_dynamic_energy_and_nothing_without_a_meter(tmp_path):
    records = _two_requests()
    s, lv = _metered_level(tmp_path)
    s.sampler = None
    attribute(s, lv, records)
    assert all(r.energy_j == {} for r in records) and lv.attribution == {}
    s, lv = _metered_level(tmp_path)
    attribute(s, lv, records)
    shares = [r.energy_j["accelerator"] for r in records]
    assert all(x > 0 for x in shares)
    assert sum(shares) == pytest.approx((500.0 - 100.0) * 20.0, rel=1e-9)  # the dynamic energy, conserved
    assert shares[1] > shares[0]  # the longer request with more tokens did more of the work
    assert lv.attribution["accelerator"].requests == 2


def test_with_idle_attributed_the_requests_carry_the_gross_energy(tmp_path):
    records = _two_requests()
    s, lv = _metered_level(tmp_path, attribute_idle=True)
    attribute(s, lv, records)
    assert sum(r.energy_j["accelerator"] for r in records) == pytest.approx(500.0 * 20.0, rel=1e-9)


def test_a_carbon_intensity_gives_each_request_and_the_level_its_carbon_with_the_pue(tmp_path):
    records = _two_requests()
    s, lv = _metered_level(tmp_path, pue=1.2)
    s.carbon = parse_carbon_intensity(400.0)
    attribute(s, lv, records)
    be = lv.energy["accelerator"]
    assert be.carbon_intensity_g_per_kwh == pytest.approx(400.0)
    assert be.carbon_g == pytest.approx(500.0 * 20.0 / 3.6e6 * 400.0 * 1.2, rel=1e-9)
    for r in records:
        assert r.carbon_g["accelerator"] == pytest.approx(r.energy_j["accelerator"] / 3.6e6 * 400.0 * 1.2, rel=1e-9)
