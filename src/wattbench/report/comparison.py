"""Text of ``compare``, ``regress`` and ``history noise``: the answer lines, the check lines and a
configuration's run-to-run noise (the library decides; this only words it)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wattbench.core.numbers import fmt, fmt_fraction_pct, fmt_range
from wattbench.core.numbers import fmt_estimate, fmt_fraction_pct as pct, fmt_ratio, MISSING
from wattbench.metrics.figure_noise import MAX_BOUND, MIN_DF, MIN_HISTORY_RUNS, ZERO_REL
from wattbench.metrics.noise import INCONCLUSIVE, judge
from wattbench.report.notes import count_text, verdict_text
from wattbench.results.configuration import describe

if TYPE_CHECKING:
    from wattbench.analysis.compare import Comparison
    from wattbench.analysis.comparability import Incomparability
    from wattbench.analysis.diagnose import Diagnosis
    from wattbench.analysis.regress import RegressReport
    from wattbench.results.agreement import Agreement
    from wattbench.results.store_noise import Spread
    from wattbench.core.schema import Result


def level_text(load: dict[str, Any]) -> str:
    """``c=16`` / ``r=2/s`` from a configuration's ``load``."""
    v = load.get("value")
    if load.get("mode") == "concurrency" and v is not None:
        return f"c={v:g}"
    if load.get("mode") == "rate" and v is not None:
        return f"r={v:g}/s"
    return str(load.get("mode") or "level")


def noise_lines(sp: Spread) -> list[str]:
    """``history noise`` for one configuration (``results.store_noise.Spread``): the figure, its
    noise basis in the sentence ``compare`` and ``regress`` print for it (``Spread.text``: runs, sd,
    df, key), every change point, one more run's bound (or why it is inconclusive: ``judge``'s why
    and what would settle it)."""
    out = [describe(sp.config)]
    name = "tok/s/kW" if sp.figure.startswith("output_tokens_per_s_per_kw") else "out tok/s"
    segs = sp.segment_runs or [sp.runs]
    now = f"mean {fmt(sp.mean)}" if len(segs) == 1 else f"now {fmt(sp.mean)} (last {segs[-1]} run{'s' if segs[-1] != 1 else ''})"
    out.append(f"  {name} {now}, range {fmt_range(sp.low, sp.high)}")
    out.append(f"  noise: {sp.text()}")
    lv = level_text(sp.config.get("load") or {})
    if sp.series is not None:
        for cp in sp.series.change_points:  # two lines: a run id is 22 characters, a line 80
            out.append(f"  {cp.text(lv, why=False)}")
            out.append(f"    ({cp.beyond()}; not folded into the spread)")
    if len(segs) > 1:
        out.append(f"  the spread is pooled within the {len(segs)} segments, never across a change")
    fn = sp.noise()
    jd = judge(1.0, fn, fn)
    if fn is not None and fn.rel_half_width <= MAX_BOUND and jd.word != INCONCLUSIVE:
        out.append(f"  one more run within ±{fmt_fraction_pct(fn.rel_half_width)} of the mean (95%)")
    elif fn is not None and fn.rel_half_width <= ZERO_REL:
        out.append("  verdicts on it are inconclusive: its runs gave one figure (sd 0%), which measures no")
        out.append("  noise (a declared or estimated power?): a meter, or --trials of a figure that varies")
    elif fn is not None:
        short = (f"{fn.dof()} df" if (fn.dof() or 0) < MIN_DF else f"over ±{fmt(MAX_BOUND * 100, kind='effect')}%")
        out.append(f"  one more run within ±{fmt_fraction_pct(fn.rel_half_width)} (95%): too wide to judge by ({short})")
        out.append("  verdicts on it are inconclusive: more runs, longer levels or --trials")
    else:
        out.append(f"  noise unknown: {MIN_HISTORY_RUNS}+ runs of one configuration ({MIN_DF} df) give where one")
        out.append("  more run falls")
    return out


# ---------------------------------------------------------------- compare

