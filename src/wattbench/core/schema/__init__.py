"""The versioned result schema (pydantic v2).

A run directory holds ``result.json`` (this model), ``requests.jsonl`` (one ``RequestRecord`` per
line), ``telemetry.jsonl`` (raw sensor samples) and reports. Units are in every name.
``SCHEMA_VERSION`` bumps on any incompatible change; readers refuse newer major versions.

Version history:

- 1: run analyses in untyped ``extra`` keys.
- 2: the trials block (``LevelResult.trials``), the memory / rest-of-board split
  (``LevelResult.power_split``), what a saturated client biases (``LevelResult.saturated_figures``
  / ``saturation_kinds``), the auto sweep and the optimiser (``Result.sweep`` /
  ``Result.optimize``), the Pareto frontiers (``Result.pareto``) and the idle windows
  (``Result.idle_window`` / ``Result.idle_after_window``) are typed fields. A version-1 file loads:
  ``_from_v1`` moves those ``extra`` keys to their fields. Typed since within version 2 (added with the record spool;
  moved from ``extra`` when a file still has them there, of either version): the prefill/decode
  split (``Result.prefill_decode``), the carbon intensity (``Result.carbon``, a ``CarbonIntensity``
  or ``None``) and, per level, ``trial``, ``timing``, ``thermal_before``, ``oversaturation``,
  ``stopped_early`` and ``target_down``; then the workload's description (``Result.workload``, a
  ``WorkloadInfo``), how prompt lengths were counted (``Result.prompt_length_source``: a file
  that has it per level in ``extra`` has it moved to the run's field, where it was the same) and,
  for a result read from a tune directory, which trial it is (``Result.tune``). Not stored since:
  the run directory's path (``extra["run_dir"]``: where the result lives is not a result; a file
  that has it keeps it in ``extra``).  Added within version 2 (optional, absent in older files): ``Result.measure``
  (``MeasureInfo``) and ``LevelResult.tool`` (``ToolLevel``) for ``wattbench measure -- COMMAND``;
  ``LevelResult.precision`` (``Precision``) and ``NoiseInfo.auto_trials`` (``AutoTrials``) for
  ``run --trials auto``.  ``LevelResult.series`` (``SteadySeries``: a trial's per-second steady series) and
  ``LevelResult.stationarity`` (``Stationarity``: drift, its cause, the warm-up estimate),
  ``TrialsBlock.thermal`` (each trial's ``Thermal``), ``Thermal.cpu_mhz`` and
  ``NoiseInfo.precondition`` (``Preconditioning``, ``run --precondition``); then ``LevelResult.host_cpu``
  (``HostCpu``: the host's CPUs over a trial), ``TrialsBlock.host_cpu`` (each trial's) and
  ``Preconditioning.round_host_cpu`` (each load's).
  Typed since within version 2, same keys as before: ``LevelResult.goodput`` (``Goodput``),
  ``thermal`` and ``thermal_before`` (``Thermal``), ``server_metrics`` (``ServerMetrics``), until
  then free dicts (``core/schema/blocks.py``). An older file's dict loads into the model; a key the
  model does not name is kept (an extra, written back as read); an empty goodput dict reads as none.
  Likewise, same keys as before: ``Result.sensors`` (``SensorChannel``), ``Result.idle``
  (``IdleBaseline``) and ``Result.prefill_decode``'s blocks (``PrefillDecodeFit``,
  ``CoefficientCheck``); ``Result.config`` (``RecordedConfig``: the run's settings by name, written
  back with the keys the file held, in its order; a key it does not name kept as an extra); then
  ``BoundaryEnergy.cross_check`` (``CrossCheck``, per device ``DeviceCrossCheck``: an empty one, what
  a boundary without a counter and power pair had, reads as none), ``LoadStats.actors``
  (``LoadActorInfo``, one per Ray load actor), ``ServerInfo.stream_batching`` (``StreamBatching``)
  and ``WorkloadInfo.tokenizer`` (``TokenizerInfo``), the last two written with the keys they were
  given (``{}`` where nothing is known).

What stays free-form (``dict[str, Any]``) is what wattbench does not shape: the server's and the
engine's own settings (``ServerIdentity.exposed``, ``ServerInfo.effective_config``), request fields
the user or an engine adds (``ServerInfo.extra_body``) and keys an older file holds that no field
names (``Result.extra``, ``LevelResult.extra``). ``tests/unit/core/test_schema_free_form.py`` lists
each with its reason, and fails on a new one.

The models live in sibling modules along the data's seams — ``records`` (one request),
``measures`` (a window's figures: latency, throughput, load, energy, validity), ``kinds`` (the
one table of finding kinds), ``blocks`` (what a
level observed beside them: goodput, thermal state, the server's metrics), ``level`` (one
level and its trials; ``figure_key``: how its trial figures are keyed), ``analyses`` (the run's sweep/optimiser, Pareto, prefill/decode, carbon),
``run`` (``Result`` and what describes the run; ``recorded_config``: its settings as written, and where its precision
came from), ``noise`` (priming, the history check, engine
starts: ``Result.noise``), ``measure`` (what ``wattbench measure`` adds), ``upgrade``
(older files in today's form) — and
are all importable from here, as ``from wattbench.core.schema import Result``.
"""

