"""The run's power telemetry: sensors found or given → a started ``Sampler`` (or, with ``--ray``,
one sensor actor per node merged on the driver's clock, seen through the sampler's interface)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wattbench.config.run import RunConfig
from wattbench.core.errors import UserError
from wattbench.run.session import RunSession
from wattbench.telemetry import detect, spec
from wattbench.telemetry.base import Channel, Sensor, TelemetryLog
from wattbench.telemetry.sampler import Sampler

if TYPE_CHECKING:
    from wattbench.core.schema import GPUInfo
    from wattbench.distributed.run import RayCluster


def open_sensors(config: RunConfig) -> tuple[list[Sensor], list[str]]:
    """Sensors to sample and the problems met while looking for them (each with its fix).

    Auto-detection with the embedded engine (which runs on this machine) adds an
    estimate-labelled CPU figure where no CPU meter exists, so a CPU-only newcomer sees an
    honest, labelled estimate rather than nothing.
    """
    if config.no_sensors:
        return [], []
    if config.sensors:
        return [spec.parse_sensor_spec(s) for s in config.sensors], []
    return detect.autodetect(estimate_cpu=config.target is None)


class ClusterTelemetry:
    """The Ray cluster's merged sensor stream seen through the sampler's interface
    (``telemetry.base.TelemetrySource``)."""

    def __init__(self, cluster: RayCluster) -> None:
        self.cluster = cluster

    @property
    def log(self) -> TelemetryLog:
        return self.cluster.telemetry()

    @property
    def channels(self) -> list[Channel]:
        return list(self.cluster.telemetry().channels.values())

    def latest_power_w(self) -> float | None:
        return None

    def await_reads_after(self, t_ns: int, timeout_s: float) -> bool:
        """Every node's closing reads after a window's end, pulled to the driver (``Sampler``'s)."""
        return self.cluster.closing_reads(t_ns, timeout_s)

    def gpu_inventory(self) -> list[GPUInfo]:
        return []

    def stop(self) -> TelemetryLog:
        return self.cluster.stop_sensors()

    def close(self) -> None:
        self.stop()


def unreadable_named(sampler: Sampler) -> str | None:
    """Why a meter the user named with ``--sensor`` cannot be read (its open failed, or it offers
    no channel on this machine), as the one line a run or ``measure`` stops on before any load;
    None when every named meter opened. Auto-detection is different: what it cannot read it
    leaves out, and the run says so among its notes."""
    failed = [s for s in sampler.sensors if s not in sampler.opened]
    if not failed:
        return None
    names = ", ".join(f"--sensor {s.name}" for s in failed)
    whys = "; ".join(p for p in sampler.problems if any(p.startswith(f"{s.name}:") for s in failed))
    return (f"{names} cannot be read on this machine ({whys or 'it offers no channel'}); fix the meter, or drop "
            "the --sensor that names it (without --sensor the meters found here are used: wattbench sensors "
            "lists them)")


def start_telemetry(session: RunSession, sensors: list[Sensor] | None = None) -> list[str]:
    """Start sampling (``session.sampler`` stays ``None`` when no channel reads); the sensor problems.
    A meter named with ``--sensor`` that cannot be read is a ``UserError`` (exit 2) here, before any
    load (``unreadable_named``).
    ``sensors``: the sensors to sample (None: ``open_sensors``, from the config). With ``--ray`` the
    cluster starts here too (``session.cluster``)."""
    cfg = session.config
    if cfg.ray:
        from wattbench.distributed.run import RayCluster  # lazy: Ray, only with --ray

        cluster = session.stack.enter_context(RayCluster(cfg.ray, n_actors=cfg.ray_actors, sensors=cfg.sensors,
                                                         sensor_interval_s=cfg.sample_interval_s))
        session.cluster = cluster
        if cfg.no_sensors:
            return []
        cluster_problems = list(cluster.start_sensors())
        merged = ClusterTelemetry(cluster)
        if merged.channels:
            session.sampler = merged
        return cluster_problems
    problems: list[str] = []
    if sensors is None:
        sensors, problems = open_sensors(cfg)
    if not sensors:
        return problems
    sampler = Sampler(sensors, interval_s=cfg.sample_interval_s)
    problems = problems + sampler.open()
    if cfg.sensors:  # each meter named on the command line must read, or the run stops here
        why = unreadable_named(sampler)
        if why:
            sampler.close()
            raise UserError(why)
    if sampler.channels:
        sampler.start()
        session.stack.callback(sampler.stop)
        session.sampler = sampler
    else:
        sampler.close()
    return problems
