"""``run/targets.py``: a given target and a launched engine each resolve to the right ``TargetSpec``
and ``ServerInfo``. Ground truth: the scripted stream server (what it lists, what it was asked, with
which headers), started as given or by an ``Engine`` the run launches (a real process the
session's stack stops)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import sys

import pytest

from tests.fakes.stream_server_proc import SERVER, stream_server
from wattbench.config.run import RunConfig
from wattbench.core.clock import ClockAnchor
from wattbench.core.errors import TargetError
from wattbench.engines.base import Engine, LaunchPlan
from wattbench.run.session import RunSession
from wattbench.server.openai import check_model_answers
from wattbench.run.targets import api_key, resolve_targets, run_secrets

CRED = "user:s3cret"


@pytest.fixture(scope="module")
def server():
    """One scripted server for the module: two models, completions only with the URL's credentials."""
    with stream_server("--model", "fake-model,other-model", "--expect-basic", CRED, "--ttft-ms", "2",
                       "--itl-ms", "1", "--loop", "asyncio") as (base, stats):
        yield base, stats


def _session(**cfg) -> RunSession:
    cfg.setdefault("register_run", False)
    cfg.setdefault("html", False)
    return RunSession(config=RunConfig(**cfg), progress=lambda event: None, anchor=ClockAnchor.take(),
                      run_id="20261202-000000-abcd", stack=contextlib.ExitStack())


class NeverLaunched(Engine):
    name = "transformers"

    def check_installed(self) -> None:
        raise AssertionError("a run with --target launches no engine")

    def plan(self, model, device, engine_args, host, port, scratch) -> LaunchPlan:
        raise AssertionError("a run with --target launches no engine")


class ScriptedEngine(Engine):
    """Launches the stream server serving ``served`` as an engine would, its tokenizer in the plan."""

    name = "transformers"

    def __init__(self, served: str = "/models/served-x") -> None:
        self.served = served
        self.plans: list[LaunchPlan] = []

    def check_installed(self) -> None:
        pass

    def plan(self, model, device, engine_args, host, port, scratch) -> LaunchPlan:
        p = LaunchPlan(argv=[sys.executable, str(SERVER), "--port", str(port), "--model", self.served,
                             "--ttft-ms", "2", "--itl-ms", "1", "--loop", "asyncio"],
                       served_model=self.served, model_path=self.served, tokenizer="/tokenizers/served-x",
                       health_paths=("/v1/models",), info={"device": device})
        self.plans.append(p)
        return p


def test_a_given_target_resolves_to_its_clean_url_its_model_and_the_users_request_fields(tmp_path, server):
    base, stats = server
    host = base.removeprefix("http://")
    s = _session(target=f"http://{CRED}@{host}/", model="other-model", headers={"X-Team": "blue"},
                 extra_body={"seed": 3}, temperature=0.5, request_timeout_s=77, stall_timeout_s=11,
                 tokenizer="/tokenizers/mine", out=str(tmp_path / "run"))
    t = resolve_targets(s, tmp_path / "run", engine=NeverLaunched())
    (spec,) = t.specs
    assert spec.base_url == base + "/v1"  # normalised, the credentials out of the URL kept
    assert spec.model == "other-model" and spec.api == s.config.api
    assert (spec.request_timeout_s, spec.stall_timeout_s) == (77, 11)
    assert spec.extra_body["seed"] == 3 and spec.extra_body["temperature"] == pytest.approx(0.5, rel=1e-12)
    assert spec.headers == {"X-Team": "blue"}
    assert t.tokenizer_path == "/tokenizers/mine"
    assert t.server.base_url == spec.base_url and t.server.model == "other-model"
    assert t.server.models == ["fake-model", "other-model"] and not t.server.launched
    assert s.engine is None
    # the spec's credential is the URL's, as the server wants it: a request made with it is answered
    # (the server refuses any other Authorization) and carried it as one Basic header
    asyncio.run(check_model_answers(spec.base_url, spec.api_key, spec.model, spec.api))
    assert stats.last()["headers"]["authorization"] == "Basic " + base64.b64encode(CRED.encode()).decode()
    assert CRED not in spec.base_url and CRED not in t.server.base_url
    assert not (tmp_path / "run").exists()  # nothing written while the targets are checked


