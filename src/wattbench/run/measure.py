"""``measure(MeasureConfig, progress) -> Result``: energy around a load generator someone already runs.

    sensors ──► Sampler ──► TelemetryLog ────────────────┐     the same as `run` (run/telemetry.py)
    /metrics ──► MetricsScraper ─────────────────────────┤
    idle before ── COMMAND (its lifetime on the run's clock) ── idle after
    the tool's result files ──► ToolRun (results/tools/) ─┴─► LevelOutcome ──► account_level ──► LevelResult

The command runs as given (``wattbench measure -- vllm bench serve …``), with every meter sampled as
``wattbench run`` samples it (the same sensors, sample interval, idle baseline before and after,
``/metrics`` scraper; the process itself — its own session, its output into ``command.log``, its
whole group stopped on Ctrl-C — is ``run/command.run_command``). When it has ended:

* a known load generator (``vllm bench serve --save-result --save-detailed``, AIPerf's
  ``profile_export.jsonl``, GuideLLM's ``benchmarks.json``): its files are read
  (``results/tools/``), one level per benchmark / rate it ran; its per-request start, first-token
  and end stamps are placed on the run's clock (``results/tools/base.place_on_run_clock``: as they
  are when the tool stamps with CLOCK_MONOTONIC, by the wall anchor when it stamps with the wall
  clock, with the uncertainty that adds), and the level is built exactly as ``run`` builds its
  own (``load.level.assemble_outcome``: window, steady state; ``accounting.level.account_level``:
  energy, tokens in the window, verdict; per-request energy). The tool's own latency figures are
  kept beside, labelled as the tool's (``LevelResult.tool``). Where the server exposes token
  counters, the tokens in the window are also taken from them and the two counts compared;
* any other command: one level per ``--window-from`` marker pair, else one level over the
  command's lifetime; tokens from the server's counters over the window; with no counters the
  level has energy and power only, and says it cannot credit tokens.

The run directory is a normal one (``result.json``, ``requests.jsonl``, ``telemetry.jsonl``,
``server_timeline.jsonl``, ``report.html``) with ``command.log`` (the command's output) beside,
registered in the history, so ``report``, ``compare``, ``regress`` and ``plan`` read it unchanged.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
import asyncio

from wattbench.accounting.level import account_level, add_level_findings, count_source, counter_level
from wattbench.accounting.level_findings import (
    no_tokens_finding,
    token_counter_edge_finding,
    token_disagreement_finding,
    tool_left_out_finding,
)
from wattbench.accounting.findings import Finding
from wattbench.core.clock import ClockAnchor
from wattbench.config.run_commands import MeasureConfig
from wattbench.core.errors import Interrupted, TargetError, UserError, WattbenchError
from wattbench.load.level import assemble_outcome
from wattbench.core.load_types import LevelSpec
from wattbench.results import rundir
from wattbench.core.recordset import RecordSet, as_record_set
from wattbench.core.schema import (
    LevelResult,
    MeasureInfo,
    RequestRecord,
    Result,
    ServerInfo,
    ToolLevel,
)
from wattbench.results.store import HistoryStore
from wattbench.results.tools.registry import (
    TOOLS,
    ToolRun,
    check_tool_args,
    detect_tool,
    find_result_files,
    installed_version,
    read_tool,
    tool_target_url,
)
from wattbench.results.tools.base import ToolLevelData, place_on_run_clock, stamps, to_records
from wattbench.results.tools.markers import read_markers
from wattbench.run import analyses, telemetry
from wattbench.run.command import run_command
from wattbench.run.benchmark import (
    SCRAPE_INTERVAL_S,
    idle_after,
    idle_before,
    new_run_id,
    register,
    start_result,
    stopped,
)
from wattbench.run.events import LevelDone, Measured, ProgressFn
from wattbench.run.session import RunSession, resolve_run_dir
from wattbench.server.metrics import MetricsScraper, ServerTimeline
from wattbench.core.redact import argv_secrets, env_secrets, redact_argv, redact_url
from wattbench.core.secret_scope import scope
from wattbench.accounting.findings import worst
from wattbench.accounting.validity import combine
from wattbench.core.redact import combine_credentials, url_secrets
from wattbench.core.schema import ServerIdentity
from wattbench.run.targets import api_key
from wattbench.server.detect import detect_server
from wattbench.server.identity.common import target_of
from wattbench.server.openai import normalize_base_url

__all__ = ["measure", "CommandFailed"]


class CommandFailed(WattbenchError):
    """The command exited non-zero or wrote no result wattbench could read; what was measured is kept."""

    exit_code = 1


def measure(mcfg: MeasureConfig, progress: ProgressFn | None = None) -> Result:
    """Run the command with every meter sampled and return the Result (also written to disk).

    ``UserError`` for bad input before anything is written; ``Interrupted`` (the partial result
    attached) on Ctrl-C/SIGTERM; ``CommandFailed`` when the command failed or its files could not
    be read — the run directory then keeps what was measured (energy over its lifetime)."""
    anchor = ClockAnchor.take()
    with contextlib.ExitStack() as stack:
        session = RunSession(config=mcfg.run, progress=progress or (lambda event: None), anchor=anchor,
                             run_id=new_run_id(anchor), stack=stack)
        try:
            return _measure(session, mcfg)
        except (KeyboardInterrupt, Interrupted) as e:
            raise stopped(session, "the command", "what was measured is saved") from e
        except CommandFailed:
            raise
        except Exception as e:
            if session.result is not None:
                session.finish("failed", str(e) if isinstance(e, WattbenchError) else f"{type(e).__name__}: {e}", e)
            raise


# ---------------------------------------------------------------------------------- the phases


def _check_command(mcfg: MeasureConfig) -> tuple[str, Path]:
    """The tool the command is (or ``command``) and its working directory; one line when the
    command cannot be run."""
    if not mcfg.command:
        raise UserError("no command given: wattbench measure [OPTIONS] -- COMMAND [ARGS...]")
    cwd = Path(mcfg.cwd or os.getcwd())
    tool = mcfg.tool or detect_tool(mcfg.command)
    if tool not in TOOLS:
        raise UserError(f"--tool {tool}: choose one of {', '.join(TOOLS)}")
    check_tool_args(tool, mcfg.command)
    exe = mcfg.command[0]
    path = (cwd / exe) if os.sep in exe and not os.path.isabs(exe) else Path(exe)
    if os.sep in exe and path.is_dir():
        raise UserError(f"{exe!r} is a directory, not a command to run")
    found = shutil.which(exe, path=os.environ.get("PATH")) if os.sep not in exe else (
        exe if path.is_file() and os.access(path, os.X_OK) else None)
    if not found:
        raise UserError(f"command not found: {exe!r} (give its path, or put it on PATH)")
    if mcfg.window_from is not None and not (cwd / mcfg.window_from).parent.is_dir():
        raise UserError(f"--window-from {mcfg.window_from}: its folder does not exist")
    for f in mcfg.result_files:
        if not (cwd / f).parent.is_dir():
            raise UserError(f"--result {f}: its folder does not exist")
    return tool, cwd


def _server(session: RunSession, mcfg: MeasureConfig, tool: str) -> tuple[ServerInfo, list[str], str | None]:
    """The server whose ``/metrics`` is scraped: ``--target`` (must answer), else the URL the
    tool's arguments name (a note when it does not answer: the command may start it)."""
    cfg = session.config
    given = cfg.target
    url = given or tool_target_url(tool, mcfg.command)
    if not url:
        return _unknown_server("no --target, and the command names no server"), [], None
    clean, key = combine_credentials(url, api_key(cfg))
    session.stack.enter_context(scope(key, *url_secrets(url)))  # nothing measure writes or prints holds it
    base = normalize_base_url(clean)
    try:
        server = asyncio.run(detect_server(base, key))
    except TargetError as e:
        if given:
            raise UserError(f"--target {given}: {e}") from None
        return _unknown_server(f"{base} did not answer before the command started", base), [
            f"the server the command names ({base}) did not answer before it started ({e}); no /metrics was scraped"
        ], None
    server.base_url = base
    return server, [], key


