"""Findings about what a level measured, beside the energy findings of ``validity.py``.

A level can look valid and not be: nothing measured, percentiles from a handful of requests, a
"concurrency=64" label on a level that held 7 requests in flight, prompts far from the length
asked for. Each rule here returns typed ``Finding``s naming the figures they bias (pure functions of
the level's records and statistics); the runner adds them to the level's verdicts
(``accounting/findings.py``).

==============================================  =====================================  =========
rule                                            threshold                              verdict
==============================================  =====================================  =========
no measured request completed                   0 completed (warm-up excluded)         invalid
a trial of the level measured nothing           any trial; > 50 % of its trials         warn; invalid
the target stopped answering (load/liveness)    REFUSALS_DOWN refusals in a row         invalid
tail percentile from few requests               n < 1 / (1 - 0.99) = 100 (p99)          note (latency)
closed loop held far fewer in flight            mean in flight < 50 % of the label      warn
prompt lengths off the asked length             server-counted mean input off by > 10 %  warn (note within)
requests failed                                 any failed; > 50 % of the level's         warn; invalid
usage refused (bad_usage): tokens not counted   their share of content chunks >= 1 %    warn (note below)
level stopped by the over-saturation guard      stopped_early "over-saturated ..."      warn
level interrupted (SIGINT/SIGTERM)              stopped_early "interrupted"             warn
a load worker failed mid-level                  stopped_early "worker_failed"           invalid
queue grew without bound (metrics/saturation.py)   is_oversaturated on the backlog        warn
another tool left requests out of its file      their bound share of the tokens > 1 %   warn (note below)
tool and server token counts disagree           beyond the edge error + 2 % of it       warn
no token count (measure, no /metrics)           no server counter                       warn
server token counter not scraped at an edge     extrapolated at an edge                 warn
==============================================  =====================================  =========

Why: a level with no completed measured request has no latency, no throughput and no window —
any figure beside it would be a placeholder. A p99 from n < 100 samples lies between the two
largest values (from n = 4 it is the maximum): it is reported, and marked — a note on the latency
verdict only: the efficiency figures do not rest on a percentile. A closed loop's label
is the concurrency *asked*; think times, sessions or a level shorter than one round keep fewer
streams busy, and below half the label the figures describe a different load. Without a
tokenizer prompts are built from approximate lengths; the server's ``usage`` says what it
really counted, and past 10 % the level's input length is not the one asked for (within it, a
note with the measured difference).
"""

from __future__ import annotations

from typing import Iterable

from wattbench.accounting.gates import gate_findings
from wattbench.accounting.findings import EFFICIENCY_MATERIAL_PCT, VERDICT_ORDER, Finding, judged, rule, verdicts, worst
from wattbench.core.errors import StorageError
from wattbench.core.recordset import NONE, RecordSet, as_record_set
from wattbench.core.schema import HistoryCheck, LevelResult, RequestRecord, Result, TargetDownInfo, Validity
from wattbench.core.schema import FindingKind

__all__ = ["measured_something", "measured_nothing", "nothing_measured_why", "unmeasured_trials_finding", "level_findings", "failed_requests_finding", "bad_usage_finding", "write_stop_finding", "RUN_STOPPED_ON_WRITE", "oversaturation_findings", "run_validity", "no_energy_text", "no_completed_finding", "small_sample_finding", "in_flight_finding",
           "input_length_finding", "stopped_finding", "TOKEN_FIGURES", "TOKEN_AGREEMENT_TOL", "NO_TOKENS",
           "no_tokens_text", "no_tokens_finding", "token_counter_edge_finding", "tool_left_out_finding",
           "token_disagreement_finding", "P99_MIN_SAMPLES", "IN_FLIGHT_WARN_FRACTION", "INPUT_LENGTH_WARN_PCT"]

P99_MIN_SAMPLES = 100
IN_FLIGHT_WARN_FRACTION = 0.5
INPUT_LENGTH_WARN_PCT = 10.0
# prompts calibrated to the server's count (run/prime.calibrate_prompts) hit the asked length within this
CALIBRATED_TOL_PCT = 2.0


