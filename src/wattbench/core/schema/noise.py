"""What a run did to measure from a known state and to see its own noise: the priming
phase, the history check and the engine restarts (``run/prime.py``; docs/accounting.md "Priming
and the history check")."""

from __future__ import annotations

from pydantic import Field

from wattbench.core.schema.base import _M, Num
from wattbench.core.schema.blocks import HostCpu
from wattbench.core.schema.level import LevelResult


class PrimingPhase(_M):
    """The load that took the server through the run's largest level before the first measured
    one; its requests are not measured, not accounted and not written to ``requests.jsonl``."""

    mode: str  # concurrency | rate
    value: Num | None = None  # None: rate inf
    label: str = ""  # e.g. concurrency=64, rate=inf
    requests: int  # asked
    completed: int = 0
    failed: int = 0
    duration_s: float | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    reason: str = ""  # why this load and this many requests
    prompts: str = ""  # which requests (never the measured ones)
    e2e_p50_s: float | None = None  # median end-to-end time of its completed requests: one request at this load
    # the server's output tokens inside the load's span (its first request sent to its last one's end:
    # metrics.latency.tokens_in_window) and them per second of that span: --precondition's rounds read it
    output_tokens: int | None = None
    output_tokens_per_s: float | None = None


class Preconditioning(_M):
    """``--precondition``: the device loaded until it settled, before the first measured level
    (``run/prime.precondition``): its GPU temperature (``accounting.thermal.temperature_settle``)
    and the server's output tokens/s over the loads (``metrics.drift.rounds_settle``), or the
    throughput alone where no temperature is read (``rules`` says which applied). Its requests are
    not measured. ``settled`` False: the time limit passed, or a load completed nothing
    (``reason`` says which, and what still moved)."""

    settled: bool = False
    start_ns: int | None = None  # its first load's start, on the run's clock
    duration_s: float | None = None  # the budget used (of limit_s)
    rounds: int = 0  # priming-sized loads sent
    requests: int = 0
    rules: list[str] = Field(default_factory=list)  # the rules that decided: "temperature", "throughput"
    temperature_c: float | None = None  # the last reading (hottest device)
    slope_c_per_min: float | None = None  # the steepest device's slope over the last window
    bound_c_per_min: float | None = None
    temperature_settled: bool | None = None  # None: no temperature read
    # every load's output tokens/s (None: it produced none), and when it ended (s after the first began)
    round_output_tokens_per_s: list[float | None] = Field(default_factory=list)
    round_end_s: list[float] = Field(default_factory=list)
    # the host's CPUs over every load (``LevelResult.host_cpu``'s block; None: not read)
    round_host_cpu: list[HostCpu | None] = Field(default_factory=list)
    throughput_change_pct: float | None = None  # the last window's fitted change (None: not yet read)
    throughput_rounds: int | None = None  # the rounds that change rests on
    throughput_bound_pct: float | None = None
    throughput_settled: bool | None = None
    window_s: float | None = None
    limit_s: float | None = None
    reason: str = ""


class HistoryCheck(_M):
    """The run's first level measured again after the others: does what the server saw in between
    move its figure by more than noise (``metrics/noise.repeat_check``)? ``repeat`` is that
    level (accounted like any other, kept out of ``Result.levels`` so no table or comparison
    reads it as a level of the run); with interleaved ``--trials`` the first level's own trials
    are compared instead and ``repeat`` is None."""

    level: str  # the label of the level checked
    figure: str  # e.g. output_tokens_per_s_per_kw@accelerator
    first: float | None = None
    repeated: float | None = None
    ratio: float | None = None  # repeated / first
    low: float | None = None
    high: float | None = None
    bound_pct: float | None = None
    basis: str = ""
    # an open loop: the requests/s each side achieved (their means); ``ratio`` is then of the figure
    # per achieved request/s, the arrivals' own scatter divided out (run/prime.check_history)
    first_rate_rps: float | None = None
    repeat_rate_rps: float | None = None
    verdict: str = "ok"  # ok | warn | unknown
    text: str = ""
    repeat: LevelResult | None = None


