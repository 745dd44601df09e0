"""A window's figures: latency statistics, throughput and token counts, what the load generator
achieved, energy per boundary and its split over requests, the window, the verdict."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from wattbench.core.numbers import fmt
from wattbench.core.secret_scope import clip
from wattbench.core.safe_text import LINE_CHARS
from wattbench.core.schema.base import _M, Verdict, _Sparse
from wattbench.core.schema.kinds import FindingKind
from wattbench.core.severity import Severity


class Stats(_M):
    """Summary of a latency figure (ms). ``count`` is how many values went in. ``unmeasured``: why
    the percentiles are not given although values went in (the client could not time them apart:
    ``metrics/latency.py``, ITL from chunks read in bunches); the mean stays where it holds."""

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    min: float | None = None
    std: float | None = None
    unmeasured: str | None = None


class Latency(_M):
    ttft_ms: Stats = Field(default_factory=Stats)
    tpot_ms: Stats = Field(default_factory=Stats)
    itl_ms: Stats = Field(default_factory=Stats)
    e2e_ms: Stats = Field(default_factory=Stats)


class TokenCount(_M):
    """Tokens credited to a window (``metrics/window_tokens.py`` states the rule)."""

    output: float = 0.0
    input: float = 0.0
    warmup_output: float | None = None  # part of ``output`` from warm-up streams (tokens_in_window only)
    edge_output: float | None = None  # part of ``output`` from streams only partly inside (tokens_in_window only)
    estimated_streams: int | None = None  # streams counted without usage (tokens_in_window only)


class Throughput(_M):
    """Throughput over the level window.

    ``output_tokens``/``input_tokens`` and every rate here (and every efficiency figure of the
    level: tok/s per kW, J/token, tokens per kWh, cost per Mtok, goodput per kW, the prefill/decode
    split) use ``tokens_in_window``: the tokens the server produced inside the window, from every
    stream (warm-up leftovers and streams cut at the edges pro rata). ``measured_request_tokens``
    are the usage tokens of the measured requests that ended in the window (the latency
    population), kept for reference; ``requests_per_s`` counts those requests. ``token_basis``
    says which count the figures use (results written before it existed used the measured requests').
    """

    output_tokens_per_s: float = 0.0
    input_tokens_per_s: float = 0.0
    total_tokens_per_s: float = 0.0
    requests_per_s: float = 0.0
    duration_s: float = 0.0
    output_tokens: int = 0
    input_tokens: int = 0
    # server_counters: the server's token counters over the window (`wattbench measure` around a command
    # whose requests it cannot see)
    token_basis: Literal["tokens_in_window", "measured_request_tokens", "server_counters"] = "measured_request_tokens"
    tokens_in_window: TokenCount | None = None
    measured_request_tokens: TokenCount | None = None


class Requests(_M):
    completed: int = 0
    failed: int = 0
    warmup: int = 0
    errors: dict[str, int] = Field(default_factory=dict)


class LoadActorInfo(_M):
    """One Ray load actor of a distributed level (``distributed/executor.py``): where it ran, what
    it sent, its CPU, and its clock against the driver's (offset = actor clock − driver clock, from
    the minimum-RTT ping before the level; the true offset lies within ± ``clock_uncertainty_ns``).

    Not ``run.NodeInfo``, though both name a node and carry a clock offset: this is one *process*
    over one *level* (``LevelResult.load.actors``: a row per actor per level, written when the level
    ends) — what it sent (``records``), its CPU, its offset measured just before that level and its
    drift over it, which map that level's stamps onto the driver's clock. ``NodeInfo`` is one
    *machine* over the whole *run* (``Result.nodes``): how many load actors it held, its sensing, and
    the offset of its sensor actor (else of its first load actor) from the run's first measurement.
    Several actors share a node and an actor's rows differ level by level, so neither is the other's
    copy. ``node_id`` here is Ray's full node id; ``NodeInfo.node_id`` is its first 8 characters
    (``distributed.executor.short_id``): join the two on that prefix."""

    index: int
    node_id: str
    hostname: str | None = None
    records: int = 0  # the records it returned for the level
    cpu_pct: float | None = None  # of one core
    clock_offset_ns: int
    clock_uncertainty_ns: int
    clock_rtt_ns: int
    drift_ppm: float | None = None  # the offset's drift over the level (None: one offset)
    drift_uncertainty_ppm: float | None = None  # ± on drift_ppm: both offsets' bounds over the time between them


class LoadStats(_M):
    """What the load generator asked for and what it achieved."""

    mode: Literal["concurrency", "rate", "trace"] = "concurrency"
    target_concurrency: int | None = None
    # a rate level's requests/s; inf (every request at once) is written as null, as result.json's
    # writer has always written it (JSON has no inf), and read back as inf (``RecordedConfig.rate``
    # alike); a trace level's stays None where its arrivals span no time
    target_rate_rps: float | None = None
    achieved_rate_rps: float | None = None
    mean_in_flight: float | None = None
    arrival: str | None = None
    send_lag_ms: Stats = Field(default_factory=Stats)
    client_cpu_pct: float | None = None  # of one core, max over workers
    client_cpu_pct_per_worker: list[float] = Field(default_factory=list)
    drain_s: float | None = None  # from when sending stopped to when the last request ended
    # How late a 10 ms timer in each worker's event loop fired (all workers pooled): when the
    # client process waits for a CPU, its arrival stamps are late by about this much.
    client_loop_lag_ms: Stats = Field(default_factory=Stats)
    workers: int = 1
    saturated: bool = False
    saturation_reasons: list[str] = Field(default_factory=list)
    max_in_flight: int | None = None  # open loop capped at this many requests in flight (--max-concurrency)
    actors: list[LoadActorInfo] = Field(default_factory=list)  # distributed: per load actor (node, clock, cpu)

    @model_validator(mode="after")
    def _null_rate_is_inf(self) -> LoadStats:
        if self.mode == "rate" and self.target_rate_rps is None:
            self.target_rate_rps = math.inf
        return self

    @field_serializer("target_rate_rps")
    def _inf_rate_as_null(self, v: float | None) -> float | None:
        return None if v is not None and math.isinf(v) else v


# ---------------------------------------------------------------- energy


class PowerChannelCheck(_M):
    """A further measured power channel's integral over the window, against the counter."""

    power_integral_j: float | None = None
    diff_pct: float | None = None  # 100 · (integral − counter) / counter


