"""``wattbench run`` refuses the text inputs and environments a review found unchecked, each
with one line on stderr, exit 2 and nothing written, before anything starts (the numbers of every
command are in ``test_cli_numeric_inputs.py``); and a history that fails after a complete run is
one warning line, the run kept (exit 0)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_run_cli import wb
from tests.fakes.stream_server_proc import stream_server
from wattbench.results.rundir import load_result

NOWHERE = "http://127.0.0.1:9"  # nothing listens: a value wrongly taken fails later, naming the target


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def refused(tmp_path: Path, *args: str, must_name: str, target: str = NOWHERE, command: str = "run") -> str:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    before = files_under(tmp_path)
    head = (command, "-t", target, "--idle", "0") if command == "run" else tuple(command.split())
    p = wb(*head, *args, cwd=work, env_extra={"WATTBENCH_DB": str(tmp_path / "db" / "history.sqlite3")}, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("wattbench: error: ") and "Traceback" not in p.stderr, p.stderr
    assert must_name in lines[0], lines[0]
    assert "cannot reach" not in lines[0]
    assert files_under(tmp_path) == before, sorted(set(files_under(tmp_path)) - set(before))
    return lines[0]


@pytest.mark.parametrize("header", ["X-A:b\r\nX-Injected: 1", "X-A:line\nbreak", "X-A:\x01bell", "X-A:del\x7f"])
def test_header_with_a_control_character_is_one_line(tmp_path, header):
    line = refused(tmp_path, "--header", header, must_name="--header X-A")
    assert "control character" in line and "Injected" not in line  # the value is not quoted back


@pytest.mark.parametrize("body,field", [('{"stream": false}', "stream"), ('{"model": "other"}', "model"),
                                        ('{"max_tokens": 5, "top_k": 3}', "max_tokens"),
                                        ('{"stream_options": {}}', "stream_options"), ('{"n": 2}', "n")])
def test_extra_body_refuses_the_fields_wattbench_owns(tmp_path, body, field):
    line = refused(tmp_path, "--extra-body", body, must_name=f"--extra-body '{field}'")
    assert "sets this field itself" in line


def test_out_under_a_file_or_in_proc_is_one_line(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    refused(tmp_path, "--out", str(a_file / "run"), must_name="is a file, not a directory")
    refused(tmp_path, "--out", str(a_file), must_name="is a file, not a directory")
    refused(tmp_path, "--out", "/proc/wattbench-run", must_name="--out /proc/wattbench-run: cannot create")


def _read_only_dir(path: Path) -> bool:
    """A directory nobody can write in: a read-only tmpfs as root, mode 0555 otherwise."""
    path.mkdir()
    if os.geteuid() == 0:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True)
        return r.returncode == 0
    path.chmod(0o555)
    return True


def test_out_on_a_read_only_directory_is_one_line(tmp_path):
    ro = tmp_path / "ro"
    if not _read_only_dir(ro):
        pytest.skip("cannot make a read-only directory here (root without mount)")
    try:
        line = refused(tmp_path, "--out", str(ro / "run"), must_name=f"--out {ro / 'run'}: cannot create a directory")
        assert "Read-only file system" in line or "Permission denied" in line
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)
        ro.chmod(0o755)


def test_a_level_the_machine_cannot_hold_is_one_line(tmp_path):
    line = refused(tmp_path, "-c", "999999999999", must_name="(--concurrency 999999999999) x 32 KiB")
    assert "of memory" in line


@pytest.mark.parametrize("args,name", [(("--duration", "10m"), "--duration: not a number"),
                                       (("--duration", "inf"), "--duration must be a finite number"),
                                       (("--seed", "-1"), "--seed must be >= 0"),
                                       (("-c", "1,,2"), "--concurrency '1,,2': an empty item"),
                                       (("--pue", "nan"), "--pue must be a finite number")])
def test_the_examples_of_the_issue_are_one_line(tmp_path, args, name):
    refused(tmp_path, *args, must_name=name)


def test_a_corrupt_history_database_is_refused_before_the_run(tmp_path):
    bad = tmp_path / "bad.sqlite3"
    bad.write_bytes(b"this is not a database\n" * 200)
    line = refused(tmp_path, "--db", str(bad), must_name=f"--db {bad}: not a usable wattbench history database")
    assert "--no-register" in line
    assert bad.read_bytes() == b"this is not a database\n" * 200


def test_a_history_that_fails_after_the_run_is_one_warning_line_and_the_run_is_kept(tmp_path):
    """A SQLite file another program owns (its own ``runs`` table): it opens, so the run goes ahead,
    then indexing fails. The run is complete on disk; one line says it is not registered and why."""
    db = tmp_path / "other.sqlite3"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE runs (something_else TEXT)")
    out = tmp_path / "run"
    with stream_server("--ttft-ms", "1", "--itl-ms", "1") as (base, _):
        p = wb("run", "-t", base, "-c", "1", "-n", "2", "--input-tokens", "8", "--output-tokens", "4", "--idle", "0",
               "--sensor", "const:node=100", "--no-html", "--db", str(db), "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    warn = [ln for ln in p.stderr.splitlines() if ln.startswith("wattbench: warning:")]
    assert len(warn) == 1 and "the run is kept but not registered in the history" in warn[0], p.stderr
    assert f"wattbench history import {out}" in warn[0]
    result = load_result(out)
    assert result.status == "complete" and any(w.startswith("the run is kept but not registered") for w in result.warnings)


def test_a_value_outside_its_choices_is_one_line_naming_the_choices(tmp_path):
    """A past defect: ``--api chta`` gave pydantic's ``api: Input should be 'completions' or 'chat'``."""
    line = refused(tmp_path, "--api", "chta", must_name="--api 'chta' is not one of completions, chat")
    assert "Input should be" not in line