def _unknown_server(why: str, base_url: str | None = None) -> ServerInfo:
    """A server wattbench could not probe: its identity says so (the URL the command names, if any;
    nothing exposed), so the run's configuration key holds what is known, not "identity unknown"
    (which is a result written before identities were recorded)."""
    return ServerInfo(identity=ServerIdentity(target=target_of(base_url), not_exposed=[why]))


def _measure(session: RunSession, mcfg: MeasureConfig) -> Result:
    cfg = session.config
    tool, cwd = _check_command(mcfg)
    run_dir = resolve_run_dir(cfg, session.run_id)
    if not cfg.out:
        run_dir = run_dir.resolve()
    if cfg.register_run:
        HistoryStore.check_usable(cfg.db)  # a corrupt --db: one line now, not a run kept but not registered
    # what the command may print of its own credentials (its argv, the environment it inherits, the
    # key) is scrubbed from command.log and everything measure writes or prints
    from wattbench.run.targets import api_key

    session.stack.enter_context(scope(api_key(cfg), *argv_secrets(mcfg.command), *env_secrets(dict(os.environ))))
    server, notes, key = _server(session, mcfg, tool)
    problems = telemetry.start_telemetry(session)
    info = MeasureInfo(command=redact_argv(mcfg.command), tool=tool, notes=notes)
    result = start_result(session, run_dir, server, problems, measure=info)
    if server.metrics_endpoint:
        session.scraper = MetricsScraper(server.metrics_endpoint, interval_s=SCRAPE_INTERVAL_S, engine=server.engine,
                                         api_key=key).start()
        session.stack.callback(session.scraper.stop)
    idle_before(session)
    before = _files_before(tool, mcfg, cwd)
    try:
        end_anchor, rc = run_command(session, mcfg, cwd, info)
    except KeyboardInterrupt:  # stopped: keep one level over the command's run until then
        info.notes.append("interrupted: the command was stopped; one level over its run until then")
        with contextlib.suppress(Exception):
            _window_levels(session, MeasureConfig(command=mcfg.command, run=cfg), cwd, info, ClockAnchor.take(),
                           tool_failed=None)
        raise
    assert info.ended_ns is not None  # run_command stamped the command's end
    session.await_closing_reads(info.ended_ns)
    failure = None
    if rc != 0:
        failure = f"the command exited with status {rc}"
    levels_done = False
    if tool != "command" and failure is None:
        try:
            run = read_tool(tool, find_result_files(tool, mcfg.command, cwd, mcfg.result_files, before,
                                                    exclude=session.run_dir))
            _tool_levels(session, run, info, end_anchor)
            levels_done = True
        except UserError as e:
            failure = str(e)
    if not levels_done:
        try:
            _window_levels(session, mcfg, cwd, info, end_anchor, tool_failed=failure if tool != "command" else None)
        except UserError as e:  # the markers could not be read: the command's lifetime instead, and say why
            failure = failure or str(e)
            _window_levels(session, MeasureConfig(command=mcfg.command, run=cfg), cwd, info, end_anchor,
                           tool_failed=None)
    analyses.run_analyses(session)
    idle_after(session)
    if failure is not None:
        session.finish("failed", failure)
        _register(session, result)
        raise CommandFailed(f"{failure}; the energy over its run is kept in {session.run_dir}")
    session.finish("complete", None)
    _register(session, result)
    return result


