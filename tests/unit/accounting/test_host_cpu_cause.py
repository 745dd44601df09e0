"""The host's CPUs as a drift's likely cause (``accounting.drift.host_cpu_cause`` and ``_cause``):
a steal, busy, iowait or server-CPU move from the first trial to the last is named at its bound
and not just below it (each edge pinned: moving a bound by 1% fails one of these tests); a host
that held still is said to have held still; a run without the record reads as before; and
``wattbench ab``'s side drift carries the cause."""

from __future__ import annotations

import math

import pytest

from wattbench.accounting import drift as adrift
from wattbench.accounting.drift import host_cpu_cause, rounds_host_cpu, stationarity
from wattbench.analysis.ab import paired_level
from wattbench.core.schema import HostCpu, LevelResult, PairedLevel, SteadySeries


def _hc(busy: float = 30.0, steal: float = 0.0, iowait: float = 0.0, server: float | None = None,
        server_pct: float | None = None, own_pct: float | None = None, cpus: int = 16) -> HostCpu:
    h = HostCpu(duration_s=20.0, cpu_count=cpus, cpu_count_start=cpus, busy_pct=busy, steal_pct=steal,
                iowait_pct=iowait)
    if server is not None:
        h.server_cpu_cores = server
    if server_pct is not None:
        h.server_cpu_pct = server_pct
    if own_pct is not None:
        h.wattbench_cpu_pct = own_pct
    return h


def _trials(host: list[HostCpu | None], change: float = -0.30, boundary: str = "node") -> list[LevelResult]:
    """Trials 30 s apart whose output tokens/s fall linearly by ``change`` over the three (no noise)
    at a constant 300 W, no thermal, queue or lag record: the host's CPUs are the only record."""
    out = []
    t_last = (len(host) - 1) * 30.0 + 19.5
    for k, h in enumerate(host):
        ts = [k * 30.0 + i + 0.5 for i in range(20)]
        lv = LevelResult(index=0, label="concurrency=16", trial=k)
        tok = [1000.0 * (1.0 + change * (t - 0.5) / (t_last - 0.5)) for t in ts]
        lv.series = SteadySeries(bucket_s=1.0, t_s=ts, output_tokens_per_s=tok, power_w={boundary: [300.0] * 20})
        lv.host_cpu = h
        out.append(lv)
    return out


def test_steal_that_grew_is_named_with_what_to_do():
    st = stationarity(_trials([_hc(steal=0.0), _hc(steal=10.0), _hc(steal=31.0)]))
    assert st.cause == "host CPU steal 0→31%"
    assert st.todo == "measure on a host without other tenants or load; pin the server's cores"


def test_busy_cpus_name_the_other_processes_share_where_the_servers_is_known():
    a = _hc(busy=35.0, server=1.0, server_pct=30.0, own_pct=3.0)  # others 2%
    b = _hc(busy=96.0, server=0.5, server_pct=31.0, own_pct=5.0)  # others 60%
    st = stationarity(_trials([a, _hc(busy=60.0), b]))
    assert st.cause == "host CPUs busy 35→96% (others' processes 2→60%); the server's CPU 1.0→0.5 cores"
    # without the server's share, the busy share alone
    st = stationarity(_trials([_hc(busy=35.0), _hc(busy=60.0), _hc(busy=96.0)]))
    assert st.cause == "host CPUs busy 35→96%"


def test_a_host_that_held_still_is_said_to_have_held_still():
    st = stationarity(_trials([_hc(busy=40.0, steal=1.0, server=1.0)] * 3))
    assert st.cause == ("no recorded cause: temperature, clocks, the server's queue, the client's lag and the "
                        "host's CPUs held still")
    assert "repeat the run" in st.todo


def test_a_run_without_the_record_reads_as_before():
    st = stationarity(_trials([None, None, None]))
    assert st.cause == ("no recorded cause: temperature, clocks, the server's queue and the client's lag held "
                        "still")
    # an empty block (not Linux: nothing read) is no record either
    st = stationarity(_trials([HostCpu(), HostCpu(), HostCpu()]))
    assert st.cause is not None and "host's CPUs" not in st.cause


def test_a_cpu_taken_offline_is_named():
    st = stationarity(_trials([_hc(cpus=16), _hc(cpus=16), _hc(cpus=15)]))
    assert st.cause == "host CPUs online 16→15"


