"""Measuring from a known state: the priming phase and the history check (docs/accounting.md "Priming").

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
window's length: a history effect worth a warning — the one reported on the H200 was 16–34% — is many times the
noise of a short level, and the README's first command stays near its time) and its
headline figure (tokens/s per kW at the headline boundary, else output tokens/s) compared
with the first measurement by ``metrics/noise.repeat_check``: a difference beyond noise is a
``warn`` on the run with both figures. With interleaved ``--trials`` the first level's own trials
are the repeat: its first trial (right after priming) is checked against the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Protocol

import numpy as np

from wattbench.accounting.thermal import (
    PRECONDITION_COVER,
    PRECONDITION_MAX_S,
    PRECONDITION_SLOPE_C_PER_MIN,
    PRECONDITION_WINDOW_S,
    Settle,
)
from wattbench.config.run import RunConfig
from wattbench.metrics.drift import SETTLE_CHANGE_PCT, SETTLE_MIN_ROUNDS, RoundsSettle, figure_drift, rounds_settle
from wattbench.metrics.noise import INCONCLUSIVE, repeat_check
from wattbench.report.labels import short_label_text
from wattbench.core.numbers import fmt
from wattbench.results.configuration import level_figure
from wattbench.core.schema import FigureKey, HistoryCheck, LevelResult, Preconditioning, PrimingPhase, PromptCalibration
from wattbench.core.load_types import LevelOutcome, LevelSpec
from wattbench.load.executor import LoadProgress
from wattbench.core.recordset import as_record_set, NONE
from wattbench.workload.base import RequestSpec
from wattbench.run.events import Phase
from wattbench.run.session import RunSession
from wattbench.workload.source import Workload
from wattbench.workload.synthetic import SyntheticWorkload, request_rng
from wattbench.workload.tokenizer import ApproxTokenizer

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
    without ``--max-concurrency`` (``config.run.SEARCH_MAX_CONCURRENCY``)."""
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
    top: float
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


def check_figure(level: LevelResult) -> tuple[FigureKey, float | None]:
    """The figure the history check compares (``results.configuration.level_figure``): tokens/s per
    kW at the level's headline boundary, or output tokens/s when it measured no energy; of one
    measurement (the level's last trial when it has trials)."""
    key, _ = level_figure(level)
    if key.boundary:
        return key, level.energy[key.boundary].output_tokens_per_s_per_kw
    return key, level.throughput.output_tokens_per_s or None


def _trial_values(level: LevelResult, figure: FigureKey) -> list[float]:
    if level.trials is None:
        return []
    f = figure.lookup(level.trials.figures)
    return [v for v in (f.values if f else []) if v is not None]


def _open_loop(level: LevelResult) -> bool:
    """A fixed-rate level, whose achieved rate scatters with its arrivals (``rate inf`` sends every
    request at once: no arrival process to divide out)."""
    r = level.load.target_rate_rps
    return level.load.mode == "rate" and r is not None and math.isfinite(r)


def _achieved(level: LevelResult) -> float | None:
    r = level.load.achieved_rate_rps
    return r if r is not None and math.isfinite(r) and r > 0 else None


def _trial_pairs(level: LevelResult, figure: FigureKey) -> list[tuple[float | None, float | None]]:
    """Each trial's ``(figure, completed requests/s)``, in trial order; empty without trials."""
    if level.trials is None:
        return []
    f = figure.lookup(level.trials.figures)
    r = FigureKey("requests_per_s").lookup(level.trials.figures)
    if f is None or r is None or len(f.values) != len(r.values):
        return []
    return list(zip(f.values, r.values))


def _per_rate(pairs: list[tuple[float | None, float | None]]) -> tuple[list[float], list[float]]:
    """Each figure divided by its own achieved requests/s, and those rates (pairs missing either left out)."""
    ok = [(v, r) for v, r in pairs if v is not None and r is not None and r > 0]
    return [v / r for v, r in ok], [r for _, r in ok]