def _register(session: RunSession, result: Result) -> None:
    if session.run_dir is not None:
        register(session.config, result, session.run_dir)


def _files_before(tool: str, mcfg: MeasureConfig, cwd: Path) -> dict[str, int]:
    """The tool's candidate result files that exist before the command (path -> mtime), so that
    only files it wrote are read."""
    if tool == "command":
        return {}
    return {str(p): p.stat().st_mtime_ns for p in find_result_files(tool, mcfg.command, cwd, mcfg.result_files,
                                                                     None, existing_only=True)}


# ---------------------------------------------------------------------------------- levels


def _tool_levels(session: RunSession, run: ToolRun, info: MeasureInfo, end_anchor: ClockAnchor) -> None:
    """One level per benchmark the tool ran, accounted as ``run`` accounts its own."""
    info.tool_version = run.version or installed_version(run.tool, info.command)
    info.result_files = list(run.files)
    info.not_read = list(run.not_read)
    info.notes += run.notes
    info.window_source = "tool records"
    info.token_source = "tool records"
    span = stamps(run)
    if span is None:
        raise UserError(f"{run.tool}: {', '.join(run.files)} holds no timed request")
    started, ended, result = info.started_ns, info.ended_ns, session.result
    assert started is not None and ended is not None and result is not None  # after the command ran
    info.clock = place_on_run_clock(span[0], span[1], started, ended, session.anchor, end_anchor,
                                    f"{run.tool} ({', '.join(run.files)})")
    for lv in run.levels:
        index = len(result.levels)
        records = as_record_set(to_records(lv, index, info.clock.offset_ns, run.token_source))
        spec = LevelSpec(index=index, mode=lv.mode, value=lv.value,  # type: ignore[arg-type]
                         max_in_flight=lv.max_in_flight, arrival=lv.arrival)
        target_rate = lv.value if lv.mode == "rate" else None
        outcome = assemble_outcome(spec, [], started, target_rate, 1, records=records)
        level = account_level(index, spec, outcome, session.level_context(), count_source(records))
        level.label = f"{run.tool}: {lv.label}"
        add_level_findings(level, spec, outcome, None)
        level.timing = None  # the tool's warm-up and duration are its own (in the figures and notes)
        analyses.attribute(session, level, records)
        level.tool = ToolLevel(tool=run.tool, label=lv.label, figures=dict(lv.figures),
                               tokens_counted_by=run.tokens_counted_by, notes=list(lv.notes),
                               tool_output_tokens=level.throughput.tokens_in_window.output
                               if level.throughput.tokens_in_window else None)
        _left_out(level, lv)
        _cross_check(level, session.scraper.timeline if session.scraper is not None else None)
        _record(session, level, records)