from __future__ import annotations

from wattbench.core.schema.analyses import (
    CarbonIntensity,
    Pareto,
    ParetoFront,
    ParetoPoint,
    CoefficientCheck,
    PrefillDecode,
    PrefillDecodeFit,
    SearchOutcome,
)
from wattbench.core.schema.base import SCHEMA_VERSION, Num, Verdict, _M
from wattbench.core.schema.blocks import (
    DeviceThermal,
    Goodput,
    GoodputPerKw,
    HostCpu,
    ServerMetrics,
    SLOBound,
    SLOCheck,
    Thermal,
)
from wattbench.core.schema.kinds import FindingKind
from wattbench.core.schema.figure_key import FigureKey
from wattbench.core.schema.level import (
    TargetDownInfo,
    LevelResult,
    LevelTiming,
    Oversaturation,
    PowerPart,
    FigureTrend,
    PowerSplit,
    Stationarity,
    SteadySeries,
    TrialFigure,
    TrialsBlock,
    UnmeasuredTrial,
    Precision,
)
from wattbench.core.schema.measure import ClockMapping, MeasureInfo, ToolLevel
from wattbench.core.schema.measures import (
    BoundaryEnergy,
    CrossCheck,
    DeviceCrossCheck,
    LoadActorInfo,
    PowerChannelCheck,
    EFFICIENCY_FIGURES,
    LATENCY_FIGURES,
    EnergyShare,
    Figure,
    Finding,
    Latency,
    LoadStats,
    RequestAttribution,
    Requests,
    Stats,
    TargetStats,
    Throughput,
    TokenCount,
    Validity,
    Window,
)
from wattbench.core.schema.noise import (AutoTrials, EngineStart, HistoryCheck, NoiseInfo, PairedLevel, PairedRun,
                                        Preconditioning, PrimingPhase)
from wattbench.core.schema.recorded_config import AxisValue, ModelPrecision, RecordedConfig, model_precision
from wattbench.core.schema.records import RequestRecord, build_record
from wattbench.core.schema.run import (
    ClockInfo,
    Environment,
    GPUInfo,
    IdleBaseline,
    NodeInfo,
    PromptCalibration,
    Result,
    ServerIdentity,
    SensorChannel,
    ServerInfo,
    StreamBatching,
    TokenCalibration,
    TokenizerInfo,
    TunedFrom,
    WorkloadInfo,
)
from wattbench.core.schema.upgrade import upgrade_v1

__all__ = [
    "TargetDownInfo",
    "AxisValue", "ModelPrecision", "RecordedConfig", "model_precision",
    "CoefficientCheck",
    "IdleBaseline",
    "PrefillDecodeFit",
    "SensorChannel",
    "FigureKey",
    "FindingKind",
    "DeviceThermal", "Goodput", "GoodputPerKw", "HostCpu", "ServerMetrics", "SLOBound", "SLOCheck", "Thermal",
    "ClockMapping", "MeasureInfo", "ToolLevel",
    "CrossCheck", "DeviceCrossCheck", "LoadActorInfo", "PowerChannelCheck", "StreamBatching", "TokenCalibration", "TokenizerInfo",
    "SCHEMA_VERSION", "BoundaryEnergy", "EFFICIENCY_FIGURES", "Figure", "Finding", "LATENCY_FIGURES", "CarbonIntensity", "ClockInfo", "EnergyShare", "Environment", "GPUInfo",
    "Latency", "LevelResult", "LevelTiming", "LoadStats", "NodeInfo", "Num", "Oversaturation", "Pareto",
    "ParetoFront", "ParetoPoint", "PowerPart", "PowerSplit", "PrefillDecode", "RequestAttribution", "RequestRecord",
    "Requests", "Result", "SearchOutcome", "ServerIdentity", "ServerInfo", "Stats", "TargetStats", "Throughput", "TokenCount",
    "PromptCalibration", "TrialFigure", "TrialsBlock", "FigureTrend", "Stationarity", "SteadySeries", "TunedFrom", "UnmeasuredTrial", "Validity", "Verdict", "Window", "WorkloadInfo", "_M", "build_record", "upgrade_v1",
    "AutoTrials", "EngineStart", "HistoryCheck", "NoiseInfo", "PairedLevel", "PairedRun", "Preconditioning", "PrimingPhase", "Precision",
]