@pytest.mark.parametrize("field, bound, words", [
    ("steal", adrift.STEAL_CHANGE_PCT, "host CPU steal"),
    ("busy", adrift.BUSY_CHANGE_PCT, "host CPUs busy"),
    ("iowait", adrift.IOWAIT_CHANGE_PCT, "host CPU iowait"),
])
def test_each_share_is_named_at_its_edge_and_not_just_below_it(field: str, bound: float, words: str):
    base = {"steal": 2.0, "busy": 30.0, "iowait": 1.0}
    at = host_cpu_cause(_hc(**base), _hc(**{**base, field: base[field] + bound}))
    below = host_cpu_cause(_hc(**base), _hc(**{**base, field: base[field] + 0.99 * bound}))
    assert len(at[0]) == 1 and at[0][0].startswith(words) and at[1] is not None
    assert below == ([], None)
    fall = host_cpu_cause(_hc(**{**base, field: base[field] + bound}), _hc(**base))  # a fall is named too
    assert len(fall[0]) == 1 and fall[0][0].startswith(words)


def test_the_servers_cpu_is_named_at_its_relative_edge_and_not_just_below_it():
    edge = adrift.SERVER_CPU_CHANGE
    at = host_cpu_cause(_hc(server=1.0), _hc(server=1.0 - edge))
    below = host_cpu_cause(_hc(server=1.0), _hc(server=1.0 - 0.99 * edge))
    assert at[0] == [f"the server's CPU 1.0→{1.0 - edge:.1f} cores"] and below == ([], None)
    # relative to the larger: a rise by the same share of the larger is named
    assert host_cpu_cause(_hc(server=1.0 - edge), _hc(server=1.0))[0]
    assert host_cpu_cause(_hc(server=0.0), _hc(server=0.0)) == ([], None)


def test_the_bounds_are_those_the_module_docstring_states():
    doc = adrift.__doc__ or ""
    for name in ("STEAL_CHANGE_PCT", "BUSY_CHANGE_PCT", "IOWAIT_CHANGE_PCT", "SERVER_CPU_CHANGE"):
        assert f"``{name}``" in doc
    # the documented sizes: steal is rare on a host of its own, so a small move names it
    assert (adrift.STEAL_CHANGE_PCT, adrift.BUSY_CHANGE_PCT, adrift.IOWAIT_CHANGE_PCT,
            adrift.SERVER_CPU_CHANGE) == pytest.approx((5.0, 20.0, 10.0, 0.25), rel=1e-12)


def test_abs_side_drift_carries_the_host_cpu_cause():
    # B's own trials drift −35% while the host's steal grows; A holds: the pairs' answer names B's cause
    b_st = stationarity(_trials([_hc(steal=0.0)] + [_hc(steal=15.0)] * 6 + [_hc(steal=31.0)], change=-0.35,
                                boundary="accelerator"))
    assert b_st is not None and b_st.cause == "host CPU steal 0→31%"
    n, slot = 8, 20.0
    a_kw = [3300.0] * n
    b_kw = [3300.0 * 1.4 * (1.0 - 0.35 * k / (n - 1)) for k in range(n)]
    lv = PairedLevel(key="c=16", label="concurrency=16", index=0, boundary="accelerator",
                     a_tokens_per_s=[x * 0.4 for x in a_kw], b_tokens_per_s=[x * 0.4 for x in b_kw],
                     a_power_w=[400.0] * n, b_power_w=[400.0] * n, a_per_kw=a_kw, b_per_kw=b_kw,
                     a_time_s=[(2 * k) * slot for k in range(n)], b_time_s=[(2 * k + 1) * slot for k in range(n)])
    ans = paired_level(lv, None, (None, b_st))
    assert ans.noise.word == "inconclusive", ans.answer
    assert "B drifts" in ans.noise.why and "host CPU steal 0→31%" in ans.noise.why
    assert "pin the server's cores" in ans.noise.todo
    assert not math.isnan(ans.decomposition.per_kw_ratio)


def test_an_unsettled_preconditions_loads_name_the_host_cpus_that_moved():
    # the committed H100 case's shape: the engine's defaults halved mid-precondition, no GPU reading moved
    loads = [_hc(busy=20.0, steal=1.0, server=1.0)] * 5 + [_hc(busy=22.0, steal=30.0, server=0.5)] * 3
    assert rounds_host_cpu(loads) == ("the host's CPUs moved over the loads: host CPU steal 1→30%; the server's CPU "
                                      "1.0→0.5 cores; measure on a host without other tenants or load; pin the "
                                      "server's cores")
    assert rounds_host_cpu([_hc(busy=20.0)] * 4) is None  # held still: nothing added
    assert rounds_host_cpu([_hc(steal=30.0)]) is None  # one load: nothing to compare
    assert rounds_host_cpu([None, _hc(steal=30.0)]) is None  # not read
