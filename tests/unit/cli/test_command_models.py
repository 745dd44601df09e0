"""Every command's options come from a config model (``cli/options.py``): no command module
declares an option by hand, a flag several commands share is one declaration, each one-command
model's default and range is its field's, and what is typed reaches the model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wattbench.cli.common import UsageError, check_number
from wattbench.cli.main import build_command
from wattbench.config.flags import EVERY, FlaggedConfig, flags
from wattbench.config.plan import TcoInputs
from wattbench.config.tables import CONFIG_MODELS, domain_for

CLI_DIR = Path(__file__).resolve().parents[3] / "src" / "wattbench" / "cli"


def _leaves(cmd, path=()):
    subs = getattr(cmd, "commands", {})
    if not subs:
        yield " ".join(path), cmd
    for name, sub in subs.items():
        yield from _leaves(sub, (*path, name))


@pytest.fixture(scope="module")
def cli():
    return build_command()


def test_no_option_is_declared_outside_the_generator():
    hand = {p.name: len(re.findall(r"typer\.(?:Option|Argument)\(", p.read_text()))
            for p in CLI_DIR.glob("*.py") if p.name != "options.py"}
    assert sum(hand.values()) == 0, {k: v for k, v in hand.items() if v}


def test_every_parameter_of_every_command_is_a_models_field(cli):
    fields = {name for m in CONFIG_MODELS for name, _ in flags(m)} | {"api_key_file", "as_json", "quiet"}
    for path, cmd in _leaves(cli):
        missing = {p.name for p in cmd.params if p.name != "help"} - fields
        assert not missing, (path, missing)


@pytest.mark.parametrize("flag", ["--db", "--json", "--boundary", "--sensor", "--api-key-file"])
def test_a_shared_flag_is_one_declaration(flag):
    """Each model that takes ``flag`` holds the same ``Flag`` (one help, default, range)."""
    declared = {id(f) for m in CONFIG_MODELS for _, f in flags(m) if f.name == flag}
    assert len(declared) == 1, (flag, len(declared))


def test_tco_defaults_have_one_home(cli):
    """``plan tco``'s defaults are ``TcoInputs``' (the planning function takes the model)."""
    by_name = {p.name: p for p in cli.commands["plan"].commands["tco"].params}
    for name, info in TcoInputs.model_fields.items():
        if not info.is_required():
            assert by_name[name].default == info.default, name
    assert TcoInputs(it_kw=1, price_per_kwh=0.1).hours == pytest.approx(8760.0, abs=0)


def test_one_command_models_declare_their_ranges():
    """A number option of a one-command model is checked against its field's range on the command
    line (``--burst 0`` means no burst; ``--headroom-pct 0`` keeps nothing free)."""
    check_number("--burst", 0, "doctor")
    check_number("--headroom-pct", 0, "plan rack")
    with pytest.raises(UsageError):
        check_number("--headroom-pct", 100, "plan rack")
    with pytest.raises(UsageError):
        check_number("--hours", 8761, "plan tco")
    assert domain_for("--limit", "history list").problem("--limit", 0) is None


def test_a_model_checks_its_fields_ranges():
    """Made outside the command line (a notebook), a model refuses what the option refuses, naming the flag."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="--pue"):
        TcoInputs(it_kw=1, price_per_kwh=0.1, pue=0.9)
    with pytest.raises(ValidationError, match="not both"):
        TcoInputs(it_kw=1, price_per_kwh=0.1, tokens_per_kwh=1, tokens_per_s=1)


def test_one_command_models_mark_their_fields():
    """Each one-command model marks its own fields ``EVERY`` (their ranges key on no other command)."""
    models = [m for m in CONFIG_MODELS if m.__name__.endswith("Options") and issubclass(m, FlaggedConfig)]
    assert len(models) >= 17  # plan 4, history 7, compare, regress, agree, report, sensors, monitor, doctor
    unmarked = [m.__name__ for m in models if not any(f.commands == EVERY for _, f in flags(m))]
    assert unmarked == []


def _params(cli, path: list[str], args: list[str]) -> dict[str, object]:
    cmd = cli
    for name in path:
        cmd = cmd.commands[name]
    return dict(cmd.make_context(" ".join(path), list(args)).params)


def test_what_a_generated_option_reads(cli, monkeypatch):
    """A second long name (``agree --timeout``), a value from the environment (``monitor``'s key),
    optional arguments (``history baseline``), and a required option that is missing (``plan tco``)."""
    assert _params(cli, ["agree"], ["http://a", "http://b", "--prompts", "p.jsonl", "--timeout", "5"])["timeout_s"] == pytest.approx(5.0, abs=0)
    monkeypatch.setenv("WATTBENCH_API_KEY", "from-the-environment")
    assert _params(cli, ["monitor"], [])["api_key"] == "from-the-environment"
    got = _params(cli, ["history", "baseline"], [])
    assert (got["name"], got["ref"]) == (None, None)
    assert _params(cli, ["plan", "rack"], ["--rack-kw", "15", "runs/a", "runs/b"])["more"] == ["runs/a", "runs/b"]
    with pytest.raises(UsageError) as missing:
        _params(cli, ["plan", "tco"], ["--price-per-kwh", "0.1"])
    assert getattr(missing.value, "param").opts == ["--it-kw"]


@pytest.mark.parametrize("args,want", [
    (["compare", "a", "b", "--window", "stedy"], "--window 'stedy' is not one of full, steady"),
    (["regress", "a", "--baseline", "b", "--match", "idx"], "--match 'idx' is not one of key, index"),
    (["agree", "http://a", "http://b", "--prompts", "p.jsonl", "--api", "chta"],
     "--api 'chta' is not one of completions, chat"),
])
def test_a_value_outside_its_choices_is_one_line(cli, capsys, args, want):
    """A choice field's model refuses another word before any file or server is read: one line, exit 2."""
    with pytest.raises(SystemExit) as code:
        cli.main(args=args, prog_name="wattbench", standalone_mode=True)
    err = capsys.readouterr().err
    assert code.value.code == 2 and err.strip() == f"wattbench: error: {want}", err
