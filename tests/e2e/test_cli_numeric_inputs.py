"""Every numeric input of every command is checked before anything starts.

The options are found by walking the CLI (``cli.main.build_command``): every ``int``/``float``
option of every command, and every comma-list option of numbers (metavar ``cli.common.LIST_METAVAR``),
so an option added later is covered without a line here. Each gets the values that broke
wattbench before (negative, zero, NaN, ±inf, 1e400, a 30-digit integer; an empty item for a list):
the command must answer with one line on stderr naming the option, exit 2, no traceback and
nothing written (no run directory, no history database, no file at all in its working directory).

A value an option takes on purpose (``--idle 0``: no idle baseline) is listed in ``TAKES`` with
the reason; every other case must be refused. ``test_any_bad_number_is_refused`` then draws
numbers with hypothesis from the families that no option takes (non-finite, beyond 1e12 in size,
negative where the option takes no negative) and checks the same outcome.
"""

from __future__ import annotations

import signal
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from wattbench.cli.common import LIST_METAVAR, MAX_OPTION_MAGNITUDE
from wattbench.cli.main import build_command

CLI = build_command()

# The arguments each command needs to get as far as checking its options; a value wrongly taken
# then fails on something that does not name the option (an unreachable target, a missing file),
# so it cannot pass for a refusal. A new command without an entry fails test_every_command_has_a_base.
BASE: dict[str, list[str]] = {
    "run": ["-t", "http://127.0.0.1:9", "--no-register", "--no-html", "--idle", "0"],
    # the command is a positional argument: options after it are still parsed (no "--" here)
    "measure": ["--no-register", "--no-html", "no-such-program-xyz"],
    "tune": ["--engine", "transformers", "--model", "tiny", "--objective", "not-an-objective"],
    "ab": ["http://127.0.0.1:9", "http://127.0.0.1:8", "--no-register", "--no-html", "--idle", "0"],
    "sensors": ["--sensor", "const:node=100", "--measure", "0"],
    "agree": ["http://127.0.0.1:9", "http://127.0.0.1:9", "--prompts", "no-such-prompts.jsonl"],
    "doctor": ["--target", "http://127.0.0.1:9", "--sensor", "nosuchsensor"],
    "monitor": ["--target", "http://127.0.0.1:9", "--sensor", "nosuchsensor", "--duration", "0.5"],
    "history list": [],
    "history noise": [],  # a value wrongly taken prints "no configuration measured…" and exits 0
    "plan roofline": ["--model", "no-such-model"],
    "plan rack": ["--rack-kw", "40", "--node", "no-such-result-dir"],
    "plan power-first": ["--site-kw", "100", "--candidates", "no-such-result-dir"],
    "plan tco": ["--it-kw", "10", "--price-per-kwh", "0.1", "--period", "no-such-period"],
}

NEG, ZERO = "-1", "0"
VALUES = {
    "negative": NEG,
    "zero": ZERO,
    "nan": "nan",
    "inf": "inf",
    "-inf": "-inf",
    "1e400": "1e400",
    "30 digits": "123456789012345678901234567890",
}