def test_replicas_that_name_the_first_target_again_are_one_target(tmp_path, server):
    base, _ = server
    host = base.removeprefix("http://")
    first = f"http://{CRED}@{host}"
    s = _session(target=first, targets=[first, f"http://{CRED}@{host}/v1/"], out=str(tmp_path / "run"))
    t = resolve_targets(s, tmp_path / "run")
    assert [x.base_url for x in t.specs] == [base + "/v1"]
    assert t.server.model == "fake-model"  # none asked: the first the server lists


def test_a_model_the_server_does_not_serve_stops_before_anything_is_written(tmp_path, server):
    base, _ = server
    s = _session(target=f"http://{CRED}@{base.removeprefix('http://')}", model="not-served",
                 out=str(tmp_path / "run"))
    with pytest.raises(TargetError, match="not-served"):
        resolve_targets(s, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_launched_engine_resolves_to_its_own_url_model_and_tokenizer_and_stops_with_the_session(
        tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBENCH_CACHE_DIR", str(tmp_path / "cache"))  # the engine's scratch directory
    engine = ScriptedEngine()
    s = _session(device="cpu", out=str(tmp_path / "run"))
    with s.stack:
        t = resolve_targets(s, tmp_path / "run", engine=engine)
        handle = s.engine
        assert handle is not None and handle.alive()
        (spec,) = t.specs
        assert spec.base_url == handle.base_url.rstrip("/") and spec.model == "/models/served-x"
        assert t.tokenizer_path == "/tokenizers/served-x"  # exact prompt lengths from the launch plan
        assert t.server.launched and t.server.pid == handle.pid and t.server.model == "/models/served-x"
        assert (tmp_path / "run" / "server.log").exists()
        assert len(engine.plans) == 1
    assert not handle.alive()  # the session's stack stopped the engine


def test_a_given_tokenizer_wins_over_the_launch_plans(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBENCH_CACHE_DIR", str(tmp_path / "cache"))
    s = _session(device="cpu", tokenizer="/tokenizers/mine", out=str(tmp_path / "run"))
    with s.stack:
        assert resolve_targets(s, tmp_path / "run", engine=ScriptedEngine()).tokenizer_path == "/tokenizers/mine"


def test_the_api_key_is_the_flag_else_wattbenchs_variable_else_openais(monkeypatch):
    monkeypatch.delenv("WATTBENCH_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = RunConfig(target="http://h:1")
    assert api_key(cfg) is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert api_key(cfg) == "sk-openai"
    monkeypatch.setenv("WATTBENCH_API_KEY", "sk-wb")
    assert api_key(cfg) == "sk-wb"
    assert api_key(RunConfig(target="http://h:1", api_key="sk-flag")) == "sk-flag"


def test_every_secret_of_the_configuration_is_registered(monkeypatch):
    monkeypatch.delenv("WATTBENCH_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = RunConfig(target="http://u:pw-in-url@h:1/v1?sig=query-secret", targets=["http://v:replica-pw@h:2"],
                    api_key=None, headers={"Authorization": "Bearer header-secret", "X-Mine": "custom-secret",
                                           "X-Team": "blue"},
                    secret_headers=["X-Mine"], extra_body={"api_key": "body-secret"})
    found = " ".join(run_secrets(cfg))
    for secret in ("pw-in-url", "query-secret", "replica-pw", "header-secret", "custom-secret", "body-secret"):
        assert secret in found
    assert "blue" not in found  # a header that carries no credential is not a secret



def test_target_count_is_the_distinct_base_urls_as_the_run_resolves_them():
    from wattbench.run.targets import target_count

    assert target_count(RunConfig()) == 1  # the engine the run launches
    assert target_count(RunConfig(target="http://h:1")) == 1
    assert target_count(RunConfig(target="http://h:1", targets=["http://h:1", "http://u:p@h:1/v1/", "http://h:2"])) == 2
