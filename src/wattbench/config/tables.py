"""The tables the command line is checked against, generated from the flags of every configuration
model (``CONFIG_MODELS``): the numbers each flag takes (``FLAG_DOMAINS``, ``COMMAND_FLAG_DOMAINS``;
``domain_for`` reads them) and the text options where an empty value means something
(``EMPTY_TEXT_OK``)."""

from __future__ import annotations

from pydantic import BaseModel

from wattbench.config.commands import (AgreeOptions, CompareOptions, DoctorOptions, MonitorOptions, RegressOptions,
                                       ReportOptions, SensorsOptions)
from wattbench.config.flags import EVERY, POSITIVE, Domain, FlaggedConfig, flags
from wattbench.config.history import (HistoryBaselineOptions, HistoryImportOptions, HistoryListOptions,
                                      HistoryNoiseOptions, HistoryShowOptions, HistoryTagOptions, HistoryUntagOptions)
from wattbench.config.plan import PlanPowerFirstOptions, PlanRackOptions, PlanRooflineOptions, PlanTcoOptions
from wattbench.config.run import RunConfig
from wattbench.config.run_commands import AbConfig, MeasureConfig, TuneConfig

# ------------------------------------------------------------------ the tables, generated from the fields

CONFIG_MODELS: tuple[type[FlaggedConfig], ...] = (RunConfig, MeasureConfig, TuneConfig, AbConfig, PlanRooflineOptions,
                                                  PlanRackOptions, PlanPowerFirstOptions, PlanTcoOptions,
                                                  HistoryListOptions, HistoryShowOptions, HistoryTagOptions,
                                                  HistoryUntagOptions, HistoryBaselineOptions, HistoryNoiseOptions,
                                                  HistoryImportOptions, CompareOptions, RegressOptions, AgreeOptions,
                                                  ReportOptions, SensorsOptions, MonitorOptions, DoctorOptions)


def flag_domains(*models: type[BaseModel]) -> dict[tuple[str, str], Domain]:
    """(command, flag) -> the numbers it takes, for every option of ``models`` that declares a domain."""
    return {(c, f.name): f.domain for m in models for _, f in flags(m) if f.domain is not None for c in f.commands}


COMMAND_FLAG_DOMAINS: dict[tuple[str, str], Domain] = flag_domains(*CONFIG_MODELS)
FLAG_DOMAINS: dict[str, Domain] = {
    **{flag: d for (c, flag), d in COMMAND_FLAG_DOMAINS.items() if c not in EVERY},
    # a flag of a one-command model that takes other numbers than run's (``plan roofline --gpus``) keeps its own
    **{flag: d for (c, flag), d in COMMAND_FLAG_DOMAINS.items() if c in EVERY},  # a flag of another command that takes other numbers (--gpus) keeps its own
}

# Text options: an empty value given on the command line (``-c ''``, ``--out ''``, ``--slo ''`` were
# read as not given, ``--tag ''`` was registered) is refused in one line, except where empty means
# something (``Flag.empty_means``). Checked by ``cli.common.text_gate`` as the command line is
# parsed, so a new option is covered when it is declared.
EMPTY_TEXT_OK: dict[str, str] = {f.name: f.empty_means for m in CONFIG_MODELS for _, f in flags(m)
                                 if f.empty_means is not None}


def domain_for(flag: str, command: str | None = None) -> Domain:
    """What ``flag`` takes (in ``command``): its field's domain, else its table entry, else positive numbers."""
    if command is not None and (command, flag) in COMMAND_FLAG_DOMAINS:
        return COMMAND_FLAG_DOMAINS[(command, flag)]
    return FLAG_DOMAINS.get(flag, POSITIVE)