FIGURE_LABELS = {
    "output_tokens_per_s": "output tok/s",
    "avg_power_w": "avg power W",
    "output_tokens_per_s_per_kw": "tok/s per kW",
    "j_per_output_token": "J / output token",
    "ttft_p50_ms": "TTFT p50 ms",
    "ttft_p99_ms": "TTFT p99 ms",
    "tpot_p50_ms": "TPOT p50 ms",
    "tpot_p99_ms": "TPOT p99 ms",
    "goodput_rps": "goodput req/s",
    "goodput_per_kw": "goodput tok/s per kW",
    "failed_pct": "failed %",
}


def cell(v: float | None, ci: Sequence[float] | None = None, base: float | None = None) -> str:
    """A figure in the report's number format, its trials' CI, and its ratio to the baseline
    (candidate ÷ baseline, the one direction of every ratio on the screen)."""
    if v is None:
        return MISSING
    if ci:
        mean, iv = fmt_estimate(v, ci[0], ci[1])  # the figure at its interval's precision
        s = f"{mean} [{iv}]"
    else:
        s = fmt(v)
    if base is not None and base != 0:
        s += f" ({fmt_ratio(v / base)})"
    return s


def answer_lines(cmp: Comparison) -> list[str]:
    """The lines ``compare`` leads with: who A, B … are, one answer per level pair, the SLO answer."""
    out = [" · ".join(f"{letter} = {'baseline ' if i == 0 else ''}{rid}"
                      for i, (letter, rid) in enumerate(zip(cmp.letters, cmp.run_ids)))]
    for row in cmp.levels:
        out.extend(row.answers)
    if cmp.at_slo is not None:
        out.extend(cmp.at_slo.lines)
    return out


BASIS_LABELS = {"output_tokens_per_s_per_kw": "per kW", "j_per_output_token": "J/output token",
                "output_tokens_per_s": "throughput", "avg_power_w": "power", "goodput_per_kw": "goodput per kW"}


def basis_lines(bases: dict[str, str]) -> list[str]:
    """Each judged figure's noise basis once (``analysis/ratios.noise_bases``): ``noise of per kW:
    history of key 1e41ee5fdb9cdb02: 4 runs, sd 1.4%, 3 df`` — for a history, the sentence ``history
    noise`` prints for the same configuration. J/output token shares per kW's basis (the same noise on
    the log scale): said with it, not twice."""
    out: list[str] = []
    said: dict[str, list[str]] = {}
    for fig, text in bases.items():
        said.setdefault(text, []).append(BASIS_LABELS.get(fig, fig))
    for text, names in said.items():
        out.append(f"noise of {', '.join(names)}: {text}")
    return out


def render_findings(console: Console, findings: Sequence[Diagnosis], incomparable: Iterable[Incomparability] = (),
                    warnings: Iterable[str] = ()) -> None:
    if incomparable:
        console.print("[bold yellow]compared with --force despite:[/bold yellow]")
        for p in incomparable:
            console.print(f"  [yellow]! {escape(p.line())}[/yellow]")
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    if findings:
        console.print("[bold]diagnosis[/bold]")
        colour = {"invalid": "red", "warn": "yellow", "note": "cyan"}
        for f in findings:
            where = escape(f" [{f.level}]") if f.level else ""
            console.print(f"  [{colour.get(f.severity, 'white')}]{f.severity}[/] {f.id}{where}: {escape(f.message)}")