class DeviceCrossCheck(_Sparse):
    """One device's energy counter against the integral of its measured power channel over the
    same window (``accounting/boundaries.device_energy``); ``others`` only where the device has
    further power channels."""

    counter_j: float
    power_integral_j: float
    power_channel: str  # the power channel integrated (the first by preference)
    diff_pct: float | None = None  # 100 · (integral − counter) / counter; None with a zero counter
    power_coverage: float  # of the window, by the power channel's samples (0..1)
    others: dict[str, PowerChannelCheck] = Field(default_factory=dict)  # the device's further power channels, by id


class CrossCheck(_M):
    """A boundary's energy counters against their power channels' integrals, summed over the
    devices that have both (``accounting/boundaries._merge_cross``)."""

    counter_j: float
    power_integral_j: float
    diff_pct: float | None = None
    # the largest disagreement among devices whose power channel covers the window (None: none
    # does): what the validity verdict judges
    max_abs_device_diff_pct: float | None = None
    devices: dict[str, DeviceCrossCheck] = Field(default_factory=dict)  # device (or channel) -> its check


class BoundaryEnergy(_M):
    """Energy and efficiency at one power boundary over one window."""

    boundary: str
    method: str  # counter | power_integral | declared | estimate | sum
    label: Literal["measured", "declared", "estimate"] = "measured"
    energy_j: float | None = None
    avg_power_w: float | None = None
    p95_power_w: float | None = None
    p99_power_w: float | None = None
    max_power_w: float | None = None
    idle_power_w: float | None = None
    idle_energy_j: float | None = None
    dynamic_energy_j: float | None = None
    j_per_output_token: float | None = None
    j_per_token: float | None = None
    output_tokens_per_s_per_kw: float | None = None
    tokens_per_kwh: float | None = None  # total (input + output) tokens per kWh
    output_tokens_per_kwh: float | None = None
    cost_per_million_output_tokens: float | None = None
    uncertainty_pct: float | None = None
    coverage: float | None = None  # fraction of the window covered by samples (0..1)
    largest_gap_s: float | None = None
    devices: list[str] = Field(default_factory=list)
    channels: list[str] = Field(default_factory=list)
    # counter vs power integral; None where no device has both (an older file's ``{}`` reads as none)
    cross_check: CrossCheck | None = None
    notes: list[str] = Field(default_factory=list)
    # added by accounting: what went into coverage and uncertainty (docs/accounting.md)
    gaps: int | None = None  # sample gaps overlapping the window
    resets: int | None = None  # energy-counter resets in the window
    wraps: int | None = None  # energy-counter wraparounds in the window
    update_period_s: float | None = None  # effective meter update period (largest of the devices)
    uncertainty_parts: dict[str, dict[str, float]] = Field(default_factory=dict)  # device -> term -> %
    dynamic_uncertainty_pct: float | None = None  # of dynamic_energy_j (gross and idle errors added)
    # carbon (metrics/carbon.py): with --carbon-intensity; PUE applied as for cost
    carbon_intensity_g_per_kwh: float | None = None  # energy-weighted over the window
    carbon_g: float | None = None
    carbon_g_per_million_output_tokens: float | None = None
    carbon_g_per_request: float | None = None

    @field_validator("cross_check", mode="before")
    @classmethod
    def _no_pair_no_check(cls, v: Any) -> Any:
        """An empty cross-check (what files wrote where no device had both) reads as none."""
        return None if v == {} else v


