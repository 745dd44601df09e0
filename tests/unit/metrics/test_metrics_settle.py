"""``--precondition``'s throughput rule (``metrics.drift.rounds_settle``) against load rounds whose
truth is known: a line whose change over the window sits a hundredth either side of the bound, the
window's coverage and its minimum rounds each moved by one, a warm-up that an earlier part of the
series held and the window no longer does, one stray round, a slow climb of many short rounds
that "the last three rounds agree" would have called settled, and the H100's steep fall, whose
interval a straight line had read below −100% (the rule's log scale keeps every end above it)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from wattbench.metrics.drift import (DRIFT_CONFIDENCE, SETTLE_CHANGE_PCT, SETTLE_MIN_ROUNDS, SETTLE_SCATTER_PCT,
                                     rounds_settle, theil_sen)

COVER = 0.9


def _rounds(values: list[float], round_s: float = 1.0, t0: float = 100.0):
    starts = [t0 + k * round_s for k in range(len(values))]
    return starts, [s + round_s for s in starts], values


def _line(change_pct: float, n: int, window_s: float, start: float = 1000.0) -> list[float]:
    """``n`` rounds of 1 s filling the window, whose tokens/s move ``change_pct`` % over ``window_s``
    at a steady rate (geometric: the midpoints are 1 s apart, ``ln`` tokens/s moves
    ``ln(1 + c)/window_s`` per s, so the change over the window is ``c`` exactly)."""
    return [start * (1.0 + change_pct / 100.0) ** (k / window_s) for k in range(n)]


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_change_bound_is_pinned_within_a_hundredth(sign):
    w = 10.0
    b = SETTLE_CHANGE_PCT
    inside = rounds_settle(*_rounds(_line(sign * 0.99 * b, 10, w)), window_s=w, cover=COVER)
    outside = rounds_settle(*_rounds(_line(sign * 1.01 * b, 10, w)), window_s=w, cover=COVER)
    assert inside.settled and inside.change_pct == pytest.approx(sign * 0.99 * b)
    assert not outside.settled and outside.change_pct == pytest.approx(sign * 1.01 * b)
    assert inside.rounds == outside.rounds == 10
    way = "rising" if sign > 0 else "falling"
    c = sign * 1.01 * b  # an exact line of ln tokens/s: Sen's interval is the slope itself
    assert outside.moves and outside.low_pct == pytest.approx(c) and outside.high_pct == pytest.approx(c)
    assert outside.words() == (f"output tok/s still {way} {c:+.1f}% over the last 10 s (99% interval {c:+.1f}% to "
                               f"{c:+.1f}%; 10 rounds; bound ±{b:g}%)")
    assert inside.words().startswith(f"output tok/s moved {sign * 0.99 * b:+.1f}% over the last 10 s")


def test_the_bound_given_is_the_bound_applied():
    w = 10.0
    vals = _line(5.0, 10, w)
    assert not rounds_settle(*_rounds(vals), window_s=w, cover=COVER, bound_pct=4.95).settled
    assert rounds_settle(*_rounds(vals), window_s=w, cover=COVER, bound_pct=5.05).settled


def test_the_window_must_be_covered():
    # flat rounds of 1 s: 9 of them span 9 s, the 90% of a 10 s window; 10 s windows a hundredth wider
    # or narrower either side of it
    flat = [1000.0] * 9
    assert rounds_settle(*_rounds(flat), window_s=9.0 / (1.01 * COVER), cover=COVER).settled
    short = rounds_settle(*_rounds(flat), window_s=9.0 / (0.99 * COVER), cover=COVER)
    assert not short.settled and short.change_pct is None
    assert short.words().startswith("output tok/s not yet read: the rounds span 9.0 s of the ")


def test_at_least_the_minimum_rounds():
    # rounds of 30 s against a 60 s window: the window widens to the minimum rounds, whatever their span
    n = SETTLE_MIN_ROUNDS
    flat = [500.0] * n
    ok = rounds_settle(*_rounds(flat, round_s=30.0), window_s=60.0, cover=COVER)
    assert ok.settled and ok.rounds == n and ok.covered_s == pytest.approx(30.0 * n)
    fewer = rounds_settle(*_rounds(flat[:-1], round_s=30.0), window_s=60.0, cover=COVER)
    assert not fewer.settled and fewer.change_pct is None and fewer.rounds == n - 1
    # a slope over the widened window is read per window_s: +1% a round of 30 s, compounding, is
    # 1.01² − 1 = +2.01% per 60 s
    climb = rounds_settle(*_rounds([500.0 * 1.01 ** k for k in range(n)], round_s=30.0), window_s=60.0,
                          cover=COVER)
    assert climb.change_pct == pytest.approx(100 * (1.01 ** 2 - 1), rel=1e-9)


def test_only_the_last_window_counts():
    # +50% over the first 20 rounds of 1 s, then flat for 10: the 10 s window holds only the flat part
    ramp = [1000.0 * (1 + 0.5 * k / 19) for k in range(20)] + [1500.0] * 10
    st = rounds_settle(*_rounds(ramp), window_s=10.0, cover=COVER)
    assert st.settled and st.change_pct == pytest.approx(0.0, abs=1e-9) and st.rounds == 10
    # five rounds sooner, the window still holds half the ramp
    early = rounds_settle(*_rounds(ramp[:25]), window_s=10.0, cover=COVER)
    assert not early.settled and early.change_pct > 2 * SETTLE_CHANGE_PCT


def test_one_stray_round_does_not_unsettle_a_flat_series():
    vals = [1000.0] * 12
    vals[6] = 700.0  # a stall in one round
    st = rounds_settle(*_rounds(vals), window_s=12.0, cover=COVER)
    assert st.settled and st.change_pct == pytest.approx(0.0, abs=1e-9)
    # a round without a figure is left out
    vals[6] = None
    assert rounds_settle(*_rounds(vals), window_s=12.0, cover=COVER).rounds == 11


def test_a_slow_climb_of_short_rounds_is_not_settled():
    # +0.2% a round of 2.5 s (the H100's defaults' pace: +24.5% in tokens/s over their trials): the
    # last three rounds agree within 0.4%, the last minute climbs about 5%
    vals = [1000.0 * 1.002 ** k for k in range(60)]
    st = rounds_settle(*_rounds(vals, round_s=2.5), window_s=60.0, cover=COVER)
    assert max(vals[-3:]) / min(vals[-3:]) < 1.005
    # ln tokens/s climbs ln(1.002) every 2.5 s: over the 60 s window exactly 1.002^24 − 1 (+4.9%)
    assert not st.settled and st.change_pct == pytest.approx(100 * (1.002 ** 24 - 1), rel=1e-9)


def test_rounds_that_scatter_past_the_bound_without_a_trend_are_not_steady_not_rising():
    # a loaded CPU's loads: tok/s anywhere from 40 to 300 (the dry run of benches/gpu/decisive.sh),
    # no trend: the change's interval holds 0, so the words say scatter, not a rise
    rng = np.random.default_rng(7)
    vals = list(rng.uniform(40.0, 300.0, 40))
    st = rounds_settle(*_rounds(vals, round_s=1.5), window_s=60.0, cover=COVER)
    assert st.change_pct is not None and abs(st.change_pct) > SETTLE_CHANGE_PCT and not st.settled
    assert st.low_pct < 0 < st.high_pct and not st.moves
    assert st.words().startswith(f"output tok/s not steady: {st.change_pct:+.1f}% over the last 60 s (99% interval ")
    assert st.words().endswith(f"an interval that holds 0 and is wider than ±{SETTLE_SCATTER_PCT:g}%: the loads' "
                               "throughput scatters too much to tell")
    # the same scatter on a climb of +300% over the window: still rising
    climb = [v + 1000.0 * k / 40 for k, v in enumerate(vals)]
    up = rounds_settle(*_rounds(climb, round_s=1.5), window_s=60.0, cover=COVER)
    assert up.moves and up.low_pct > 0 and up.words().startswith("output tok/s still rising +")


# The H100's precondition of B (`wattbench ab … --precondition`, the engine's defaults, 2026-12-07):
# every load's output tok/s and when it ended (s after the precondition began), as recorded; a load
# starts where the one before it ended (the record keeps no start). A straight line through the last
# window's 15 loads read "−56.0% over the last 60 s (99% interval −107.6% to −2.8%)": a throughput
# below zero.
FALL_TOKENS_PER_S = [
    779.6236369405129, 966.3352558881521, 993.6833273330565, 950.4671634982843,
    979.2499540647856, 1004.2202350474449, 1014.4278687745223, 980.951376535538,
    969.4906132527076, 981.9330230696036, 985.477247481997, 973.1087470188008,
    976.3074917895937, 821.1336646752011, 975.5371600907663, 761.7683319737857,
    513.2324569192124, 463.23524739463244, 491.4659847428944, 510.9321502731327,
    501.56503167850326, 578.9544320757722, 421.91246176559434, 472.171325934346,
    473.18876505918854, 491.7382674320354]
FALL_END_S = [
    3.185763931999986, 5.8902038830000265, 8.48285794000003, 11.190080601999966,
    13.885538430999986, 16.485933899999964, 19.085910755999976, 21.784929059999968,
    24.481656447999967, 27.18143469100005, 29.884408997000037, 32.589888168000016,
    35.28327342499995, 38.382155323999996, 41.08325078200005, 44.39064177800003,
    48.98619371799998, 53.98198141900002, 58.68287142600002, 63.284499998,
    67.98248471399995, 72.08525420800004, 77.48516393, 82.38709362899999,
    87.28707809599996, 91.986099405]


def test_a_steep_fall_reads_a_change_and_an_interval_above_minus_100_percent():
    starts = [0.0, *FALL_END_S[:-1]]
    st = rounds_settle(starts, FALL_END_S, FALL_TOKENS_PER_S, window_s=60.0, cover=COVER)
    assert st.rounds == 15 and not st.settled and st.moves
    # the truth, from the 15 loads by hand: every pairwise slope of ln tok/s over the loads' midpoints,
    # their median, and Sen's 99% ranks (N = 105 slopes, C = z·sqrt(15·14·35/18)); each read over 60 s
    mid = [(a + b) / 2 for a, b in zip(starts[-15:], FALL_END_S[-15:])]
    ln = [math.log(v) for v in FALL_TOKENS_PER_S[-15:]]
    slopes = sorted((ln[j] - ln[i]) / (mid[j] - mid[i]) for i in range(15) for j in range(i + 1, 15))
    c = NormalDist().inv_cdf(0.5 + DRIFT_CONFIDENCE / 2) * math.sqrt(15 * 14 * 35 / 18)
    lo, hi = round((105 - c) / 2), round((105 + c) / 2) + 1
    assert (lo, hi) == (26, 80)
    assert st.change_pct == pytest.approx(100 * math.expm1(60 * slopes[52]), rel=1e-9)
    assert st.low_pct == pytest.approx(100 * math.expm1(60 * slopes[lo - 1]), rel=1e-9)
    assert st.high_pct == pytest.approx(100 * math.expm1(60 * slopes[hi - 1]), rel=1e-9)
    assert -100.0 < st.low_pct < st.change_pct < st.high_pct < 0.0
    assert st.words() == (f"output tok/s still falling {st.change_pct:+.1f}% over the last 60 s (99% interval "
                          f"{st.low_pct:+.1f}% to {st.high_pct:+.1f}%; 15 rounds; bound ±2%)")
    # the straight line through the same loads, relative to its fitted start, is the defect: below −100%
    line = theil_sen(mid, FALL_TOKENS_PER_S[-15:])
    assert 100 * line.low * 60 / line.start == pytest.approx(-107.6, abs=0.05)


def _flat_scatter(sd: float) -> list[float]:
    """40 loads of flat tok/s with a seeded scatter of ``sd`` (a fraction) whose change over the window
    is inside the change bound (the first such seed: a case crafted once, the same every run)."""
    for seed in range(100):
        vals = list(1000.0 * (1.0 + np.random.default_rng(seed).normal(0.0, sd, 40)))
        st = rounds_settle(*_rounds(vals, round_s=1.5), window_s=60.0, cover=COVER, scatter_pct=1e9)
        if abs(st.change_pct) <= 0.5 * SETTLE_CHANGE_PCT:
            return vals
    raise AssertionError("no seed")


def test_the_scatter_bound_is_pinned_within_a_hundredth():
    vals = _flat_scatter(0.05)
    wide = rounds_settle(*_rounds(vals, round_s=1.5), window_s=60.0, cover=COVER, scatter_pct=1e9)
    edge = max(-wide.low_pct, wide.high_pct)
    assert wide.settled and wide.low_pct < 0 < wide.high_pct
    assert rounds_settle(*_rounds(vals, round_s=1.5), window_s=60.0, cover=COVER, scatter_pct=1.01 * edge).settled
    st = rounds_settle(*_rounds(vals, round_s=1.5), window_s=60.0, cover=COVER, scatter_pct=0.99 * edge)
    assert not st.settled and st.words().startswith("output tok/s not steady: ")
    # the default: a GPU's scatter of a few percent a load settles, a loaded CPU's of tens does not
    assert rounds_settle(*_rounds(_flat_scatter(0.02), round_s=1.5), window_s=60.0, cover=COVER).settled
    assert not rounds_settle(*_rounds(_flat_scatter(0.3), round_s=1.5), window_s=60.0, cover=COVER).settled


def test_nothing_to_read():
    st = rounds_settle([], [], [], window_s=60.0, cover=COVER)
    assert not st.settled and st.rounds == 0 and st.change_pct is None
    zero = rounds_settle(*_rounds([0.0] * 5), window_s=3.0, cover=COVER)
    assert not zero.settled and zero.rounds == 0