def check_history(first: LevelResult, repeat: LevelResult | None, precision: float | None = None) -> HistoryCheck:
    """The history check's verdict: ``repeat`` (the level measured again) against ``first`` (its
    first measurement, with its trials if it has them); with no ``repeat``, ``first``'s first trial
    against its later trials. ``precision``: the one an inconclusive verdict says how to resolve
    (``--trials auto``'s; None: ``metrics.precision.DEFAULT_PRECISION``).

    An open loop (a fixed rate) is judged on what its arrivals allow: each measurement's figure per
    request/s it achieved. A Poisson process sends N ± √N requests in a window and every
    throughput-based figure follows the count: a repeat of r=20 achieved 17.50 and 19.76 requests/s
    and its tokens/s per kW moved +9.8% with them, which the bound (the server's noise alone) blamed
    on the server's history. The text shows both achieved rates."""
    key, _ = check_figure(first)
    figure = key.text()  # as the history check records and says it
    window = first.window.duration_s if first.window else None
    # a level that drifted while measured (either measurement) is no basis for a noise verdict
    drift = figure_drift(first.stationarity, key.figure, key.boundary) or (
        figure_drift(repeat.stationarity, key.figure, key.boundary) if repeat is not None else None)
    open_loop = _open_loop(first)
    rates_f: list[float] = []
    rates_r: list[float] = []
    if repeat is not None:
        one_v = check_figure(first)[1]
        vals = _trial_values(first, key) or ([one_v] if one_v is not None else [])
        _, rv = check_figure(repeat)
        rep = [rv] if rv is not None and check_figure(repeat)[0] == key else []
        if open_loop:
            pf = _trial_pairs(first, key) or [(check_figure(first)[1], _achieved(first))]
            vals, rates_f = _per_rate(pf)
            rep, rates_r = _per_rate([(rep[0], _achieved(repeat))] if rep else [])
        chk = repeat_check(vals, rep, window, repeat.window.duration_s if repeat.window else None, drift=drift,
                           precision=precision)
    elif open_loop:
        pairs = _trial_pairs(first, key)
        rest, rates_f = _per_rate(pairs[1:])
        one, rates_r = _per_rate(pairs[:1])
        chk = repeat_check(rest, one, window, drift=drift, precision=precision) if rest and one else None
    else:
        vals = _trial_values(first, key)
        chk = repeat_check(vals[1:], vals[:1], window, drift=drift, precision=precision) if len(vals) >= 2 else None
    hc = HistoryCheck(level=first.label, figure=figure, repeat=repeat)
    if chk is None:
        hc.verdict = "unknown"
        hc.text = f"history check: {first.label} has no {figure} in both measurements"
        return hc
    hc.first, hc.repeated, hc.ratio, hc.low, hc.high = chk.first, chk.repeat, chk.ratio, chk.low, chk.high
    hc.bound_pct, hc.basis = chk.bound_pct, chk.basis
    when = "measured again after the other levels" if repeat is not None else "first trial vs its later trials"
    # the figures first, so the line a summary cuts at 80 columns keeps them (report/notes.py)
    unit = "tok/s/kW" if "per_kw" in key.figure else "tok/s" if key.figure.startswith("output_tokens_per_s") else figure
    both = f"{fmt(chk.first)} then {fmt(chk.repeat)} {unit} ({chk.ratio - 1:+.1%})"
    if open_loop and rates_f and rates_r:  # the figures as measured, the rates achieved, the ratio judged
        hc.first_rate_rps, hc.repeat_rate_rps = sum(rates_f) / len(rates_f), sum(rates_r) / len(rates_r)
        raw = [sum(v * r for v, r in zip(x, rs)) / len(rs) for x, rs in
               ((vals if repeat is not None else rest, rates_f), (rep if repeat is not None else one, rates_r))]
        hc.first, hc.repeated = raw
        both = (f"{fmt(raw[0])} then {fmt(raw[1])} {unit} at {fmt(hc.first_rate_rps)} then "
                f"{fmt(hc.repeat_rate_rps)} req/s achieved, per request/s {chk.ratio - 1:+.1%}")
        hc.basis = f"per achieved request/s: the arrivals' own scatter divided out; {chk.basis}"
    lbl = short_label_text(first.label)
    if chk.word == INCONCLUSIVE:  # metrics/noise.judge: too few df or a bound over ±25%
        assert chk.judgement is not None  # repeat_check's every verdict carries its judgement
        hc.verdict = "unknown"
        hc.text = f"history check {lbl}: {both}, inconclusive — {chk.judgement.why}; {chk.judgement.todo}"
    elif chk.beyond_noise:
        hc.verdict = "warn"
        hc.text = (f"history check {lbl}: {both}, beyond noise ±{chk.bound_pct:.1f}% — {when}: what the server "
                   f"served in between moved it ({hc.basis})")
    else:
        hc.text = f"history check {lbl}: {both}, within noise ±{chk.bound_pct:.1f}% — {when} ({hc.basis})"
    return hc