def _left_out(level: LevelResult, lv: ToolLevelData) -> None:
    """The tool's requests left in flight at its end (``level_findings.tool_left_out_finding``)."""
    f = tool_left_out_finding(level, lv.left_out, max((r.output_tokens or 0 for r in lv.requests), default=0))
    if f is not None:
        level.validity = worst(level.validity, combine([f]))


def _cross_check(level: LevelResult, timeline: ServerTimeline | None) -> None:
    """The server's own count of the tokens in the window beside the tool's. The counter is read
    between scrapes, so it is known to within the tokens of the two scrape intervals around the
    window's edges (``ServerTimeline.counter_edge_error``); judged by
    ``level_findings.token_disagreement_finding``."""
    tl = level.tool
    if tl is None or timeline is None or "generation_tokens" not in timeline.series:
        return
    w = level.window
    assert w is not None  # account_level gives every level its window
    server = timeline.counter_delta("generation_tokens", w.start_ns, w.end_ns)
    edge = timeline.counter_edge_error("generation_tokens", w.start_ns, w.end_ns)
    if server is None or edge is None:
        tl.notes.append("the server's token counter was not scraped on both sides of the window: no cross-check")
        return
    tl.server_output_tokens = float(server)
    tl.server_output_tokens_error = float(edge)
    if tl.tool_output_tokens is None or server <= 0:
        return
    tl.token_disagreement = tl.tool_output_tokens / server - 1.0
    f = token_disagreement_finding(tl.tool_output_tokens, server, edge)
    if f is not None:
        level.validity = worst(level.validity, combine([f]))


