"""``compare --at-slo``: each run at its level with the most goodput per kW that meets one SLO, and
each candidate's goodput-per-kW ratio to the baseline's (``throughput T× ÷ power P×``), judged by
``metrics/noise.judge``. A level's goodput under an SLO it did not carry is recomputed from its
request records (``slo_goodput``); a level is judged on the latency figure the table shows beside it
(the trials' mean).
"""

from __future__ import annotations

from typing import Callable, Iterable

from pydantic import BaseModel, Field

from wattbench.analysis.figures import ranked_figures, reported_figures
from wattbench.analysis.level_pairs import left_out_reason, short_key
from wattbench.analysis.ratios import HistorySpread, NoiseVerdict, figure_noise
from wattbench.core.errors import UserError
from wattbench.core.numbers import fmt_range, fmt_ratio
from wattbench.core.schema import LevelResult, RequestRecord, Result, SLOBound
from wattbench.metrics.noise import INCONCLUSIVE, judge
from wattbench.metrics.slo import SLO, goodput, parse_slos, run_slo_text
from wattbench.results.headline import level_key

# (result, level) -> the level's request records (to recompute goodput under another SLO), or None
RecordsOf = Callable[[Result, LevelResult], "list[RequestRecord] | None"]


class AtSLO(BaseModel):
    """``compare --at-slo``: each run at its level with the most goodput per kW meeting the SLO."""

    slo: str
    boundary: str | None = None
    levels: list[str | None] = Field(default_factory=list)  # per run: the level chosen (None: none meets)
    goodput_per_kw: list[float | None] = Field(default_factory=list)
    goodput_tokens_per_s: list[float | None] = Field(default_factory=list)
    avg_power_w: list[float | None] = Field(default_factory=list)
    ratio: list[float | None] = Field(default_factory=list)  # per candidate: goodput per kW ÷ the baseline's
    throughput_ratio: list[float | None] = Field(default_factory=list)
    power_ratio: list[float | None] = Field(default_factory=list)  # candidate power ÷ baseline power
    noise: list[NoiseVerdict | None] = Field(default_factory=list)
    # per run: the levels above its chosen one that missed the SLO, each "c=32 ttft_p99 599 ms > 500 ms"
    misses_above: list[list[str]] = Field(default_factory=list)
    lines: list[str] = Field(default_factory=list)  # the sentence (or the refusal), per candidate
    refused: str | None = None  # a run has no level meeting the SLO


def _slo_set(slos: Iterable[SLO | SLOBound]) -> frozenset[tuple[str, str, float]]:
    """SLOs (``metrics.slo.SLO`` or the stored ``SLOBound``) as a set of (metric, stat, bound)."""
    return frozenset((s.metric, s.stat, float(s.threshold_ms)) for s in slos)


def slo_goodput(result: Result, lv: LevelResult, slos: list[SLO], boundary: str,
                records: RecordsOf | None) -> tuple[float | None, float | None, float | None, str]:
    """A level's goodput under ``slos`` at ``boundary``: (goodput output tok/s, average power W,
    goodput tok/s per kW, basis), every figure of the window the level is read in (``select_window``)
    by the one rule (``ranked_figures``; ``metrics.slo.goodput_in_window``): the good share of the
    output tokens times the window's output tokens/s and tokens/s per kW. From the level's own
    goodput block when it was measured under these SLOs (its trial means, as the table), else with
    the share recomputed from its request records (``metrics/slo.goodput``); Nones when neither is
    there. A boundary without per-token figures (one that leaves out the devices doing the work) has
    no goodput per kW."""
    f = ranked_figures(lv, boundary, has_slo=True)
    power = f["avg_power_w"]
    gp = lv.goodput
    if gp is not None and gp.slos and _slo_set(gp.slos) == _slo_set(slos):
        return f["goodput_output_tokens_per_s"], power, f["goodput_per_kw"], "the run's own goodput"
    recs = records(result, lv) if records is not None else None
    dur = lv.window.duration_s if lv.window else None
    if not recs or not dur or not power:
        return None, power, None, ""
    share = goodput(recs, slos, dur).good_output_share
    if share is None:
        return None, power, None, ""
    tok, per_kw = f["output_tokens_per_s"], f["output_tokens_per_s_per_kw"]
    return (None if tok is None else share * tok, power, None if per_kw is None else share * per_kw,
            "recomputed from its requests")


def _meets(lv: LevelResult, slos: list[SLO]) -> tuple[bool, str]:
    """Whether a level meets every SLO as written (the level's stat ≤ the bound), and the first miss.
    The stat is the one the table quotes (``reported_figures``: the trials' mean with ``--trials``, not the
    last trial's), so a level is judged on the figure shown beside it."""
    h = reported_figures(lv, None)
    for s in slos:
        v = h.get(f"{s.metric}_{s.stat}_ms")
        if v is None:
            return False, f"{s.name} not measured"
        if v > s.threshold_ms:
            return False, f"{s.name} {v:,.0f} ms > {s.threshold_ms:g} ms"
    return True, ""


def _load(lv: LevelResult) -> float:
    """A level's offered load, to order one run's levels (concurrency or rate; a trace: 0)."""
    _, value = level_key(lv)
    return float(value) if value is not None else 0.0