# ---------------------------------------------------------------- prompt lengths without a tokenizer

CALIBRATION_START = 1 << 41  # where the run's asked lengths are sampled from (its own draws, not sent)
CALIBRATION_INDEX = 100  # the probes' indices (3 digits, as a run's measured requests mostly have)
CALIBRATION_STREAM = 11  # the probes' generator stream: their tags and word orders are their own
CALIBRATION_PROBES = 12  # probe prompts per length
CALIBRATION_MIN_TOKENS = 8
CALIBRATION_SEED = 6_151
# a fit outside this band is no tokenizer's count of the run's words (a real one: ~1-3 tokens per
# word): refused, so a prompt never has more than 4 words per asked token (ApproxTokenizer.words_for)
MIN_TOKENS_PER_WORD = 0.25
MAX_TOKENS_PER_WORD = 8.0
STALLED = ("stall", "timeout")  # a probe that ended so: the server is not answering probes, stop sending them


def fit_calibration(words: list[int], counts: list[float]) -> tuple[float, float]:
    """``(tokens_per_word, overhead_tokens)`` through the probe lengths' mean counts (``words[i]``
    words counted ``counts[i]`` tokens on average): a line through two lengths, a ratio through the
    origin for one. ``ValueError`` naming the lengths that misbehaved, for a fit no tokenizer makes:
    a count below one token a probe, counts that do not grow with the words (a server answering one
    fixed number: 1 on every answer fitted 0.0069 tokens per word and built 4.3-million-word prompts),
    or a slope outside ``MIN_TOKENS_PER_WORD``..``MAX_TOKENS_PER_WORD``."""
    if not words or len(words) != len(counts) or min(words) < 1:
        raise ValueError(f"no probe lengths to fit ({len(words)} lengths of {list(words)[:2]} words)")
    for w, y in zip(words, counts):
        if not y >= 1:  # NaN too
            raise ValueError(f"the server counted {y:g} prompt tokens for the probes of {w} words, below one "
                             "token a probe")
        if math.isinf(y):
            raise ValueError(f"the server counted {y:g} prompt tokens for the probes of {w} words, not a count")
    if len(words) == 2 and words[1] != words[0]:
        if not counts[1] > counts[0]:
            raise ValueError(f"the server counted {counts[0]:g} prompt tokens for the probes of {words[0]} words "
                             f"and {counts[1]:g} for those of {words[1]}: the count does not grow with the words")
        a = (counts[1] - counts[0]) / (words[1] - words[0])
        b = counts[0] - a * words[0]
    else:
        a, b = sum(counts) / sum(words), 0.0
    if not MIN_TOKENS_PER_WORD <= a <= MAX_TOKENS_PER_WORD:
        seen = " and ".join(f"{y:g} tokens for {w} words" for w, y in zip(words, counts))
        raise ValueError(f"the server counted {seen}: {a:.3g} tokens per word, outside the "
                         f"{MIN_TOKENS_PER_WORD:g}-{MAX_TOKENS_PER_WORD:g} any tokenizer counts")
    return a, b