# (command, option) -> {value name: why the option takes it}
TAKES: dict[tuple[str, str], dict[str, str]] = {
    ("run", "--seed"): {"zero": "the default seed"},
    ("tune", "--seed"): {"zero": "the default seed"},
    ("run", "--idle"): {"zero": "no idle baseline"},
    ("tune", "--idle"): {"zero": "no idle baseline"},
    ("measure", "--idle"): {"zero": "no idle baseline"},
    ("measure", "--idle-after"): {"zero": "no idle baseline after (the default)"},
    ("measure", "--price-per-kwh"): {"zero": "free electricity: the cost figures read 0"},
    ("run", "--idle-after"): {"zero": "no idle baseline after (the default)"},
    ("run", "--cooldown"): {"zero": "no pause between trials (the default)"},
    ("run", "--price-per-kwh"): {"zero": "free electricity: the cost figures read 0"},
    ("run", "--temperature"): {"zero": "greedy sampling"},
    ("tune", "--gpus"): {"zero": "GPU index 0"},
    ("tune", "--noise-pct"): {"zero": "never measure the best two again"},
    ("tune", "--max-repeats"): {"zero": "no repeat rounds"},
    ("sensors", "--measure"): {"zero": "no update-period measurement"},
    ("history list", "--limit"): {"zero": "all runs (documented: 0 = all)"},
    ("plan roofline", "--level"): {"zero": "the first level of --result"},
    ("plan roofline", "--context"): {"zero": "no KV cache read (the default)"},
    ("plan tco", "--level"): {"zero": "the first level of --result"},
    ("plan tco", "--rack-rent-per-month"): {"zero": "no rent (the default)"},
    ("plan tco", "--racks"): {"zero": "no racks rented (the default)"},
    ("plan tco", "--cooling-cost-per-kwh"): {"zero": "no separate cooling cost (the default)"},
    ("plan tco", "--maintenance-pct-per-year"): {"zero": "no maintenance cost (the default)"},
    ("plan tco", "--hardware-cost"): {"zero": "hardware already paid for (the default)"},
    ("plan tco", "--price-per-kwh"): {"zero": "free electricity"},
    ("plan rack", "--headroom-pct"): {"zero": "no headroom (the default)"},
    ("plan rack", "--host-overhead-w"): {"zero": "a host drawing nothing beside its accelerators"},
    ("plan power-first", "--headroom-pct"): {"zero": "no headroom"},
    ("plan power-first", "--host-overhead-w"): {"zero": "a host drawing nothing beside its accelerators"},
    ("monitor", "--idle-threshold"): {"zero": "idle only when no token at all was produced"},
    ("doctor", "--burst"): {"zero": "no burst sent (documented: 0: none)"},
}
# `ab` takes run's options (cli/ab.py): what they take there, they take in ab
TAKES.update({("ab", flag): takes for (command, flag), takes in list(TAKES.items())
              if command == "run" and flag not in ("--trials",)})


def _commands(cmd, path=()):
    subs = getattr(cmd, "commands", None)
    if subs:
        for name, sub in subs.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), cmd


def numeric_options() -> list[tuple[str, str, bool]]:
    """(command, option, is_list) for every numeric option of every command."""
    out = []
    for name, cmd in _commands(CLI):
        for p in cmd.params:
            if getattr(p, "param_type_name", "") != "option" or getattr(p, "is_flag", False):
                continue
            flag = max(p.opts, key=len)
            if p.metavar == LIST_METAVAR:
                out.append((name, flag, True))
            elif hasattr(p, "bare_type") and p.bare_type() in ("int", "float"):
                out.append((name, flag, False))
    return out