class EnergyShare(_M):
    """One group's (tenant, tag, model, target) part of a window's energy split over requests."""

    requests: int = 0
    energy_j: float = 0.0
    output_tokens: int = 0
    j_per_output_token: float | None = None
    share: float | None = None  # of the energy split
    carbon_g: float | None = None


class RequestAttribution(_M):
    """A window's energy at one boundary split over its requests (an estimate; accounting/request_energy.py)."""

    boundary: str
    label: Literal["estimate"] = "estimate"
    method: str | None = None  # a sentence: basis, interval, weighting, idle
    basis: str | None = None  # dynamic | gross: what the per-request energies add up to
    weighting: str | None = None  # prefill_decode | tokens
    weighting_reason: str | None = None  # why tokens, when the split was not used
    idle_attributed: bool = False
    interval_s: float | None = None
    requests: int = 0
    energy_j: float | None = None  # the sum of the per-request energies
    j_per_prefill_token: float | None = None  # the weights used (prefill_decode only)
    j_per_decode_token: float | None = None
    mean_energy_j_per_request: float | None = None
    by_tenant: dict[str, EnergyShare] = Field(default_factory=dict)
    by_tag: dict[str, EnergyShare] = Field(default_factory=dict)
    by_model: dict[str, EnergyShare] = Field(default_factory=dict)
    by_target: dict[str, EnergyShare] = Field(default_factory=dict)
    unavailable_reason: str | None = None


class Window(_M):
    """A measurement window on the run's monotonic clock."""

    start_ns: int
    end_ns: int
    duration_s: float
    kind: str = "full"  # full | steady | idle | idle_after


# The figures a finding can bias (``Finding.figures``). ``efficiency`` is every per-kW, per-kWh and
# per-token energy figure; ``ttft``/``tpot``/``itl``/``e2e`` their latency statistics
# (percentiles); ``load``: the level did not offer the load its label names (every figure then
# describes another load); ``prompt_lengths``: the prompts were not the length asked for.
Figure = Literal["energy", "efficiency", "throughput", "ttft", "tpot", "itl", "e2e", "goodput",
                 "prompt_lengths", "load"]