def _probe_rounds(probes: list[RequestSpec], size: int) -> list[list[RequestSpec]]:
    """The probes in rounds of ``size`` (sent at once), the lengths interleaved: the first round holds
    both lengths, so a server that stalls every probe costs one ``--stall-timeout``, not one a round."""
    half = len(probes) // 2
    mixed = [p for pair in zip(probes[:half], probes[half:]) for p in pair] + probes[2 * half:]
    return [mixed[i:i + size] for i in range(0, len(mixed), size)]


class ProbeRunner(Protocol):
    """What the calibration needs of the level runner (``run/level.LevelRunner``): the run's session,
    its workload, and one load that records nothing."""

    session: RunSession
    workload: Workload

    def _run_one(self, spec: LevelSpec, requests: Iterable[RequestSpec],
                 on_progress: Callable[[LoadProgress], None]) -> LevelOutcome: ...


def calibrate_prompts(runner: ProbeRunner) -> PromptCalibration | None:
    """Fit synthetic prompt lengths to the server's own token count when there is no tokenizer
    (docs/workloads.md, "Prompt lengths without a tokenizer").

    Without ``--tokenizer`` and without a server ``/tokenize`` a prompt of N tokens is N × 0.75
    random words, and servers count those words differently (+58% on the H200's transformers serve,
    −25% on the scripted server): every level was ``warn`` for prompt length. As the priming's first
    step the run sends ``CALIBRATION_PROBES`` one-token requests at each of two lengths
    — half the workload's median asked length and the median — built exactly as the run's prompts
    are (tag, head, shared prefix), reads the server's ``usage.prompt_tokens`` of each, and fits
    ``tokens = a · words + b`` through the two lengths' means (``b``: the chat template, BOS and the
    tag, the same for every prompt; ``fit_calibration``). From then on a prompt of N tokens has ``(N − b) / a`` words
    (``ApproxTokenizer.calibrate``) and the run's prompt lengths read ``calibrated``; the levels'
    check (``accounting.level_findings.input_length_finding``) still compares every request with
    the server's count. Nothing of it is measured; ``Result.prompt_calibration`` records the probes,
    the fit and, when it was not possible, why. Only a synthetic workload
    with the approximate source is calibrated: a tokenizer or ``/tokenize`` is exact and stays the
    first choice; a dataset's prompts are the user's.

    A server whose counts no tokenizer makes (``fit_calibration``), or that stops answering the
    probes, is not fitted: the run goes on with the 0.75 guess, and says why (``reason``, a run
    warning; ``run/plan._calibrate``). Nothing is measured yet, and the levels measure what the
    server serves whatever it counts — refusing the run would take the measurement from a user whose
    server only miscounts its prompts. The probes go in rounds of at most 4 at once; after a round in
    which a probe stalled or timed out no more are sent (24 stalling probes cost 6 × ``--stall-timeout``
    before, one now)."""
    session, wl = runner.session, runner.workload
    cfg = session.config
    if not cfg.calibrate_prompts or not isinstance(wl, SyntheticWorkload):  # a dataset's prompts are the user's
        return None
    ts = wl.ts
    if not isinstance(ts, ApproxTokenizer) or ts.calibration is not None:
        return None
    asked = sorted(int(x.input_tokens) for x in wl.specs(64, start=CALIBRATION_START) if x.input_tokens)
    if not asked:
        return None
    med = asked[len(asked) // 2]
    lengths = sorted({max(CALIBRATION_MIN_TOKENS, int(round(med / 2))), max(CALIBRATION_MIN_TOKENS, med)})
    probes: list[RequestSpec] = []
    words: dict[int, int] = {}
    for j, n in enumerate(lengths):
        for k in range(CALIBRATION_PROBES):
            # a tag like the measured requests' (their indices run from 0; a digit can be a token), from
            # a generator of its own (stream): never the prompt of a measured request
            idx = CALIBRATION_INDEX + j * CALIBRATION_PROBES + k
            prompt = wl.builder.unique_prompt(n, idx, request_rng(wl.seed, idx, stream=CALIBRATION_STREAM),
                                              head=wl.head, shared=wl.shared)
            words.setdefault(n, len(prompt.split()))
            probes.append(RequestSpec(prompt=prompt, max_tokens=1, input_tokens=n, token_source=ts.source,
                                      min_tokens=1, tags={"workload": "prompt calibration", "index": idx}))
    cal = PromptCalibration(probes=len(probes), lengths=lengths, words=[words[n] for n in lengths])
    in_flight = min(4, len(probes), cfg.max_concurrency or 4)  # never more at once than --max-concurrency allows
    session.emit(Phase("calibrate", f"calibrating prompt lengths: {len(probes)} one-token requests "
                                                    "(no tokenizer; not measured)"))
    cols: list[dict[str, np.ndarray]] = []
    stalled: str | None = None
    sent = 0
    for r, batch in enumerate(_probe_rounds(probes, in_flight)):
        spec = LevelSpec(index=0, mode="concurrency", value=len(batch), num_requests=len(batch),
                         seed=cfg.seed + CALIBRATION_SEED + r, workers=1, stop_when_oversaturated=False)
        outcome = runner._run_one(spec, iter(batch), lambda p: None)
        sent += len(batch)
        rs = as_record_set(outcome.records)
        if len(rs):
            c = rs.columns("ok", "input_tokens", "requested_input_tokens", "error")
            cols.append(c)
            codes = rs.labels("error")
            bad = sorted({str(codes[int(e)]) for e in c["error"] if e != NONE and codes[int(e)] in STALLED})
            if bad:
                stalled = (f"probes ended in {', '.join(bad)} in round {r + 1} ({len(batch)} at once), so no more "
                           f"were sent ({sent} of {len(probes)})")
        rs.close()
        if stalled:
            break
    cal.probes = sent
    xs, ys = [], []
    for n in lengths:
        m_ok = [c["ok"] & (c["input_tokens"] != NONE) & (c["requested_input_tokens"] == n) for c in cols]
        got = [c["input_tokens"][m] for c, m in zip(cols, m_ok) if m.any()]
        if got:
            cal.counted += sum(len(g) for g in got)
            xs.append(words[n])
            ys.append(float(sum(float(g.sum()) for g in got) / sum(len(g) for g in got)))
    cal.server_tokens = ys
    guess = "prompt lengths stay the 0.75 words-per-token guess; give --tokenizer PATH for exact lengths"
    if not xs:
        answered = sum(int(c["ok"].sum()) for c in cols)
        why = ("the server's answers carried no usage.prompt_tokens" if answered else
               f"none of the {sent} probe requests completed")
        cal.refused = stalled is not None
        cal.reason = f"{why}{', ' + stalled if stalled else ''}: {guess}"
        return cal
    try:
        a, b = fit_calibration(xs, ys)
    except ValueError as e:
        cal.refused = True
        cal.reason = f"the server's prompt counts are no tokenizer's: {e}; {guess}"
        return cal
    if stalled and len(xs) < len(lengths):  # one length counted of two: too little to fit after a stall
        cal.refused = True
        cal.reason = f"{stalled}: {guess}"
        return cal
    ts.calibrate(a, b, probes=sent, lengths=lengths)
    wl.recalibrated()
    cal.used, cal.tokens_per_word, cal.overhead_tokens = True, a, b
    cal.reason = (f"{cal.counted} probes counted by the server: {a:.3f} tokens per word + {b:.1f} "
                  f"(asked {', '.join(str(n) for n in lengths)} tokens: {', '.join(str(w) for w in cal.words)} "
                  f"words, the server counted {', '.join(f'{y:.1f}' for y in ys)})")
    return cal


def precondition(load_round: Callable[[], PrimingPhase], settle: Callable[[], Settle], clock_s: Callable[[], float],
                 *, limit_s: float = PRECONDITION_MAX_S, window_s: float = PRECONDITION_WINDOW_S,
                 bound_c_per_min: float = PRECONDITION_SLOPE_C_PER_MIN, bound_pct: float = SETTLE_CHANGE_PCT,
                 min_rounds: int = SETTLE_MIN_ROUNDS) -> Preconditioning:
    """``--precondition``: send loads (``load_round``: one priming-sized load, its ``PrimingPhase``
    with the output tokens/s it read) until the device is in its steady state or ``limit_s``
    passes, as MLPerf's power runs load a device into its steady thermal state before they measure.

    Steady means both rules hold after a load: the devices' temperature has settled (``settle``:
    ``accounting.thermal.temperature_settle`` over the last ``window_s``), and the server's output
    tokens/s over the loads no longer moves (``metrics.drift.rounds_settle``: the fitted change of
    the loads of the last ``window_s`` within ±``bound_pct`` %, from at least ``min_rounds`` loads).
    A server's throughput can climb for minutes at a steady temperature (an engine's own warm-up:
    on an H100 the engine's defaults drifted +24.5% in tokens/s over 16 trials at a held clock and
    49 °C), which the temperature alone never sees. Where no temperature is read (no NVML or other
    channel) the throughput rule alone decides, and ``rules`` says so. A load that completes
    none of its requests stops it (nothing to read a throughput from). Never touches power limits or
    clocks."""
    t0 = clock_s()
    requests = 0
    rounds: list[PrimingPhase] = []
    ends_s: list[float] = []
    st = Settle(False, None, None, 0.0)
    tp = RoundsSettle(False, None, 0, 0.0, window_s, bound_pct)
    reason = ""
    elapsed = 0.0
    while True:
        phase = load_round()
        rounds.append(phase)
        requests += phase.requests
        elapsed = clock_s() - t0
        ends_s.append(elapsed)
        st = settle()
        if phase.completed == 0:
            reason = (f"not settled: load {len(rounds)} completed none of its {phase.requests} requests (nothing "
                      "to read a throughput from); the first levels may drift")
            break
        tp = rounds_settle([(p.start_ns or 0) / 1e9 for p in rounds], [(p.end_ns or 0) / 1e9 for p in rounds],
                           [p.output_tokens_per_s for p in rounds], window_s=window_s, cover=PRECONDITION_COVER,
                           bound_pct=bound_pct, min_rounds=min_rounds)
        temperature = st.devices > 0
        if tp.settled and (st.settled or not temperature):
            reason = f"settled after {elapsed:.0f} s ({len(rounds)} loads): {tp.words()}"
            reason += (f" and the temperature {st.slope_c_per_min:+.2f} °C/min (bound ±{bound_c_per_min:g} °C/min)"
                       if temperature and st.slope_c_per_min is not None else
                       "; no GPU temperature was read (no NVML or other temperature channel): the throughput alone "
                       "decided")
            break
        if elapsed >= limit_s:
            held = [] if tp.settled else [tp.words()]
            if temperature and not st.settled:
                slope = "unknown" if st.slope_c_per_min is None else f"{st.slope_c_per_min:+.2f} °C/min"
                held.append(f"temperature still moving {slope} (bound ±{bound_c_per_min:g} °C/min)")
            reason = f"not settled after {elapsed:.0f} s (the limit): {'; '.join(held)}; the first levels may drift"
            break
    temperature = st.devices > 0
    return Preconditioning(
        settled=tp.settled and (st.settled or not temperature) and rounds[-1].completed > 0,
        start_ns=rounds[0].start_ns, duration_s=elapsed, rounds=len(rounds), requests=requests,
        rules=(["temperature"] if temperature else []) + ["throughput"],
        temperature_c=st.temperature_c, slope_c_per_min=st.slope_c_per_min, bound_c_per_min=bound_c_per_min,
        temperature_settled=st.settled if temperature else None,
        round_output_tokens_per_s=[p.output_tokens_per_s for p in rounds], round_end_s=ends_s,
        throughput_change_pct=tp.change_pct, throughput_rounds=tp.rounds or None, throughput_bound_pct=bound_pct,
        throughput_settled=tp.settled, window_s=window_s, limit_s=limit_s, reason=reason)
