"""``run/level.py`` records the host's CPUs over each trial's load (``LevelResult.host_cpu``), with
the launched server's process tree where the session holds an engine (``session.engine.pid``).
Ground truth: the scripted stream server is a real process serving the trial, and psutil reads its
CPU time before and after; the recorded server CPU (the snapshot's ticks over the load) is that
time, less what it spent outside the load (start-up reads, closing connections)."""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path

import pytest

from tests.fakes.results_factory import make_result
from tests.fakes.stream_server_proc import SERVER, start_script, stop_process
from wattbench.config.run import RunConfig
from wattbench.core.clock import ClockAnchor
from wattbench.core.schema import NoiseInfo
from wattbench.results.rundir import write_result
from wattbench.run.level import LevelRunner
from wattbench.run.session import RunSession
from wattbench.run.targets import resolve_targets
from wattbench.workload.presets import load_workload
from wattbench.workload.tokenizer import open_token_source

psutil = pytest.importorskip("psutil")


class _Launched:
    """What the runner reads of a launched engine's handle: its process id (``EngineHandle.pid``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid


def _session(**cfg) -> RunSession:
    return RunSession(config=RunConfig(**cfg), progress=lambda event: None, anchor=ClockAnchor.take(),
                      run_id="20261207-000000-abcd", stack=contextlib.ExitStack())


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads /proc: Linux only")
def test_each_trial_records_the_host_and_the_launched_servers_cpu(tmp_path):
    proc, base = start_script(SERVER, "--ttft-ms", "2", "--itl-ms", "1", "--loop", "asyncio")
    try:
        cfg = dict(target=base, input_tokens="8", output_tokens="32", num_requests=150, idle_s=0, trials=2,
                   register_run=False, html=False, no_sensors=True, out=str(tmp_path / "run"))
        specs = resolve_targets(_session(**{**cfg, "trials": 1}), None).specs
        s = _session(**cfg)
        s.run_dir, s.result = tmp_path / "run", make_result(levels=[])
        s.run_dir.mkdir()
        s.result.noise = NoiseInfo()
        write_result(s.run_dir, s.result)
        s.engine = _Launched(proc.pid)  # type: ignore[assignment]  # the handle's pid is all the runner reads
        wl = load_workload(None, open_token_source(None), s.config.seed, input_tokens="8", output_tokens="32")
        lr = LevelRunner(s, copy.deepcopy(specs), wl)
        server = psutil.Process(proc.pid)
        before = sum(server.cpu_times()[:4])
        lv = lr.measure("concurrency", 4)
        truth = sum(server.cpu_times()[:4]) - before  # both trials and what the server did around them
    finally:
        stop_process(proc)
    assert lv.trials is not None and len(lv.trials.host_cpu) == 2
    online = sum(1 for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("cpu") and ln[3:4].isdigit())
    recorded = 0.0
    for h in lv.trials.host_cpu:
        assert h is not None and h.cpu_count == online and h.duration_s is not None and h.duration_s > 0
        assert h.busy_pct is not None and 0.0 <= h.busy_pct <= 100.0
        assert h.wattbench_cpu_cores is not None and h.wattbench_cpu_cores > 0  # the load generator ran here
        assert h.server_cpu_cores is not None and h.server_cpu_pct is not None
        assert h.server_cpu_pct == pytest.approx(100.0 * h.server_cpu_cores / online, rel=0.25, abs=1.0)
        recorded += h.server_cpu_cores * h.duration_s
    assert truth >= 0.05, truth  # the server did measurable work: the comparison below means something
    # never more than the server used (a tick of rounding per read), and most of it: the loads are its work
    assert recorded <= truth + 0.05
    assert recorded >= 0.5 * truth - 0.05, (recorded, truth)
    assert lv.host_cpu == lv.trials.host_cpu[-1]
