"""The level tables every report shows, as ``Column``s of cells (one figure per cell): the summary's
level table (load, latency, SLO and goodput, power and efficiency per boundary), the parts of each
level in words, the wide requests-and-latency table of other load generators' figures, and the
trials' means and CIs. ``report/terminal.py`` packs these columns to the width; Markdown and HTML
render them as they are. Nothing here computes a figure."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from wattbench.report import format as F
from wattbench.core.numbers import MISSING, fmt, fmt_fraction_pct
from wattbench.metrics.efficiency import AIPERF_TWINS, aiperf_twins
from wattbench.results.headline import headline_boundary, parts, point, server_lower_bound, trial_ci, trial_entry
from wattbench.report.goodput import goodput_cells, has_goodput
from wattbench.report.labels import short_label
from wattbench.report.trials import (TRIAL_FIGURES, any_trials, trial_cells, trials_cell,
                                     trials_n_text)
from wattbench.core.schema import LevelResult, Result, TargetStats


@dataclass
class Column:
    """One column of a level table: a short header (lines joined by newlines) and one cell per level."""

    header: str
    cells: list[str]
    justify: Literal["left", "right"] = "right"
    kind: str = ""  # how a renderer may colour it: verdict | slo | ci | label:<measured|declared|estimate>
    styles: list[str] | None = None  # per-cell terminal style, when the column sets its own
    max_width: int | None = None  # longer cells fold onto more lines (the level label only)
    glue: bool = False  # kept in the same table as the column before it (a CI beside its mean, one
    # boundary's W, tok/s/kW, J/tok and J/total, one latency's five statistics)

    @property
    def width(self) -> int:
        w = max([len(x) for x in self.header.split("\n")] + [len(c) for c in self.cells])
        return min(w, self.max_width) if self.max_width else w


# Boundary names in table headers, where width is short (the full name is in the notes and docs).
SHORT_BOUNDARY = {"accelerator": "accel", "accelerator_memory": "accel-mem"}


def short_boundary(b: str) -> str:
    return SHORT_BOUNDARY.get(b, b)


def _boundary_label(result: Result, b: str) -> str:
    labels = {lv.energy[b].label for lv in result.levels if b in lv.energy}
    return "/".join(sorted(labels))


def out_tokens_per_s_cell(level: LevelResult) -> str:
    """A level's output tokens/s; ``–`` (not measured) where it completed no request and counted no
    token (``measure -- COMMAND`` with no token source): a zero there is no measurement."""
    if level.requests.completed == 0 and not level.throughput.output_tokens:
        return MISSING
    return fmt(level.throughput.output_tokens_per_s)


def level_columns(result: Result, with_latency: bool = True) -> list[Column]:
    """Every per-level figure of the summary, one figure per cell, in reading order: load, SLO and
    goodput (with ``--slo``), power and efficiency per boundary, then (``with_latency``) the latency
    (TTFT p50 and p99, TPOT p50: one group). The terminal leaves the latency out: its own
    requests-and-latency table (``serving_columns``) says it in full."""
    lvs = result.levels
    cols = [
        Column("verdict", [lv.validity.verdict for lv in lvs], "left", "verdict"),
        Column("ok/fail", [f"{lv.requests.completed}/{lv.requests.failed}" for lv in lvs]),
        Column("out\ntok/s", [out_tokens_per_s_cell(lv) for lv in lvs]),
    ]
    # the latency the figures were bought at, last and together: where the width splits the
    # table, the efficiency figures stay in the first one
    latency = [
        Column("TTFT\np50 ms", [fmt(lv.latency.ttft_ms.p50) for lv in lvs]),
        Column("TTFT\np99 ms", [fmt(lv.latency.ttft_ms.p99) for lv in lvs], glue=True),
        Column("TPOT\np50 ms", [fmt(lv.latency.tpot_ms.p50) for lv in lvs], glue=True),
    ]
    if has_goodput(result):
        g = [goodput_cells(lv) for lv in lvs]
        bs = {x.boundary for x in g if x.boundary}
        where = f"\n{short_boundary(bs.pop())}" if len(bs) == 1 else ""
        cols += [
            Column("SLO", [x.slo for x in g], "left", "slo"),
            Column("met\nSLO", [x.met_pct for x in g]),
            Column("goodput\ntok/s", [x.goodput_tok_s for x in g]),
            Column("goodput\ntok/s/kW" + where, [x.goodput_per_kw for x in g]),
        ]
    for b in F.result_boundaries(result):
        label = _boundary_label(result, b)
        sb = short_boundary(b)

        def cells(attr: str, b: str = b) -> list[str]:  # an estimate's figures at its ±%'s digits
            return [F.energy_fmt(lv.energy[b], getattr(lv.energy[b], attr)) if b in lv.energy else MISSING
                    for lv in lvs]

        cols.append(Column(f"W\n{sb}\n{label}", cells("avg_power_w"), kind=f"label:{label}"))
        if F.has_per_token(result, b):
            cols += [
                Column(f"tok/s/kW\n{sb}\n{label}", cells("output_tokens_per_s_per_kw"), kind=f"label:{label}"),
                Column(f"J/tok\n{sb}\n{label}", cells("j_per_output_token"), kind=f"label:{label}", glue=True),
                # J per total (input + output) token, InferenceX's figure, beside AIPerf's per output token
                Column(f"J/total\n{sb}\n{label}", cells("j_per_token"), kind=f"label:{label}", glue=True),
            ]
        else:  # a part (the HBM rail; the host of a GPU server): its share, no per-token figure
            shares = [part_share(lv, b) for lv in lvs]
            ofs = {o for _, o in shares if o}
            if ofs:
                of = short_boundary(ofs.pop()) if len(ofs) == 1 else "whole"
                cols.append(Column(f"share\n{sb}\nof {of}", [fmt_fraction_pct(x) if x is not None else MISSING
                                                           for x, _ in shares], kind=f"label:{label}", glue=True))
    return cols + latency if with_latency else cols


def _host_port(url: str) -> tuple[str, int | None]:
    try:
        u = urlsplit(url)
        host = u.hostname or url
        return (f"[{host}]" if ":" in host else host), u.port
    except ValueError:
        return "target", None


def target_name(url: str, others: list[str] | None = None) -> str:
    """A replica as its rows name it: ``↳ host:port`` (never the URL's credentials or path). Among
    ``others`` (every replica of the level), only what tells them apart, so a row stays one line at
    80 columns: ``↳ :8001`` where all run on one host, ``↳ gpu-a`` where all use one port (a host's
    first name where that is unique)."""
    host, port = _host_port(url)
    where = [_host_port(x) for x in (others or [url])]
    hosts, ports = {h for h, _ in where}, {p for _, p in where}
    if len(where) > 1 and len(hosts) == 1 and port is not None:
        return f"↳ :{port}"
    if len(where) > 1 and len(ports) == 1 and not host.startswith("["):
        first = {h.split(".")[0] for h, _ in where}
        short = host.split(".")[0] if len(first) == len(hosts) and not host.replace(".", "").isdigit() else host
        return f"↳ {short}"
    return "↳ " + (f"{host}:{port}" if port else host)


def target_cells(stats: TargetStats) -> dict[str, str]:
    """One replica's figures by the level tables' headers (``core.schema.TargetStats``: its
    requests, latency and throughput; its energy is the level's, not split by target)."""
    out = {"ok/fail": f"{stats.requests.completed}/{stats.requests.failed}",
           "out\ntok/s": fmt(stats.throughput.output_tokens_per_s),
           "TTFT\np50 ms": fmt(stats.latency.ttft_ms.p50), "TTFT\np99 ms": fmt(stats.latency.ttft_ms.p99),
           "TPOT\np50 ms": fmt(stats.latency.tpot_ms.p50), "req/s": fmt(stats.throughput.requests_per_s)}
    for kind in SERVING_LATENCY:
        st = getattr(stats.latency, f"{kind}_ms")
        for stat in SERVING_STATS:
            out[f"{kind.upper()}\n{stat}"] = fmt(getattr(st, stat))
    return out


def with_target_rows(result: Result, key: Column, cols: list[Column]) -> tuple[Column, list[Column], list[bool]]:
    """The level table with each replica's row under its level's total (a level driven against
    several ``--target``s, ``LevelResult.per_target``): its requests, throughput and latency; the
    cells it has no figure of (energy, SLO) left blank. Returns the key, the columns and which rows
    are a replica's."""
    rows: list[tuple[int, str | None]] = []  # (level position, target url or None for the total)
    for i, lv in enumerate(result.levels):
        rows.append((i, None))
        if len(lv.per_target) > 1:
            rows += [(i, url) for url in lv.per_target]
    if len(rows) == len(result.levels):
        return key, cols, [False] * len(rows)

    def cell(c: Column, i: int, url: str | None) -> str:
        if url is None:
            return c.cells[i]
        return target_cells(result.levels[i].per_target[url]).get(c.header, "")

    new_key = replace(key, cells=[key.cells[i] if url is None else target_name(url, list(result.levels[i].per_target))
                                  for i, url in rows],
                      styles=None if key.styles is None else
                      [key.styles[i] if url is None else "dim" for i, url in rows])
    new_cols = [replace(c, cells=[cell(c, i, url) for i, url in rows],
                        styles=None if c.styles is None else [c.styles[i] if url is None else "dim" for i, url in rows])
                for c in cols]
    return new_key, new_cols, [url is not None for _, url in rows]


def level_rows(result: Result) -> tuple[list[str], list[Column]]:
    """The level table every report shows: the level labels and ``level_columns``, with each
    replica's row under its level's total (``with_target_rows``)."""
    key = Column("level", [short_label(lv) for lv in result.levels], "left")
    tkey, cols, _ = with_target_rows(result, key, level_columns(result))
    return tkey.cells, cols


def part_share(level: LevelResult, boundary: str) -> tuple[float | None, str | None]:
    """(share, of what) of a part at one level (``results.headline.parts``)."""
    for p in parts(level):
        if p.boundary == boundary:
            return p.share, p.of
    return None, None


def part_lines(result: Result) -> list[str]:
    """The parts of each level in words, after the tables: ``c=8: memory (accel-mem) 59.5 W, 22% of
    the accelerator; host 210 W (estimate; not in a measured whole)``, and the metered server lower
    bound where there is one. Nothing for a level without parts."""
    out = []
    for lv in result.levels:
        said = []
        for p in parts(lv):
            if p.boundary == "accelerator_memory" and lv.power_split is not None:
                continue  # where the board's watts went has its own line
            lab = lv.energy[p.boundary].label
            txt = f"{p.boundary} {fmt(p.avg_power_w)} W" + ("" if lab == "measured" else f" ({lab})")
            if p.share is not None:
                txt += f", {fmt_fraction_pct(p.share)} of {p.of}"
            said.append(txt)
        lb = server_lower_bound(lv)
        if lb is not None:
            watts, used = lb
            said.append(f"server ≥ {fmt(watts)} W ({' + '.join(used)}, a lower bound: fans and PSU losses "
                        "are not metered)")
        if said:
            out.append(f"{short_label(lv)}: parts — " + "; ".join(said))
    return out


# The figures users of `vllm bench serve`, AIPerf and GuideLLM read: request rate, the
# achieved load, and every latency as mean, p50, p90, p95, p99. One list for the terminal's table,
# `wattbench report --json` and the CSV (report/csv.py names its columns from it).
SERVING_LATENCY = ("ttft", "tpot", "itl", "e2e")
SERVING_STATS = ("mean", "p50", "p90", "p95", "p99")


def serving_figures(level: LevelResult) -> dict[str, float | None]:
    """A level's request rate, achieved load and latency statistics, as stored (the last trial's with
    ``--trials``): ``requests_per_s``, ``output_tokens_per_s``, ``total_tokens_per_s``,
    ``achieved_rate_rps`` (open loop), ``mean_in_flight`` (the achieved concurrency), and
    ``<ttft|tpot|itl|e2e>_<mean|p50|p90|p95|p99>_ms``."""
    t, ld = level.throughput, level.load
    out: dict[str, float | None] = {
        "requests_per_s": t.requests_per_s, "output_tokens_per_s": t.output_tokens_per_s,
        "total_tokens_per_s": t.total_tokens_per_s, "achieved_rate_rps": ld.achieved_rate_rps,
        "mean_in_flight": ld.mean_in_flight,
    }
    for kind in SERVING_LATENCY:
        st = getattr(level.latency, f"{kind}_ms")
        for stat in SERVING_STATS:
            out[f"{kind}_{stat}_ms"] = getattr(st, stat)
    return out


def level_json(level: LevelResult) -> dict[str, Any]:
    """A level's figures for ``report --json``, one basis throughout: ``figures`` are what the
    answer quotes — with ``--trials``, each the trials' mean (``results.headline.point``) and its 95%
    interval in ``ci95`` (``[low, high]``); a figure no trial mean exists for (the achieved load) is
    then not in ``figures`` but under its trial. ``trials`` lists each trial's own figures (from
    1, as the run prints it; ``measured`` False for a trial that measured nothing). A level measured
    once has its own figures and one trial."""
    own = serving_figures(level)
    block = level.trials
    if block is None or block.n <= 1:
        return {"figures": own, "ci95": {}, "aiperf": aiperf_json(level),
                "trials": [{"trial": 1, "measured": True, "figures": own}]}
    figures: dict[str, float | None] = {}
    ci95: dict[str, list[float]] = {}
    for name, v in own.items():
        if trial_entry(level, name, None) is None:
            continue
        figures[name] = point(level, name, None, v)
        ci = trial_ci(level, name, None)
        if ci is not None:
            ci95[name] = [ci.low, ci.high]
    dead = {u.trial for u in block.unmeasured}
    measured = [k for k in range(1, block.n + 1) if k not in dead]
    last = (level.trial + 1) if level.trial is not None else (measured[-1] if measured else block.n)
    trials: list[dict[str, Any]] = []
    for k in range(1, block.n + 1):
        if k in dead:
            trials.append({"trial": k, "measured": False, "figures": {}})
        elif k == last:
            trials.append({"trial": k, "measured": True, "figures": own})
        else:
            i = measured.index(k)
            mine: dict[str, float | None] = {}
            for name in own:
                entry = trial_entry(level, name, None)
                if entry is not None and i < len(entry.values):
                    mine[name] = entry.values[i]
            trials.append({"trial": k, "measured": True, "figures": mine})
    return {"figures": figures, "ci95": ci95, "aiperf": aiperf_json(level), "trials": trials}


def aiperf_json(level: LevelResult) -> dict[str, Any]:
    """The level's efficiency at its headline boundary under NVIDIA AIPerf's names and units
    (``metrics.efficiency.aiperf_twins``), each figure as the answer quotes it (the trials' mean
    with ``--trials``); the per-W request rates for a level measured once only. ``boundary`` names
    the boundary (AIPerf's own figures are the GPUs': wattbench's ``accelerator``)."""
    b = headline_boundary(level)
    be = level.energy.get(b) if b else None
    if be is None:
        return {"boundary": None, **{name: None for name in AIPERF_TWINS}}
    once = level.trials is None or level.trials.n <= 1
    good = level.goodput.requests_per_s if (level.goodput is not None and once) else None
    return {"boundary": b, **aiperf_twins(
        j_per_output_token=point(level, "j_per_output_token", b, be.j_per_output_token),
        j_per_total_token=point(level, "j_per_token", b, be.j_per_token),
        output_tokens_per_s_per_kw=point(level, "output_tokens_per_s_per_kw", b, be.output_tokens_per_s_per_kw),
        requests_per_s=level.throughput.requests_per_s if once else None,
        good_requests_per_s=good, avg_power_w=be.avg_power_w)}


# the statistics the 80-column summary shows of each latency (those `vllm bench serve` prints by
# default: mean, median, p99); from 160 columns, all of SERVING_STATS
SERVING_STATS_NARROW = ("mean", "p50", "p99")


def serving_columns(result: Result, stats: tuple[str, ...] = SERVING_STATS) -> list[Column]:
    """The requests-and-latency table (``serving_figures``): the window's length in seconds, the
    completed requests per second, the load achieved (an open loop's asked and sent requests/s, a
    closed loop's mean requests in flight), then TTFT, TPOT, ITL and E2E in ms, each as ``stats``
    (a latency's statistics stay in one table)."""
    lvs = result.levels
    figs = [serving_figures(lv) for lv in lvs]
    cols = [Column("window\ns", [fmt(lv.throughput.duration_s) if lv.throughput.duration_s else MISSING
                                  for lv in lvs]),
            Column("req/s", [fmt(f["requests_per_s"]) for f in figs])]
    if any(lv.load.mode == "rate" for lv in lvs):  # the arrivals asked for and those sent
        cols += [Column("asked\nreq/s", [("inf" if lv.load.target_rate_rps == float("inf") else
                                           fmt(lv.load.target_rate_rps, kind="load"))
                                          if lv.load.mode == "rate" and lv.load.target_rate_rps is not None
                                          else MISSING for lv in lvs]),
                 Column("sent\nreq/s", [fmt(f["achieved_rate_rps"], kind="load") if lv.load.mode == "rate"
                                         else MISSING for lv, f in zip(lvs, figs)], glue=True)]
    if any(lv.load.mode != "rate" for lv in lvs):  # what a closed loop achieved: requests in flight
        cols.append(Column("in\nflight", [fmt(f["mean_in_flight"], kind="load") if lv.load.mode != "rate"
                                           else MISSING for lv, f in zip(lvs, figs)]))
    for kind in SERVING_LATENCY:  # one latency's statistics stay in one table
        for i, stat in enumerate(stats):
            cols.append(Column(f"{kind.upper()}\n{stat}", [fmt(f[f"{kind}_{stat}_ms"]) for f in figs], glue=i > 0))
    return cols


def serving_title(result: Result) -> str:
    # with trials, the table above already says its means and CIs are below: the short form here
    return "requests, and latency in ms" + (f" — last of {trials_n_text(result)}" if any_trials(result) else "")


def trial_columns(result: Result) -> list[Column]:
    """Mean and 95% CI of each headline figure over trials: two columns per figure."""
    lvs = result.levels
    per_level = [{c.name: c for c in trial_cells(lv)} for lv in lvs]
    names = [t for _, t, _ in TRIAL_FIGURES if any(t in d for d in per_level)]
    cols = [Column("trials", [trials_cell(lv) or MISSING for lv in lvs])]
    for name in names:
        head = name.replace(" ", "\n", 1) if len(name) > 8 else name
        cols.append(Column(f"{head}\nmean", [(d[name].mean if name in d else MISSING) for d in per_level]))
        cols.append(Column("95% CI", [d[name].ci if name in d else MISSING for d in per_level], kind="ci",
                           glue=True))  # never a headless CI in the next table
    return cols
