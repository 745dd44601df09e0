"""Live progress of ``wattbench run``: level k of n (or until the search ends), the trial,
elapsed and remaining time, phase messages without rich's log time and source location."""

import pytest
from rich.console import Console

from wattbench.cli.progress import RunProgress, level_description, progress_figures
from wattbench.run.events import LevelDone, LevelProgress, LevelStarted, Measured, Phase, Priming, Unrecorded

M0, M1, M2 = Measured(0), Measured(1), Measured(2)


def test_level_description():
    assert level_description(LevelStarted(M1, "concurrency=8", None, levels=5)) == "level 2 of 5 · c=8"
    assert level_description(LevelStarted(M2, "concurrency=16", None)) == (
        "level 3, until the search ends · c=16")
    assert level_description(LevelStarted(M0, "rate=4 trial 2/3", None, levels=2, trial=2, trials=3)) == (
        "level 1 of 2 · r=4/s · trial 2 of 3")
    assert level_description(LevelStarted(M0, "rate=4 prefill-heavy", None, levels=1)) == (
        "level 1 of 1 · r=4/s prefill-heavy")


def test_progress_figures_say_only_what_is_known():
    assert progress_figures(LevelProgress(M0)) == []
    assert progress_figures(LevelProgress(M0, output_tokens=300, elapsed_s=2.0, power_w=412.0, failed=1234)) == [
        "150 out tok/s", "412 W", "1,234 failed"]
    # the runner's own rate wins over tokens / elapsed; none failed says nothing
    assert progress_figures(LevelProgress(M0, output_tokens_per_s=99.0, output_tokens=300, elapsed_s=2.0, failed=0),
                            "tok/s") == ["99.0 tok/s"]


def test_rendered_progress_has_no_internals():
    console = Console(record=True, width=120, color_system=None, force_terminal=True, file=open("/dev/null", "w"))
    with RunProgress(console, enabled=True) as prog:
        prog.update(Phase("idle", "measuring idle power for 3 s"))
        prog.update(LevelStarted(M0, "concurrency=8", 100, levels=2))
        prog.update(LevelProgress(M0, done=40, output_tokens_per_s=1234.0, power_w=412.0))
    out = console.export_text()
    assert "measuring idle power for 3 s" in out and "progress.py" not in out
    assert "level 1 of 2 · c=8" in out and "40/100 requests" in out
    assert "1,234 out tok/s · 412 W" in out
    assert "elapsed" in out and "left" in out
    assert "None" not in out


def test_duration_bound_level_runs_its_bar_over_time():
    """A --duration level has no request total: its bar runs over the level's seconds, so rich can
    say how much time is left; the requests done are still shown."""
    console = Console(record=True, width=120, color_system=None, force_terminal=True, file=open("/dev/null", "w"))
    with RunProgress(console, enabled=True) as prog:
        prog.update(LevelStarted(M0, "rate=4", None, levels=1, duration_s=60.0))
        prog.update(LevelProgress(M0, done=57, elapsed_s=15.0, output_tokens=1500))
        task = prog._progress.tasks[0]
        assert task.total == pytest.approx(60.0, rel=1e-9) and task.completed == pytest.approx(15.0, rel=1e-9)
    out = console.export_text()
    assert "57 requests" in out and "level 1 of 1 · r=4/s" in out and "100 out tok/s" in out


def test_the_progress_line_fits_80_columns():
    """A past defect: at 80 columns the line was cut to ``c… 32/32 reque…``. Below 120 columns every field
    takes its short form and nothing is cut."""
    assert level_description(LevelStarted(M1, "concurrency=32", None, levels=2), compact=True) == "2/2 c=32"
    assert level_description(LevelStarted(M2, "rate=4 trial 2/3", None, trial=2, trials=3),
                             compact=True) == "3/? r=4/s t2/3"
    console = Console(record=True, width=80, color_system=None, force_terminal=True, file=open("/dev/null", "w"))
    with RunProgress(console, enabled=True) as prog:
        prog.update(LevelStarted(M1, "concurrency=32", 32, levels=2))
        prog.update(LevelProgress(M1, done=32, output_tokens_per_s=1234.0, power_w=412.0))
        prog.update(LevelStarted(M2, "rate=4 trial 2/3", None, trial=2, trials=3, duration_s=60.0))
        prog.update(LevelProgress(M2, done=57, elapsed_s=15.0, output_tokens=1500))
    out = console.export_text()
    assert "…" not in out
    assert "2/2 c=32" in out and "32/32 req" in out and "1,234 tok/s · 412 W" in out
    assert "3/? r=4/s t2/3" in out and "57 req" in out


