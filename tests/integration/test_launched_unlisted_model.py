"""A launched engine whose ``/v1/models`` lists nothing.

``transformers serve`` 5.17 (the H200 image's version) lists only what a scan of the Hugging Face
cache finds, never the model it was started with, so ``wattbench run`` with no arguments stopped
with "serves no models". The seam here: the launcher starts the scripted stream server (a real
process, real HTTP) with ``--hide-models``, which answers ``/v1/models`` with an empty list and
serves only the model named on its command line (404 for any other), exactly that behaviour.
The model's name comes from the launch plan; a request for it is still checked before the first
level, so a plan naming a model the server does not serve is still a clear error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import wattbench.engines.registry as engines
from wattbench.config.run import RunConfig
from wattbench.engines.base import Engine, LaunchPlan
from wattbench.core.errors import TargetError
from wattbench.results.rundir import load_requests

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "stream_server.py"
SERVED = "/models/tiny-local-dir"  # what transformers serve is started on: a path, never listed


class HiddenModelEngine(Engine):
    """Starts the stream server as transformers serve 5.17 behaves; ``plan_model`` is the name
    the launch plan gives (normally the one it serves)."""

    name = "transformers"

    def __init__(self, plan_model: str = SERVED):
        self.plan_model = plan_model

    def check_installed(self) -> None:
        pass

    def plan(self, model, device, engine_args, host, port, scratch) -> LaunchPlan:
        argv = [sys.executable, str(SERVER), "--port", str(port), "--model", SERVED, "--hide-models",
                "--ttft-ms", "5", "--itl-ms", "1", "--loop", "asyncio"]
        return LaunchPlan(argv=argv, served_model=self.plan_model, health_paths=("/v1/models",),
                          info={"device": device})


@pytest.fixture
def engine(monkeypatch, tmp_path):
    monkeypatch.setenv("WATTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    holder = {"engine": HiddenModelEngine()}
    monkeypatch.setattr(engines, "get_engine", lambda name: holder["engine"])
    return holder


def _config(tmp_path) -> RunConfig:
    return RunConfig(concurrency=[2], num_requests=6, input_tokens="8", output_tokens="4",
                     sensors=["const:accelerator=100"], idle_s=0, register_run=False, html=False,
                     device="cpu", out=str(tmp_path / "run"))


def test_launched_engine_listing_no_models_still_runs_its_model(tmp_path, engine):
    from wattbench.run import run_benchmark

    res = run_benchmark(_config(tmp_path))
    assert res.server.launched
    assert res.server.model == SERVED
    assert res.server.models == []  # what the server listed, recorded as it was
    lv = res.levels[0]
    assert lv.requests.completed == 6 and lv.requests.failed == 0
    # every request named the plan's model: the server would have answered 404 otherwise
    recs = load_requests(tmp_path / "run")
    assert recs and all(r.ok for r in recs)
    assert json.loads((tmp_path / "run" / "result.json").read_text())["server"]["model"] == SERVED


def test_a_plan_naming_a_model_the_server_does_not_serve_is_a_clear_error(tmp_path, engine):
    from wattbench.run import run_benchmark

    engine["engine"] = HiddenModelEngine(plan_model="/models/something-else")
    with pytest.raises(TargetError, match=r"does not list '/models/something-else'.*HTTP 404"):
        run_benchmark(_config(tmp_path))
    assert not (tmp_path / "run" / "result.json").exists()  # nothing measured, nothing written
