"""collect_environment (src/wattbench/environment.py) against what this machine says by other means."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path

import pydantic
import pytest

from wattbench.environment import collect_environment, package_versions
from wattbench.core.schema import GPUInfo


def test_host_python_and_cpu_match_the_machine():
    env = collect_environment()
    assert env.hostname == socket.gethostname()
    assert env.python == "%d.%d.%d" % sys.version_info[:3]
    assert env.kernel == os.uname().release
    assert env.os.startswith(platform.system())
    assert env.cpu_count == os.cpu_count()
    cpuinfo = Path("/proc/cpuinfo")
    names = ([ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
             if cpuinfo.exists() else [])
    # the first "model name" line, or None where there is none (no /proc/cpuinfo, or an ARM kernel's)
    assert env.cpu_model == (names[0] if names else None)


def test_memory_total_is_memtotal_from_proc_meminfo():
    """psutil is a dependency, so on Linux the figure is always there: None is a failure, not a pass."""
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        pytest.skip("no /proc/meminfo (not Linux): nothing independent to compare the figure with")
    env = collect_environment()
    kb = next(int(ln.split()[1]) for ln in meminfo.read_text().splitlines() if ln.startswith("MemTotal:"))
    assert env.memory_total_bytes == kb * 1024


def test_package_versions_are_the_installed_ones_and_skip_missing():
    v = package_versions(("pydantic", "no-such-package-wattbench-test"))
    assert v == {"pydantic": pydantic.VERSION}
    assert collect_environment().packages["pydantic"] == pydantic.VERSION


def test_gpus_are_taken_from_the_sensor_inventory_as_given():
    gpus = [GPUInfo(index=0, name="NVIDIA H200", power_limit_w=700.0), GPUInfo(index=1, name="NVIDIA H200")]
    env = collect_environment(gpus)
    assert env.gpus == gpus and env.gpus is not gpus
    assert collect_environment().gpus == []


def test_cpu_frequency_is_the_mean_of_the_cpus_cpufreq_and_none_without_it(tmp_path):
    from wattbench.environment import cpu_frequency_mhz

    for cpu, khz in (("cpu0", "2400000\n"), ("cpu1", "1800000\n"), ("cpu2", "garbage\n")):
        d = tmp_path / cpu / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_cur_freq").write_text(khz)
    pattern = str(tmp_path / "cpu[0-9]*" / "cpufreq" / "scaling_cur_freq")
    assert cpu_frequency_mhz(pattern) == pytest.approx(2100.0, rel=1e-12)  # (2,400 + 1,800) / 2 MHz; the unreadable one is left out
    assert cpu_frequency_mhz(str(tmp_path / "nothing" / "*")) is None