def render_compare(cmp: Comparison, agreement: Agreement | None = None, results: Sequence[Result] | None = None,
                   console: Console | None = None) -> None:
    """``compare`` on a terminal: each run's verdict, the answer lines, then the tables."""
    c = console or Console(highlight=False)
    for i, r in enumerate(results or []):  # one verdict line per run
        role = "baseline" if i == 0 else "run"

        counted = count_text(r)  # the summary's and the HTML report's count
        tail = f" · {counted} (wattbench report --notes)" if counted else ""
        c.print(escape(f"{role} {r.run_id}: {verdict_text(r)}{tail}"), soft_wrap=True)
    for line in answer_lines(cmp):
        c.print(escape(line), soft_wrap=True)
    for line in basis_lines(cmp.noise_bases):
        c.print(escape(line), soft_wrap=True)
    if cmp.todo:
        c.print(escape(f"inconclusive: {cmp.todo}"), style="dim", soft_wrap=True)
    for row in cmp.levels:
        if row.left_out:
            continue
        where = cmp.boundary or "no energy measured"
        t = Table(title=escape(f"{row.key} @ {where}"), title_justify="left")
        t.add_column("figure")
        for rid, verdict in zip(cmp.run_ids, row.verdicts):  # A, B …: the legend line above
            mark = "" if verdict == "valid" else f" ({verdict})"
            # folded, never cut: two runs of one minute differ only in the id's last characters
            t.add_column(escape(f"{rid}{mark}"), justify="right", overflow="fold")
        for key, name in FIGURE_LABELS.items():
            vals = [f.get(key) for f in row.figures]
            if all(v is None for v in vals):
                continue
            cells = [cell(v, ci.get(key), vals[0] if i else None)
                     for i, (v, ci) in enumerate(zip(vals, row.cis or [{}] * len(vals)))]
            t.add_row(name, *cells)
        c.print(t)
        for d in row.decompositions:
            c.print(escape(f"  {d.candidate} vs {cmp.run_ids[0]}: {d.text()}"))
    if cmp.unmatched:
        c.print("[dim]unmatched levels: " + escape("; ".join(cmp.unmatched)) + "[/dim]")
    render_findings(c, cmp.findings, cmp.incomparable, cmp.warnings)
    if agreement is not None:
        m = agreement.metrics

        c.print("[bold]output agreement[/bold] " + escape(
            f"({agreement.run_id}): exact match {pct(m.exact_match_rate)}, token agreement "
            f"{pct(m.token_agreement)} ({m.token_basis}), structured valid A {pct(m.structured_valid_rate_a)} / "
            f"B {pct(m.structured_valid_rate_b)}"))


# ---------------------------------------------------------------- regress


def render_regress(rep: RegressReport, console: Console | None = None) -> None:
    """``regress`` on a terminal: compare's answer line for each pair, every check one line (``ok``,
    ``pass`` within noise, ``FAIL``, ``inconclusive`` with why and what would settle it, ``skip``),
    each level left out one line, what to do about the inconclusive checks once, the tally."""
    c = console or Console(highlight=False, soft_wrap=True)
    c.print(escape(f"run = {rep.run_id} · baseline = {rep.baseline_id}"))
    for line in rep.answers:
        c.print(escape(line))
    for lo in rep.left_out:
        c.print(f"[red]FAIL[/red] {escape(lo.line())}")
    for o in rep.outcomes:  # every check, one line each: the passing ones too
        if o.status == "fail":
            c.print(f"[red]FAIL[/red] {escape(o.message)}")
        elif o.status == "skip":
            c.print(f"[dim]skip {escape(o.message)}[/dim]")
        elif o.status == "inconclusive":
            c.print(f"[yellow]inconclusive[/yellow] {escape(o.message)}")
        elif o.within_noise:  # a pass inside the noise says so
            c.print(f"[cyan]pass[/cyan] {escape(o.message)}")
        else:
            c.print(f"[green]ok[/green]   {escape(o.message)}")
    for line in basis_lines(rep.noise_bases):
        c.print(escape(line))
    if rep.todo:
        c.print(f"[dim]{escape('inconclusive: ' + rep.todo)}[/dim]")
    held = sum(1 for o in rep.outcomes if o.status == "pass")
    failed = len(rep.failed) + len(rep.left_out)
    unsure = len(rep.inconclusive)
    if rep.verdict == "pass":
        verdict = "[green]all checks hold[/green]"
    elif rep.verdict == "fail":
        verdict = f"[red]{failed} failed[/red]" + (f", {unsure} inconclusive" if unsure else "")
    else:
        verdict = (f"[yellow]{unsure} inconclusive[/yellow]: none failed, but the noise cannot show "
                   f"{'it holds' if unsure == 1 else 'they hold'}")
    c.print(escape(f"{rep.run_id} vs baseline {rep.baseline_id} @ {rep.boundary or 'no common boundary'}: "
                   f"{held} held, ") + verdict)
    render_findings(c, rep.findings, rep.incomparable if rep.forced else
                    [p for p in rep.incomparable if p.category != "setup"])
