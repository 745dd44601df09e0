"""``RunSession``: everything a run holds while it goes, and the run directory it writes.

The session owns the ``ExitStack`` every resource enters (a launched engine, the Ray cluster, the
sampler, the ``/metrics`` scraper), so they close in reverse order however the run ends. It writes
the run directory after every level (result.json, telemetry.jsonl, server_timeline.jsonl,
report.html), so an interrupted run keeps what it measured, and it reports progress through the
caller's callback (the library never prints).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from wattbench.accounting.level import LevelContext
from wattbench.accounting.level_findings import run_validity
from wattbench.core.clock import ClockAnchor, now_ns
from wattbench.config.run import RunConfig
from wattbench.core.errors import StorageError, UserError
from wattbench.results import rundir
from wattbench.core.schema import Result
from wattbench.run.events import ProgressEvent, ProgressFn

if TYPE_CHECKING:
    from wattbench.accounting.idle import IdlePower
    from wattbench.distributed.run import RayCluster
    from wattbench.engines.base import EngineHandle
    from wattbench.metrics.carbon import IntensitySeries
    from wattbench.metrics.slo import SLO
    from wattbench.server.metrics import MetricsScraper
    from wattbench.telemetry.base import TelemetryLog, TelemetrySource
    from wattbench.telemetry.jsonl import TelemetryWriter

log = logging.getLogger("wattbench.run")


CLOSING_SCRAPE_WAIT_S = 2.0  # at most this long for the scrape after a level's window
CLOSING_READ_WAIT_S = 2.0  # at most this long for the sensors' readings after a window (NVML's counter: one poll)
POLL_S = 0.02


@dataclass
class RunSession:
    """The run's resources and its result so far; ``stack`` closes them in reverse order."""

    config: RunConfig
    progress: ProgressFn
    anchor: ClockAnchor
    run_id: str
    stack: contextlib.ExitStack
    run_dir: Path | None = None
    result: Result | None = None
    sampler: TelemetrySource | None = None  # telemetry.sampler.Sampler, or run.telemetry.ClusterTelemetry with --ray
    scraper: MetricsScraper | None = None
    cluster: RayCluster | None = None
    telemetry_writer: TelemetryWriter | None = None
    carbon: IntensitySeries | None = None  # from --carbon-intensity
    idle_power: dict[str, IdlePower] | None = None  # by boundary
    energy_unavailable_reason: str | None = None
    slos: list[SLO] = field(default_factory=list)
    engine: EngineHandle | None = None  # the launched engine's handle, None with --target

    def emit(self, event: ProgressEvent) -> None:
        try:
            self.progress(event)
        except Exception:  # a broken progress display must never break a measurement
            log.exception("progress callback failed")

    @property
    def log(self) -> TelemetryLog | None:
        """The run's telemetry log, ``None`` without a meter."""
        return self.sampler.log if self.sampler is not None else None

    def level_context(self) -> LevelContext:
        """What ``accounting.level.account_level`` accounts a level against."""
        cfg = self.config
        return LevelContext(log=self.log, idle=self.idle_power, price_per_kwh=cfg.price_per_kwh, pue=cfg.pue,
                            timeline=self.scraper.timeline if self.scraper is not None else None,
                            engine=self.result.server.engine if self.result is not None else None, slos=self.slos)

    def await_closing_reads(self, end_ns: int) -> None:
        """Readings after ``end_ns`` (a window's end) before the window is accounted, so each edge is
        bracketed by a reading on both sides: the sampler's closing reads (``Sampler.await_reads_after``:
        NVML's seldom-read counter read again, every energy and power channel read past the end, at
        most ``CLOSING_READ_WAIT_S``) and a ``/metrics`` scrape after the end (counter deltas over
        the window interpolate between two scrapes; at most ``CLOSING_SCRAPE_WAIT_S``, the scraper
        thread takes it on its own period)."""
        if self.sampler is not None:
            self.sampler.await_reads_after(end_ns, CLOSING_READ_WAIT_S)
        if self.scraper is None:
            return
        deadline = now_ns() + int(min(self.scraper.interval_s * 2.4, CLOSING_SCRAPE_WAIT_S) * 1e9)
        scrapes = self.scraper.timeline.scrapes
        while now_ns() < deadline and not (scrapes and scrapes[-1][0] > end_ns):
            time.sleep(POLL_S)
        self.scraper.scrape_after(end_ns)  # a loaded host may have delayed the thread's: take it here

    def write_level_artifacts(self) -> None:
        """Write the telemetry and server timeline since the last write and rewrite result.json
        (atomically). Called after every level (its requests are appended as they finish)."""
        assert self.run_dir is not None and self.result is not None
        try:
            if self.sampler is not None and self.telemetry_writer is not None:
                self.telemetry_writer.flush(self.sampler.log)
            if self.scraper is not None:
                self.scraper.timeline.to_jsonl(self.run_dir / "server_timeline.jsonl")
        except OSError as e:  # disk full: one line, the run stops (result.json keeps the levels before)
            raise rundir.storage_error(self.run_dir, e) from None
        rundir.write_result(self.run_dir, self.result)

    def write_report(self) -> None:
        if not self.config.html or self.run_dir is None:
            return
        try:
            from wattbench.report.html import write_run_html  # lazy: the HTML renderer, only with --html

            write_run_html(self.run_dir)
        except Exception as e:  # the report must never cost the measurement
            msg = f"report.html could not be written: {e}"
            if self.result is not None and msg not in self.result.warnings:
                self.result.warnings.append(msg)

    def finish(self, status: str, detail: str | None, error: BaseException | None = None) -> None:
        """Close the result (status, the run's verdict) and write it; never raises on the way. A run
        stopped by a failed write (``error`` a ``StorageError``: disk full, a read-only directory)
        says so in its verdict, and its closing write takes what the disk still allows
        (``rundir.close_result``)."""
        if self.result is None or self.run_dir is None:
            return
        self.result.status = status  # type: ignore[assignment]
        self.result.status_detail = detail
        stopped = error if isinstance(error, StorageError) else None
        self.result.validity = run_validity(self.result, self.energy_unavailable_reason, stopped)
        with contextlib.suppress(Exception):
            if self.sampler is not None and self.telemetry_writer is not None:
                self.telemetry_writer.flush(self.sampler.log)
        with contextlib.suppress(Exception):
            if stopped:
                rundir.close_result(self.run_dir, self.result)
            else:
                rundir.write_result(self.run_dir, self.result)
        self.write_report()


def run_dir_path(config: RunConfig, run_id: str) -> Path:
    """Where a run's directory is: ``--out``, else ``wattbench-results/<run id>``. Not stored in
    ``result.json`` (where the result lives is not a result, and a copied directory would carry
    a wrong path); the CLI prints it after the run from here."""
    return Path(config.out).expanduser() if config.out else Path("wattbench-results") / run_id


def resolve_run_dir(config: RunConfig, run_id: str) -> Path:
    """The run's directory, refused when ``--out`` already holds a result or cannot be written
    (``rundir.check_output_dir``: a file on the way, a read-only filesystem, ``/proc``)."""
    d = run_dir_path(config, run_id)
    rundir.check_name_lengths(d, "--out" if config.out else "the results directory")
    if config.out and (d / "result.json").exists():
        raise UserError(f"--out {d} already holds a result.json; choose another directory or remove it")
    rundir.check_output_dir(d, "--out" if config.out else "the results directory")
    return d