EVERY_FIGURE = ("energy", "efficiency", "throughput", "ttft", "tpot", "itl", "e2e", "goodput", "load")
PERCENTILES = ("ttft", "tpot", "itl", "e2e")


def measured_something(level: LevelResult) -> bool:
    """A level with output tokens and what produced them: at least one completed measured request,
    or — a level without request records (``measure`` around a command: its tokens are the server's
    counters' increase over the window) — that increase (what compare needs of a level)."""
    if (level.throughput.output_tokens_per_s or 0) <= 0:
        return False
    return level.requests.completed > 0 or level.throughput.token_basis == "server_counters"


def measured_nothing(level: LevelResult) -> bool:
    """A level (or one trial of it) measured by its own requests, none of which completed (the
    ``no_completed`` rule): it has no figure — no throughput, energy or per-kW, not a copy, not a
    fill-in — and no mean or interval of a level's trials counts it. A level of ``measure`` around
    a command (its tokens the server's counters') is never one: its window's energy is measured."""
    return level.throughput.token_basis != "server_counters" and level.requests.completed == 0


def nothing_measured_why(level: LevelResult) -> str:
    """What a level (or trial) that measured nothing did instead, in a few words: ``8 of 8 requests
    failed: http_500 8``."""
    req = level.requests
    total = req.completed + req.failed
    if req.failed:
        errors = ", ".join(f"{k} {v}" for k, v in sorted(req.errors.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"{req.failed} of {total} requests failed" + (f": {errors}" if errors else "")
    if req.warmup and not total:
        return f"its {req.warmup} requests were all warm-up"
    if req.completed:
        return f"its {req.completed} completed requests produced no output token"
    return "no measured request completed"


def unmeasured_trials_finding(unmeasured: list[tuple[int, str]], n_trials: int) -> Finding | None:
    """The trials of a level that measured nothing (``(trial counted from 1, why)``, of
    ``n_trials``): ``warn`` while most trials measured (the level's figures are their means),
    ``invalid`` when more than half did not (``FAILED_INVALID_SHARE``, the failed requests' bound)
    or none measured. None when every trial measured."""
    if not unmeasured:
        return None
    which = ", ".join(str(k) for k, _ in unmeasured)
    whys = sorted({w for _, w in unmeasured if w})
    left = n_trials - len(unmeasured)
    word = "trial" if len(unmeasured) == 1 else "trials"
    if left == 0:
        tail = "no trial measured, so the level has no figure"
    else:
        tail = (f"the level's figures are the {'mean of the ' + str(left) + ' trials' if left > 1 else 'one trial'} "
                f"that measured; no mean or interval counts {'it' if len(unmeasured) == 1 else 'them'}")
    text = f"{word} {which} of {n_trials} measured nothing ({'; '.join(whys) or 'no measured request completed'}): {tail}"
    share = len(unmeasured) / max(n_trials, 1)
    return rule(FindingKind.TRIAL_UNMEASURED, "invalid" if share > FAILED_INVALID_SHARE else "warn", text,
                EVERY_FIGURE, effect_pct=100.0 * share, summary=f"{word} {which} of {n_trials} measured nothing")


def no_completed_finding(level: LevelResult, stopped_early: str | None = None) -> Finding | None:
    """``invalid`` when no measured (non-warm-up) request completed, with what happened instead."""
    req = level.requests
    if req.completed > 0:
        return None
    parts = [f"{req.warmup} warm-up", f"{req.failed} failed"]
    why = f"no measured request completed ({', '.join(parts)}, 0 completed)"
    if stopped_early == "requests_exhausted":
        why += "; the workload ran out of requests before this level"
    elif req.warmup and not req.failed:
        why += ("; every request sent was a warm-up request: the level ended (--duration) before a request "
                "sent after the warm-up finished; lengthen --duration or shorten --warmup")
    elif req.failed:
        top = max(req.errors, key=lambda e: req.errors[e]) if req.errors else "error"
        why += f"; most failures: {top}"
    return rule(FindingKind.NO_COMPLETED, "invalid", why + ". Its figures are not measurements", EVERY_FIGURE,
                summary="no measured request completed")


def stopped_finding(stopped_early: str | None) -> Finding | None:
    """A level cut short by the user (``warn``: what was measured until then is what it says) or by
    a failed load worker (``invalid``: part of the load asked for was never sent)."""
    if stopped_early == "interrupted":
        return rule(FindingKind.INTERRUPTED, "warn", "level interrupted (SIGINT/SIGTERM): its figures are the requests "
                                           "completed before the signal, over a window shorter than asked",
                    ("load",), summary="level interrupted")
    if stopped_early == "worker_failed":
        return rule(FindingKind.WORKER_FAILED, "invalid", "a load worker failed mid-level: part of the load asked for was "
                                                "never sent; the requests completed before are kept, but they are "
                                                "not this level's load", EVERY_FIGURE,
                    summary="a load worker failed mid-level")
    return None


def small_sample_finding(level: LevelResult) -> Finding | None:
    """A ``note`` on the latency verdict when the level reports a p99 from fewer than
    ``P99_MIN_SAMPLES`` requests: the percentiles it thins, nothing else."""
    n = level.requests.completed
    if n == 0 or n >= P99_MIN_SAMPLES or level.latency.e2e_ms.p99 is None:
        return None
    return rule(FindingKind.SMALL_SAMPLE, "note", f"latency percentiles from {n} requests: a p99 needs at least "
                                        f"{P99_MIN_SAMPLES} (from {n} it lies between the largest values); read p99 "
                                        "as the maximum", PERCENTILES,
                summary=f"p99 from < {P99_MIN_SAMPLES} requests (the maximum)")


def in_flight_finding(level: LevelResult) -> Finding | None:
    """``warn`` when a closed loop kept far fewer requests in flight than its label."""
    load = level.load
    asked, got = load.target_concurrency, load.mean_in_flight
    if load.mode != "concurrency" or not asked or got is None or level.requests.completed == 0:
        return None
    if got >= IN_FLIGHT_WARN_FRACTION * asked:
        return None
    return rule(FindingKind.IN_FLIGHT, "warn", f"concurrency asked {asked}, achieved {got:.1f} in flight on average "
                                     f"({got / asked:.0%}; think times, sessions or a short level): the figures "
                                     f"describe a load of about {got:.1f}", ("load",),
                effect_pct=100.0 * (got - asked) / asked, summary="in flight {effect:+} from the label")


def input_length_finding(records: Iterable[RequestRecord] | RecordSet, length_source: str | None) -> Finding | None:
    """Approximate prompt lengths (no tokenizer) against the server's count: ``warn`` beyond
    ``INPUT_LENGTH_WARN_PCT``, a ``note`` with the measured difference within it."""
    if length_source not in ("approx", "approximate", "calibrated"):
        return None
    calibrated = length_source == "calibrated"
    c = as_record_set(records).columns("warmup", "ok", "input_tokens", "requested_input_tokens")
    m = ~c["warmup"] & c["ok"] & (c["input_tokens"] != NONE) & (c["requested_input_tokens"] > 0)
    asked = int(c["requested_input_tokens"][m].sum())
    got = int(c["input_tokens"][m].sum())
    n = int(m.sum())
    if n == 0:
        return rule(FindingKind.PROMPT_LENGTHS, "warn", "prompt lengths are approximate (no tokenizer) and the server "
                                              "reported no input token counts to check them; give --tokenizer PATH "
                                              "for exact lengths", ("prompt_lengths",),
                    summary="prompt lengths unchecked (no tokenizer, no server count)")
    diff = 100.0 * (got - asked) / asked
    if calibrated:  # fitted to the server's count before the first level (run/prime.calibrate_prompts)
        if abs(diff) <= CALIBRATED_TOL_PCT:
            return None  # the calibration held: the prompts are the length asked, as the server counts them
        text = (f"input tokens asked {asked / n:.0f}, the server counted {got / n:.0f} on average ({diff:+.0f}%) "
                f"although the prompts were calibrated to its count (±{CALIBRATED_TOL_PCT:g}% expected)")
        if abs(diff) > INPUT_LENGTH_WARN_PCT:
            text += "; give --tokenizer PATH for exact lengths"
        return rule(FindingKind.PROMPT_LENGTHS, "warn" if abs(diff) > INPUT_LENGTH_WARN_PCT else "note", text,
                    ("prompt_lengths",), effect_pct=diff,
                    basis="the server's usage.prompt_tokens against the asked length",
                    summary="prompt lengths {effect:+} (calibrated, no tokenizer)")
    text = (f"input tokens asked {asked / n:.0f}, the server counted {got / n:.0f} on average ({diff:+.0f}%): "
            "without a tokenizer prompt lengths are approximate")
    if abs(diff) > INPUT_LENGTH_WARN_PCT:
        text += "; give --tokenizer PATH (or a server with /tokenize) for exact lengths"
    return rule(FindingKind.PROMPT_LENGTHS, "warn" if abs(diff) > INPUT_LENGTH_WARN_PCT else "note", text,
                ("prompt_lengths",), effect_pct=diff, basis="the server's usage.prompt_tokens against the asked length",
                summary="prompt lengths {effect:+} (no tokenizer)")


def bad_usage_finding(records: Iterable[RequestRecord] | RecordSet) -> Finding | None:
    """Measured requests whose ``usage`` the client refused (``bad_usage``: a count that is not a
    number, a second account that contradicts the first, more tokens than ``max_tokens``, fewer than
    the content chunks streamed). Their work is in the level's window but no token of theirs is
    counted, so the per-token efficiency figures are understated by about the share of the level's
    content chunks they streamed: that share is the finding's size, judged against the efficiency
    materiality bound (``warn`` at ``EFFICIENCY_MATERIAL_PCT``, a ``note`` below)."""
    rs = as_record_set(records)
    if not rs:
        return None
    labels = rs.labels("error")
    if "bad_usage" not in labels:
        return None
    c = rs.columns("warmup", "error", "n_chunks", "ok")
    measured = ~c["warmup"]
    bad = measured & (c["error"] == labels.index("bad_usage"))
    n_bad = int(bad.sum())
    if n_bad == 0:
        return None
    chunks = int(c["n_chunks"][measured & (c["ok"] | bad)].sum())
    share = 100.0 * int(c["n_chunks"][bad].sum()) / chunks if chunks else None
    text = (f"{n_bad} request(s) answered a usage that disagrees with their stream or request (bad_usage): their "
            "work is in the window, their tokens are not counted"
            + (f"; they streamed {share:.2g}% of the level's content chunks, so per-token efficiency is understated "
               "by about that much" if share is not None else ""))
    return judged(FindingKind.BAD_USAGE, text, ("efficiency", "throughput"), -share if share is not None else None,
                  EFFICIENCY_MATERIAL_PCT, basis="content chunks of the bad_usage requests against the level's",
                  summary="tokens of bad_usage requests not counted {effect:+}")


def level_findings(level: LevelResult, records: Iterable[RequestRecord] | RecordSet, *,
                   stopped_early: str | None = None, length_source: str | None = None,
                   target_down: TargetDownInfo | None = None) -> list[Finding]:
    """Every rule of this module for one accounted level."""
    out: list[Finding] = []
    if target_down:
        out.append(rule(FindingKind.TARGET_DOWN, "invalid", f"{target_down.text or 'the target stopped answering'}; "
                                                  "the level was stopped and the requests measured before are kept",
                        EVERY_FIGURE, summary="the target stopped answering"))
    for f in (no_completed_finding(level, stopped_early), stopped_finding(stopped_early), small_sample_finding(level),
              in_flight_finding(level),
              input_length_finding(records, length_source), bad_usage_finding(records)):
        if f is not None:
            out.append(f)
    return out + gate_findings(level)  # the ML.ENERGY benchmark's validity gates wattbench can read


def no_energy_text(why: str) -> str:
    """The one message a run without energy carries (said once, in the run's verdict; the summary's
    answer line already says "no energy was measured", so this says why, not that again)."""
    return (f"energy: unavailable ({why}); latency and throughput are measured, "
            "energy and efficiency figures are not")


def history_finding(hc: HistoryCheck | None) -> Finding | None:
    """The history check (``run/prime.check_history``) as a finding about the run's state: beyond noise, its
    size — the first level's figure moved by ``ratio − 1`` between its measurement and the repeat —
    judged against the efficiency materiality bound like every other finding (a ``warn`` from
    ``EFFICIENCY_MATERIAL_PCT``, a note below); inconclusive (too little noise data to say) or
    without a figure in both measurements, a note that says so — never "within noise". Within noise:
    no finding (the summary's state line says it)."""
    if hc is None or hc.verdict == "ok":
        return None
    figures = ("efficiency", "throughput") if "per_kw" in hc.figure else ("throughput",)
    if hc.verdict == "warn" and hc.ratio is not None:
        return judged(FindingKind.HISTORY_CHECK, hc.text, figures, 100.0 * (hc.ratio - 1.0), EFFICIENCY_MATERIAL_PCT,
                      basis=f"{hc.figure}: {hc.basis}" if hc.basis else hc.figure)
    return rule(FindingKind.HISTORY_CHECK, "note", hc.text, figures, basis=hc.basis or None)


def run_validity(result: Result, energy_unavailable: str | None = None, stopped: StorageError | None = None
                 ) -> Validity:
    """The run's verdicts: each the worst level's (efficiency: the headline; latency) and of the
    run's own findings (the levels' stay with them: ``findings.group_findings`` shows each once):
    ``invalid`` without a finished level; at best ``warn`` with ``energy="unavailable"`` when no
    level has energy (``energy_unavailable`` says why: no meter, ``--no-sensors``); the history
    check's finding (``history_finding``) judged like any other; at best ``warn`` when the run
    stopped before its plan ended on a failed write (``stopped``, e.g. a full disk): the levels
    listed are complete, the best of them is the best of a partial plan, and the finished records
    of the level in progress are in its spool, not accounted."""
    levels = result.levels
    verdict = worst(*(lv.validity for lv in levels)).verdict if levels else "valid"
    latency = worst(*(lv.validity for lv in levels)).latency if levels else None
    found = []
    hf = history_finding(result.noise.history_check if result.noise is not None else None)
    if hf is not None:
        found.append(hf)
        own = verdicts([hf])
        verdict = max(verdict, own.verdict, key=VERDICT_ORDER.index)
        if latency is not None:
            latency = max(latency, own.latency, key=VERDICT_ORDER.index)
    if not levels:
        found.append(rule(FindingKind.NO_LEVEL, "invalid", "no level finished", EVERY_FIGURE))
        verdict = "invalid"
    measured = any(lv.energy for lv in levels)
    energy = "measured" if measured else "unavailable"
    # levels that measured nothing have no energy by rule (their own findings say why), not for a meter
    if not measured and levels and not all(measured_nothing(lv) for lv in levels):
        if verdict == "valid":
            verdict = "warn"
        found.insert(0, rule(FindingKind.NO_ENERGY, "warn", no_energy_text(energy_unavailable or "no power meter produced "
                                                                 "readings"), ("energy", "efficiency")))
    idle = no_idle_finding(result)
    if idle is not None:  # a note: the run's figures are gross, as a declared constant's always are
        found.append(idle)
    if stopped is not None:  # first: why the run is shorter than asked
        found.insert(0, write_stop_finding(stopped, len(levels)))
        if verdict == "valid":
            verdict = "warn"
    return Validity(verdict=verdict, latency=latency, findings=found, energy=energy)


NO_IDLE_TEXT = ("no idle baseline: the only power figures are declared constants (--sensor const:…), whose idle "
                "power is their load power; dynamic energy is not defined")


def no_idle_finding(result: Result) -> Finding | None:
    """A ``note`` when the run asked for an idle baseline (``--idle`` > 0) and skipped it because
    every energy or power channel is a declared constant (``run.benchmark.only_declared``): it would
    read the constant back. Not a warning — nothing is wrong with a declared meter's figures, they
    are gross by nature — and said once, here (before: a warning, printed as a progress line and
    again in the summary)."""
    chans = [c for c in result.sensors if c.kind in ("counter", "power")]
    if result.idle or not chans or not all(c.method == "declared" for c in chans):
        return None
    if not (result.config.idle_s or 0) > 0:
        return None
    return rule(FindingKind.NO_IDLE, "note", NO_IDLE_TEXT, ("energy",), summary="no idle baseline (declared meter)")


RUN_STOPPED_ON_WRITE = "the run stopped on a failed write"


def write_stop_finding(err: StorageError, levels: int) -> Finding:
    """``warn``: the run stopped before its plan ended because a write failed (``err``: the file and
    the system's reason); the ``levels`` listed are complete."""
    text = (f"{RUN_STOPPED_ON_WRITE} before its plan ended: {str(err).rstrip('.')}; the {levels} level(s) listed "
            "are complete; finished requests of the level in progress, if any, are kept in its spool (shown as "
            "recovered, not accounted)")
    return rule(FindingKind.RUN_STOPPED, "warn", text, ("load",), summary=f"{RUN_STOPPED_ON_WRITE} ({err.reason})")


FAILED_INVALID_SHARE = 0.5  # more than half the level's requests failed: its figures describe the failures


def failed_requests_finding(level: LevelResult) -> Finding | None:
    """``warn`` when requests failed, ``invalid`` when more than half did; the text breaks the
    failures down by error (``13 of 60 failed: http_500 11, stall 2``)."""
    failed = level.requests.failed
    if not failed:
        return None
    total = failed + level.requests.completed
    share = failed / max(total, 1)
    errors = sorted(level.requests.errors.items(), key=lambda kv: (-kv[1], kv[0]))
    breakdown = ", ".join(f"{k} {v}" for k, v in errors)
    return rule(FindingKind.FAILED, "invalid" if share > FAILED_INVALID_SHARE else "warn",
                f"{failed} of {total} failed" + (f": {breakdown}" if breakdown else "") + f" ({share:.0%})",
                ("throughput", "efficiency", "ttft", "tpot", "itl", "e2e", "goodput"), effect_pct=100.0 * share,
                summary="requests failed {effect}")


def oversaturation_findings(stopped_early: str | None, oversaturated_reason: str | None) -> list[Finding]:
    """The level stopped by the over-saturation guard, and a queue that grew without bound."""
    out = []
    if str(stopped_early or "").startswith("over-saturated"):
        out.append(rule(FindingKind.STOPPED_OVERSATURATED, "warn", f"level stopped early, {stopped_early}; its figures "
                                                         "describe a server past its capacity", ("load",),
                        summary="stopped by the over-saturation guard"))
    if oversaturated_reason is not None:
        out.append(rule(FindingKind.BACKLOG, "warn", f"over-saturated: {oversaturated_reason}; latency figures grow with run "
                                           "length", ("ttft", "e2e", "goodput"),
                        summary="queue grew without bound (latency grows with run length)"))
    return out


# ---------------------------------------------------------------- another tool's levels (wattbench measure)

TOKEN_FIGURES = ("throughput", "efficiency")  # what a token count off biases
# beyond the counter's own edge uncertainty (the scrapes around the window's edges), the two counts
# (the tool's records, the server's counter) may differ by this share before a level is warned: a
# tool that counts with its tokenizer, or a server that counts a stop token, differs by a little
TOKEN_AGREEMENT_TOL = 0.02
NO_TOKENS = ("no tokens can be credited to this window: the command is not a load generator wattbench reads "
             "and the server exposes no token counters (give --target URL of a server with /metrics); "
             "energy and power only")


def no_tokens_text(target: str | None) -> str:
    """Why a window has no tokens, and the fix: ``NO_TOKENS`` without ``--target``; with one, that
    its server showed no token counter (``--target`` was given: asking for it again is no fix)."""
    if not target:
        return NO_TOKENS
    return (f"no tokens can be credited to this window: the command is not a load generator wattbench reads "
            f"and the server at {target} showed no token counter on its /metrics (vLLM, SGLang, TGI and "
            "llama.cpp --metrics have one); energy and power only")


def no_tokens_finding(target: str | None) -> Finding:
    """``warn``: a window with no token count (``no_tokens_text``; ``target`` as shown, redacted)."""
    return rule(FindingKind.NO_TOKENS, "warn", no_tokens_text(target), TOKEN_FIGURES, summary="no tokens counted")


def token_counter_edge_finding() -> Finding:
    """``warn``: the server's token counter was not scraped on both sides of the window."""
    return rule(FindingKind.TOKEN_COUNTER_EDGE, "warn", "the server's token counter was not scraped on both "
                                                        "sides of the window; its tokens are extrapolated at an "
                                                        "edge", TOKEN_FIGURES,
                summary="server token counter extrapolated at an edge")


def tool_left_out_finding(level: LevelResult, left_out: int, largest_output_tokens: int) -> Finding | None:
    """Requests the tool says it still had in flight at its end and left out of its file: their
    tokens inside the window are not credited, so tokens/s is understated and J/token overstated by
    at most their share — each at most the recorded requests' largest output
    (``largest_output_tokens``; the credited tokens per completed request when none is recorded) —
    of the credited tokens (the finding's effect, an upper bound; ``warn`` above the materiality
    bound). None when nothing was left out or nothing was credited."""
    tw = level.throughput.tokens_in_window
    if left_out <= 0 or tw is None or not tw.output:
        return None
    per = largest_output_tokens or tw.output / max(1, level.requests.completed)
    bound = 100.0 * left_out * per / tw.output
    why = (f"the tool ended with {left_out} request(s) still in flight and left them out of its file: the tokens the "
           f"server produced for them inside the window are not credited (up to {left_out} × {per:.0f} tokens, "
           f"{bound:.1f}% of the {tw.output:.0f} credited; J/token overstated by at most that)")
    return judged(FindingKind.TOOL_LEFT_OUT, why, TOKEN_FIGURES, bound, EFFICIENCY_MATERIAL_PCT,
                  basis="the recorded requests' output per request", summary="tool left requests out: up to {effect}")


def token_disagreement_finding(tool_output_tokens: float, server_output_tokens: float, edge_tokens: float
                               ) -> Finding | None:
    """``warn`` when the tool's count of the window's output tokens and the server's counter differ
    by more than the counter's edge uncertainty (``edge_tokens``: the tokens of the two scrape
    intervals around the window's edges) plus ``TOKEN_AGREEMENT_TOL`` of the server's count; its
    effect is the disagreement (tool / server − 1). None within that, or with no server count."""
    if server_output_tokens <= 0:
        return None
    allowed = edge_tokens + TOKEN_AGREEMENT_TOL * server_output_tokens
    if abs(tool_output_tokens - server_output_tokens) <= allowed:
        return None
    why = (f"the tool's records credit {tool_output_tokens:.0f} output tokens to the window, the server's "
           f"counter {server_output_tokens:.0f} ± {edge_tokens:.0f} (its scrapes around the edges): another client "
           "on the server, or a token count off")
    return rule(FindingKind.TOKENS_DISAGREE, "warn", why, TOKEN_FIGURES,
                effect_pct=100.0 * (tool_output_tokens / server_output_tokens - 1.0),
                summary="tool vs server token count {effect:+}")
