"""``--restart-engine``: a fresh engine (and a fresh priming) before every trial round, so the trials'
CI contains start-to-start noise. The launcher is the seam: each "start" is a new
scripted streaming server process with its own per-start speed (``--speed-noise``, one factor for
the process's life), so the run's trials must differ by the starts' factors, every trial must hit
the server started for it, and every server must be stopped by the run."""

from __future__ import annotations

import math

import pytest

from tests.fakes.stream_server_proc import start_script, stop_process, SERVER
from wattbench.config.run import RunConfig
from wattbench.core.schema import ServerInfo

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


class FakeHandle:
    """What ``engines.launch`` returns, over a scripted server process."""

    def __init__(self, seed: int, extra: tuple[str, ...] = ()):
        self.proc, root = start_script(SERVER, "--ttft-ms", "10", "--itl-ms", "10", "--speed-noise", "0.3",
                                       "--noise-seed", str(seed), *extra)
        self.base_url = root + "/v1"
        self.pid = self.proc.pid
        self.model = "fake-model"
        self.start_duration_s = 0.1
        self.server_info = ServerInfo(base_url=self.base_url, engine="transformers", launched=True)

        class Plan:
            @staticmethod
            def tokenizer_source():
                return None
        self.plan = Plan()
        self.stopped = False

    def stop(self, grace_s: float = 15.0):
        if not self.stopped:
            stop_process(self.proc)
            self.stopped = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def test_every_round_runs_on_a_fresh_primed_engine(tmp_path, monkeypatch):
    from wattbench.run import run_benchmark
    from wattbench.run import targets as run_targets

    handles: list[FakeHandle] = []

    def launch(**kw):
        h = FakeHandle(seed=len(handles) + 1)
        handles.append(h)
        return h

    monkeypatch.setattr(run_targets, "launch", launch)
    cfg = RunConfig(concurrency=[2], num_requests=8, trials=3, restart_engine=True, input_tokens="8",
                    output_tokens="8", sensors=["const:node=300"], idle_s=0, register_run=False, html=False,
                    out=str(tmp_path / "run"))
    res = run_benchmark(cfg)
    assert len(handles) == 3 and all(h.stopped for h in handles)  # one start per round, each stopped
    starts = res.noise.engine_starts
    assert [s.index for s in starts] == [0, 1, 2] and [s.before_trial for s in starts] == [None, 1, 2]
    assert [s.pid for s in starts] == [h.pid for h in handles]
    assert res.noise.priming is not None and len(res.noise.repriming) == 2  # each fresh engine primed
    lv = res.levels[0]
    vals = lv.trials.figures["output_tokens_per_s_per_kw@node"].values
    assert len(vals) == 3 and max(vals) / min(vals) > 1.05  # the starts' speeds differ (sd 30%)
    f = lv.trials.figures["output_tokens_per_s_per_kw@node"]
    assert f.ci_low < min(vals) <= max(vals) < f.ci_high  # the CI spans the start-to-start spread


def test_restart_engine_is_refused_for_a_target_in_one_line():
    with pytest.raises(Exception) as ei:
        RunConfig(target="http://127.0.0.1:9", trials=3, restart_engine=True)
    assert "--restart-engine restarts an engine wattbench starts" in str(ei.value)
    with pytest.raises(Exception) as ei:
        RunConfig(trials=1, restart_engine=True)
    assert "give --trials N (N >= 2)" in str(ei.value)


def test_a_start_that_refuses_every_request_is_a_trial_that_measured_nothing(tmp_path, monkeypatch):
    """The second start answers 401 to every completion (a server that lost its key): its trial
    measured nothing, so it has no figure; the level's mean and interval are the other two starts'
    (df 1), and the level names the dead trial."""
    from wattbench.run import run_benchmark
    from wattbench.run import targets as run_targets

    handles: list[FakeHandle] = []

    def launch(**kw):
        extra = ("--fail-requests", "1-100000", "--fail-status", "401") if len(handles) == 1 else ()
        h = FakeHandle(seed=len(handles) + 1, extra=extra)
        handles.append(h)
        return h

    monkeypatch.setattr(run_targets, "launch", launch)
    cfg = RunConfig(concurrency=[2], num_requests=8, trials=3, restart_engine=True, input_tokens="8",
                    output_tokens="8", sensors=["const:node=300"], idle_s=0, register_run=False, html=False,
                    out=str(tmp_path / "run"))
    res = run_benchmark(cfg)
    assert len(handles) == 3 and all(h.stopped for h in handles)
    lv = res.levels[0]
    f = lv.trials.figures["output_tokens_per_s_per_kw@node"]
    tok = lv.trials.figures["output_tokens_per_s"]
    assert f.values[1] is None and tok.values[1] is None and f.n == 2
    a, b = f.values[0], f.values[2]
    assert a == pytest.approx(tok.values[0] / 0.3, rel=1e-9) and b == pytest.approx(tok.values[2] / 0.3, rel=1e-9)
    assert a != b  # two starts, two speeds: no copy
    assert f.mean == pytest.approx((a + b) / 2, rel=1e-12)
    assert math.log(f.ci_high / f.ci_low) == pytest.approx(12.706204736174707 * abs(math.log(a / b)), rel=1e-9)
    assert [(u.trial, u.why) for u in lv.trials.unmeasured] == [(2, "8 of 8 requests failed: http_401 8")]
    assert lv.validity.verdict == "warn"


def test_an_engine_restarted_as_another_configuration_is_not_pooled(tmp_path, monkeypatch):
    """The second start serves another model id: the run is re-identified after the restart and stops
    before measuring on it (its trial would have pooled two configurations in one level), in one line
    naming the change; the trials measured on the first configuration are kept."""
    from wattbench.core.errors import TargetStopped
    from wattbench.results.rundir import load_result
    from wattbench.run import run_benchmark
    from wattbench.run import targets as run_targets

    handles: list[FakeHandle] = []

    def launch(**kw):
        h = FakeHandle(seed=len(handles) + 1, extra=("--model", "other-model") if handles else ())
        handles.append(h)
        return h

    monkeypatch.setattr(run_targets, "launch", launch)
    cfg = RunConfig(concurrency=[2, 4], num_requests=8, trials=3, restart_engine=True, input_tokens="8",
                    output_tokens="8", sensors=["const:node=300"], idle_s=0, register_run=False, html=False,
                    out=str(tmp_path / "run"))
    with pytest.raises(TargetStopped) as ei:
        run_benchmark(cfg)
    msg = str(ei.value)
    assert "\n" not in msg and "restarted before trial 2 serves another configuration" in msg
    assert "model id 'fake-model' -> 'other-model'" in msg and "the 2 trial(s) measured are kept" in msg
    assert len(handles) == 2 and all(h.stopped for h in handles)
    res = load_result(tmp_path / "run")
    assert res.status == "failed" and [lv.trials for lv in res.levels] == [None, None]  # one trial each, unpooled
    assert [lv.requests.completed for lv in res.levels] == [8, 8]
    starts = res.noise.engine_starts
    assert starts[0].identity_change is None and "model id 'fake-model' -> 'other-model'" in starts[1].identity_change
