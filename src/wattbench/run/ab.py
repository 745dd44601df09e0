"""``run_ab(config, progress) -> AbOutcome``: two configurations measured in pairs (``wattbench ab``).

    side A, side B ── each checked (its server answers, or its engine started) ──► two sessions
    one machine's meters ──► one Sampler, read by both sessions (the meters are shared)   run/telemetry.py
    idle baseline (both resident, neither loaded), copied to both
    priming of A (then --precondition's loads of A until it settles), then of B          run/prime.py
    blocks: A B B A per level, every trial after the server drained the load before it  run/level.py
      └─ after each block: an idle window (--idle s) on the shared meters ──► the idle series
    ──► two run directories (result.json each) + the pairs in both (Result.noise.paired)
    ──► analysis/ab.paired_compare: the per-kW ratio B/A, its decomposition and interval from the pairs

Each side is a whole run (``run/benchmark.py``'s phases: ``prepare``, ``begin``, ``conclude``): its
own directory, targets, workload (fresh prompts, its own salt), ``/metrics`` scraper and level
runner; its trials are the pairs' members, so ``report`` and ``compare`` read each run as any
other with ``--trials``. The design (``metrics/paired.py``): the levels are measured one block at
a time — pair ``k`` is A's and B's k-th trial of a level, ``A B`` for an even pair, ``B A`` for an
odd one — so a drift common to both sides cancels; ``--precision`` adds blocks until every level's
per-kW ratio is known within it (``metrics.paired.precise_enough``), ``--max-pairs`` or
``--max-time`` ends it. After each block the shared meters' idle power is measured again (``--idle``
seconds, both servers resident and neither loaded: ``benchmark.idle_sample``), so the idle side's
draw inside every trial's figures is a series over the pairs (``PairedRun.idle_series``), not one
reading before them. Nothing is written before both sides are checked; a failure closes both runs
(``failed``, or ``interrupted``), each keeping what it measured and registered in the history.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from wattbench.analysis.ab import PairedComparison, paired_compare
from wattbench.analysis.level_pairs import resolve_boundary, short_key
from wattbench.analysis.figures import level_figures
from wattbench.metrics.level_figures import LevelFigures
from wattbench.config.run_commands import AbConfig
from wattbench.core.clock import ClockAnchor, now_ns
from wattbench.core.errors import Interrupted, UserError, WattbenchError
from wattbench.core.schema import LevelResult, PairedLevel, PairedRun, Result
from wattbench.metrics.precision import MAX_TIME, MAX_TRIALS, REACHED, auto_stop
from wattbench.metrics.paired import PAIRS_PER_BLOCK, PairedRatio, blocks_for, pair_sides, paired_ratio, precision
from wattbench.run import analyses, benchmark, plan
from wattbench.run.level import LevelRunner
from wattbench.run.events import LevelStarted, Phase, ProgressEvent, ProgressFn
from wattbench.run.session import RunSession, run_dir_path
from wattbench.telemetry.base import Sensor

SIDES = ("A", "B")


@dataclass
class AbOutcome:
    """What ``ab`` measured: both results (A, B), where they are, and the paired answer."""

    a: Result
    b: Result
    run_dir_a: Path
    run_dir_b: Path
    comparison: PairedComparison


def _side_progress(progress: ProgressFn, side: str) -> ProgressFn:
    """The caller's progress with every label and message naming the side (``A c=8 trial 1/4``)."""
    def emit(event: ProgressEvent) -> None:
        if isinstance(event, LevelStarted):
            event = dataclasses.replace(event, label=f"{side} {event.label}")
        elif isinstance(event, Phase):
            event = dataclasses.replace(event, message=f"{side} {event.message}")
        progress(event)
    return emit


@contextlib.contextmanager
def _engine_defaults(own: bool) -> Iterator[None]:
    """While a side that asked for the engine's own defaults starts its engine: wattbench's tuned
    flags off (``WATTBENCH_TUNED_DEFAULTS=0``, as ``tune`` starts from), restored after."""
    if not own:
        yield
        return
    prev = os.environ.get("WATTBENCH_TUNED_DEFAULTS")
    os.environ["WATTBENCH_TUNED_DEFAULTS"] = "0"
    try:
        yield
    finally:
        if prev is None:
            os.environ.pop("WATTBENCH_TUNED_DEFAULTS", None)
        else:
            os.environ["WATTBENCH_TUNED_DEFAULTS"] = prev


@contextlib.contextmanager
def _naming(side: str) -> Iterator[None]:
    """A side's check that fails says which side: ``side B: cannot reach …``."""
    try:
        yield
    except WattbenchError as e:
        e.args = (f"side {side}: {e}",) + tuple(e.args[1:])
        raise


