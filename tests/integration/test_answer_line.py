"""The answer line says what the run can answer, and nothing else.

Against the scripted stream server (ground truth: its scripted TTFT no SLO of 1 ms can hold; a
server that exits at its Nth request), through the CLI as a user reads it — the summary at 80 and
160 columns, ``report --json``, ``history show`` and the HTML report in headless Chromium:

- an SLO no level meets: ``answer: none — no level met the SLO …``, never the most efficient
  level's figure two lines above "no level met it";
- ``--optimize`` with such an SLO: the same, never the first level measured;
- a server that dies mid-ladder: the levels never measured are named (``not measured: c=8``);
- ``--optimize``'s answer is the figure it chose by (the mean of the level's two measurements), its
  sentence never says both "no other level is within noise" and "within noise of it: <itself>",
  and levels print by load everywhere.

The run with an impossible SLO and a dead server is also a golden summary
(``tests/fixtures/golden/answer_summary.json``): the answer block's words, digits aside.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.reliability_procs import child_env, server
from tests.golden import check_part
from wattbench.results.rundir import load_result

MEMORY_LIMIT = 2 << 30
QUIET = ("--idle", "0", "--input-tokens", "16", "--output-tokens", "16", "--quiet", "--no-prime",
         "--no-history-check", "--no-calibrate-prompts", "--sensor", "const:node=500")
IMPOSSIBLE = "ttft_p99=1ms"  # the scripted server's TTFT is 20 ms


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _wb(*args: str, cwd: Path, cols: int = 80) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=cwd, env=child_env(COLUMNS=str(cols)),
                          capture_output=True, text=True, timeout=180, preexec_fn=_limited)


def _joined(text: str) -> str:
    """A summary's lines with a terminal's folds joined (a long line folds at 80 columns)."""
    return " ".join(text.split())


def _answer_block(stdout: str) -> list[str]:
    """The summary's lines from ``answer:`` to the verdict line (the answer first), folds joined."""
    lines = stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("answer: "))
    end = next(i for i, x in enumerate(lines) if x.startswith("verdict: "))
    out: list[str] = []
    for ln in lines[start:end]:
        if out and not re.match(r"^(answer: |not measured: |optimize|primed |best under SLO|prompts |[cr]=\S+: )", ln):
            out[-1] += " " + ln.strip()  # a fold of the line before
        else:
            out.append(ln.rstrip())
    return out


def _report(run: Path, cwd: Path, cols: int) -> str:
    p = _wb("report", str(run), cwd=cwd, cols=cols)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_an_impossible_slo_and_a_dead_server_answer_nothing_and_name_what_was_not_measured(tmp_path):
    """Golden summary: c=1,2,4,8 against a server that exits at its 21st request, under an SLO its
    TTFT never meets. c=1 completes, c=2 loses its last requests, c=4 meets only refusals (the
    run stops: exit 4), c=8 never runs."""
    out, db = tmp_path / "run", tmp_path / "h.db"
    with server("--ttft-ms", "20", "--itl-ms", "2", "--die-after-requests", "20") as s:
        p = _wb("run", "--target", s.base, "-c", "1,2,4,8", "-n", "12", "--slo", IMPOSSIBLE, *QUIET,
                "--db", str(db), "--out", str(out), cwd=tmp_path)
        served = s.stats()
    assert p.returncode == 4, p.stderr  # the target stopped answering
    assert served["requests"] == 20  # c=4 met only refusals
    res = load_result(out)
    assert [lv.load.target_concurrency for lv in res.levels] == [1, 2, 4] and res.status == "failed"
    assert all(lv.goodput is None or not lv.goodput.all_met for lv in res.levels)  # ground truth: 20 ms TTFT never meets 1 ms
    for cols in (80, 160):
        text = p.stdout if cols == 80 else _report(out, tmp_path, cols)
        block = _answer_block(text)
        assert block[0] == "answer: none — no level met the SLO ttft_p99=1ms (measured c=1,2,4)", block
        assert "not measured: c=8 — the run stopped early: the target stopped answering during c=4" in block
        assert not any(x.startswith("best under SLO") for x in block)  # said once, by the answer
        assert "tok/s per kW" not in block[0] and "valid" not in block[0]
    # measured figures (timing-dependent) as #; labels, counts and words exactly
    check_part("answer_summary", "impossible_slo_dead_server", [re.sub(r"\d{1,3}(,\d{3})+|\d+\.\d+", "#", x)
                                                                  for x in _answer_block(p.stdout)],
               about="the answer block of `wattbench run -c 1,2,4,8 --slo ttft_p99=1ms` against the scripted server "
                     "exiting at its 21st request (tests/integration/test_answer_line.py), measured figures as #: "
                     "no level answers, and c=8 is named as not measured",
               regenerate="WATTBENCH_REGEN_GOLDEN=1 python -m pytest tests/integration/test_answer_line.py")
    # report --json says the same, and the history keeps no level as the run's headline
    j = json.loads(_wb("report", str(out), "--json", cwd=tmp_path).stdout)["runs"][0]
    assert j["answer"] == "answer: none — no level met the SLO ttft_p99=1ms (measured c=1,2,4)"
    assert j["headline"]["level"] is None and j["headline"]["value"] is None and j["not_measured"] == ["c=8"]
    show = _wb("history", "show", res.run_id, "--db", str(db), cwd=tmp_path, cols=160)
    assert show.returncode == 0 and "headline  no answer" in show.stdout, show.stdout


