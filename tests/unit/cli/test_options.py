"""The options of run, measure and tune are generated from the config fields they set
(``cli/options.py``): every option is a field's, each default has one home, and what is typed
reaches the config as the field's value."""

from __future__ import annotations

import pytest

from wattbench.cli.main import build_command
from wattbench.cli.options import CommandOptions, given_from, options
from wattbench.config.flags import flags
from wattbench.config.run import RunConfig
from wattbench.config.run_commands import MeasureConfig, TuneConfig
from wattbench.config.tables import COMMAND_FLAG_DOMAINS, EMPTY_TEXT_OK, FLAG_DOMAINS, domain_for
from wattbench.core.target import TargetSpec

MODELS = {"run": (RunConfig, CommandOptions), "measure": (MeasureConfig, RunConfig, CommandOptions),
          "tune": (RunConfig, TuneConfig, CommandOptions)}


@pytest.fixture(scope="module")
def cli():
    return build_command()


@pytest.mark.parametrize("command", sorted(MODELS))
def test_every_option_is_a_fields(cli, command):
    """No option is declared by hand: each parameter of the command is a field of its models."""
    fields = {name for m in MODELS[command] for name, _ in flags(m)}
    params = {p.name for p in cli.commands[command].params}
    assert params <= fields, params - fields
    assert params == {o.field for o in options(command, *MODELS[command])}


def test_run_options_follow_the_fields_defaults(cli):
    """The click default of each `run` option is its field's (the opposite for a --no-… flag)."""
    by_name = {p.name: p for p in cli.commands["run"].params}
    for o in options("run", RunConfig):
        info = RunConfig.model_fields[o.field]
        if info.default_factory is not None or o.flag.text:
            continue
        want = (not info.default) if o.flag.negated else info.default
        assert by_name[o.field].default == want, o.field


def test_timeouts_have_one_home():
    t = TargetSpec(base_url="http://h/v1", model="m")
    c = RunConfig()
    assert (t.request_timeout_s, t.stall_timeout_s) == (c.request_timeout_s, c.stall_timeout_s)


def test_tables_come_from_the_fields():
    for m in (RunConfig, MeasureConfig, TuneConfig):
        for _, f in flags(m):
            for c in f.commands:
                if f.domain is not None:
                    assert COMMAND_FLAG_DOMAINS[(c, f.name)] == f.domain == domain_for(f.name, c)
    assert FLAG_DOMAINS["--idle"] == RunConfig.model_fields["idle_s"].metadata[0].domain
    assert domain_for("--gpus", "tune").lo == 0 and domain_for("--gpus", "plan roofline").lo == 1  # indices; a count
    assert "--prompt-salt" in EMPTY_TEXT_OK


def _given(cli, command, args):
    ctx = cli.commands[command].make_context(command, list(args))
    return given_from(options(command, *MODELS[command]), ctx.params, MODELS[command])


def test_what_is_typed_reaches_the_run_config(cli):
    from wattbench.cli.run import config_from

    given = _given(cli, "run", ["-t", "http://h:1", "-c", "1,8", "--no-prime", "--warmup", "10s", "-H", "X-A:b",
                                "--extra-body", '{"top_k": 2}', "--idle", "0", "--no-register", "--json"])
    cfg = config_from(given)
    assert (cfg.target, cfg.targets, cfg.concurrency, cfg.prime, cfg.warmup_s) == ("http://h:1", [], [1, 8], False, 10)
    assert cfg.headers == {"X-A": "b"} and cfg.extra_body == {"top_k": 2} and cfg.idle_s == 0
    assert cfg.register_run is False and cfg.html is True and given[CommandOptions]["as_json"] is True
    two = config_from(_given(cli, "run", ["-t", "http://a:1", "-t", "http://b:1", "--warmup", "20"]))
    assert two.target == "http://a:1" and two.targets == ["http://a:1", "http://b:1"] and two.warmup_requests == 20
    embedded = config_from(_given(cli, "run", ["-m", "tiny"]))
    assert embedded.engine_model == "tiny" and embedded.model is None


def test_tune_takes_its_own_default_and_seeds_both(cli):
    given = _given(cli, "tune", ["--engine", "vllm", "--gpus", "0,1", "--no-baseline", "--seed", "7"])
    assert given[RunConfig]["max_concurrency"] == 256 and given[TuneConfig]["gpu_indices"] == [0, 1]
    assert given[TuneConfig]["baseline"] is False and given[TuneConfig]["seed"] == 7
    assert _given(cli, "tune", [])[TuneConfig]["gpu_indices"] is None