def run_ab(config: AbConfig, progress: ProgressFn | None = None, *, sensors: list[Sensor] | None = None) -> AbOutcome:
    """Measure ``config``'s two sides in pairs and return both results and the paired answer (module
    docstring). ``sensors``: the sensors to sample (None: from the options). Raises ``UserError`` for
    bad input before anything is written, ``Interrupted`` on SIGINT/SIGTERM (both runs closed
    ``interrupted`` with what they measured)."""
    emit = progress or (lambda event: None)
    configs = {s: config.side_config(s) for s in SIDES}
    with contextlib.ExitStack() as stack:
        sessions: dict[str, RunSession] = {}
        for s in SIDES:
            anchor = ClockAnchor.take()
            sessions[s] = RunSession(config=configs[s], progress=_side_progress(emit, s), anchor=anchor,
                                     run_id=benchmark.new_run_id(anchor), stack=stack)
        if sessions["A"].run_id == sessions["B"].run_id:  # one second, 3 random bytes: never in practice
            raise UserError("the two sides drew one run id; run ab again")
        try:
            comparison = _run(config, sessions, sensors)
        except (KeyboardInterrupt, Interrupted) as e:
            for s in SIDES:
                if sessions[s].result is not None:
                    benchmark.stopped(sessions[s], "ab", "the pairs measured so far are saved")
            where = " and ".join(str(sessions[s].run_dir) for s in SIDES if sessions[s].run_dir)
            err = Interrupted(f"interrupted; the pairs measured so far are saved{' in ' + where if where else ''}")
            err.result = sessions["A"].result  # type: ignore[attr-defined]
            raise err from e
        except Exception as e:
            for s in SIDES:
                session = sessions[s]
                if session.result is not None:
                    session.finish("failed", str(e) if isinstance(e, WattbenchError)
                                   else f"{type(e).__name__}: {e}", e)
                    benchmark.register(session.config, session.result, session.run_dir)
            raise
    ra, rb = sessions["A"].result, sessions["B"].result
    assert ra is not None and rb is not None
    return AbOutcome(a=ra, b=rb, run_dir_a=run_dir_path(configs["A"], ra.run_id),
                     run_dir_b=run_dir_path(configs["B"], rb.run_id), comparison=comparison)


def _run(config: AbConfig, sessions: dict[str, RunSession], sensors: list[Sensor] | None) -> PairedComparison:
    sa, sb = sessions["A"], sessions["B"]
    dirs = {s: run_dir_path(sessions[s].config, sessions[s].run_id) for s in SIDES}
    if dirs["A"].resolve() == dirs["B"].resolve():
        raise UserError(f"both sides would write {dirs['A']}; give --out DIR (A and B go to DIR/A and DIR/B)")
    # every check of both sides (targets answer, engines start) before anything is written
    with _engine_defaults(config.side("A").own_defaults), _naming("A"):
        prep_a = benchmark.prepare(sa, sensors=sensors)
    with _engine_defaults(config.side("B").own_defaults), _naming("B"):
        prep_b = benchmark.prepare(sb, share_telemetry=sa)
    ua, ub = prep_a.targets.specs[0].base_url, prep_b.targets.specs[0].base_url
    if not (config.side("A").launched or config.side("B").launched) and ua == ub:
        raise UserError(f"A and B answer at one URL ({ua}): ab compares two servers; give B another URL")
    runners = {"A": benchmark.begin(sa, prep_a, idle=False), "B": benchmark.begin(sb, prep_b, idle=False)}
    _shared_idle(sa, sb)
    idle_points = _first_idle_point(sa)
    # each side from a known state: its prompt lengths fitted, its server primed and, with
    # --precondition, loaded until its temperature and throughput settle (recorded in its own result;
    # a side that did not settle says so in its run's warnings)
    for s in SIDES:
        sessions[s].emit(Phase("prime", "priming before the first pair"))
        res = sessions[s].result
        assert res is not None  # begin() wrote each side's skeleton
        plan.prime_first(sessions[s].config, res, runners[s])
    t0 = now_ns()  # the first pair begins: the pairs' clock
    sequence, stopped = _pairs(config, sessions, runners, t0, lambda: _block_idle(sa, idle_points))
    for s in SIDES:
        analyses.run_analyses(sessions[s])
    if sa.config.idle_after_s > 0:
        benchmark.idle_after(sa)
        _copy_idle(sa, sb)
    blocks = _paired_blocks(config, sessions, runners, sequence, stopped, t0)
    series = _idle_series(idle_points, t0)
    for block in blocks.values():
        block.idle_series = series
    for s in SIDES:
        res = sessions[s].result
        assert res is not None and res.noise is not None
        res.noise.paired = blocks[s]
        res.noise.trial_order = "paired"
    assert sa.result is not None and sb.result is not None
    cmp = paired_compare(sa.result, sb.result)
    answers = [lv.answer for lv in cmp.levels] + [lv.precision_line for lv in cmp.levels]
    for s in SIDES:
        res = sessions[s].result
        assert res is not None and res.noise is not None and res.noise.paired is not None
        res.noise.paired.answers = list(answers)
        sessions[s].finish("complete", None)
        benchmark.register(sessions[s].config, res, sessions[s].run_dir)
    return cmp


