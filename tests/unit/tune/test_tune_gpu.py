"""GPU power settings as tune axes, against a fake NVML only (never a real GPU): the set calls,
the range checks, the refusal when not root, the restore after every trial, on an exception, on
SIGTERM, and after a SIGKILL mid-trial (by the next tune / doctor --restore)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from wattbench.tune.events import GpuRestored

from tests.fakes.fake_nvml import FakeGPU, FakeNvml
from wattbench.config.run import RunConfig
from wattbench.config.run_commands import TuneConfig
from wattbench.core.errors import UserError
from wattbench.results.tune import TrialFigures
from wattbench.tune import tune
from wattbench.tune.gpu import GpuSettings, restore_pending

ROOT = Path(__file__).resolve().parents[3]


def _fake(tmp_path, n=2):
    return FakeNvml(gpus=[FakeGPU(enforced_mw=700_000, management_mw=700_000) for _ in range(n)],
                    persist=str(tmp_path / "device.json"))


class Recorder:
    """A scripted trial that records the GPU state it ran under (from the fake device)."""

    def __init__(self, nv, fail_on=None):
        self.nv, self.fail_on, self.seen = nv, fail_on, []

    def __call__(self, trial, base, level, objective, boundary, run_dir, tags):
        g = self.nv.gpus[0]
        self.seen.append((g.management_mw, g.locked_clocks))
        if self.fail_on is not None and trial.config.get("power-limit") == self.fail_on:
            raise RuntimeError("engine crashed")
        trial.status, trial.score = "done", 1000.0 + (trial.config.get("power-limit") or 0)
        trial.figures = TrialFigures(goodput_per_kw=trial.score, load_mode="concurrency", load_value=8)
        return trial


def _cfg(tmp_path, **kw):
    return TuneConfig(base=RunConfig(engine="vllm", engine_model="tiny"), axes=["max-num-seqs=64"],
                      allow_gpu_settings=True, out=str(tmp_path / "tune"), **kw)


def test_settings_applied_per_trial_and_restored_after_each(tmp_path):
    nv = _fake(tmp_path)
    gpu = GpuSettings(nvml=nv, state=tmp_path / "state.json", root=True)
    rec = Recorder(nv)
    t = tune(_cfg(tmp_path, power_limits_w=[400, 550], sm_clocks_mhz=[1200]), evaluate=rec, gpu=gpu)
    # baseline untouched (700 W, unlocked), then each configuration under its settings
    assert rec.seen == [(700_000, None), (400_000, (1200, 1200)), (550_000, (1200, 1200))]
    assert [tr.gpu_settings for tr in t.trials] == [{}, {"power_limit_w": 400.0, "sm_clock_mhz": 1200},
                                                    {"power_limit_w": 550.0, "sm_clock_mhz": 1200}]
    assert all(g.management_mw == 700_000 and g.locked_clocks is None for g in nv.gpus)
    assert not (tmp_path / "state.json").exists()
    assert nv.calls.count("nvmlDeviceResetGpuLockedClocks") == 2 * 2  # after each trial, both GPUs
    assert t.recommended.serve_command.startswith("sudo nvidia-smi -pl 550 && sudo nvidia-smi -lgc 1200,1200 && vllm serve")


def test_restored_on_exception(tmp_path):
    nv = _fake(tmp_path)
    gpu = GpuSettings(nvml=nv, state=tmp_path / "state.json", root=True)
    with pytest.raises(RuntimeError):
        tune(_cfg(tmp_path, power_limits_w=[400, 550]), evaluate=Recorder(nv, fail_on=400), gpu=gpu)
    assert all(g.management_mw == 700_000 for g in nv.gpus) and not (tmp_path / "state.json").exists()


def test_sigterm_stops_like_ctrl_c_inside_and_is_the_callers_after_an_exception(tmp_path):
    from wattbench.core.interrupt import on_sigterm

    nv = _fake(tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RuntimeError, match="a trial failed"):
        with GpuSettings(nvml=nv, state=tmp_path / "state.json", root=True) as g:
            g.apply({"power_limit_w": 450.0})
            assert signal.getsignal(signal.SIGTERM) is on_sigterm
            raise RuntimeError("a trial failed")
    assert signal.getsignal(signal.SIGTERM) == before
    assert all(g.management_mw == 700_000 for g in nv.gpus)


def test_refused_when_not_root_or_out_of_range(tmp_path):
    nv = _fake(tmp_path)
    with pytest.raises(UserError, match="needs root"):
        tune(_cfg(tmp_path, power_limits_w=[400]), evaluate=Recorder(nv),
             gpu=GpuSettings(nvml=nv, state=tmp_path / "s.json", root=False))
    with pytest.raises(UserError, match="outside GPU 0's allowed range 100-700 W"):
        tune(_cfg(tmp_path, power_limits_w=[400, 750]), evaluate=Recorder(nv),
             gpu=GpuSettings(nvml=nv, state=tmp_path / "s.json", root=True))
    with pytest.raises(UserError, match="2100 MHz is outside GPU 0's supported range 345-1980 MHz"):
        tune(_cfg(tmp_path, sm_clocks_mhz=[1200, 2100]), evaluate=Recorder(nv),
             gpu=GpuSettings(nvml=nv, state=tmp_path / "s.json", root=True))
    assert not any(c.startswith("nvmlDeviceSet") for c in nv.calls)  # checked before any change
    assert not (tmp_path / "tune").exists()



def test_restore_uses_the_devices_already_open(tmp_path):
    """The restore inside a tune reaches each board through the handle opened for the change (a
    restore that reopened them would also work, but would mask a lost handle)."""
    nv = _fake(tmp_path)
    g = GpuSettings(nvml=nv, state=tmp_path / "state.json", root=True)
    with g:
        g.apply({"power_limit_w": 450.0, "sm_clock_mhz": 1395})
        assert [x.management_mw for x in nv.gpus] == [450_000, 450_000]
    assert [x.management_mw for x in nv.gpus] == [700_000, 700_000]
    assert all(x.locked_clocks is None for x in nv.gpus)
    assert nv.calls.count("nvmlDeviceGetHandleByIndex") == 2  # one per GPU, at the first change only


CHILD = """
import sys, time
sys.path[:0] = [{root!r}, {src!r}]
from tests.fakes.fake_nvml import FakeGPU, FakeNvml
from wattbench.tune.gpu import GpuSettings
nv = FakeNvml(gpus=[FakeGPU(), FakeGPU()], persist={dev!r})
g = GpuSettings(nvml=nv, state={state!r}, root=True)
with g:
    g.apply({{"power_limit_w": 450.0, "sm_clock_mhz": 1395}})
    print("APPLIED", flush=True)
    time.sleep(60)  # a trial in progress