def _where(letter: str, level: str, misses: list[str], differ: bool) -> str:
    """``A at c=8`` and, where the runs are taken at different levels, why this one is not higher:
    ``A at c=8 — c=32 missed ttft_p99 599 ms > 500 ms`` (at most two misses named)."""
    if not differ or not misses:
        return f"{letter} at {level}"
    more = f" and {len(misses) - 2} more" if len(misses) > 2 else ""
    return f"{letter} at {level} — {'; '.join(misses[:2])}{more}"


def compare_at_slo(results: list[Result], spec: str | None, boundary: str | None, history: HistorySpread | None,
                   records: RecordsOf | None, letters: list[str]) -> AtSLO | None:
    """Each run at its level with the most goodput per kW that meets the SLO ``spec`` (None: the
    SLO every run carries, when they carry the same one; no SLO: None), and each candidate's
    goodput-per-kW ratio to the baseline's, ``throughput T× ÷ power P×``, judged by
    ``metrics/noise.judge``. An explicit ``spec`` a run cannot meet is refused (UserError); an
    implied one says so in ``refused``."""
    explicit = spec is not None
    if spec is None:
        texts = [run_slo_text(r) for r in results]
        if not texts[0] or any(t is None or _slo_set(parse_slos(t)) != _slo_set(parse_slos(texts[0]))
                               for t in texts):
            return None
        spec = texts[0]
    slos = parse_slos(spec)
    if not slos:
        return None
    text = ",".join(str(s) for s in slos)
    out = AtSLO(slo=text, boundary=boundary)

    def refuse(msg: str) -> AtSLO:
        if explicit:
            raise UserError(msg)
        out.refused = msg
        out.lines.append(msg)
        return out

    if boundary is None:
        return refuse(f"at {text}: no power boundary common to the runs' measured levels, so no goodput per kW")
    chosen: list[tuple[LevelResult, float, float, float]] = []  # each run's (level, tok/s, W, per kW)
    missed: list[list[tuple[float, str]]] = []  # each run's levels that missed the SLO: (load, "c=32 why")
    for letter, r in zip(letters, results):
        best: tuple[LevelResult, float, float, float] | None = None
        misses: list[str] = []
        missed.append([])
        missing: list[str] = []
        for lv in r.levels:
            if left_out_reason(r.run_id, lv, boundary):
                continue
            ok, miss = _meets(lv, slos)
            if not ok:
                misses.append(f"{short_key(lv)} {miss}")
                missed[-1].append((_load(lv), f"{short_key(lv)} missed {miss}"))
                continue
            tok, power, per_kw, _ = slo_goodput(r, lv, slos, boundary, records)
            if per_kw is None:
                missing.append(short_key(lv))
                continue
            if best is None or per_kw > best[3]:
                best = (lv, tok or 0.0, power or 0.0, per_kw)
        if best is None:
            if missing:
                return refuse(f"at {text}: run {r.run_id} ({letter}) has no goodput under this SLO at "
                              f"{', '.join(missing)} and no requests.jsonl to recompute it from; give its run "
                              "directory, or run it with --slo " + text)
            return refuse(f"at {text}: no level of run {r.run_id} ({letter}) meets it ("
                          f"{'; '.join(misses[:3]) or 'no level measured'}); loosen the SLO or measure lower loads")
        chosen.append(best)
    base = chosen[0]
    out.levels = [short_key(c[0]) for c in chosen]
    out.goodput_tokens_per_s = [c[1] for c in chosen]
    out.avg_power_w = [c[2] for c in chosen]
    out.goodput_per_kw = [c[3] for c in chosen]
    out.misses_above = [[why for load, why in m if load > _load(c[0])] for m, c in zip(missed, chosen)]
    for i, c in enumerate(chosen[1:], 1):
        ratio = c[3] / base[3] if base[3] else None
        t = c[1] / base[1] if base[1] else None
        p = c[2] / base[2] if base[2] else None
        out.ratio.append(ratio)
        out.throughput_ratio.append(t)
        out.power_ratio.append(p)
        nv = None
        if ratio:
            nv = NoiseVerdict.of("goodput_per_kw", judge(
                ratio, figure_noise(results[0], base[0], "goodput_per_kw", boundary, None),
                figure_noise(results[i], c[0], "goodput_per_kw", boundary, None)))
        out.noise.append(nv)

        differ = out.levels[0] != out.levels[i]
        where = (f"({_where(letters[0], str(out.levels[0]), out.misses_above[0], differ)}, "
                 f"{_where(letters[i], str(out.levels[i]), out.misses_above[i], differ)})")
        parts = (f": throughput {fmt_ratio(t)} ÷ power {fmt_ratio(p)}" if t is not None and p else "")
        word = "" if nv is None else (f"; {nv.word}" + (f" ({nv.why})" if nv.word == INCONCLUSIVE
                                                         else f" ({fmt_range(nv.low, nv.high, kind='ratio')})"))
        out.lines.append(f"{letters[i]} gives {fmt_ratio(ratio)} the goodput per kW of {letters[0]} at {text}{parts} "
                         f"{where}{word}" if ratio is not None else
                         f"{letters[i]} vs {letters[0]} at {text}: no goodput per kW ratio (a zero figure)")
    return out
