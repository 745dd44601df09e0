import pytest

from wattbench.accounting.steady import full_window, steady_window


def test_closed_loop_from_target_reached_to_first_drain_completion():
    reqs = [(0, 10), (1, 11), (2, 12), (10, 20), (11, 21), (12, 22)]
    w = steady_window(reqs, "concurrency", 3)
    assert (w.start_ns, w.end_ns, w.kind) == (2, 20, "steady")
    assert w.duration_s == pytest.approx(18e-9)


def test_closed_loop_refill_at_same_instant_keeps_target():
    # a slot freed and refilled at the same ns never lowers the count
    reqs = [(0, 5), (0, 9), (5, 30), (9, 31)]
    w = steady_window(reqs, "concurrency", 2)
    assert (w.start_ns, w.end_ns) == (0, 30)


def test_closed_loop_a_last_step_with_fewer_requests_than_streams_is_drain():
    # 4 streams, 10 requests, a server that ends every step's streams together (steps of 100 ns):
    # steps 0 and 1 run 4 each, step 2 the last 2 alone. The target was last held after the send
    # at 100; the drain begins at the first completion after it (200), not after the last send
    # (300): from 200 the server never again sees 4.
    reqs = [(s, s + 100) for s in (0, 0, 0, 0, 100, 100, 100, 100, 200, 200)]
    w = steady_window(reqs, "concurrency", 4)
    assert (w.start_ns, w.end_ns) == (0, 200)
    # one more request (a step of 3): the same; a full last step keeps the old edge
    assert steady_window(reqs + [(200, 300)], "concurrency", 4).end_ns == 200
    assert steady_window(reqs + [(200, 300), (200, 300)], "concurrency", 4).end_ns == 300


def test_closed_loop_never_reaching_target():
    assert steady_window([(0, 5), (6, 10)], "concurrency", 2) is None
    assert steady_window([(0, 5)], "concurrency", None) is None


def test_open_loop():
    reqs = [(0, 300), (100, 250), (200, 350), (300, 500)]
    w = steady_window(reqs, "rate")
    assert (w.start_ns, w.end_ns) == (0, 350)


def test_unfinished_requests_stay_in_flight():
    reqs = [(0, None), (5, 20), (8, 30)]
    w = steady_window(reqs, "concurrency", 3)
    assert (w.start_ns, w.end_ns) == (8, 20)
    assert full_window(reqs).end_ns == 30


def test_empty_and_full():
    assert steady_window([], "rate") is None
    assert full_window([]) is None
    w = full_window([(5, 10), (2, 40)])
    assert (w.start_ns, w.end_ns, w.kind) == (2, 40, "full")


# ---- one rule for warm-up leftovers, the verdict it earns, and default level sizes

from wattbench.accounting.steady import (  # noqa: E402
    STEADY_MIN_ENERGY_S,
    default_num_requests,
    min_steady_s,
    steady_energy_periods,
)
from wattbench.accounting.validity import STEADY_FULL_TOL_PCT, steady_findings  # noqa: E402
from wattbench.core.schema import BoundaryEnergy, Window  # noqa: E402

S = 1_000_000_000


def test_warmup_streams_count_in_flight_but_the_window_starts_at_the_first_measured_send():
    # two warm-up streams (sent at 0) still running when the measured ones start at 10 and 12
    reqs = [(0, 15), (0, 40), (10, 30), (12, 50), (30, 60)]
    w = steady_window(reqs, "concurrency", 3, start_ns=10)
    # in flight reaches 3 at 10 (two warm-up + one measured); the drain starts at 40 (> last send 30)
    assert (w.start_ns, w.end_ns) == (10, 40)
    # measured requests alone would reach 3 only at... never (at most 2 at once): no window
    assert steady_window([(10, 30), (12, 50), (30, 60)], "concurrency", 3) is None


def test_a_completion_at_the_last_send_is_not_the_drain():
    reqs = [(0, 10), (0, 20), (10, 30)]  # the completion at 10 triggered the send at 10
    w = steady_window(reqs, "concurrency", 2)
    assert (w.start_ns, w.end_ns) == (0, 20)


def test_the_level_runner_uses_this_rule(monkeypatch):
    """``load/level.py`` assembles its outcome's steady window with ``accounting.steady`` (one rule)."""
    from wattbench.load import level as lv
    from wattbench.load.link import WorkerResult
    from wattbench.core.load_types import LevelSpec
    from wattbench.core.schema import RequestRecord

    def rec(i, sent, end, warm=False):
        return RequestRecord(id=i, level=0, sent_ns=sent, first_token_ns=sent + 1, last_token_ns=end, end_ns=end + 1,
                             output_tokens=2, input_tokens=1, warmup=warm)

    recs = [rec(0, 0, 15, True), rec(1, 0, 40, True), rec(2, 10, 30), rec(3, 12, 50), rec(4, 30, 60)]
    spec = LevelSpec(index=0, mode="concurrency", value=3, num_requests=3)
    out = lv.assemble_outcome(spec, [WorkerResult(recs, None, None, False)], 0, None, 1)
    assert (out.start_ns, out.end_ns) == (10, 60)
    assert (out.steady_start_ns, out.steady_end_ns) == (10, 40)