def _shared_idle(sa: RunSession, sb: RunSession) -> None:
    """The idle baseline once, with both servers resident and neither loaded, for both runs: they
    read the same meters, so the idle power is one measurement (each side's dynamic energy is its
    gross energy less it)."""
    benchmark.idle_before(sa)
    _copy_idle(sa, sb)


IdlePoints = dict[str, list[tuple[int, float]]]  # boundary -> [(window midpoint ns, W)]


def _first_idle_point(sa: RunSession) -> IdlePoints:
    """The idle series' first point: the baseline before the first pair (none where it was skipped)."""
    w = sa.result.idle_window if sa.result is not None else None
    if w is None:
        return {}
    mid = (w.start_ns + w.end_ns) // 2
    return {b: [(mid, float(i.power_w))] for b, i in (sa.idle_power or {}).items()}


def _block_idle(sa: RunSession, points: IdlePoints) -> None:
    """After a block of pairs: the shared meters' idle power again (``--idle`` seconds, both
    servers resident, neither loaded), appended to ``points``; nothing where the baseline is skipped."""
    got = benchmark.idle_sample(sa, sa.config.idle_s, " between blocks of pairs")
    if got is None:
        return
    (t0, t1), idle = got
    for b, i in idle.items():
        points.setdefault(b, []).append(((t0 + t1) // 2, float(i.power_w)))


def _idle_series(points: IdlePoints, t0_ns: int) -> dict[str, list[tuple[float, float]]]:
    """``points`` on the pairs' clock (seconds after the first pair began; the baseline before it
    reads negative)."""
    return {b: [((t - t0_ns) / 1e9, w) for t, w in pts] for b, pts in points.items()}


def _copy_idle(sa: RunSession, sb: RunSession) -> None:
    assert sa.result is not None and sb.result is not None
    sb.idle_power = sa.idle_power
    sb.result.idle = {b: i.model_copy() for b, i in (sa.result.idle or {}).items()}
    sb.result.idle_window = sa.result.idle_window
    sb.result.idle_after_window = sa.result.idle_after_window


def _pairs(config: AbConfig, sessions: dict[str, RunSession], runners: dict[str, LevelRunner], t0: int,
           after_block: Callable[[], None] = lambda: None) -> tuple[list[str], str]:
    """Measure whole blocks over the levels until the pairs asked (``--pairs``) are in and, with
    ``--precision``, every level's ratio is within it, or ``--max-pairs`` / ``--max-time`` ends it;
    ``after_block`` runs after each block (the idle window: counted in the block's time). Returns the order measured and why it stopped."""
    ladder = list(enumerate(sessions["A"].config.levels()))
    sequence: list[str] = []
    want = blocks_for(config.pairs) * PAIRS_PER_BLOCK
    # --max-pairs in whole blocks (never past it), at least the pairs asked
    cap = max(want, config.max_pairs - config.max_pairs % PAIRS_PER_BLOCK) if config.precision_pct is not None else want
    done = 0
    start = now_ns()
    while True:
        planned = max(want, done + PAIRS_PER_BLOCK)  # the trials of a level so far, for its label
        block_start = now_ns()
        for k in (done, done + 1):
            for index, (mode, value) in ladder:
                for side in pair_sides(k):
                    runners[side].trial(mode, value, index, k, planned)
                    sequence.append(f"{side} {_key(mode, value)}")
        after_block()
        done += PAIRS_PER_BLOCK
        if done < want:
            continue
        if config.precision_pct is None:
            return sequence, f"the {done} pairs asked (--pairs {config.pairs})"
        pct = config.precision_pct
        levels = [precision(_per_kw_ratio(runners, i, t0), pct) for i, _ in ladder]
        # run --trials auto's stop rule, a block standing for its round (metrics/precision.auto_stop)
        why = auto_stop(levels, done, max_trials=cap, elapsed_s=(now_ns() - start) / 1e9,
                        max_time_s=config.max_time_s, round_s=(now_ns() - block_start) / 1e9)
        unmet = ", ".join(_key(m, v) for (_, (m, v)), lp in zip(ladder, levels) if not lp.met)
        if why == REACHED:
            return sequence, f"every level within ±{pct:g}% after {done} pairs"
        if why == MAX_TRIALS:
            return sequence, f"--max-pairs {config.max_pairs}: {done} pairs measured, {unmet} short of ±{pct:g}%"
        if why == MAX_TIME:
            return sequence, (f"--max-time {config.max_time_s:g} s: {done} pairs measured (another block would end "
                              f"past it), {unmet} short of ±{pct:g}%")


def _key(mode: str, value: float) -> str:
    return f"c={value:g}" if mode == "concurrency" else f"r={value:g}/s"


def _boundary(runners: dict[str, LevelRunner], index: int) -> str | None:
    """The boundary the pairs of level ``index`` are read at: compare's rule over both runs."""
    results = [r.session.result for r in runners.values() if r.session.result is not None]
    try:
        return resolve_boundary([_only(res, index) for res in results], None)
    except UserError:
        return None


def _only(result: Result, index: int) -> Result:
    """``result`` with only level ``index`` (the boundary rule read over that level)."""
    return result.model_copy(update={"levels": [lv for lv in result.levels if lv.index == index]})


def _trial_figures(trials: list[LevelResult], boundary: str | None, t0_ns: int) -> dict[str, list[float | None]]:
    """Each trial's own throughput, power and per-kW figure at ``boundary`` (never the trials' mean a
    trial may carry) and its window's midpoint (seconds after ``t0_ns``)."""
    out: dict[str, list[float | None]] = {"tok": [], "power": [], "per_kw": [], "time": []}
    for t in trials:
        f = level_figures(t, boundary) if t.requests.completed > 0 else LevelFigures()
        out["tok"].append(f.get("output_tokens_per_s"))
        out["power"].append(f.get("avg_power_w") if boundary else None)
        out["per_kw"].append(f.get("output_tokens_per_s_per_kw") if boundary else None)
        w = t.window
        out["time"].append((w.start_ns + w.end_ns) / 2e9 - t0_ns / 1e9 if w is not None else None)
    return out


def _level_pairs(runners: dict[str, LevelRunner], index: int, t0_ns: int
                 ) -> tuple[str | None, dict[str, list[float | None]], dict[str, list[float | None]]]:
    b = _boundary(runners, index)
    ta, tb = runners["A"].trials_of(index), runners["B"].trials_of(index)
    n = min(len(ta), len(tb))
    return b, _trial_figures(ta[:n], b, t0_ns), _trial_figures(tb[:n], b, t0_ns)


def _per_kw_ratio(runners: dict[str, LevelRunner], index: int, t0_ns: int) -> PairedRatio | None:
    b, fa, fb = _level_pairs(runners, index, t0_ns)
    figure = "per_kw" if b else "tok"
    return paired_ratio(fa[figure], fb[figure], fa["time"], fb["time"])


def _paired_blocks(config: AbConfig, sessions: dict[str, RunSession], runners: dict[str, LevelRunner],
                   sequence: list[str], stopped: str, t0_ns: int) -> dict[str, PairedRun]:
    levels = []
    for index, (mode, value) in enumerate(sessions["A"].config.levels()):
        b, fa, fb = _level_pairs(runners, index, t0_ns)
        ta = runners["A"].trials_of(index)
        lv = ta[-1] if ta else None
        levels.append(PairedLevel(key=short_key(lv) if lv else _key(mode, value), label=lv.label if lv else "",
                                  index=index, boundary=b, a_tokens_per_s=fa["tok"], b_tokens_per_s=fb["tok"],
                                  a_power_w=fa["power"], b_power_w=fb["power"], a_per_kw=fa["per_kw"],
                                  b_per_kw=fb["per_kw"], a_time_s=fa["time"], b_time_s=fb["time"]))
    idle = {}
    ra = sessions["A"].result
    assert ra is not None
    for bnd, d in (ra.idle or {}).items():
        w = d.power_w
        if w is not None:
            idle[bnd] = float(w)
    out = {}
    for s, other in (("A", "B"), ("B", "A")):
        res = sessions[other].result
        assert res is not None
        out[s] = PairedRun(role=s, other_run_id=res.run_id, sequence=list(sequence), precision_pct=config.precision_pct,
                           max_pairs=config.max_pairs if config.precision_pct is not None else None, stopped=stopped,
                           shared_meter=True, shared_idle_power_w=idle, levels=levels)
    return out

