"""``tune(config) -> TuneResult``: search engine settings (and GPU power settings) for the best
goodput per kW under an SLO, on top of the run pipeline.

Each trial is a normal run (``run_benchmark``) of the engine started with the configuration's
arguments and ``--optimize``: its own run directory under ``DIR/trials/NNN`` (registered in the
history store, tagged ``<tune id>.trial-NNN``: a tag has no '/'), engine start timed from the run's progress events and outside
every measurement window (the run measures idle power and levels only after the engine is ready).
The first trial is the engine's defaults (the baseline the gain is quoted against). GPU settings,
when searched, are applied before the trial's run and restored after it (:mod:`wattbench.tune.gpu`).
``tune.json`` is rewritten after every trial; ``resume=DIR`` continues an interrupted tune.

``evaluate`` is the seam for tests (a scripted engine with a known efficiency surface): a callable
``(trial: TrialRecord, base: RunConfig, fixed_level) -> TrialRecord`` filling status, score and figures.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from pathlib import Path
from typing import Any, Callable
from datetime import datetime, timezone

from wattbench.config.run import RunConfig
from wattbench.config.run_commands import TuneConfig
from wattbench.core.errors import UserError
from wattbench.core.numbers import fmt_pct_against
from wattbench.tune import score as sc
from wattbench.metrics.noise import RatioNoise
from wattbench.metrics.plateau import margin
from wattbench.metrics.precision import auto_stop, level_precision
from wattbench.metrics.trials import rel_half_width
from wattbench.results.tune import (LOWER_IS_BETTER, OBJECTIVES, Budget, Decision, FinalistPrecision, Margin,
                                    PrecisionOutcome, Recommendation, TrialRecord, TuneResult, load_tune, write_tune)
from wattbench.tune.space import Space, build_space, config_key, describe, engine_args, gpu_settings
from wattbench.accounting.boundaries import WHOLE_BOUNDARIES
from wattbench.core.errors import EngineError, Interrupted
from wattbench.engines import registry as engines
from wattbench.metrics.slo import parse_slos
from wattbench.results.rundir import check_output_dir
from wattbench.run import run_benchmark
from wattbench.telemetry.base import BOUNDARIES
from wattbench.tune import strategy as st
from wattbench.tune.gpu import GpuSettings, state_path

from wattbench.run.events import Phase, ProgressEvent
from wattbench.tune.events import GpuRestored, InTrial, Progress, TrialDone, TrialStarted
# Measures one trial (RunEvaluator, or a scripted one in tests): (the trial, the base run
# configuration, a fixed (load mode, value) or None to search, the objective, the boundary, the
# trial's run directory, its history tags) -> the trial with its status, figures and score.
Evaluate = Callable[[TrialRecord, RunConfig, "tuple[str, float] | None", str, "str | None", Path, list[str]],
                    TrialRecord]


def validate(cfg: TuneConfig) -> Space:
    """Everything checked before anything runs or is written; returns the space."""
    if cfg.objective not in OBJECTIVES:
        raise UserError(f"--objective {cfg.objective!r}: choose one of {', '.join(OBJECTIVES)}")
    if cfg.base.target or cfg.base.targets:
        raise UserError("wattbench tune starts the engine itself (it restarts it per configuration): "
                        "give --engine and --model, not --target")

    parse_slos(cfg.base.slo)  # the one SLO grammar; raises on bad input
    if cfg.boundary is not None:
        if cfg.boundary not in BOUNDARIES:
            raise UserError(f"--boundary {cfg.boundary!r}: choose one of {', '.join(BOUNDARIES)}")

        if cfg.boundary not in WHOLE_BOUNDARIES and cfg.boundary != "cpu":
            raise UserError(f"--boundary {cfg.boundary}: a part of a boundary has no tokens-per-kW figure to "
                            f"score (results.headline); choose one of {', '.join(WHOLE_BOUNDARIES)}")
    space = build_space(cfg.base.engine, cfg.axes, cfg.space_file, cfg.power_limits_w, cfg.sm_clocks_mhz)
    gpu_axes = [a for a in space.axes if a.is_gpu]
    if gpu_axes and not cfg.allow_gpu_settings:
        raise UserError("searching GPU power settings changes the GPU's power limit / clocks: add "
                        "--allow-gpu-settings (as root) to allow it")
    if space.size() < 1:
        raise UserError("the search space is empty")
    if cfg.out and not cfg.resume:
        check_output_dir(cfg.out, "--out")
    return space


def _objective_for_run(objective: str) -> str:
    # J/token orders levels exactly like output tokens/s per kW (J/token = 1000 / (tok/s per kW))
    return "output_tokens_per_s_per_kw" if objective == "j_per_output_token" else objective


class RunEvaluator:
    """Measures a trial with ``run_benchmark`` (the real path)."""

    def __init__(self, progress: Progress | None = None) -> None:
        self.progress = progress or (lambda event: None)

    def __call__(self, trial: TrialRecord, base: RunConfig, fixed_level: tuple[str, float] | None,
                 objective: str, boundary: str | None, run_dir: Path, tags: list[str]) -> TrialRecord:
        upd: dict[str, Any] = {"engine_args": list(base.engine_args) + trial.engine_args, "out": str(run_dir),
                               "tags": list(base.tags) + tags}
        if fixed_level is None:
            upd["optimize"] = _objective_for_run(objective)
        else:
            mode, v = fixed_level
            upd.update(optimize=None, concurrency=[int(v)] if mode == "concurrency" else [],
                       rate=[v] if mode == "rate" else [])
        cfg = base.model_copy(update=upd)
        RunConfig.model_validate(cfg.model_dump())
        marks: dict[str, float] = {}

        def on_event(event: ProgressEvent) -> None:
            now = time.perf_counter()
            if isinstance(event, Phase) and event.name == "engine":
                marks["engine"] = now
            elif "engine" in marks and "ready" not in marks:
                marks["ready"] = now
            self.progress(InTrial(trial.index, event))

        t0 = time.perf_counter()

        try:
            res = run_benchmark(cfg, on_event)
        except Interrupted:
            raise
        except UserError as e:
            if not isinstance(e, EngineError):
                raise  # bad input: the same for every configuration
            trial.status, trial.detail = "failed", f"engine did not start: {str(e).splitlines()[0]}"
            trial.duration_s = time.perf_counter() - t0
            trial.run_dir = str(run_dir)
            return trial
        except Exception as e:  # noqa: BLE001 - an engine that dies mid-run is a result of the trial
            trial.status, trial.detail = "failed", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            trial.duration_s = time.perf_counter() - t0
            trial.run_dir = str(run_dir)
            return trial
        trial.duration_s = time.perf_counter() - t0
        if "ready" in marks:
            trial.engine_start_s = marks["ready"] - marks["engine"]
        trial.run_dir, trial.run_id = str(run_dir), res.run_id
        trial.levels_measured = len(res.levels)
        has_slo = bool(base.slo)
        if fixed_level is None:
            trial.status, trial.figures, trial.detail = sc.result_figures(res, boundary, has_slo)
        elif res.levels:
            trial.status, trial.figures = "done", sc.trial_figures(res.levels[0], boundary, has_slo)
        if fixed_level is None and res.optimize is not None and trial.status == "done":
            trial.figures.top_of_ladder = bool(res.optimize.top_of_ladder)
            trial.figures.ladder = list(res.optimize.candidates or [])
        else:
            trial.status, trial.detail = "failed", "the repeat measured no level"
        trial.score = trial.figures.objective(objective) if trial.status == "done" else None
        if trial.status == "done" and trial.score is None:
            trial.status, trial.detail = "failed", f"the chosen level has no {objective} (no power measured?)"
        return trial


def _new_id() -> tuple[str, str]:
    now = datetime.now(timezone.utc)
    return "tune-" + now.strftime("%Y-%m-%dT%H-%M-%S"), now.isoformat(timespec="seconds").replace("+00:00", "Z")


def tune(cfg: TuneConfig, *, evaluate: Evaluate | None = None, progress: Progress | None = None,
         gpu: GpuSettings | None = None) -> TuneResult:
    """Run the tune as configured (see the module docstring). ``gpu``: a ``GpuSettings`` (the seam
    for a fake NVML); by default one is made when the space has GPU axes."""
    progress = progress or (lambda event: None)
    space = validate(cfg)
    if evaluate is None:
        engines.get_engine(cfg.base.engine).check_installed()  # once, before anything is written or changed
    gpu_axes = any(a.is_gpu for a in space.axes)
    if gpu is None and (gpu_axes or _state_pending()):
        gpu = GpuSettings(cfg.gpu_indices)
    if gpu is not None:
        # a tune killed mid-trial left settings changed: put them back before anything else
        if gpu.state.exists() and not gpu.root:
            raise UserError(f"GPU settings changed by an earlier wattbench tune are still recorded in {gpu.state}; "
                            "run `sudo wattbench doctor --restore` to put them back")
        done = gpu.restore()
        if done:
            progress(GpuRestored(tuple(done)))
        if gpu_axes:
            pw = [float(v) for a in space.axes if a.name == "power-limit" for v in a.values if v != "default"]
            ck = [int(v) for a in space.axes if a.name == "sm-clocks" for v in a.values if v != "default"]
            gpu.check(pw, ck)
    name = st.choose(space, cfg.max_trials, cfg.strategy)
    if cfg.resume:
        d = Path(cfg.resume).expanduser()
        t = load_tune(d)
        if t.engine != cfg.base.engine or t.space != space.record() or t.objective != cfg.objective:
            raise UserError(f"--resume {d}: that tune searched another engine, space or objective; "
                            "give the same flags or start a new tune")
        t.status = "running"
        name = t.strategy  # the strategy it started with, whatever the budget now
    else:
        tune_id, created = _new_id()
        d = Path(cfg.out or Path("wattbench-results") / tune_id).expanduser()
        if (d / "tune.json").exists():
            raise UserError(f"--out {d} already holds a tune.json; use --resume {d} to continue it")
        t = TuneResult(tune_id=tune_id, created_at=created, engine=cfg.base.engine, model=cfg.base.engine_model,
                       objective=cfg.objective, boundary=cfg.boundary, slo=cfg.base.slo, space=space.record(),
                       strategy=name, budget=Budget(max_trials=cfg.max_trials, max_minutes=cfg.max_minutes),
                       config=cfg.model_dump(mode="json", exclude={"resume"}))
    t.directory = str(d)
    strat = st.make(name, space, cfg.seed, cfg.objective)
    for tr in t.trials:  # replay what an interrupted tune measured
        if tr.repeat_of is None:
            strat.tell(tr.config, tr.params, tr.score)
    write_tune(d, t)
    evaluate = evaluate or RunEvaluator(progress)
    ctx = gpu if gpu is not None else contextlib.nullcontext()
    # trials start from the engine's own defaults: wattbench's tuned defaults for the embedded
    # engine would otherwise apply to every configuration without a --cb-* flag
    prev_env = os.environ.get("WATTBENCH_TUNED_DEFAULTS")
    os.environ["WATTBENCH_TUNED_DEFAULTS"] = "0"
    t0 = time.monotonic()
    try:
        with ctx:
            _search(cfg, t, d, strat, evaluate, gpu, progress, t0)
            _repeats(cfg, t, d, evaluate, gpu, progress, t0)
        t.status = "complete"
    except KeyboardInterrupt:
        t.status, t.status_detail = "interrupted", f"interrupted; resume with --resume {d}"
        raise
    except BaseException as e:
        stopped = isinstance(e, (SystemExit, Interrupted))
        t.status = "interrupted" if stopped else "failed"
        t.status_detail = (f"interrupted; resume with --resume {d}" if stopped else str(e) or type(e).__name__)
        raise
    finally:
        if prev_env is None:
            os.environ.pop("WATTBENCH_TUNED_DEFAULTS", None)
        else:
            os.environ["WATTBENCH_TUNED_DEFAULTS"] = prev_env
        conclude(t, cfg)
        write_tune(d, t)
    return t


def _state_pending() -> bool:
    return state_path().exists()


def _budget_left(cfg: TuneConfig, t: TuneResult, t0: float) -> bool:
    n = sum(1 for tr in t.trials if tr.repeat_of is None)
    if cfg.max_trials is not None and n >= cfg.max_trials:
        return False
    if cfg.max_minutes is not None and (time.monotonic() - t0) / 60.0 >= cfg.max_minutes:
        return False
    return True


def trial_tag(tune_id: str, index: int) -> str:
    return f"{tune_id}.trial-{index:03d}"


def _run_trial(cfg: TuneConfig, t: TuneResult, d: Path, evaluate: Evaluate, gpu: GpuSettings | None,
               progress: Progress, config: dict[str, Any], params: dict[str, Any], repeat_of: int | None = None,
               level: tuple[str, float] | None = None) -> TrialRecord:
    idx = len(t.trials)
    tr = TrialRecord(index=idx, config=config, params=params, label=describe(config), engine_args=engine_args(config),
                     repeat_of=repeat_of)
    settings = gpu_settings(config)
    progress(TrialStarted(idx, tr.label, repeat_of))
    try:
        if settings:
            assert gpu is not None  # GPU settings come from GPU axes, for which tune() made one
            tr.gpu_settings = gpu.apply(settings)
        tags = [trial_tag(t.tune_id, idx)]  # a history tag names one run: one per trial
        tr = evaluate(tr, cfg.base, level, cfg.objective, cfg.boundary, d / "trials" / f"{idx:03d}", tags)
    finally:
        if settings and gpu is not None:
            gpu.restore()  # after every trial
    t.trials.append(tr)
    write_tune(d, t)
    progress(TrialDone(tr))
    return tr


def _search(cfg: TuneConfig, t: TuneResult, d: Path, strat: st.Strategy, evaluate: Evaluate,
            gpu: GpuSettings | None, progress: Progress, t0: float) -> None:
    done = {config_key(tr.config) for tr in t.trials if tr.repeat_of is None}
    if cfg.baseline and config_key({}) not in done and _budget_left(cfg, t, t0):
        tr = _run_trial(cfg, t, d, evaluate, gpu, progress, {}, {})
        strat.tell({}, {}, tr.score)
    while _budget_left(cfg, t, t0):
        nxt = strat.ask()
        if nxt is None:
            break
        config, params = nxt
        tr = _run_trial(cfg, t, d, evaluate, gpu, progress, config, params)
        strat.tell(config, params, tr.score)


def finalist_precision(t: TuneResult, target: float, max_rounds: int, elapsed_s: float,
                       max_time_s: float | None, round_s: float | None) -> tuple[str | None, PrecisionOutcome]:
    """``--precision``: ``run --trials auto``'s stop rule (``metrics.precision.auto_stop``) over the
    best two configurations, each one's measurements (its first and its repeats) read as a level's
    trials: the relative 95% half-width of their mean against ``target``. Returns why to stop (None:
    measure both again) and what ``tune.json``'s ``decision`` keeps of it."""
    ranked = sc.ranking(t)[:2]
    precs, out = [], {}
    for i, stats in ranked:
        rel = rel_half_width(stats.mean, stats.low, stats.high)  # the log half-width, as every noise rule reads an interval
        p = level_precision(stats.n, rel, target)
        precs.append(p)
        out[str(i)] = FinalistPrecision(measurements=stats.n, reached_pct=None if rel is None else rel * 100.0,
                                        met=p.met, more_measurements=p.more)
    rounds = min((p.trials for p in precs), default=0)
    why = auto_stop(precs, rounds, max_trials=max_rounds, elapsed_s=elapsed_s, max_time_s=max_time_s,
                    round_s=round_s)
    return why, PrecisionOutcome(asked_pct=target * 100.0, stopped=why, finalists=out)