OPTIONS = numeric_options()
CASES = [(c, o, k, v) for c, o, is_list in OPTIONS
         for k, v in [*VALUES.items(), *([("empty item", "1,,2")] if is_list else [])]
         if k not in TAKES.get((c, o), {})]


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """A working directory, home and history path of the test's own: whatever a command writes
    lands under ``tmp_path``."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "data"))
    monkeypatch.setenv("WATTBENCH_DB", str(tmp_path / "home" / "history.sqlite3"))
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def _alarm(signum, frame):
    raise TimeoutError("the command ran instead of refusing its input")


def invoke(args: list[str], capsys) -> tuple[int, str, str]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    # SIGALRM's one timer is pytest-timeout's while a test runs: ours takes its place, and it gets
    # back what it had left
    runner_left_s, runner_interval_s = signal.setitimer(signal.ITIMER_REAL, 60)
    t0 = time.monotonic()
    try:
        code = CLI.main(args=args, prog_name="wattbench", standalone_mode=True)
    except SystemExit as e:
        code = e.code
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if runner_left_s > 0:
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, runner_left_s - (time.monotonic() - t0)),
                             runner_interval_s)
    got = capsys.readouterr()
    return code or 0, got.out, got.err


def files_under(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def check_refused(command: str, option: str, value: str, root, capsys) -> None:
    before = files_under(root)
    code, out, err = invoke([*command.split(), *BASE[command], option, value], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (command, option, value, code, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("wattbench: error: "), (command, option, value, err[-2000:])
    assert "Traceback" not in err and not out.strip(), (command, option, value, out[-500:])
    short = [o for o in next(p for n, c in _commands(CLI) if n == command for p in c.params
                             if option in getattr(p, "opts", ())).opts]
    assert any(o in lines[0] for o in short), f"{command} {option} {value}: the line does not name it: {lines[0]}"
    assert files_under(root) == before, (command, option, value, sorted(set(files_under(root)) - set(before)))


def test_every_command_has_a_base():
    assert {c for c, _, _ in OPTIONS} <= set(BASE), "add the new command's arguments to BASE"
    assert all((c, o) in {(c2, o2) for c2, o2, _ in OPTIONS} for c, o in TAKES), "TAKES names an unknown option"


def test_what_an_option_takes_is_in_its_domain():
    from wattbench.config.tables import domain_for

    for (command, flag), takes in TAKES.items():
        for kind in takes:
            assert domain_for(flag, command).problem(flag, float(VALUES[kind])) is None, (command, flag, kind)


def test_the_walk_finds_the_options_that_broke_before():
    found = {(c, o) for c, o, _ in OPTIONS}
    for want in [("run", "--concurrency"), ("run", "--rate"), ("run", "--duration"), ("run", "--request-timeout"),
                 ("run", "--sample-interval"), ("run", "--idle"), ("run", "--idle-after"), ("run", "--seed"),
                 ("run", "--pue"), ("run", "--workers"), ("tune", "--concurrency"), ("plan tco", "--hours")]:
        assert want in found, want


@pytest.mark.parametrize("command,option,kind,value", CASES, ids=[f"{c}:{o}={k}" for c, o, k, _ in CASES])
def test_bad_number_is_one_line_exit_2_nothing_written(command, option, kind, value, isolated, capsys):
    check_refused(command, option, value, isolated, capsys)


_NEGATIVE_OK = {(c, o) for (c, o), takes in TAKES.items() if "negative" in takes}
_BAD = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "+inf", "NaN", "Infinity", "1e309", "-1e999"]),
    st.floats(min_value=MAX_OPTION_MAGNITUDE * 1.0001, max_value=1e300).map(lambda x: repr(x)),
    st.integers(min_value=int(MAX_OPTION_MAGNITUDE) + 1, max_value=10 ** 40).map(str),
    st.integers(max_value=-1, min_value=-(10 ** 40)).map(str),
    st.floats(max_value=-1e-9, min_value=-1e300).map(lambda x: repr(x)),
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from([(c, o) for c, o, _ in OPTIONS]), value=_BAD)
def test_any_bad_number_is_refused(case, value, isolated, capsys):
    command, option = case
    # a negative value is valid for these options: hypothesis draws again (a `return` passed unchecked)
    assume(not (case in _NEGATIVE_OK and value.startswith("-") and value not in ("-inf", "-1e999")))
    root = isolated
    check_refused(command, option, value, root, capsys)


# ------------------------------------------------------------------ empty text

def text_options() -> list[tuple[str, str]]:
    """(command, option) for every option of every command that takes text, a path or a repeated
    text value (not a number, not a flag): walked like the numbers, so a new one is covered."""
    out = []
    for name, cmd in _commands(CLI):
        for p in cmd.params:
            if getattr(p, "param_type_name", "") != "option" or getattr(p, "is_flag", False) or getattr(p, "count", False):
                continue
            if hasattr(p, "bare_type") and p.bare_type() in ("int", "float"):
                continue
            out.append((name, max(p.opts, key=len)))
    return out


TEXT_OPTIONS = text_options()


def test_the_text_walk_finds_the_options_that_read_empty_as_not_given():
    found = set(TEXT_OPTIONS)
    for want in [("run", "--concurrency"), ("run", "--slo"), ("run", "--out"), ("run", "--tag"), ("run", "--db"),
                 ("monitor", "--history"), ("tune", "--space")]:
        assert want in found, want


@pytest.mark.parametrize("command,option", TEXT_OPTIONS, ids=[f"{c}:{o}" for c, o in TEXT_OPTIONS])
def test_an_empty_value_is_one_line_exit_2_nothing_written(command, option, isolated, capsys):
    """``-c ''`` ran the default level, ``--out ''`` wrote to the default directory, ``--slo ''`` was
    no SLO, ``--tag ''`` was registered: an empty value typed for a text option is refused, naming
    the option, unless empty means something (``config.tables.EMPTY_TEXT_OK``, checked to be taken)."""
    from wattbench.config.tables import EMPTY_TEXT_OK

    if option in EMPTY_TEXT_OK:
        code, _, err = invoke([*command.split(), *BASE.get(command, []), option, ""], capsys)
        assert "an empty value" not in err, (command, option, err)
        return
    before = files_under(isolated)
    code, out, err = invoke([*command.split(), *BASE.get(command, []), option, ""], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "an empty value" in lines[0] and option in lines[0], (
        command, option, code, err[-1000:])
    assert files_under(isolated) == before