def _be(power_w, j_per_tok, period_s=0.1, boundary="accelerator", label="measured"):
    return BoundaryEnergy(boundary=boundary, method="counter", avg_power_w=power_w, j_per_output_token=j_per_tok,
                          update_period_s=period_s, energy_j=power_w * 10.0, label=label)


def _w(dur_s, kind):
    return Window(start_ns=0, end_ns=int(dur_s * S), duration_s=dur_s, kind=kind)


def test_the_h200_case_is_warn_with_every_reason():
    # H200, c=128: steady 2.7 s of a 13 s level, 490 W vs 295 W, 1.10 vs 0.235 J/token, E2E ~11 s
    f = steady_findings(_w(13.0, "full"), _w(2.7, "steady"), mode="concurrency", e2e_s=11.0,
                        energy={"accelerator": _be(295.0, 0.235)}, energy_steady={"accelerator": _be(490.0, 1.10)})
    text = " | ".join(x.text for x in f)
    assert all(x.severity == "warn" for x in f) and len(f) == 4, text
    assert all("efficiency" in x.figures for x in f)
    assert "shorter than the minimum 22 s" in text  # 2 × 11 s E2E > the 5 s energy term
    assert "21% of the 13 s window" in text
    assert "average power 490 W is +66%" in text and "J/output token 1.1 J is +368%" in text


def test_a_long_steady_state_that_agrees_is_valid():
    f = steady_findings(_w(40.0, "full"), _w(30.0, "steady"), mode="concurrency", e2e_s=11.0,
                        energy={"accelerator": _be(470.0, 0.30)}, energy_steady={"accelerator": _be(490.0, 0.29)})
    assert f == []


def test_tolerance_edge_and_meter_period_rule():
    lim = 1 + STEADY_FULL_TOL_PCT / 100
    ok = steady_findings(_w(100.0, "full"), _w(90.0, "steady"), mode="rate", e2e_s=1.0,
                         energy={"a": _be(100.0, 1.0)}, energy_steady={"a": _be(100.0 * lim * 0.999, 1.0)})
    assert ok == []
    bad = steady_findings(_w(100.0, "full"), _w(90.0, "steady"), mode="rate", e2e_s=1.0,
                          energy={"a": _be(100.0, 1.0)}, energy_steady={"a": _be(100.0 * lim * 1.001, 1.0)})
    assert len(bad) == 1 and "average power" in bad[0].text
    # the energy term: STEADY_MIN_ENERGY_S for a fast meter, ten updates of a slow one (1 s: 10 s);
    # no measured whole boundary (declared, estimate): the E2E term alone
    assert STEADY_MIN_ENERGY_S == pytest.approx(5.0, rel=1e-9)
    assert [min_steady_s(1.0, 0.5), min_steady_s(0.1, 11.0), min_steady_s(0.1, 0.5)] == pytest.approx(
        [10.0, 22.0, 5.0], rel=1e-9)
    assert [min_steady_s(None, 0.5), min_steady_s(None, None)] == pytest.approx([1.0, 0.0], rel=1e-9)
    short = steady_findings(_w(12.0, "full"), _w(9.0, "steady"), mode="rate", e2e_s=0.5,
                            energy={"a": _be(100.0, 1.0, period_s=1.0)}, energy_steady={"a": _be(100.0, 1.0, 1.0)})
    assert len(short) == 1 and "shorter than the minimum 10 s" in short[0].text


def test_a_rail_s_slow_field_does_not_set_the_minimum():
    """The H200 defect: a steady state under 20 s was ``warn`` because the board's memory power is a
    1 s average field (20 updates = 20 s), though the counter-based energy of those levels agreed with
    an independent read within 0.2%. The rail is a part of the board: the board's 0.1 s counter sets
    the energy term (5 s)."""
    energy = {"accelerator": _be(300.0, 0.5), "accelerator_memory": _be(70.0, 0.1, period_s=1.0,
                                                                        boundary="accelerator_memory")}
    f = steady_findings(_w(8.5, "full"), _w(8.0, "steady"), mode="concurrency", e2e_s=1.4,
                        energy=energy, energy_steady=energy)
    assert f == []
    assert steady_energy_periods(energy.values()) == pytest.approx(0.1, rel=1e-9)
    # below the 5 s energy term it is still short
    f = steady_findings(_w(4.5, "full"), _w(4.0, "steady"), mode="concurrency", e2e_s=1.4,
                        energy=energy, energy_steady=energy)
    assert [x.kind for x in f] == ["steady_short"] and "minimum 5 s" in f[0].text


def test_declared_and_estimated_meters_have_no_energy_term():
    energy = {"node": _be(300.0, 0.5, boundary="node", label="declared"),
              "cpu": _be(30.0, 0.05, boundary="cpu", label="estimate")}
    assert steady_energy_periods(energy.values()) is None
    f = steady_findings(_w(3.5, "full"), _w(3.0, "steady"), mode="concurrency", e2e_s=1.0,
                        energy=energy, energy_steady=energy)
    assert f == []  # 3 s > 2 × E2E, and no edge error to bound