def _chosen_load(tr: TrialRecord) -> tuple[str, float]:
    """The (load mode, value) a done trial chose (its figures name it): a repeat measures it again."""
    value = tr.figures.load_value
    if value is None:
        raise ValueError(f"trial {tr.index} has no chosen load to repeat")  # a done trial always names it
    return str(tr.figures.load_mode), float(value)


def _repeats(cfg: TuneConfig, t: TuneResult, d: Path, evaluate: Evaluate, gpu: GpuSettings | None,
             progress: Progress, t0: float) -> None:
    """Measure the best two again while their difference is inside the noise; with ``--precision``,
    until each one's score is known within it (``finalist_precision``)."""
    if cfg.precision_pct is not None:
        _repeats_to_precision(cfg, cfg.precision_pct, t, d, evaluate, gpu, progress, t0)
        return
    for _ in range(cfg.max_repeats):
        ranked = sc.ranking(t)
        if len(ranked) < 2:
            return
        (ia, a), (ib, b) = ranked[0], ranked[1]
        pl, _ = sc.plateau(t)
        if not sc.needs_repeat(a, b, cfg.objective, cfg.noise_pct, pl, ia, ib):
            return
        if cfg.max_minutes is not None and (time.monotonic() - t0) / 60.0 >= cfg.max_minutes:
            t.warnings.append("the best two configurations are within the noise (or the noise cannot yet tell them "
                              "apart) and the time budget is spent")
            return
        for i in (ia, ib):
            orig = t.trials[i]
            level = _chosen_load(orig)
            _run_trial(cfg, t, d, evaluate, gpu, progress, orig.config, orig.params, repeat_of=i, level=level)