# The figures each of a level's two verdicts judges (``accounting/findings.py``).
EFFICIENCY_FIGURES: tuple[str, ...] = ("energy", "efficiency", "throughput", "prompt_lengths", "load")
LATENCY_FIGURES: tuple[str, ...] = ("ttft", "tpot", "itl", "e2e", "goodput", "prompt_lengths", "load")
# a finding's severity: the one scale (core/severity.py); ``estimate``: the figures it names rest on
# a model of power (no meter): the verdict reads ``estimate``
_SEVERITY_PREFIXES = ("invalid: ", "warn: ", "estimate: ", "note: ")
# where a finding's short form puts its estimated effect: as a magnitude (``requests failed
# {effect}``) or signed (``prompt lengths {effect:+} (no tokenizer)``); the stored summary shows the
# finding's own effect there, a group of findings of several levels their range (report/notes.py)
EFFECT_SLOT = "{effect}"
SIGNED_EFFECT_SLOT = "{effect:+}"


def effect_pct_text(pct: float, signed: bool) -> str:
    """``+56%``, ``−3.2%`` (signed) or ``56%`` (a magnitude): an effect as a summary shows it."""
    return (("+" if pct >= 0 else "−") if signed else "") + fmt(abs(pct), kind="effect") + "%"


def fill_effect(template: str, effect: str) -> str:
    """``template`` with its effect slot (``EFFECT_SLOT``/``SIGNED_EFFECT_SLOT``) replaced by
    ``effect`` (a figure or a range; empty: none estimated), else ``effect`` after it."""
    if "{effect" in template:
        return template.replace(SIGNED_EFFECT_SLOT, effect).replace(EFFECT_SLOT, effect).replace("  ", " ").strip()
    return f"{template} {effect}".strip() if effect else template