def test_no_steady_state_is_warn():
    f = steady_findings(_w(5.0, "full"), None, mode="concurrency", e2e_s=1.0)
    assert [x.severity for x in f] == ["warn"] and "never reached" in f[0].text


def test_default_sizes_grow_with_concurrency_e2e_and_meter_period():
    assert default_num_requests("concurrency", 1) == 32  # nothing measured yet: 4 rounds, at least 32
    assert default_num_requests("concurrency", 128) == 512
    # E2E known: rounds = ceil(1.5 × 2 × E2E / E2E) + 2 = 5, whatever the E2E
    assert default_num_requests("concurrency", 128, e2e_s=11.0, update_period_s=0.1) == 128 * 5
    # fast requests, slow meter: 1.5 × 10 × 1 s = 15 s of 0.5 s requests = 30 rounds + 2
    assert default_num_requests("concurrency", 8, e2e_s=0.5, update_period_s=1.0) == 8 * 32
    # fast requests, the H200's counter: 1.5 × 5 s = 7.5 s of 0.5 s requests = 15 rounds + 2
    assert default_num_requests("concurrency", 8, e2e_s=0.5, update_period_s=0.1) == 8 * 17
    # no measured meter (a declared or estimated one): the E2E term alone, 5 rounds
    assert default_num_requests("concurrency", 8, e2e_s=0.5, update_period_s=None) == 8 * 5
    assert default_num_requests("rate", 2.0) == 32
    assert default_num_requests("rate", 10.0) == 100
    assert default_num_requests("rate", 10.0, e2e_s=11.0, update_period_s=0.1) == 10 * (33 + 22)


def test_default_size_is_five_rounds_for_every_e2e_when_it_is_the_longer_term():
    """1.5 × (2 × E2E) / E2E is 3 rounds whatever the E2E — not 4 when the division lands a hair
    above 3 in floating point (E2E 0.1 s: 1.5 × 0.2 / 0.1 = 3.0000000000000004)."""
    for e2e_s in [0.05, 0.1, 0.3, 0.7, 1.1, 2.9, 11.0] + [0.05 + i * 0.0037 for i in range(800)]:
        assert default_num_requests("concurrency", 32, e2e_s=e2e_s) == 32 * 5, e2e_s
        # a measured meter: its energy term max(5 s, 10 updates) is the shorter one from E2E 2.5 s on
        e2e_long = 2.5 + e2e_s
        assert default_num_requests("concurrency", 32, e2e_s=e2e_long, update_period_s=e2e_long / 10) == 32 * 5, e2e_s
    # open loop: rate × (1.5 × 2 × E2E + 2 × E2E) = rate × 5 E2E requests, rounded up only when not whole
    assert default_num_requests("rate", 10.0, e2e_s=2.2) == 110


def test_a_steady_window_well_below_the_full_one_warns_from_a_scripted_trace():
    """The comparison is two-sided: a steady state that draws *less* than the full window (hot ramp
    and drain around a cooler middle) biases the full-window figures as much as one that draws more.
    Ground truth from a scripted counter: 700 W for the first and last 2 s of a 20 s window, 300 W in
    between, 1,000 output tokens a second throughout. Full window: 7,600 J / 20 s = 380 W, 0.38 J a
    token; steady (2–18 s): 300 W, 0.30 J a token — 21% below both, past the 15% tolerance. (With
    the comparison one-sided only a steady state above the full one warned: this level read valid.)"""
    from tests.fakes.scripted_sensor import build_log, counter_channel, grid, step_trace
    from wattbench.accounting.window import account_window
    from wattbench.accounting.validity import steady_findings

    tr = step_trace([(0, 700), (2, 300), (18, 700)])
    t = grid(0, 20, 0.1)
    log = build_log((counter_channel("g", boundary="accelerator", device="dev0", update_period_s=0.1), t,
                     [tr.energy(0, x) for x in t]))

    def acc(a_s, b_s, kind):
        return account_window(log, int(a_s * S), int(b_s * S), output_tokens=int(1000 * (b_s - a_s)),
                              total_tokens=int(1200 * (b_s - a_s)), idle=None, price_per_kwh=0.2, pue=1.0, kind=kind)

    full, steady = acc(0.0, 20.0, "full"), acc(2.0, 18.0, "steady")
    assert full.energy["accelerator"].avg_power_w == pytest.approx(380.0, rel=1e-3)
    assert steady.energy["accelerator"].avg_power_w == pytest.approx(300.0, rel=1e-3)
    f = steady_findings(full.window, steady.window, mode="rate", e2e_s=0.5, energy=full.energy,
                        energy_steady=steady.energy)
    got = {x.text.split(" is ")[0]: x for x in f if x.kind == "steady_vs_full"}
    assert set(got) == {"accelerator: steady-state average power 300 W", "accelerator: steady-state J/output token 0.3 J"}
    assert all(x.severity == "warn" and x.effect_pct == pytest.approx(-21.05, abs=0.1) for x in got.values())
    assert [x.kind for x in f] == ["steady_vs_full", "steady_vs_full"]  # nothing else: 16 s of 20, past the minimum