class EngineStart(_M):
    """One start of a launched engine (``--restart-engine`` starts one per trial round)."""

    index: int
    base_url: str | None = None
    pid: int | None = None
    start_duration_s: float | None = None
    before_trial: int | None = None  # the trial round it was started for (None: the run's first)
    # what told this start's server from the run's (``server/identity/build.identity_change``): the run
    # stopped before measuring on it; None when it served the run's configuration
    identity_change: str | None = None


class AutoTrials(_M):
    """``--trials auto``: what was asked, why the rounds stopped (``metrics.precision.auto_stop``:
    reached, max trials, max time) and what they cost."""

    asked_pct: float
    max_trials: int
    max_time_s: float | None = None
    rounds: int = 0
    stopped: str = ""  # reached | max trials | max time
    seconds: float | None = None  # from the first round's start to the last round's end
    trials: int = 0  # trials measured in all (every level's)


class PairedLevel(_M):
    """One level of a paired A/B measurement (``wattbench ab``): each pair's figures of both sides at
    one boundary, in pair order (pair ``k`` is the k-th trial of each side; None where a trial
    measured nothing). ``metrics/paired.py`` makes the ratio of them; ``analysis/ab.py`` the answer."""

    key: str  # the level's name in an answer line: c=8, r=2/s
    label: str  # the level's label in both runs
    index: int  # the level's index in both runs
    boundary: str | None = None  # the power boundary of the per-kW figures (None: no energy)
    a_tokens_per_s: list[float | None] = Field(default_factory=list)
    b_tokens_per_s: list[float | None] = Field(default_factory=list)
    a_power_w: list[float | None] = Field(default_factory=list)
    b_power_w: list[float | None] = Field(default_factory=list)
    a_per_kw: list[float | None] = Field(default_factory=list)
    b_per_kw: list[float | None] = Field(default_factory=list)
    # each trial's window midpoint, seconds after the first pair began (the drift adjustment's clock)
    a_time_s: list[float | None] = Field(default_factory=list)
    b_time_s: list[float | None] = Field(default_factory=list)


class PairedRun(_M):
    """A run measured as one side of ``wattbench ab``: which side (``role``), the other side's run,
    the order the trials were measured in (``sequence``: ``A c=8``, ``B c=8``, ``B c=8``, ``A c=8``,
    …), the precision asked and why the pairs stopped, the shared meter's idle power (both servers
    resident, neither loaded; boundary -> W: the idle side's draw inside every trial's figures), and
    per level the pairs. Both runs of a pair hold the same block but for ``role``/``other_run_id``."""

    role: str  # A | B
    other_run_id: str
    sequence: list[str] = Field(default_factory=list)
    precision_pct: float | None = None
    max_pairs: int | None = None
    stopped: str = ""  # why no more pairs were measured
    shared_meter: bool = True  # both sides read by the same meters (one machine)
    shared_idle_power_w: dict[str, float] = Field(default_factory=dict)
    # the shared meter's idle power again after each block of pairs (both resident, neither loaded;
    # boundary -> [(s on the pairs' clock, W)], the baseline before the first pair first): the idle
    # side's draw as the pairs went on. Empty in runs written before it was measured.
    idle_series: dict[str, list[tuple[float, float]]] = Field(default_factory=dict)
    levels: list[PairedLevel] = Field(default_factory=list)
    # the answer as `ab` printed it (analysis/ab.py: compare's answer line per level), for a report
    # of either run; recomputed from ``levels`` by ``analysis.ab.paired_compare``
    answers: list[str] = Field(default_factory=list)


class NoiseInfo(_M):
    """The run's state-control: priming, the history check, engine starts, the trial order."""

    priming: PrimingPhase | None = None
    repriming: list[PrimingPhase] = Field(default_factory=list)  # after each --restart-engine restart
    precondition: Preconditioning | None = None  # --precondition
    history_check: HistoryCheck | None = None
    engine_starts: list[EngineStart] = Field(default_factory=list)
    trial_order: str | None = None  # interleaved | shuffled | consecutive (--trials > 1)
    auto_trials: AutoTrials | None = None  # --trials auto
    prompt_salt: str | None = None  # what every synthetic prompt's unique tag starts with (None: not synthetic)
    paired: PairedRun | None = None  # one side of `wattbench ab` (below)
