"""``run_doctor``: every applicable check of ``wattbench doctor``, in order, into one ``DoctorReport``
(the groups: ``environment``, ``server``, ``checklist``, ``troubleshoot``). Nothing here changes a
GPU setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from wattbench.config.commands import DEFAULT_BURST
from wattbench.doctor.check import DoctorReport
from wattbench.doctor.troubleshoot import diagnose_failure
from wattbench.core.errors import UserError
from wattbench.core.redact import url_secrets
from wattbench.core.secret_scope import scope
from wattbench.doctor import checklist as cl, environment as env, server as srv
from wattbench.server.openai import normalize_base_url


def run_doctor(
    target: str | None = None,
    sensors: list[str] | None = None,
    nvml: Any = None,
    *,
    api_key: str | None = None,
    run_dir: str | Path | None = None,
    checklist: str | Path | None = None,
    exporters: list[str] | None = None,
    burst: int | None = None,
    environment: bool = True,
    sensor_measure_s: float = 0.3,
    nvidia_device: str | None = None,
    torch_probe: Callable[[], dict[str, Any] | None] | None = None,
    versions: dict[str, str] | None = None,
    requires: dict[str, list[str]] | None = None,
    sensor_kw: dict[str, Any] | None = None,
) -> DoctorReport:
    """Run every applicable check. Bad input (URL, checklist file, run dir) raises UserError."""
    if not environment and target is None and run_dir is None and checklist is None and not exporters:
        raise UserError("nothing to check: keep the environment checks, or give --target, --run, --checklist "
                        "or --exporter")

    # the key, URL credentials and query values: never shown while the checks run
    with scope(api_key, *url_secrets(target)):
        declared = cl.load_checklist(checklist) if checklist else None
        if target is not None:
            normalize_base_url(target)  # a bad URL is a UserError before any probing
        report = DoctorReport(target=target, run_dir=str(run_dir) if run_dir else None)
        facts: dict[str, Any] = {}
        if environment:
            kw = {"nvidia_device": nvidia_device} if nvidia_device else {}
            gpu, facts = env.gpu_checks(nvml, **kw)
            report.add(gpu)
            report.add(env.python_check())
            tp = torch_probe or env.probe_torch
            report.add(env.torch_check(tp(), facts.get("driver_cuda"), facts.get("gpu_count", 0) > 0))
            report.add(env.engine_checks(versions if versions is not None else env.installed_versions(),
                                         requires if requires is not None else env.installed_requires(),
                                         facts.get("driver_cuda")))
            report.add(env.sensor_checks(sensors, nvml=nvml, measure_s=sensor_measure_s, **(sensor_kw or {})))
        probe = None
        if target is not None:
            probe = srv.probe_server(target, api_key, DEFAULT_BURST if burst is None else burst)
            report.add(srv.server_checks(probe))
        if target is not None or declared is not None or exporters:
            report.add(cl.checklist_checks(probe, declared, exporters))
        if run_dir is not None:
            report.add(diagnose_failure(Path(run_dir)))
        return report
