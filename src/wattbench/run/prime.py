"""Measuring from a known state: the priming phase and the history check (issue 24).

On the H200 the same configuration at the same load read 16–34% apart depending on what the server
had served before (docs/validation.md, "The server's history"). Two rules make the state a run
measures from deliberate and show when it moved anyway:

**Priming** (on by default, ``--no-prime`` to skip): before the first level, the run sends load at
its *largest* level — the largest concurrency (or rate) of a ladder, the top of an ``--optimize``
ladder, the ``--sweep auto`` maximum — so every batch shape, cache size and allocation the run will
need has been seen before anything is measured. Closed loop at concurrency C: ``2·C`` requests
(the batch fills to C, drains, fills again; at least ``PRIME_MIN_REQUESTS``); open loop at rate R:
``R · min(PRIME_RATE_S, --duration)`` requests, no more than a level's ``--num-requests`` and at
least ``PRIME_MIN_REQUESTS``, capped in flight by ``--max-concurrency`` as the levels are
(``rate inf``: a level's requests, all at once). ``--prime-requests N`` sets the count. The workload's own shape (its length
distributions) is used, but requests from far past any the run measures (``run/level.PRIME_START``),
so no measured prompt is in a prefix cache because of the priming. Nothing of it is measured or
accounted: ``Result.noise.priming`` records the load, the requests sent and completed and its
duration. A trace workload is not primed (its load is the trace's own), said in the record's
absence and in the run's warnings.

**The history check** (on by default with two or more levels, ``--no-history-check`` to skip):
after the last level, the run's first level is measured once more (fresh requests, a quarter of
its size: ``REPEAT_FRACTION`` of its measured requests, at least ``PRIME_MIN_REQUESTS`` but no more
than it had, or of its ``--duration``, at least ``REPEAT_MIN_S``; the noise allowed follows each
window's length: a history effect worth a warning — issue 24's was 16–34% — is many times the
noise of a short level, and the README's first command stays near its time) and its
headline figure (tokens/s per kW at the headline boundary, else output tokens/s) compared
with the first measurement by ``metrics/noise.repeat_check``: a difference beyond noise is a
``warn`` on the run with both figures. With interleaved ``--trials`` the first level's own trials
are the repeat: its first trial (right after priming) is checked against the others.
"""

from __future__ import annotations

import math

from wattbench.config import RunConfig
from wattbench.metrics.noise import INCONCLUSIVE, repeat_check
from wattbench.report.labels import short_label_text
from wattbench.report.numbers import fmt
from wattbench.results.configuration import level_figure
from wattbench.results.schema import HistoryCheck, LevelResult, PrimingPhase

PRIME_MIN_REQUESTS = 8
PRIME_ROUNDS = 2
PRIME_RATE_S = 10.0
REPEAT_FRACTION = 0.25  # the history check's repeat: a quarter of the first level
REPEAT_MIN_S = 5.0


def repeat_size(cfg: RunConfig, first: LevelResult) -> tuple[int | None, float | None]:
    """``(num_requests, duration_s)`` of the history check's repeat of ``first`` (module docstring)."""
    if cfg.duration_s is not None:
        return None, max(REPEAT_MIN_S, REPEAT_FRACTION * cfg.duration_s)
    done = first.requests.completed + first.requests.failed
    return max(min(PRIME_MIN_REQUESTS, done), int(math.ceil(REPEAT_FRACTION * done))), None


def priming_level(cfg: RunConfig, candidates: list[float] | None = None,
                  search_max: int = 256) -> tuple[str, float, int, str] | None:
    """``(mode, value, requests, reason)`` of the run's priming load, or None with ``--no-prime``.
    ``candidates``: the ``--optimize`` ladder when searching; ``search_max``: the top of a search
    without ``--max-concurrency`` (``run/plan.SEARCH_MAX_CONCURRENCY``)."""
    if not cfg.prime:
        return None
    if cfg.rate:
        rate = max(cfg.rate)
        if math.isinf(rate):
            n = cfg.prime_requests or max(PRIME_MIN_REQUESTS, cfg.num_requests or PRIME_MIN_REQUESTS)
            return "rate", rate, n, "the run's largest rate (inf: every request at once)"
        secs = min(PRIME_RATE_S, cfg.duration_s or PRIME_RATE_S)
        n = int(math.ceil(rate * secs))
        if cfg.num_requests:
            n = min(n, cfg.num_requests)  # never more than a level of the run sends
        n = cfg.prime_requests or max(PRIME_MIN_REQUESTS, n)
        return "rate", rate, n, f"the run's largest rate, for about {n / rate:.3g} s"
    if cfg.sweep:
        top = cfg.max_concurrency or search_max
        why = "the top of the --sweep auto range"
    elif cfg.optimize:
        top = max(candidates) if candidates else (cfg.max_concurrency or search_max)
        why = "the top of the --optimize ladder"
    else:
        top = max(c for _, c in cfg.levels())
        why = "the run's largest concurrency"
    n = cfg.prime_requests or max(PRIME_MIN_REQUESTS, PRIME_ROUNDS * int(top))
    return "concurrency", int(top), n, f"{why}, {PRIME_ROUNDS} rounds of its streams"


