"""What a finding can be: the one table of finding kinds (``FindingKind``).

Each kind names one check and carries what it means and the severity it is raised at when its
threshold is crossed (``default_severity``, on the one scale: ``core.severity.Severity``). Several checks grade their severity: a *judged* kind
(``accounting.findings.judged``) is a ``note`` below the materiality bound of the figures it biases
and a ``warn`` at or above it; the energy checks and the failed-request check have a second,
``invalid`` threshold (``accounting/validity.py``, ``accounting/level_findings.py``); the table gives the
severity of the first threshold. ``Finding.kind`` is a ``FindingKind``; every producer names its kind from
here.

An older file's finding whose kind this version does not know (a check renamed or removed since)
loads as ``legacy`` with its severity and text as written, the kind it was written with kept beside
it as ``kind_as_written`` (``Finding``'s validator): readers never meet a kind outside this table.
"""

from __future__ import annotations

from wattbench.core.words import WordEnum

from wattbench.core.severity import Severity


class FindingKind(WordEnum):
    """One check's finding: ``FindingKind.LOOP_LAG == "loop_lag"`` (the word written in result.json)."""

    default_severity: Severity
    meaning: str

    def __new__(cls, value: str, default_severity: str, meaning: str) -> "FindingKind":
        m = str.__new__(cls, value)
        m._value_ = value
        m.default_severity = Severity(default_severity)
        m.meaning = meaning
        return m

    # -- energy at one boundary (accounting/validity.py: energy_findings, steady_findings)
    NO_ENERGY = ("no_energy", "warn", "no energy was computed (at a boundary, or for the whole run: no meter was read)")
    COVERAGE = ("coverage", "warn", "the meter's samples cover too little of the window (invalid below the lower bound)")
    GAP = ("gap", "warn", "the largest gap between the meter's samples is longer than `LARGEST_GAP_WARN_S`")
    COUNTER_RESET = ("counter_reset", "warn", "the energy counter reset inside the window")
    CROSS_CHECK = ("cross_check", "warn",
                   "the energy counter and the power integral disagree (invalid past the upper bound)")
    SHORT_WINDOW = ("short_window", "warn", "the window spans few meter update periods (invalid below the lower bound)")
    STEADY_VS_FULL = ("steady_vs_full", "warn", "an efficiency figure of the steady state is far from the full window's")
    ESTIMATE = ("estimate", "estimate", "the energy comes from a model of power, not a meter")
    SENSOR_FAILED = ("sensor_failed", "warn", "a sensor failed while the window was read")
    CLOCKS_CAPPED = ("clocks_capped", "warn", "the GPU's clocks were power- or thermally capped in the window")
    # -- the load and the client (accounting/validity.py: load_findings)
    RATE = ("rate", "warn", "the achieved request rate is off the target rate")
    TOKEN_SOURCE = ("token_source", "warn", "token counts come from neither the server's usage nor a tokenizer")
    LOOP_LAG = ("loop_lag", "warn",
                "the client's event loop ran late: latency figures carry its lag (judged: a note below the bound)")
    ITL_UNMEASURED = ("itl_unmeasured", "note", "ITL percentiles withheld: chunks were read in bunches")
    CAP = ("cap", "note", "an open-loop level was capped by --max-concurrency: it measures the cap's load")
    SEND_LAG = ("send_lag", "warn", "open-loop arrivals went out late: the load offered is not the one asked")
    CLIENT_CPU = ("client_cpu", "note", "a client worker used most of a core (its effect is the loop lag's)")
    STEADY_MISSING = ("steady_missing", "warn", "no steady state was found: the figures include ramp and drain")
    STEADY_SHORT = ("steady_short", "warn", "the steady state is shorter than the figures need")
    STEADY_SHARE = ("steady_share", "warn", "the steady state is a small share of the window")
    # -- a level (accounting/level_findings.py)
    NO_COMPLETED = ("no_completed", "invalid", "no measured request of the level completed: its figures are not measurements")
    INTERRUPTED = ("interrupted", "warn", "the level was interrupted (SIGINT/SIGTERM): its window is shorter than asked")
    WORKER_FAILED = ("worker_failed", "invalid", "a load worker failed mid-level: part of the load was never sent")
    SMALL_SAMPLE = ("small_sample", "note", "latency percentiles from fewer requests than a p99 needs")
    IN_FLIGHT = ("in_flight", "warn", "fewer requests were in flight than the concurrency asked")
    PROMPT_LENGTHS = ("prompt_lengths", "warn",
                      "prompts were not the length asked, or could not be checked (a note when close)")
    BAD_USAGE = ("bad_usage", "warn", "tokens of requests whose usage block was malformed were not counted (judged)")
    TARGET_DOWN = ("target_down", "invalid", "the target stopped answering: the level was stopped")
    HISTORY_CHECK = ("history_check", "warn",
                     "a repeat of the first level differs from the run's history of this configuration (judged)")
    FAILED = ("failed", "warn", "requests failed (invalid past the failed share's bound)")
    STOPPED_OVERSATURATED = ("stopped_oversaturated", "warn", "the over-saturation guard stopped the level early")
    BACKLOG = ("backlog", "warn", "the queue grew without bound: latency figures grow with run length")
    DRIFT = ("drift", "warn", "a figure moved while the level was measured, by more than its noise (judged: a note "
             "below the bound); no noise verdict rests on it")
    WARMUP_ESTIMATE = ("warmup_estimate", "note",
                       "the warm-up estimate (`MSER-5`) and the steady window's start disagree (judged: its effect)")
    THERMAL_STATE = ("thermal_state", "warn", "a trial ran in another thermal or clock state than the rest")
    NOT_DRAINED = ("not_drained", "warn", "the server still held the load of the level before when this one began")
    TRIAL_UNMEASURED = ("trial_unmeasured", "warn",
                        "a trial of the level measured nothing: it has no figure and no mean or interval counts it "
                        "(invalid when more than half did not)")
    # -- the run (accounting/level_findings.py, results/recovery.py)
    NO_LEVEL = ("no_level", "invalid", "no level finished")
    RUN_STOPPED = ("run_stopped", "warn", "the run stopped early: a write to its directory failed")
    RUN_UNFINISHED = ("run_unfinished", "invalid", "the run's process died while it was running (found on reading it back)")
    # -- the validity gates of the ML.ENERGY benchmark (accounting/gates.py)
    GATE_STEADY_WINDOW = ("gate_steady_window", "note", "ML.ENERGY gate: the steady window is shorter than 30 s")
    GATE_POWER_RANGE = ("gate_power_range", "warn",
                        "ML.ENERGY gate: the accelerator's power is above its boards' power limit (judged)")
    NO_IDLE = ("no_idle", "note", "no idle baseline: every power figure is a declared constant, whose idle power is "
               "its load power (dynamic energy is not defined)")
    # -- `wattbench measure -- COMMAND` (run/measure.py)
    TOOL_LEFT_OUT = ("tool_left_out", "warn", "the load generator left requests out of its own file (judged)")
    TOKENS_DISAGREE = ("tokens_disagree", "warn", "the tool's token count and the server's counters disagree")
    TOKEN_COUNTER_EDGE = ("token_counter_edge", "warn",
                          "the server's token counter was not scraped on both sides of the window")
    NO_TOKENS = ("no_tokens", "warn", "no tokens were counted (no server counters were scraped)")
    # -- older files
    LEGACY = ("legacy", "warn", "a reason line of an older file, or a finding of a kind this version does not know")