"""


def _child(tmp_path, sigint_ignored: bool = False):
    code = CHILD.format(root=str(ROOT), src=str(ROOT / "src"), dev=str(tmp_path / "device.json"),
                        state=str(tmp_path / "state.json"))
    # sigint_ignored: as a process started in the background of a non-interactive shell (`tune &`
    # in a script, nohup) inherits it; otherwise SIGINT at its Python default whatever the runner's
    pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else (
        lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, preexec_fn=pre)
    assert p.stdout.readline().strip() == "APPLIED"
    return p


def _device(tmp_path):
    return json.loads((tmp_path / "device.json").read_text())


def test_sigkill_mid_trial_then_restore(tmp_path):
    p = _child(tmp_path)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=60)
    # the device keeps what the killed process set; the state file remembers the originals
    assert _device(tmp_path) == [{"power_mw": 450_000, "locked": [1395, 1395]}] * 2
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["devices"]["0"]["power_limit_mw"] == 700_000 and state["clocks_locked"] is True
    with pytest.raises(UserError, match="doctor --restore"):
        restore_pending(nvml=FakeNvml(gpus=[FakeGPU(), FakeGPU()], persist=str(tmp_path / "device.json")),
                        state=tmp_path / "state.json", root=False)
    nv = FakeNvml(gpus=[FakeGPU(), FakeGPU()], persist=str(tmp_path / "device.json"))  # "doctor --restore"
    done = restore_pending(nvml=nv, state=tmp_path / "state.json", root=True)
    assert "GPU 1: power limit restored to 700 W" in done and "GPU 0: locked clocks reset" in done
    assert _device(tmp_path) == [{"power_mw": 700_000, "locked": None}] * 2
    assert not (tmp_path / "state.json").exists()
    assert restore_pending(nvml=nv, state=tmp_path / "state.json", root=True) is None


def test_sigkill_then_next_tune_restores_first(tmp_path):
    p = _child(tmp_path)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=60)
    nv = FakeNvml(gpus=[FakeGPU(), FakeGPU()], persist=str(tmp_path / "device.json"))
    rec = Recorder(nv)
    events = []
    tune(_cfg(tmp_path, power_limits_w=[300]), evaluate=rec, progress=events.append,
         gpu=GpuSettings(nvml=nv, state=tmp_path / "state.json", root=True))
    restored = [e for e in events if isinstance(e, GpuRestored)]
    assert len(restored) == 1 and restored[0].actions  # said once, with what was put back
    assert rec.seen[0] == (700_000, None)  # the baseline ran on the restored originals
    assert _device(tmp_path) == [{"power_mw": 700_000, "locked": None}] * 2


@pytest.mark.parametrize("sigint_ignored", [False, True])
def test_sigterm_mid_trial_restores(tmp_path, sigint_ignored):
    p = _child(tmp_path, sigint_ignored)
    os.kill(p.pid, signal.SIGTERM)
    assert p.wait(timeout=120) != 0  # stopped (SIGTERM -> SIGINT -> KeyboardInterrupt), not finished
    assert _device(tmp_path) == [{"power_mw": 700_000, "locked": None}] * 2
    assert not (tmp_path / "state.json").exists()


def test_leftover_state_without_root_is_refused(tmp_path):
    p = _child(tmp_path)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=60)
    nv = FakeNvml(gpus=[FakeGPU(), FakeGPU()], persist=str(tmp_path / "device.json"))
    with pytest.raises(UserError, match="doctor --restore"):
        tune(_cfg(tmp_path), evaluate=Recorder(nv), gpu=GpuSettings(nvml=nv, state=tmp_path / "state.json", root=False))
    assert not any(c.startswith("nvmlDeviceSet") for c in nv.calls) and (tmp_path / "state.json").exists()
