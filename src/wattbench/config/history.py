"""The options of the ``history`` commands (``list``, ``show``, ``tag``, ``untag``, ``baseline``,
``noise``, ``import``), one model each, and the filters ``list`` and ``noise`` share."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from wattbench.config.flags import EVERY, NON_NEGATIVE, Flag, FlaggedConfig
from wattbench.config.shared import AsJson, HistoryDb

# wattbench history
HISTORY_LIST, HISTORY_NOISE = "history list", "history noise"
ModelFilter = Annotated[str | None, Field(default=None), Flag("--model", commands=EVERY,
                                                               help="Substring of the model name.")]
EngineFilter = Annotated[str | None, Field(default=None), Flag("--engine", commands=EVERY,
                                                                help="Substring of the engine name.")]
GpuFilter = Annotated[str | None, Field(default=None), Flag(
    "--gpu", commands=EVERY, help="Substring of the GPU description.",
    help_in={HISTORY_NOISE: "Substring of the machine (GPU, CPU)."})]


class HistoryListOptions(FlaggedConfig):
    """``history list``: which registered runs to list."""

    model: ModelFilter
    engine: EngineFilter
    gpu: GpuFilter
    target: Annotated[str | None, Flag("--target", "-t", commands=EVERY, help=(
        "Substring of the target (host:port, or the launched engine)."))] = None
    label: Annotated[str | None, Flag("--label", commands=EVERY, help="Substring of the --config-label.")] = None
    tag: Annotated[str | None, Flag("--tag", commands=EVERY, help="Only the run with this tag.")] = None
    kind: Annotated[str | None, Flag("--kind", commands=EVERY, help="run or agree.")] = None
    since: Annotated[str | None, Flag("--since", commands=EVERY, help=(
        "ISO date, e.g. 2026-11-01 (or 2026-11-01T09:00)."))] = None
    limit: Annotated[int, Flag("--limit", commands=EVERY, domain=NON_NEGATIVE,
                               help="At most this many runs (0 = all).")] = 50
    full_ids: Annotated[bool, Flag("--full-ids", commands=EVERY, help=(
        "Show each run id whole (by default the shortest prefix that names it, as git shortens commits; "
        "--json always has the whole id)."))] = False
    db: HistoryDb
    as_json: AsJson


class HistoryShowOptions(FlaggedConfig):
    """``history show``: one run."""

    ref: Annotated[str, Flag("REF", commands=EVERY, positional=True,
                             help="Run directory, run id, id prefix, tag or baseline.")]
    db: HistoryDb
    as_json: AsJson


class HistoryTagOptions(FlaggedConfig):
    """``history tag``: a run and the tag it gets."""

    ref: Annotated[str, Flag("REF", commands=EVERY, positional=True, help="The run to tag.")]
    tag: Annotated[str, Flag("TAG", commands=EVERY, positional=True, help="The tag.")]
    force: Annotated[bool, Flag("--force", commands=EVERY, help="Move the tag if it names another run.")] = False
    db: HistoryDb
    as_json: AsJson


class HistoryUntagOptions(FlaggedConfig):
    """``history untag``: the tag to remove."""

    tag: Annotated[str, Flag("TAG", commands=EVERY, positional=True, help="The tag to remove.")]
    db: HistoryDb


class HistoryBaselineOptions(FlaggedConfig):
    """``history baseline``: a baseline's name and the run it points at (each optional)."""

    name: Annotated[str | None, Flag("NAME", commands=EVERY, positional=True,
                                     help="Baseline name, e.g. main.")] = None
    ref: Annotated[str | None, Flag("REF", commands=EVERY, positional=True, help="The run it points at.")] = None
    db: HistoryDb
    as_json: AsJson


class HistoryNoiseOptions(FlaggedConfig):
    """``history noise``: which configurations' run-to-run spread to show."""

    model: ModelFilter
    engine: EngineFilter
    gpu: GpuFilter
    min_runs: Annotated[int, Flag("--min-runs", commands=EVERY,
                                  help="Only configurations with at least this many runs.")] = 2
    db: HistoryDb
    as_json: AsJson


class HistoryImportOptions(FlaggedConfig):
    """``history import``: the run directories to register."""

    paths: Annotated[list[str], Flag("PATHS", commands=EVERY, positional=True,
                                     help="Run directories or folders holding them.")]
    db: HistoryDb
    as_json: AsJson