def unmeasurable(cfg: RunConfig, priming: PrimingPhase | None) -> str | None:
    """Why the run's largest level cannot measure, from the priming's own requests (one line with
    the ``--duration`` to give), or None.

    A closed-loop level measures the requests its streams send after the warm-up: each stream's
    first request goes out at once (a warm-up one under ``--warmup S``), its next when that one
    ends, one request's time later. The priming ran at the run's largest level and measured that
    time (``PrimingPhase.e2e_p50_s``, the median of its requests). Where ``--warmup`` + ``--duration``
    is shorter than it, no stream sends a request inside the measured part: the level would measure
    nothing (on the H200: 16 s per request at c=64, 3 s + 12 s given). The ``--duration`` to give
    lets one full round of the streams be sent and finish after the warm-up: ``2·E2E − warm-up``.

    Only a ``--duration`` the user gave can be too short: a level sized by a request count
    (``--num-requests``, or wattbench's default) always measures. It is refused rather than
    lengthened: the duration is what the user asked for (and what runs compared with it used).
    An open loop measures every request scheduled in its window whatever their length."""
    if priming is None or priming.e2e_p50_s is None or priming.mode != "concurrency":
        return None
    d, w = cfg.duration_s, cfg.warmup_s or 0.0
    if d is None or w <= 0 or w + d >= priming.e2e_p50_s:
        return None
    e2e = priming.e2e_p50_s
    give = max(math.ceil(2 * e2e - w), math.floor(e2e - w) + 1)
    lbl = short_label_text(priming.label) if priming.label else f"c={priming.value:g}"
    return (f"{lbl} cannot measure: priming took {fmt(e2e)} s per request at {lbl} (median of "
            f"{priming.completed}), longer than --warmup {w:g} s + --duration {d:g} s, so no request sent after the "
            f"warm-up can finish in the level; give --duration {give} (a round of requests after the warm-up) or "
            "more, or size levels with --num-requests N")


def check_figure(level: LevelResult) -> tuple[str, float | None]:
    """The figure the history check compares (``results.configuration.level_figure``): tokens/s per
    kW at the level's headline boundary, or output tokens/s when it measured no energy; of one
    measurement (the level's last trial when it has trials)."""
    key, _ = level_figure(level)
    name, _, b = key.partition("@")
    if b:
        return key, level.energy[b].output_tokens_per_s_per_kw
    return key, level.throughput.output_tokens_per_s or None


def _trial_values(level: LevelResult, figure: str) -> list[float]:
    if level.trials is None:
        return []
    name, _, b = figure.partition("@")
    f = level.trials.figures.get(f"{name}@{b}" if b else name) or level.trials.figures.get(name)
    return [v for v in (f.values if f else []) if v is not None]


def judge(first: LevelResult, repeat: LevelResult | None) -> HistoryCheck:
    """The history check's verdict: ``repeat`` (the level measured again) against ``first`` (its
    first measurement, with its trials if it has them); with no ``repeat``, ``first``'s first trial
    against its later trials."""
    figure, _ = check_figure(first)
    window = first.window.duration_s if first.window else None
    if repeat is not None:
        vals = _trial_values(first, figure) or [check_figure(first)[1]]
        _, rv = check_figure(repeat)
        rep = [rv] if rv is not None and check_figure(repeat)[0] == figure else []
        chk = repeat_check(vals, rep, window, repeat.window.duration_s if repeat.window else None)
    else:
        vals = _trial_values(first, figure)
        chk = repeat_check(vals[1:], vals[:1], window) if len(vals) >= 2 else None
    hc = HistoryCheck(level=first.label, figure=figure, repeat=repeat)
    if chk is None:
        hc.verdict = "unknown"
        hc.text = f"history check: {first.label} has no {figure} in both measurements"
        return hc
    hc.first, hc.repeated, hc.ratio, hc.low, hc.high = chk.first, chk.repeat, chk.ratio, chk.low, chk.high
    hc.bound_pct, hc.basis = chk.bound_pct, chk.basis
    when = "measured again after the other levels" if repeat is not None else "first trial vs its later trials"
    # the figures first, so the line a summary cuts at 80 columns keeps them (report/notes.py)
    unit = "tok/s/kW" if "per_kw" in figure else "tok/s" if figure.startswith("output_tokens_per_s") else figure
    both = f"{fmt(chk.first)} then {fmt(chk.repeat)} {unit} ({chk.ratio - 1:+.1%})"
    lbl = short_label_text(first.label)
    if chk.word == INCONCLUSIVE:  # metrics/noise.judge: too few df or a bound over ±25%
        hc.verdict = "unknown"
        hc.text = f"history check {lbl}: {both}, inconclusive — {chk.judgement.why}; {chk.judgement.todo}"
    elif chk.beyond_noise:
        hc.verdict = "warn"
        hc.text = (f"history check {lbl}: {both}, beyond noise ±{chk.bound_pct:.1f}% — {when}: what the server "
                   f"served in between moved it ({chk.basis})")
    else:
        hc.text = f"history check {lbl}: {both}, within noise ±{chk.bound_pct:.1f}% — {when} ({chk.basis})"
    return hc

