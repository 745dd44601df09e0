"""The commands that hold a ``RunConfig``: ``MeasureConfig`` (``wattbench measure``: the command and
the run's settings around it), ``TuneConfig`` (``wattbench tune``: the run every trial makes and the
search) and ``AbConfig`` with ``AbSide`` (``wattbench ab``: two sides measured in pairs over the
levels of ``run``; ``AB_LEAVES_OUT``: the run options ``ab`` does not take)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator

from wattbench.core.errors import UserError
from wattbench.config.flags import (AB, AT_LEAST_ONE, INDEX, MAX_SECONDS, MEASURE, NON_NEGATIVE, SECONDS, SEED, TUNE,
                                    Domain, Flag, FlaggedConfig)
from wattbench.config.run import RunConfig
from wattbench.config.shared import Boundary

class MeasureConfig(FlaggedConfig):
    """What ``wattbench measure`` runs (``run/measure.py``): the command, and the run's settings
    (``run``: sensors, idle, price, PUE, output, history; ``run.target``: a server whose
    ``/metrics`` to scrape)."""

    command: Annotated[list[str], Flag(
        "command", commands=(MEASURE,), positional=True, help="The command to run, after --.", show_default=False)]
    run: RunConfig
    tool: Annotated[str | None, Flag(  # None: recognised from the command (results/tools/registry.detect_tool)
        "--tool", commands=(MEASURE,), help="What COMMAND is: vllm-bench-serve, aiperf, guidellm, wattbench-run or "
        "command (default: recognised from it).")] = None
    result_files: Annotated[list[str], Flag(  # the tool's files, else found
        "--result", commands=(MEASURE,), help="The tool's result file (repeatable; default: found where its "
        "arguments put it).")] = Field(default_factory=list)
    window_from: Annotated[str | None, Flag(  # start/end markers
        "--window-from", commands=(MEASURE,), help="A file of 'start SECONDS [LABEL]' / 'end SECONDS' lines the "
        "command writes: one level per pair.")] = None
    cwd: str | None = None  # where the command runs (its relative result paths too)


class TuneConfig(FlaggedConfig):
    """What ``wattbench tune`` searches (``tune/run.py``): the run every trial makes (``base``:
    engine, model, workload, sensors, SLO, load candidates, as ``run``) and the search."""

    base: RunConfig
    axes: Annotated[list[str], Flag(
        "--axis", commands=(TUNE,), help="NAME=V1,V2,… an engine flag and its values (repeatable); default: the "
        "engine's built-in space.")] = Field(default_factory=list)
    space_file: Annotated[str | None, Flag(
        "--space", commands=(TUNE,), help="YAML/JSON space file (axes, ranges, conditions).")] = None
    power_limits_w: Annotated[list[float], Flag(
        "--power-limit", commands=(TUNE,), domain=Domain(unit="W"),
        help="GPU power limits to try, W (400,550,700). Needs --allow-gpu-settings and root.")] = (
        Field(default_factory=list))
    sm_clocks_mhz: Annotated[list[int], Flag(
        "--sm-clocks", commands=(TUNE,), domain=Domain(unit="MHz"),
        help="Locked SM clocks to try, MHz (1200,1590,1980). Needs --allow-gpu-settings and root.")] = (
        Field(default_factory=list))
    allow_gpu_settings: Annotated[bool, Flag(
        "--allow-gpu-settings", commands=(TUNE,), help="Allow changing the GPU power limit / clocks (restored after "
        "every trial).")] = False
    gpu_indices: Annotated[list[int] | None, Flag(  # GPU indices here; a number of GPUs in `plan roofline`
        "--gpus", commands=(TUNE,), domain=INDEX, help="GPU indices whose settings are changed (default: all).")] = None
    objective: Annotated[str, Flag(
        "--objective", commands=(TUNE,), help="goodput_per_kw, output_tokens_per_s_per_kw or j_per_output_token.")] = (
        "goodput_per_kw")
    boundary: Boundary
    strategy: Annotated[str, Flag(
        "--strategy", commands=(TUNE,), help="auto (exhaustive up to 16 configurations, else Optuna TPE), exhaustive "
        "or optuna.")] = "auto"
    max_trials: Annotated[int | None, Flag(
        "--max-trials", commands=(TUNE,), domain=AT_LEAST_ONE, help="Budget: configurations measured (the defaults "
        "included).")] = None
    max_minutes: Annotated[float | None, Flag(
        "--max-minutes", commands=(TUNE,), domain=Domain(hi=MAX_SECONDS / 60, unit="minutes"),
        help="Budget: no new trial starts after this many minutes.")] = None
    noise_pct: Annotated[float, Flag(  # single measurements closer than this are measured again
        "--noise-pct", commands=(TUNE,), domain=NON_NEGATIVE, help="Best two closer than this (single measurements) "
        "are measured again.")] = 5.0
    max_repeats: Annotated[int, Flag(
        "--max-repeats", commands=(TUNE,), domain=NON_NEGATIVE, help="Rounds of repeat measurements of the best "
        "two.")] = 2
    precision_pct: Annotated[float | None, Flag(  # None: repeat while the best two are within the noise
        "--precision", commands=(TUNE,), domain=Domain(hi=100.0, hi_open=True, unit="%"),
        help="Measure the best two configurations again until each one's score is known within PCT% (95% "
        "half-width of its measurements' mean; run --trials auto's rule), or --max-repeats / --max-minutes ends "
        "it.")] = None
    baseline: Annotated[bool, Flag(
        "--no-baseline", commands=(TUNE,), negated=True, help="Do not measure the engine defaults first (no gain is "
        "quoted).")] = True
    seed: Annotated[int, Flag("--seed", commands=(TUNE,), domain=SEED)] = 0  # the search's; the CLI seeds base too
    out: Annotated[str | None, Flag(
        "--out", "-o", commands=(TUNE,), help="Tune directory (default ./wattbench-results/tune-<time>).")] = None
    resume: Annotated[str | None, Flag(
        "--resume", commands=(TUNE,), help="Continue an interrupted tune in this directory.")] = None


# ------------------------------------------------------------------ wattbench ab

# The run options `ab` does not take: one server per side (the sides are its arguments), and what
# the paired design decides itself — how many times each level is measured and in which order
# (the pairs: ab's own --pairs, --precision, --max-pairs, --max-time, in place of --trials auto's), with no search (a search would choose different levels for A and
# B), no extra levels, no history check (the pairs are their own repeat) and no engine restarts.
AB_LEAVES_OUT = ("targets", "trials", "precision_pct", "max_trials", "max_time_s", "trial_order", "restart_engine",
                 "history_check", "sweep", "optimize", "prefill_decode_pair", "ray", "ray_actors")
AB_ENGINE, AB_ENGINE_DEFAULTS = "engine", "engine-defaults"
AB_SIDE_HELP = ("A server's base URL (http://host:8000), or `engine[:ARGS]` to start the embedded engine (--engine, "
                "--model, --device) with ARGS added to its flags, or `engine-defaults[:ARGS]` to start it with the "
                "engine's own defaults (none of wattbench's tuned flags).")


@dataclass(frozen=True)
class AbSide:
    """One side of ``wattbench ab`` as typed: a server's URL, or the embedded engine started with
    ``engine_args`` (``own_defaults``: without wattbench's tuned flags, the engine's own defaults)."""

    text: str
    url: str | None = None
    engine_args: tuple[str, ...] = ()
    own_defaults: bool = False

    @classmethod
    def parse(cls, text: str, which: str) -> "AbSide":
        import shlex

        t = text.strip()
        if not t:
            raise UserError(f"side {which} is empty: give a server's URL, `engine[:ARGS]` or `engine-defaults[:ARGS]`")
        head, sep, rest = t.partition(":")
        if head.lower() in (AB_ENGINE, AB_ENGINE_DEFAULTS) and (sep or t.lower() == head.lower()):
            try:
                args = tuple(shlex.split(rest))
            except ValueError as e:
                raise UserError(f"side {which} {text!r}: its engine flags do not parse ({e}); quote them as a shell "
                                "would") from None
            return cls(text=t, engine_args=args, own_defaults=head.lower() == AB_ENGINE_DEFAULTS)
        if "://" not in t:
            raise UserError(f"side {which} {text!r} is neither a URL (http://host:port) nor `engine[:ARGS]` / "
                            "`engine-defaults[:ARGS]`")
        return cls(text=t, url=t)

    @property
    def launched(self) -> bool:
        return self.url is None


class AbConfig(FlaggedConfig):
    """What ``wattbench ab`` measures (``run/ab.py``): two sides, each a server or a launch of the
    embedded engine, measured alternately in pairs over the levels of ``run`` (the options both sides
    share, as ``wattbench run`` takes them; ``--out DIR`` holds ``DIR/A`` and ``DIR/B``)."""

    side_a: Annotated[str, Flag("A", commands=(AB,), positional=True, help=AB_SIDE_HELP, show_default=False)]
    side_b: Annotated[str, Flag("B", commands=(AB,), positional=True, help="The other side, as A.",
                                show_default=False)]
    run: RunConfig = Field(default_factory=RunConfig)
    pairs: Annotated[int, Flag(
        "--pairs", commands=(AB,), domain=Domain(lo=3, lo_open=False),
        help="Pairs per level at least (each pair: one trial of A and one of B; whole A B B A blocks, so an odd N "
        "measures N+1).")] = 4
    precision_pct: Annotated[float | None, Flag(
        "--precision", commands=(AB,), domain=Domain(hi=100.0, unit="%"),
        help="Add A B B A blocks until every level's per-kW ratio B/A is known within ±PCT% (95%), or --max-pairs / "
        "--max-time ends it (default: --pairs only).")] = None
    max_pairs: Annotated[int, Flag(
        "--max-pairs", commands=(AB,), domain=Domain(lo=3, lo_open=False),
        help="With --precision: at most N pairs per level.")] = 16
    max_time_s: Annotated[float | None, Flag(
        "--max-time", commands=(AB,), domain=SECONDS,
        help="With --precision: no new block starts after this many seconds.")] = None

    @model_validator(mode="after")
    def _sides(self) -> "AbConfig":
        a, b = self.side("A"), self.side("B")
        if a.url and b.url and a.url.rstrip("/").removesuffix("/v1").rstrip("/") == \
                b.url.rstrip("/").removesuffix("/v1").rstrip("/"):
            raise ValueError(f"A and B are the same server ({a.url}): ab compares two servers (or two engine starts); "
                             "give B another URL")
        if self.max_pairs < self.pairs:
            raise ValueError(f"--max-pairs {self.max_pairs} is below --pairs {self.pairs}: give at least as many")
        return self

    def side(self, which: str) -> AbSide:
        return AbSide.parse(self.side_a if which == "A" else self.side_b, which)

    def side_config(self, which: str) -> RunConfig:
        """The ``RunConfig`` of side ``which``: the shared options with its target (or its engine flags
        added), its run directory (``--out DIR``: ``DIR/A``, ``DIR/B``), trials for the pairs and no
        history check."""
        s = self.side(which)
        fields = self.run.model_dump(exclude={"api_key", "headers"})
        fields.update(api_key=self.run.api_key, headers=dict(self.run.headers), history_check=False,
                      trials=self.max_pairs if self.precision_pct is not None else self.pairs, restart_engine=False)
        model = self.run.model or self.run.engine_model  # --model: the served name, or the preset to start
        if s.url:
            fields.update(target=s.url, targets=[], model=model, engine_model=None)
        else:
            fields.update(target=None, targets=[], model=None, engine_model=model,
                          engine_args=[*self.run.engine_args, *s.engine_args])
        if self.run.out:
            fields["out"] = str(Path(self.run.out).expanduser() / which)
        return RunConfig(**fields)