def test_optimize_with_an_impossible_slo_chooses_no_level_and_answers_none(tmp_path):
    with server("--ttft-ms", "20", "--itl-ms", "2") as s:
        p = _wb("run", "--target", s.base, "-c", "1,2,4", "-n", "8", "--optimize", "goodput_per_kw",
                "--slo", IMPOSSIBLE, *QUIET, "--no-register", "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = load_result(tmp_path / "run")
    assert res.optimize.best_value is None
    measured = ",".join(f"{v:g}" for v in sorted(set(res.optimize.measured_values)))
    for cols in (80, 160):
        block = _answer_block(p.stdout if cols == 80 else _report(tmp_path / "run", tmp_path, cols))
        assert block[0] == (f"answer: none — no level met the SLO ttft_p99=1ms (measured c={measured})"), block
        assert any(x.startswith("optimize goodput_per_kw: no level chosen") for x in block), block


def _table_levels(text: str) -> list[str]:
    """The first level table's level column, top to bottom."""
    return re.findall(r"^(c=\d+(?: re-measured)?)\s+(?:valid|warn|invalid)\b", text, flags=re.M)


@pytest.mark.skipif(not __import__("shutil").which("chromium"), reason="chromium not installed")
def test_optimize_answers_with_the_figure_it_chose_by_and_levels_print_by_load(tmp_path):
    """Four streams served at once (``--max-concurrent 4``): per kW rises to c=4 and stays flat
    above it, so the search re-measures two levels. The answer's figure is the mean of the chosen
    level's two measurements (read from result.json), as the optimize line says it; the tables,
    ``history show`` and the HTML list the levels by load."""
    from tests.fakes.browser import inspect_page

    out, db = tmp_path / "run", tmp_path / "h.db"
    with server("--ttft-ms", "20", "--itl-ms", "4", "--max-concurrent", "4") as s:
        p = _wb("run", "--target", s.base, "-c", "1,8,2,4", "-n", "16", "--optimize", "output_tokens_per_s_per_kw",
                *QUIET, "--db", str(db), "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = load_result(out)
    opt = res.optimize
    rec = opt.recommended_value
    assert rec is not None and rec in opt.remeasured
    both = [lv.energy["node"].output_tokens_per_s_per_kw for lv in res.levels if lv.load.target_concurrency == rec]
    assert len(both) == 2
    mean = sum(both) / 2
    from wattbench.core.numbers import fmt

    for cols in (80, 160):
        text = p.stdout if cols == 80 else _report(out, tmp_path, cols)
        block = _answer_block(text)
        assert block[0].startswith(f"answer: c={rec:g} — {fmt(mean)} output tok/s per kW (node, declared ±20%), "
                                   "mean of its 2 measurements"), block
        line = next(x for x in block if x.startswith("optimize: recommends"))
        best = f"c={opt.best_value:g}"
        assert f"best {best}: highest output_tokens_per_s_per_kw ({fmt(opt.best_score)})" in line, line
        # never "no other level is within noise of it" beside "within noise of it: <the best itself>"
        assert not ("no other level is within noise" in line and "within noise of it:" in line), line
        assert f"within noise of it: {best}" not in line and f"within noise of it: {best}," not in line
        labels = _table_levels(text)
        assert labels == sorted(labels, key=lambda x: (int(x.split("=")[1].split()[0]), x)), labels
        assert len(labels) == len(res.levels)
    show = _wb("history", "show", res.run_id, "--db", str(db), cwd=tmp_path, cols=160)
    rows = re.findall(r"^\s*concurrency=(\d+)", show.stdout, flags=re.M)
    assert rows == sorted(rows, key=int) and len(rows) == len(res.levels), show.stdout
    html = _wb("report", str(out), "--html", str(tmp_path / "r.html"), cwd=tmp_path)
    assert html.returncode == 0, html.stderr
    page = inspect_page(tmp_path / "r.html", evaluate={
        "big": "document.querySelector('.hero .big').textContent",
        "unit": "document.querySelector('.hero .unit').textContent",
        "ci": "document.querySelector('.hero .ci') && document.querySelector('.hero .ci').textContent",
        "rows": "Array.from(document.querySelectorAll('table.summary tbody tr td:first-child'))"
                ".map(td => td.textContent.trim())"})
    assert page.errors() == []
    assert page.values["big"] == fmt(mean) and page.values["ci"] == "mean of its 2 measurements"
    assert page.values["unit"].endswith("(node, declared ±20%)")  # a declared meter's own uncertainty
    rows = [r for r in page.values["rows"] if r.startswith("c=")]
    assert rows == sorted(rows, key=lambda x: (int(x.split("=")[1].split()[0]), x)) and len(rows) == len(res.levels)


def test_a_declared_meter_keeps_its_uncertainty_in_the_answer_and_its_idle_note_is_said_once(tmp_path):
    """``--sensor const:node=500`` is a declared figure, ±20% (``accounting/uncertainty.py``): the
    answer names it, and with ``--trials`` the range counts it beside the trials' CI (before: ``95% CI
    6,127–6,136 · valid``, ±0.07%, as if the meter were exact). The skipped idle baseline is one
    ``note``, said once (before: a warning, printed as a progress line and again in the summary)."""
    from wattbench.core.numbers import fmt, fmt_estimate

    out = tmp_path / "run"
    with server("--ttft-ms", "20", "--itl-ms", "2") as s:
        p = _wb("run", "--target", s.base, "-c", "1,2", "-n", "12", "--trials", "3", "--idle", "0.5",
                "--input-tokens", "16", "--output-tokens", "16", "--no-prime", "--no-history-check",
                "--no-calibrate-prompts", "--sensor", "const:node=500", "--no-register", "--out", str(out),
                cwd=tmp_path, cols=160)
    assert p.returncode == 0, p.stderr
    res = load_result(out)
    import math

    from wattbench.report.summary import headline  # which level answers (the most tok/s per kW)

    lv = headline(res).level
    be = lv.energy["node"]
    from wattbench.results.headline import trial_ci

    ci = trial_ci(lv, "output_tokens_per_s_per_kw", "node")  # the trials' mean and 95% CI, as stored
    assert ci.n == 3
    assert be.label == "declared" and be.uncertainty_pct == pytest.approx(20.0, abs=0.5)
    half = math.sqrt(((ci.high - ci.low) / 2) ** 2 + (be.uncertainty_pct / 100 * ci.mean) ** 2)
    pct = 100 * half / ci.mean
    assert pct > be.uncertainty_pct  # never narrower than the meter's own ±%
    for cols in (80, 160):
        text = _joined(p.stdout if cols == 160 else _report(out, tmp_path, cols))
        want = (f"(node, declared ±{fmt(be.uncertainty_pct, kind='effect')}%), mean of 3 trials (95% CI "
                f"{fmt_estimate(ci.mean, ci.low, ci.high)[1]} from the trials; "
                f"{fmt_estimate(ci.mean, ci.mean - half, ci.mean + half)[1]}, "
                f"±{fmt(pct, kind='effect')}%, with the meter's ±{fmt(be.uncertainty_pct, kind='effect')}%)")
        assert want in text, text[:600]
        assert text.count("no idle baseline") == 1 and "- no idle baseline" in text
        # levels of a second or two: the ML.ENERGY 30 s steady-window gate, a note named as the gate
        assert "- c=1,2: ML.ENERGY gate: steady window ≥ 30 s not met" in text
    assert "no idle baseline" not in p.stderr
    (f,) = [f for f in res.validity.findings if f.kind == "no_idle"]
    assert f.severity == "note" and not any("idle" in w for w in res.warnings)


def test_an_open_loops_history_check_is_judged_per_achieved_request_and_shows_both_rates(tmp_path):
    """r=20,40 against the scripted server: the history check measures r=20 again, and its arrivals
    achieve another rate than the first time. The check judges the figure per achieved request/s
    (from result.json: each measurement's tok/s per kW over its own achieved rate) and says both
    rates, in the summary at 80 columns and in ``--json``."""
    out = tmp_path / "run"
    with server("--ttft-ms", "10", "--itl-ms", "2") as s:
        p = _wb("run", "--target", s.base, "-r", "20,40", "--duration", "3", "--idle", "0", "--input-tokens", "16",
                "--output-tokens", "8", "--no-prime", "--no-calibrate-prompts", "--sensor", "const:node=500",
                "--no-register", "--no-html", "--json", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = load_result(out)
    hc = res.noise.history_check
    first = next(lv for lv in res.levels if lv.index == 0)
    rep = hc.repeat
    f_rate, r_rate = first.load.achieved_rate_rps, rep.load.achieved_rate_rps
    f_kw, r_kw = first.energy["node"].output_tokens_per_s_per_kw, rep.energy["node"].output_tokens_per_s_per_kw
    assert hc.first_rate_rps == pytest.approx(f_rate, rel=1e-9) and hc.repeat_rate_rps == pytest.approx(r_rate, rel=1e-9)
    assert hc.ratio == pytest.approx((r_kw / r_rate) / (f_kw / f_rate), rel=1e-9)
    j = json.loads(p.stdout)["noise"]["history_check"]
    assert j["first_rate_rps"] == pytest.approx(f_rate, rel=1e-9) and "per achieved request/s" in j["basis"]
    from wattbench.core.numbers import fmt

    text = _joined(_report(out, tmp_path, 80))
    rates = f"{fmt(f_rate)} then {fmt(r_rate)} req/s achieved"
    assert rates in text, text[:800]  # in the state line (within noise) or the check's own note