def _repeats_to_precision(cfg: TuneConfig, precision_pct: float, t: TuneResult, d: Path, evaluate: Evaluate,
                          gpu: GpuSettings | None, progress: Progress, t0: float) -> None:
    round_s = None
    while True:
        elapsed = time.monotonic() - t0
        why, kept = finalist_precision(t, precision_pct / 100.0, 1 + cfg.max_repeats, elapsed,
                                       None if cfg.max_minutes is None else cfg.max_minutes * 60.0, round_s)
        t.precision = kept
        if why is not None:
            if why != "reached":
                t.warnings.append(f"the best two configurations are not known within ±{cfg.precision_pct:g}% "
                                  f"({why}): " + ", ".join(
                                      f"trial {i} ±{fmt_pct_against(f.reached_pct, cfg.precision_pct)}" if f.reached_pct is not None
                                      else f"trial {i} one measurement" for i, f in kept.finalists.items()))
            return
        r0 = time.monotonic()
        for i, _ in sc.ranking(t)[:2]:
            orig = t.trials[i]
            level = _chosen_load(orig)
            _run_trial(cfg, t, d, evaluate, gpu, progress, orig.config, orig.params, repeat_of=i, level=level)
        round_s = time.monotonic() - r0


def serve_command(engine: str, model: str | None, args: list[str], gpu: dict[str, float]) -> str:
    """The command line that serves a configuration outside wattbench."""
    m = model or "MODEL"
    base = {
        "vllm": ["vllm", "serve", m],
        "transformers": ["transformers", "serve", m, "--continuous-batching"],
        "sglang": ["python", "-m", "sglang.launch_server", "--model-path", m],
        "llamacpp": ["llama-server", "-m", m],
    }.get(engine, [engine, m])
    lines = []
    if "power_limit_w" in gpu:
        lines.append(f"sudo nvidia-smi -pl {gpu['power_limit_w']:g}")
    if "sm_clock_mhz" in gpu:
        c = int(gpu["sm_clock_mhz"])
        lines.append(f"sudo nvidia-smi -lgc {c},{c}")
    lines.append(shlex.join(base + list(args)))
    return " && ".join(lines)


