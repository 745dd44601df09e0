"""The host's CPUs over a window (``environment.py``: ``parse_proc_stat``, ``process_cpu_ticks``,
``tree_cpu_ticks``, ``host_cpu_between``) against crafted ``/proc`` texts whose shares are known by
construction: steal, iowait, a CPU hot-plugged out mid-window, a counter that went back, a process
tree with a name holding spaces and parentheses, and a real ``/proc`` where one exists."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wattbench.environment import (
    CpuSnapshot,
    cpu_snapshot,
    host_cpu_between,
    parse_proc_stat,
    process_cpu_ticks,
    tree_cpu_ticks,
)


def _stat(agg: list[int], per_cpu: int, extra: str = "") -> str:
    """A /proc/stat text: the aggregate line (user nice system idle iowait irq softirq steal guest
    guest_nice), ``per_cpu`` cpuN lines (their figures are not read) and the lines after."""
    lines = ["cpu  " + " ".join(str(x) for x in agg)]
    lines += [f"cpu{i} 1 2 3 4 5 6 7 8 0 0" for i in range(per_cpu)]
    lines += ["intr 12345 0 0", "ctxt 999", "btime 1700000000", "processes 42", "procs_running 3", extra]
    return "\n".join(lines) + "\n"


def test_the_aggregate_line_and_the_online_cpus_are_read():
    t = parse_proc_stat(_stat([100, 20, 30, 400, 5, 6, 7, 8, 50, 1], per_cpu=16))
    assert t is not None and t.cpus == 16
    assert (t.get("user"), t.get("nice"), t.get("system"), t.get("idle")) == (100, 20, 30, 400)
    assert (t.get("iowait"), t.get("irq"), t.get("softirq"), t.get("steal")) == (5, 6, 7, 8)
    assert t.total == 576  # guest and guest_nice are inside user and nice: not added again


def test_an_old_kernels_short_line_reads_its_missing_fields_as_zero_and_garbage_as_none():
    t = parse_proc_stat("cpu 10 0 5 85\ncpu0 10 0 5 85\n")
    assert t is not None and t.total == 100 and t.get("steal") == 0 and t.cpus == 1
    assert parse_proc_stat("cpu 10 x 5 85\n") is None
    assert parse_proc_stat("cpu 10 0\n") is None
    assert parse_proc_stat("intr 1 2 3\n") is None
    assert parse_proc_stat("") is None


def _snap(t_s: float, agg: list[int], cpus: int = 4, server: int | None = None, own: float | None = None
          ) -> CpuSnapshot:
    host = parse_proc_stat(_stat(agg, cpus))
    return CpuSnapshot(t_s=t_s, host=host, server_ticks=server, own_cpu_s=own)


def test_busy_steal_and_iowait_shares_of_the_windows_ticks():
    # 4 CPUs × 10 s × 100 ticks/s = 4000 ticks: user +1000, nice +200, system +400, irq +100,
    # softirq +100 (busy 1800 = 45%), steal +800 (20%), iowait +200 (5%), idle +1200 (30%)
    a = _snap(100.0, [5000, 100, 2000, 90000, 300, 50, 50, 10, 0, 0], server=7000, own=12.0)
    b = _snap(110.0, [6000, 300, 2400, 91200, 500, 150, 150, 810, 0, 0], server=7600, own=12.5)
    hc = host_cpu_between(a, b, clk_tck=100)
    assert hc.duration_s == pytest.approx(10.0)
    assert hc.busy_pct == pytest.approx(45.0) and hc.steal_pct == pytest.approx(20.0)
    assert hc.iowait_pct == pytest.approx(5.0)
    assert hc.cpu_count == 4 and hc.cpu_count_start == 4
    # the server's tree: 600 ticks = 6 CPU s over 10 s = 0.6 cores, 600 of 4000 ticks = 15%
    assert hc.server_cpu_cores == pytest.approx(0.6) and hc.server_cpu_pct == pytest.approx(15.0)
    # wattbench: 0.5 CPU s over 10 s = 0.05 cores = 50 ticks of 4000 = 1.25%
    assert hc.wattbench_cpu_cores == pytest.approx(0.05) and hc.wattbench_cpu_pct == pytest.approx(1.25)
    assert hc.others_busy_pct == pytest.approx(45.0 - 15.0 - 1.25)


def test_a_cpu_hot_plugged_out_mid_window_keeps_the_shares_of_the_aggregate_line():
    # 4 CPUs for 5 s then 3 for 5 s: 2000 + 1500 = 3500 ticks, of which 700 busy, 350 steal
    a = _snap(0.0, [1000, 0, 0, 9000, 0, 0, 0, 0, 0, 0], cpus=4)
    b = _snap(10.0, [1700, 0, 0, 11450, 0, 0, 0, 350, 0, 0], cpus=3)
    hc = host_cpu_between(a, b, clk_tck=100)
    assert hc.cpu_count_start == 4 and hc.cpu_count == 3
    assert hc.busy_pct == pytest.approx(20.0) and hc.steal_pct == pytest.approx(10.0)


def test_a_counter_that_went_back_counts_as_zero_not_negative():
    # the kernel's iowait may go back; the other counters' growth is the whole window
    a = _snap(0.0, [100, 0, 0, 1000, 500, 0, 0, 0, 0, 0])
    b = _snap(1.0, [300, 0, 0, 1200, 400, 0, 0, 0, 0, 0])
    hc = host_cpu_between(a, b, clk_tck=100)
    assert hc.iowait_pct == pytest.approx(0.0, abs=1e-12) and hc.busy_pct == pytest.approx(50.0)


def test_an_empty_window_or_an_unread_host_gives_only_what_both_reads_had():
    a = _snap(5.0, [100, 0, 0, 1000, 0, 0, 0, 0, 0, 0])
    assert host_cpu_between(a, a).model_dump(exclude_unset=True) == {}
    none = CpuSnapshot(t_s=0.0, host=None, own_cpu_s=1.0)
    hc = host_cpu_between(none, CpuSnapshot(t_s=2.0, host=None, own_cpu_s=2.0), clk_tck=100)
    assert hc.model_dump(exclude_unset=True) == pytest.approx({"duration_s": 2.0, "wattbench_cpu_cores": 0.5}, rel=1e-12)
    assert hc.others_busy_pct is None
    # no server read (--target): no server key, and no share of the others
    hc = host_cpu_between(_snap(0.0, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), _snap(1.0, [100, 0, 0, 300, 0, 0, 0, 0, 0, 0]),
                          clk_tck=100)
    assert "server_cpu_cores" not in hc.model_fields_set and hc.busy_pct == pytest.approx(25.0)
    assert hc.others_busy_pct is None


def _pstat(pid: int, comm: str, ppid: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime …
    return (f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 100 0 0 0 {utime} {stime} {cutime} {cstime} "
            "20 0 4 0 12345 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n")


def test_a_process_stat_line_is_read_after_its_names_last_parenthesis():
    assert process_cpu_ticks(_pstat(42, "vllm (worker) 1)", 7, 100, 20, 3, 4)) == (42, 7, 127)
    assert process_cpu_ticks("42 (x) S 7 1 2") is None
    assert process_cpu_ticks("garbage") is None


def test_a_process_tree_is_the_root_and_every_descendant_only():
    stats = [
        _pstat(1, "init", 0, 5000, 5000),
        _pstat(100, "python3 -m vllm", 1, 300, 50, cutime=40, cstime=10),  # the root: 400
        _pstat(101, "EngineCore_0", 100, 2000, 100),  # child: 2100
        _pstat(102, "ray::worker)(", 101, 500, 0),  # grandchild, an awkward name: 500
        _pstat(200, "noisy neighbour", 1, 9000, 0),  # not in the tree
        "not a stat line",
    ]
    assert tree_cpu_ticks(stats, 100) == 400 + 2100 + 500
    assert tree_cpu_ticks(stats, 102) == 500
    assert tree_cpu_ticks(stats, 999) is None  # the root is gone


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc: Linux only")
def test_a_real_snapshot_reads_this_hosts_cpus_and_this_process():
    snap = cpu_snapshot(os.getpid())
    assert snap.host is not None
    online = sum(1 for ln in Path("/proc/stat").read_text().splitlines()
                 if ln.startswith("cpu") and ln[3:4].isdigit())
    assert snap.host.cpus == online
    assert snap.server_ticks is not None and snap.own_cpu_s is not None
    assert cpu_snapshot(None).server_ticks is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc: Linux only")
def test_a_real_process_trees_ticks_are_its_members_own():
    """A launched-engine-like tree (a new session: a shell and two busy children, nice'd), stopped
    with SIGSTOP so its times hold still: the snapshot's tree ticks are the sum psutil reads from
    each member, and a process outside the tree (this one) is not in them."""
    psutil = pytest.importorskip("psutil")
    hog = f"{sys.executable} -c 'while True: pass'"
    proc = subprocess.Popen(["nice", "-n", "5", "sh", "-c", f"{hog} & {hog} & wait"], start_new_session=True)
    try:
        tck = os.sysconf("SC_CLK_TCK")
        root = psutil.Process(proc.pid)
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:  # until the tree has run a little (a loaded machine is slow to)
            members = [root, *root.children(recursive=True)]
            if len(members) == 3 and sum(m.cpu_times().user + m.cpu_times().system for m in members) * tck >= 10:
                break
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(0.2)  # the stop reaches every member
        members = [root, *root.children(recursive=True)]
        assert len(members) == 3
        truth = sum(sum(m.cpu_times()[:4]) for m in members) * tck  # user, system, children's user and system
        snap = cpu_snapshot(proc.pid)
        assert snap.server_ticks is not None and snap.server_ticks >= 10
        assert snap.server_ticks == pytest.approx(truth, abs=3)  # psutil's seconds are the ticks ÷ CLK_TCK
        assert cpu_snapshot(members[1].pid).server_ticks < snap.server_ticks  # a subtree is less
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