def test_plain_progress_where_stderr_is_not_a_terminal():
    """No progress at all reached a CI log or nohup: 25 minutes of silence. Plain lines now: a
    level's start, one every 10 s inside it (not on every update), and its end with its headline."""
    import io

    from tests.fakes.results_factory import make_level
    from wattbench.cli.progress import PlainProgress, run_progress
    from wattbench.report.format import headline_line as headline

    now = [100.0]
    out = io.StringIO()
    prog = run_progress(Console(file=io.StringIO()), quiet=False, terminal=False, stream=out)
    assert isinstance(prog, PlainProgress)
    prog.clock = lambda: now[0]
    with prog:
        prog.update(Phase("idle", "measuring idle power for 3 s"))
        prog.update(LevelStarted(M0, "concurrency=8", 1000, levels=2))
        for t in range(1, 26):  # an update a second for 25 s: two lines, at 10 s and 20 s
            now[0] = 100.0 + t
            prog.update(LevelProgress(M0, done=40 * t, output_tokens_per_s=1234.0, power_w=412.0))
        lv = make_level(0, value=8)
        prog.update(LevelDone(M0, lv))
    lines = out.getvalue().splitlines()
    assert lines[0] == "wattbench: measuring idle power for 3 s"
    assert lines[1] == "wattbench: level 1 of 2 · c=8 started: 1,000 requests"
    assert lines[2:4] == ["wattbench: level 1 of 2 · c=8: 400/1,000 requests · 1,234 out tok/s · 412 W · 0:00:10",
                          "wattbench: level 1 of 2 · c=8: 800/1,000 requests · 1,234 out tok/s · 412 W · 0:00:20"]
    assert lines[4] == f"wattbench: level 1 of 2 · c=8 done in 0:00:25: {headline(lv)}"
    assert len(lines) == 5
    assert not isinstance(run_progress(Console(file=io.StringIO()), quiet=True, terminal=False), PlainProgress)


@pytest.mark.parametrize("width", [80, 160])
def test_priming_and_a_re_measure_are_named_not_counted(width):
    """A past defect: ``0/? priming`` and ``-1/? c=1 history check`` (the priming load and the history
    check's re-measure are not levels of the ladder)."""
    for compact in (True, False):
        assert level_description(LevelStarted(Priming(), "priming", 8, levels=3), compact=compact) == "priming"
        assert level_description(LevelStarted(Unrecorded(0), "concurrency=1 history check", 8),
                                 compact=compact) == "c=1 history check"
    console = Console(record=True, width=width, color_system=None, force_terminal=True, file=open("/dev/null", "w"))
    with RunProgress(console, enabled=True) as prog:
        prog.update(LevelStarted(Priming(), "priming", 8))
        prog.update(LevelStarted(Unrecorded(0), "concurrency=1 history check", 8))
    out = console.export_text()
    assert "priming" in out and "c=1 history check" in out
    assert "0/? priming" not in out and "-1/?" not in out and "of None" not in out


@pytest.mark.parametrize("width,unit", [(80, "tok/s"), (160, "out tok/s")])
def test_a_finished_bar_shows_the_levels_own_figures_not_its_last_sample(width, unit):
    from tests.fakes.results_factory import make_level

    lv = make_level(0, value=8, output_tokens_per_s=1000.0, power_w=600.0)
    power = next(iter(lv.energy.values())).avg_power_w
    console = Console(record=True, width=width, color_system=None, force_terminal=True, file=open("/dev/null", "w"))
    with RunProgress(console, enabled=True) as prog:
        prog.update(LevelStarted(M0, "concurrency=8", 32, levels=1))
        prog.update(LevelProgress(M0, done=32, output_tokens_per_s=1234.0, power_w=11.4))
        prog.update(LevelDone(M0, lv))
    last = console.export_text().splitlines()
    row = next(ln for ln in reversed(last) if "c=8" in ln).split("c=8")[-1]  # the final frame of the bar
    assert f"1,000 {unit}" in row and f"{power:,.0f} W" in row
    assert "11.4 W" not in row and "1,234" not in row