@pytest.mark.parametrize("server_env, must_name", [
    ("", "no WATTBENCH_LLAMA_SERVER and no llama-server on PATH"),
    ("/nonexistent/llama-server", "/nonexistent/llama-server is not a file"),
])
def test_an_engine_that_is_not_installed_is_one_line_and_nothing_written(tmp_path, server_env, must_name):
    """``--engine llamacpp`` without its server binary: one line naming what to install (and
    WATTBENCH_LLAMA_SERVER), exit 2, no run directory, before a GGUF export or anything else."""
    work, empty = tmp_path / "work", tmp_path / "empty-path"
    work.mkdir()
    empty.mkdir()
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    before = files_under(tmp_path)
    p = wb("run", "--engine", "llamacpp", "--model", str(gguf), "--idle", "0", "--no-register", cwd=work,
           env_extra={"WATTBENCH_LLAMA_SERVER": server_env, "PATH": str(empty)}, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("wattbench: error: llama.cpp server not found"), p.stderr
    assert must_name in lines[0] and "WATTBENCH_LLAMA_SERVER" in lines[0] and "Traceback" not in p.stderr, lines
    assert files_under(tmp_path) == before, sorted(set(files_under(tmp_path)) - set(before))


# ------------------------------------------------------------------ round 3: inputs that gave a traceback or were taken

DEEP = 100_000  # JSON nesting past any recursion limit (a RecursionError traceback before)


def _deep(n: int = DEEP) -> str:
    return "[" * n + "]" * n


@pytest.fixture(scope="module")
def live():
    """A scripted server: the inputs below are read after the target answered (a wrongly taken one
    would run, not fail naming the target)."""
    with stream_server("--ttft-ms", "1", "--itl-ms", "1") as (base, _):
        yield base


RUN_SMALL = ("-c", "1", "-n", "2", "--input-tokens", "8", "--output-tokens", "4", "--no-sensors", "--no-prime",
             "--no-history-check", "--no-html", "--no-register")


def test_a_dataset_row_nested_100k_deep_is_one_line(tmp_path, live):
    data = tmp_path / "deep.jsonl"
    data.write_text('{"prompt": "hi", "x": ' + _deep() + "}\n")
    refused(tmp_path, *RUN_SMALL, "-w", str(data), must_name="deep.jsonl:1: JSON nested too deeply", target=live)


@pytest.mark.parametrize("body,name", [
    ('{"a": ' + _deep(40_000) + "}", "--extra-body: JSON nested 40001 levels deep"),  # argv caps an argument at 128 KiB
    # 70 deep: Python parses it, but result.json would nest it past the 64 levels report and compare read
    ('{"a": ' + _deep(69) + "}", "--extra-body: JSON nested 70 levels deep (at most 16 are stored"),
    ('{"top_k": NaN}', "--extra-body: NaN is not a JSON number"),
    ('{"top_k": Infinity}', "--extra-body: Infinity is not a JSON number"),
    ('{"top_p": 1e400}', "--extra-body: 1e400 is too large"),
])
def test_extra_body_that_no_server_reads_as_json_is_one_line(tmp_path, body, name):
    refused(tmp_path, "--extra-body", body, must_name=name)


def test_an_api_key_with_cr_lf_is_one_line_and_not_quoted(tmp_path):
    line = refused(tmp_path, "--api-key", "sk-abc\r\nX-Evil: 1", must_name="--api-key holds a control character")
    assert "sk-abc" not in line and "Evil" not in line


@pytest.mark.parametrize("command", ["run", "monitor", "doctor"])
def test_an_unclosed_ipv6_target_is_one_line(tmp_path, command):
    args = ("--sensor", "const:node=100", "--duration", "1") if command == "monitor" else ()
    if command == "run":
        work = tmp_path / "work"
        work.mkdir()
        p = wb("run", "-t", "http://[::1", "--idle", "0", cwd=work)
    else:
        p = wb(command, "-t", "http://[::1", *args, cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "cannot be read as a URL (Invalid IPv6 URL)" in lines[0], p.stderr


def test_an_out_name_longer_than_the_filesystem_takes_is_one_line(tmp_path):
    line = refused(tmp_path, "--out", str(tmp_path / "work" / ("a" * 300)), must_name="--out: the name aaaa")
    assert "300 bytes, more than the 255" in line


@pytest.mark.parametrize("args,name", [
    (("--sensor", "const:node=inf"), "node=inf is not a finite number"),
    (("--sensor", "const:node=1e400"), "node=1e400 is not a finite number"),
    (("--slo", "ttft_p99=1e400ms"), "the bound must be a finite number"),
    (("-H", "Content-Length: 5"), "--header Content-Length: wattbench and its HTTP client set this header"),
    (("-H", "Host: elsewhere"), "--header Host"),
    (("--tag", "two words"), "--tag 'two words' must be non-empty without spaces"),
])
def test_values_taken_silently_before_are_one_line(tmp_path, live, args, name):
    small = tuple(a for a in RUN_SMALL if a != "--no-sensors") if args[0] == "--sensor" else RUN_SMALL
    refused(tmp_path, *small, *args, must_name=name, target=live)


@pytest.mark.parametrize("command", ["run", "measure"])
def test_no_sensors_beside_a_sensor_is_one_line(tmp_path, command):
    """``--no-sensors`` made ``--sensor const:node=inf`` go unread (no meter opened, nothing
    validated): the two contradict, refused before anything is read or written."""
    cmd = ("measure", "--no-sensors", "-s", "const:node=inf", "--idle", "0", "--", "true") if command == "measure" \
        else ("--no-sensors", "-s", "const:node=inf")
    line = refused(tmp_path, *cmd[1:], must_name="--no-sensors samples no power meter, and --sensor const:",
                   command=cmd[0]) if command == "measure" else \
        refused(tmp_path, *cmd, must_name="--no-sensors samples no power meter, and --sensor const:")
    assert "inf" not in line  # the spec is not quoted back (a sensor spec can name a credentials file)


def test_a_history_database_that_is_not_a_regular_file_is_one_line(tmp_path, live):
    small = tuple(a for a in RUN_SMALL if a != "--no-register")
    refused(tmp_path, *small, "--db", "/dev/null", must_name="--db /dev/null: not a regular file", target=live)


def test_a_fifo_is_not_a_regular_file_not_a_missing_one(tmp_path, live):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    line = refused(tmp_path, *RUN_SMALL, "-w", str(fifo), must_name="not a regular file", target=live)
    assert "no such file" not in line
    line = refused(tmp_path, "--engine", "vllm", "--space", str(fifo), "--out", str(tmp_path / "t"),
                   must_name=f"space file {fifo}: not a regular file", command="tune")


@pytest.mark.parametrize("where", ["/proc/wattbench-history.jsonl", "read-only"])
def test_monitor_history_that_cannot_be_written_is_one_line(tmp_path, live, where):
    if where == "read-only":
        ro = tmp_path / "ro"
        if not _read_only_dir(ro):
            pytest.skip("cannot make a read-only directory here")
        where = str(ro / "h.jsonl")
    try:
        p = wb("monitor", "-t", live, "--sensor", "const:node=100", "--history", where, "--duration", "1", cwd=tmp_path)
    finally:
        if os.geteuid() == 0 and where.startswith(str(tmp_path)):
            subprocess.run(["umount", str(tmp_path / "ro")], capture_output=True)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and f"--history {where}: cannot write it" in lines[0], p.stderr


@pytest.mark.parametrize("what", ["/dev/null", "fifo", "/proc/self", "empty dir", "empty result.json"])
def test_history_import_of_what_holds_no_run_is_refused(tmp_path, what):
    """``history import /dev/null`` (or a FIFO, or ``/proc/self``) said "0 run(s) imported", exit 0:
    refused in one line, exit 2, without blocking on the FIFO (the subprocess has a timeout)."""
    work = tmp_path / "work"
    work.mkdir()
    path = {"/dev/null": "/dev/null", "/proc/self": "/proc/self"}.get(what)
    if what == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    elif what == "empty dir":
        path = str(tmp_path / "empty")
        os.mkdir(path)
    elif what == "empty result.json":
        (tmp_path / "r").mkdir()
        (tmp_path / "r" / "result.json").write_bytes(b"")
        path = str(tmp_path / "r" / "result.json")
    db = tmp_path / "h.db"
    p = wb("history", "import", path, "--db", str(db), cwd=work, timeout=30)
    assert p.returncode == 2 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    says = {"/dev/null": "not a regular file or a directory", "fifo": "not a regular file or a directory",
            "/proc/self": "in a kernel filesystem (proc)", "empty dir": "no result.json in it or below",
            "empty result.json": "result.json"}[what]
    assert len(lines) == 1 and says in lines[0], p.stderr


@pytest.mark.parametrize("args, must_name", [
    (("--trials", "x"), "--trials 'x': give a whole number of trials (--trials 3) or auto"),
    (("--trials", "3.5"), "--trials '3.5'"),
    (("--trials", "0"), "--trials must be >= 1"),
    (("--precision", "2"), "--precision bounds --trials auto"),
    (("--trials", "auto", "--max-trials", "2"), "--max-trials 2 with --trials auto"),
    (("--trials", "auto", "--precision", "0"), "--precision must be > 0"),
    (("--trials", "auto", "--sweep", "auto"), "--sweep auto only finds"),
])
def test_trials_takes_a_count_or_auto_in_one_line(tmp_path, args, must_name):
    refused(tmp_path, *args, must_name=must_name)


@pytest.mark.parametrize("levels,named", [(("-c", "1"), "--concurrency 1 is below the number of targets (2)"),
                                          (("-c", "4,1"), "--concurrency 1 is below the number of targets (2)"),
                                          (("--sweep", "auto", "--max-concurrency", "1"),
                                           "--max-concurrency 1 (the top of the search) is below the number of "
                                           "targets (2)")])
def test_a_concurrency_below_the_number_of_targets_is_refused_before_any_request(tmp_path, levels, named):
    """Two replicas and a level with fewer streams than targets: refused with the plan's other
    checks, before the priming, the idle measurement or any request reaches either server (it was
    refused only when the level started, after the priming had loaded the servers)."""
    with stream_server("--ttft-ms", "1", "--itl-ms", "1") as (a, stats_a), \
            stream_server("--ttft-ms", "1", "--itl-ms", "1") as (b, stats_b):
        line = refused(tmp_path, "-t", b, *levels, "--sensor", "const:node=100", target=a, must_name=named)
        assert "raise the concurrency or drop targets" in line
        for stats in (stats_a, stats_b):
            assert stats()["requests"] == 0 and stats.per_request() == {}


def test_a_prefill_decode_pair_with_no_sensors_is_refused_before_any_request(tmp_path):
    """``--prefill-decode-pair``'s only figures are energies (J per prefill token, J per decode
    token): with ``--no-sensors`` its levels would measure nothing (the run skipped them without a
    word). Refused in one line with the meter to give, before any request reaches the server."""
    with stream_server("--ttft-ms", "1", "--itl-ms", "1") as (a, stats):
        line = refused(tmp_path, "--prefill-decode-pair", "--no-sensors", "-c", "1", target=a,
                       must_name="--prefill-decode-pair splits energy into J per prefill token and J per decode "
                                 "token, and --no-sensors measures none: drop --no-sensors and give a power meter")
        assert line.endswith("(or drop --prefill-decode-pair)"), line
        assert stats()["requests"] == 0 and stats.per_request() == {}


def test_two_targets_and_no_concurrency_name_the_default_level(tmp_path):
    """Two replicas and no ``-c``: the default level (one stream) cannot serve both. Refused in one
    line that says the level was the default and which flag to give (it named "--concurrency 1", a
    flag the user never gave), before any request reaches either server."""
    with stream_server("--ttft-ms", "1", "--itl-ms", "1") as (a, stats_a), \
            stream_server("--ttft-ms", "1", "--itl-ms", "1") as (b, stats_b):
        line = refused(tmp_path, "-t", b, "--sensor", "const:node=100", target=a,
                       must_name="the default level --concurrency 1 (when no --concurrency is given) is below the "
                                 "number of targets (2)")
        assert line.endswith("some targets would get no stream; give --concurrency 2 or more"), line
        for stats in (stats_a, stats_b):
            assert stats()["requests"] == 0 and stats.per_request() == {}


@pytest.mark.parametrize("load, fix", [
    (("--rate", "2"), "measure the pair in a run of its own with --concurrency 9 or more (--rate takes no "
                      "--concurrency), or drop --prefill-decode-pair"),
    (("--sweep", "auto"), "give --concurrency 9 or more, or drop --prefill-decode-pair")])
def test_a_prefill_decode_pair_with_fewer_streams_than_targets_is_refused_before_any_request(tmp_path, load, fix):
    """``--prefill-decode-pair`` measures its two closed-loop levels at 8 streams when no
    ``--concurrency`` is given (with ``--rate`` none can be): with 9 targets that pair cannot run.
    Refused with the plan, in one line naming the pair's concurrency and what to do, before any
    request reaches the server (it was refused only when the pair's level started, after every rate
    level had run, as "--concurrency 8 is below the number of targets", a flag the user never gave).
    The 9 targets are 9 base paths of one server that logs every request it receives."""
    from tests.fakes.reliability_procs import HOSTILE, server

    with server("--behaviour", "recorder", script=HOSTILE) as s:
        targets = [f"{s.base}/replica{i}" for i in range(9)]
        extra = [a for t in targets[1:] for a in ("-t", t)]
        line = refused(tmp_path, *extra, *load, "--prefill-decode-pair", "--sensor", "const:node=100",
                       target=targets[0], must_name="--prefill-decode-pair's concurrency 8 (its default when no "
                                                    "--concurrency is given) is below the number of targets (9)")
        assert line.endswith(fix), line
        assert s.get("/log") == []  # nothing reached the server: no probe, no priming, no level
    # eight targets: the pair's 8 streams serve them all, and the plan goes ahead
    from wattbench.config.run import RunConfig
    from wattbench.run.plan import validate_plan

    validate_plan(RunConfig(target=targets[0], targets=targets[1:8], rate=[2.0], prefill_decode_pair=True))


def test_the_same_replica_spelled_twice_counts_once(tmp_path):
    """``http://h:1`` and ``http://h:1/v1/`` are one target (the run deals its load over one), so
    ``-c 1`` is not below the number of targets: the run goes ahead and measures."""
    out = tmp_path / "run"
    with stream_server("--ttft-ms", "1", "--itl-ms", "1") as (base, stats):
        p = wb("run", "-t", base, "-t", base.rstrip("/") + "/v1/", "-c", "1", "-n", "2", "--input-tokens", "8",
               "--output-tokens", "4", "--idle", "0", "--sensor", "const:node=100", "--no-html", "--no-register",
               "--out", str(out), cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert stats()["requests"] >= 2
    assert load_result(out).status == "complete"