def _window_levels(session: RunSession, mcfg: MeasureConfig, cwd: Path, info: MeasureInfo, end_anchor: ClockAnchor,
                   tool_failed: str | None) -> None:
    """Levels without per-request records: ``--window-from`` marker pairs, else the command's
    lifetime; tokens from the server's counters when scraped."""
    windows: list[tuple[str, int, int]]
    started, ended, result = info.started_ns, info.ended_ns, session.result
    assert started is not None and ended is not None and result is not None  # after the command ran
    if mcfg.window_from is not None:
        marks = read_markers(cwd / mcfg.window_from)
        lo = min(a for _, a, _ in marks)
        hi = max(b for _, _, b in marks)
        info.clock = place_on_run_clock(lo, hi, started, ended, session.anchor, end_anchor,
                                        f"--window-from {mcfg.window_from}")
        off = info.clock.offset_ns
        windows = [(label, a + off, b + off) for label, a, b in marks]
        info.window_source = "markers"
    else:
        windows = [("command", started, ended)]
        info.window_source = "command lifetime"
    timeline = session.scraper.timeline if session.scraper is not None else None
    has_counters = timeline is not None and "generation_tokens" in timeline.series
    info.token_source = "server counters" if has_counters else "none"
    if tool_failed:
        info.notes.append(f"the tool's result could not be used ({tool_failed}); the window is "
                          + ("the markers'" if mcfg.window_from else "the command's lifetime"))
    for label, t0, t1 in windows:
        level = _counter_level(session, len(result.levels), label, t0, t1, timeline if has_counters else None)
        _record(session, level, [])


def _counter_level(session: RunSession, index: int, label: str, t0: int, t1: int, timeline: ServerTimeline | None
                   ) -> LevelResult:
    """A level over ``[t0, t1]`` whose tokens are the server's counters' increase (none without):
    the counts read here, the level accounted by ``accounting.level.counter_level``."""
    cfg = session.config
    tokens = None
    found: list[Finding] = []
    if timeline is not None:
        out_tok = max(0.0, timeline.counter_delta("generation_tokens", t0, t1) or 0.0)
        in_tok = max(0.0, timeline.counter_delta("prompt_tokens", t0, t1) or 0.0) if "prompt_tokens" in timeline.series else 0.0
        tokens = (out_tok, in_tok)
        if not timeline.covers(t0, t1, "generation_tokens"):
            found.append(token_counter_edge_finding())
    else:
        given = cfg.target or (cfg.targets[0] if cfg.targets else None)
        found.append(no_tokens_finding(redact_url(given) if given else None))
    level = counter_level(index, label, t0, t1, session.level_context(), tokens=tokens, findings=found,
                          no_metrics_reason="no server /metrics was scraped"
                          + ("" if cfg.target or cfg.targets else " (give --target URL)"))
    level.tool = ToolLevel(tool="command", label=label, tokens_counted_by="the server's token counters"
                           if timeline is not None else "none",
                           server_output_tokens=tokens[0] if tokens is not None else None,
                           server_output_tokens_error=timeline.counter_edge_error("generation_tokens", t0, t1)
                           if timeline is not None else None)
    return level


def _record(session: RunSession, level: LevelResult, records: RecordSet | list[RequestRecord]) -> None:
    """Add the level and write the run directory (its requests appended), as ``run`` does."""
    assert session.result is not None and session.run_dir is not None  # start_result made both
    session.result.levels.append(level)
    if len(records):
        rundir.append_requests(session.run_dir, as_record_set(records), keep_chunks=session.config.keep_chunks)
    session.write_level_artifacts()
    session.emit(LevelDone(Measured(level.index), level))