def conclude(t: TuneResult, cfg: TuneConfig | None = None) -> None:
    """Recommended configuration, gain over the defaults, Pareto front, score by axis."""
    ranked = sc.ranking(t)
    t.by_axis = sc.by_axis(t)
    lat = "tpot_p99_ms"
    if t.slo and t.slo.strip().lower().startswith("ttft"):
        lat = "ttft_p99_ms"
    t.pareto = sc.pareto(t.trials, latency=lat)
    base = next((tr for tr in t.trials if tr.repeat_of is None and not tr.config), None)
    t.baseline_index = base.index if base else None
    if not ranked:
        t.recommended = None
        return
    i, stats = ranked[0]
    win = t.trials[i]
    base_stats = dict(ranked).get(base.index) if base else None
    gain = sc.gain_pct(stats.mean, base_stats.mean if base_stats else None, t.objective)
    rec = t.recommended = Recommendation(
        trial=i, label=win.label, config=win.config, engine_args=win.engine_args,
        gpu_settings=gpu_settings(win.config), score=stats.mean, score_ci=stats, figures=win.figures,
        gain_over_defaults_pct=gain, baseline_score=base_stats.mean if base_stats else None,
        serve_command=serve_command(t.engine, t.model, win.engine_args, gpu_settings(win.config)),
        summary=_summary(t, gain, base_stats is not None),
    )
    pl, basis = sc.plateau(t)
    hib = t.objective not in LOWER_IS_BETTER
    if len(ranked) >= 2:
        (ia, a), (ib, b) = ranked[0], ranked[1]
        t.decision = Decision(best=ia, runner_up=ib, best_score=a, runner_up_score=b,
                              separated=not sc.needs_repeat(a, b, t.objective, cfg.noise_pct if cfg else 5.0, pl, ia, ib),
                              plateau=[int(v) for v in pl.values] if pl else [], noise_basis=basis)
        m = margin(pl, float(ia), float(ib), higher_is_better=hib) if pl else None
        rec.margin_over_runner_up = _margin(m, ib)
    if base is not None and base.index != i and pl is not None:
        rec.margin_over_defaults = _margin(margin(pl, float(i), float(base.index), higher_is_better=hib), base.index)
    if win.figures.top_of_ladder:
        msg = (f"the recommended configuration's chosen load ({win.figures.load_mode} "
               f"{win.figures.load_value:g}) is the top of the ladder it searched: a higher "
               "load may be better (widen --concurrency / --max-concurrency)")
        if msg not in t.warnings:
            t.warnings.append(msg)


def _margin(m: RatioNoise | None, other: int) -> Margin | None:
    """A ratio of scores with its noise interval, as ``tune.json`` keeps it."""
    if m is None:
        return None
    return Margin(trial=other, ratio=m.ratio, low=m.low, high=m.high, within_noise=m.within, basis=m.basis,
                  text=m.text())


def _summary(t: TuneResult, gain: float | None, has_base: bool) -> str:
    what = {"goodput_per_kw": "goodput per kW", "output_tokens_per_s_per_kw": "output tokens/s per kW",
            "j_per_output_token": "energy per output token"}[t.objective]
    slo = f" at the same SLO ({t.slo})" if t.slo else ""
    if gain is None:
        return "no gain quoted: the engine defaults " + ("did not score" if has_base else "were not measured")
    if t.objective == "j_per_output_token":
        return f"{_pct(gain)} output tokens per joule (lower {what}) vs the engine defaults{slo}"
    return f"{_pct(gain)} {what} vs the engine defaults{slo}"


def _pct(gain: float) -> str:
    """``+30%``; a gain under 10% keeps one decimal (``+0.5%``), not rounded up to ``+1%``."""
    return f"{gain:+.0f}%" if abs(gain) >= 10 else f"{gain:+.1f}%"