class Finding(BaseModel):
    """What one check found about a level (or a run): typed, so reports render it and never parse it.

    ``kind`` names the check (a ``FindingKind``, the one table of kinds: ``loop_lag``,
    ``small_sample``, ``steady_short`` …; ``legacy`` for a reason string of an older file, and for a
    kind this version does not know, which is kept as written in ``kind_as_written``); ``figures`` the figures it can bias (empty: unknown, as for
    ``legacy``: it then counts for both verdicts); ``effect_pct`` its estimated effect as a percent of
    the figure named in ``basis`` (None: not estimable) and ``bound_pct`` the materiality bound it
    was judged against (``accounting/findings.py``: below the bound a finding is a ``note``);
    ``summary`` a short form without the level's own numbers, for one line shared by several levels;
    ``levels``: the indices of the levels it applies to (filled where findings of several levels are
    grouped)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: FindingKind = FindingKind.LEGACY
    severity: Severity = Severity.WARN
    figures: tuple[Figure, ...] = ()
    effect_pct: float | None = None
    bound_pct: float | None = None
    basis: str | None = None
    text: str
    summary: str | None = None
    levels: tuple[int, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _unknown_kind_is_legacy(cls, data: Any) -> Any:
        """A kind outside ``FindingKind`` (an older file's, of a check renamed or removed since) reads
        as ``legacy``; the kind as written is kept beside it (``kind_as_written``, written back)."""
        if isinstance(data, dict):
            kind = data.get("kind")
            if isinstance(kind, str) and kind not in FindingKind._value2member_map_:
                data = {**data, "kind": FindingKind.LEGACY, "kind_as_written": kind}
        return data

    @model_validator(mode="before")
    @classmethod
    def _summary_shows_its_effect(cls, data: Any) -> Any:
        """A summary given as a template (``prompt lengths {effect:+} (no tokenizer)``: a check's
        own, or an older file's) is stored rendered, with the finding's own effect in its slot
        (``prompt lengths +56% (no tokenizer)``); ``summary_template`` gives the template back."""
        if isinstance(data, dict):
            summary, pct = data.get("summary"), data.get("effect_pct")
            if isinstance(summary, str) and "{effect" in summary:
                shown = ""
                if isinstance(pct, (int, float)) and not isinstance(pct, bool) and math.isfinite(pct):
                    shown = effect_pct_text(float(pct), SIGNED_EFFECT_SLOT in summary)
                data = {**data, "summary": fill_effect(summary, shown)}
        return data

    @property
    def summary_template(self) -> str | None:
        """The summary with its own effect taken out again (its slot back where the stored text
        shows ``effect_pct``): the short form findings of several levels share, and are grouped by."""
        s = self.summary
        if s is None or self.effect_pct is None or not math.isfinite(self.effect_pct):
            return s
        for slot, signed in ((SIGNED_EFFECT_SLOT, True), (EFFECT_SLOT, False)):
            head, sep, tail = s.rpartition(effect_pct_text(self.effect_pct, signed))
            if sep:
                return head + slot + tail
        return s

    @property
    def line(self) -> str:
        """``warn: text`` (the form older files stored as a reason), at most ``LINE_CHARS``
        characters (a crafted file's megabyte of text is not shown whole; scrubbed, then cut)."""
        return clip(f"{self.severity}: {self.text}", LINE_CHARS, "…")

    @staticmethod
    def from_reason(reason: str) -> "Finding":
        """A reason string of an older file: its severity prefix read, effect unknown."""
        r = str(reason)
        for prefix in _SEVERITY_PREFIXES:
            if r.startswith(prefix):
                return Finding(kind=FindingKind.LEGACY, severity=Severity(prefix[:-2]), text=r[len(prefix):])
        # a run-level line of an older file: "concurrency=8: warn: text"
        head, sep, rest = r.partition(": ")
        for prefix in _SEVERITY_PREFIXES:
            if sep and rest.startswith(prefix):
                return Finding(kind=FindingKind.LEGACY, severity=Severity(prefix[:-2]),
                               text=f"{head}: {rest[len(prefix):]}")
        return Finding(kind=FindingKind.LEGACY, severity=Severity.WARN, text=r)


class Validity(_M):
    """A level's (or a run's) verdicts and the findings behind them.

    ``verdict`` is the **efficiency** verdict — of the figures a run exists for (energy, tok/s per
    kW, J/token, throughput) — and the headline verdict of the level and the run; ``latency`` the
    verdict of its latency figures (TTFT/TPOT/ITL/E2E statistics, goodput). Each is the worst
    severity of the findings that bias its figures (a ``note`` leaves it ``valid``; an ``estimate``
    finding — energy from a model of power, not a meter — makes it ``estimate``). Files written
    before findings were typed hold ``reasons`` (strings): they load as ``legacy`` findings and
    ``latency`` is None there."""

    verdict: Verdict = "valid"
    latency: Verdict | None = None
    findings: list[Finding] = Field(default_factory=list)
    # runs only: whether any energy was measured ("unavailable": no meter was read; the verdict is
    # then at best ``warn`` and latency/throughput are still measured)
    energy: Literal["measured", "unavailable"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _reasons_to_findings(cls, data: Any) -> Any:
        if isinstance(data, dict) and "reasons" in data:
            data = dict(data)
            reasons = data.pop("reasons") or []
            if not data.get("findings"):
                data["findings"] = [Finding.from_reason(r) for r in reasons]
        return data

    @property
    def reasons(self) -> list[str]:
        """The warn and invalid findings as ``severity: text`` lines (the older form)."""
        return [f.line for f in self.findings if f.severity != "note"]

    @reasons.setter
    def reasons(self, lines: list[str]) -> None:
        """Reason strings in the older form, kept as ``legacy`` findings (the notes stay)."""
        self.findings = self.notes + [Finding.from_reason(r) for r in lines]

    @property
    def notes(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "note"]


class TargetStats(_M):
    """One target's share of a level driven against several targets."""

    requests: Requests = Field(default_factory=Requests)
    latency: Latency = Field(default_factory=Latency)
    throughput: Throughput = Field(default_factory=Throughput)

