"""The monitor's arithmetic on synthetic timestamps: exact energies, tokens, windows, segments,
outages, counter resets, stalled sensors, bounded memory."""

import pytest

from wattbench.monitor.backoff import Backoff
from wattbench.monitor.tracker import EfficiencyTracker, window_label
from wattbench.telemetry.base import Channel, Reading

S = 1_000_000_000
T0 = 5_000 * S


def counter(id_="g.energy", boundary="accelerator", device="d0"):
    return Channel(id=id_, sensor="g", kind="counter", quantity="energy", unit="J", boundary=boundary, device=device,
                   primary=True)


class Driver:
    """Plays a power trace (W per second of sim time) at 10 Hz and scrapes once per second."""

    def __init__(self, tracker, channels=None):
        self.tr = tracker
        self.chans = channels or [counter()]
        tracker.add_channels(self.chans)
        self.e = {c.id: 0.0 for c in self.chans}
        self.gen = 0.0
        self.prompt = 0.0
        self.k = 0

    def run(self, seconds, power_w, tok_s=0.0, running=0, scrape_ok=True, hz=10):
        out = []
        for _ in range(int(seconds * hz)):
            self.k += 1
            t = T0 + self.k * S // hz
            for cid in self.e:
                self.e[cid] += power_w / hz
            self.gen += tok_s / hz
            self.prompt += 2 * tok_s / hz
            self.tr.add_readings([Reading(t, cid, v) for cid, v in self.e.items()])
            if self.k % hz == 0:
                vals = {"generation_tokens": self.gen, "prompt_tokens": self.prompt, "running": running,
                        "waiting": 0.0} if scrape_ok else None
                out += self.tr.mark(t, vals)
        return out


def test_windows_and_cumulative_are_exact():
    tr = EfficiencyTracker(windows_s=(10, 60))
    d = Driver(tr)
    d.run(1, 100)  # first mark at t=1 s
    d.run(60, 100)  # idle
    d.run(30, 400, tok_s=80, running=4)
    w = tr.windows()
    assert w["10s"]["power_w"]["accelerator"] == pytest.approx(400)
    assert w["10s"]["j_per_output_token"]["accelerator"] == pytest.approx(400 / 80)
    assert w["10s"]["output_tokens_per_kwh"]["accelerator"] == pytest.approx(80 / 400 * 3.6e6)
    assert w["10s"]["output_tokens_per_s"] == pytest.approx(80)
    # 1 minute: 30 s loaded + 30 s idle
    assert w["1m"]["energy_j"]["accelerator"] == pytest.approx(30 * 400 + 30 * 100)
    assert w["1m"]["output_tokens"] == pytest.approx(30 * 80)
    assert w["1m"]["j_per_output_token"]["accelerator"] == pytest.approx(15000 / 2400)
    tot = w["total"]
    assert tot["duration_s"] == pytest.approx(90) and tot["energy_j"]["accelerator"] == pytest.approx(6000 + 12000)
    assert tot["prompt_tokens"] == pytest.approx(2 * 2400)
    assert tr.energy_total_j["accelerator"] == pytest.approx(18000)


def test_idle_loaded_segmentation_and_dynamic_energy():
    tr = EfficiencyTracker(windows_s=(10,))
    d = Driver(tr)
    d.run(1, 100)
    d.run(20, 100)
    d.run(10, 300, tok_s=50, running=2)
    d.run(15, 110)
    seg = tr.segmentation()
    # a span is loaded when its end scrape shows running requests or it produced tokens
    assert seg["idle"]["duration_s"] == pytest.approx(20 + 15)
    assert seg["loaded"]["duration_s"] == pytest.approx(10)
    idle_w = (20 * 100 + 15 * 110) / 35
    assert tr.idle_power_w()["accelerator"] == pytest.approx(idle_w)
    assert tr.loaded_power_w()["accelerator"] == pytest.approx(300)
    assert seg["loaded"]["j_per_output_token"]["accelerator"] == pytest.approx(3000 / 500)
    assert seg["loaded"]["dynamic_j_per_output_token"]["accelerator"] == pytest.approx((3000 - idle_w * 10) / 500)
    assert seg["segments_closed"] == 2
    assert [s.state for s in tr.closed] == ["idle", "loaded"] and tr.segment.state == "idle"


def test_rate_above_threshold_without_running_gauge_is_loaded():
    tr = EfficiencyTracker(windows_s=(10,), idle_threshold_tok_s=5)
    d = Driver(tr)
    d.run(1, 100)
    d.run(5, 100, tok_s=4)  # below the threshold, nothing running: idle
    d.run(5, 100, tok_s=6)
    assert tr.segmentation()["idle"]["duration_s"] == pytest.approx(5)
    assert tr.segmentation()["loaded"]["duration_s"] == pytest.approx(5)


def test_outage_merges_spans_so_tokens_match_energy():
    tr = EfficiencyTracker(windows_s=(600,))
    d = Driver(tr)
    d.run(1, 200)
    d.run(5, 200, tok_s=10, running=1)
    spans_before = len(tr.spans)
    d.run(100, 200, tok_s=10, running=1, scrape_ok=False)  # 100 s without a successful scrape
    assert len(tr.spans) == spans_before and len(tr._pending) <= 65  # merged, bounded
    assert tr.energy_total_j["accelerator"] == pytest.approx(200 * 105)  # energy keeps counting
    d.run(1, 200, tok_s=10, running=1)
    last = tr.spans[-1]
    assert last.duration_s == pytest.approx(101)
    assert last.output_tokens == pytest.approx(1010) and last.energy_j["accelerator"] == pytest.approx(20200)
    assert tr.windows()["total"]["j_per_output_token"]["accelerator"] == pytest.approx(20.0)


def test_counter_reset_counts_tokens_since_restart():
    tr = EfficiencyTracker(windows_s=(10,))
    d = Driver(tr)
    d.run(1, 100)
    d.run(3, 100, tok_s=10, running=1)
    d.gen, d.prompt = 0.0, 0.0  # server restarted
    d.run(1, 100, tok_s=10, running=1)
    assert tr.counter_resets == 1 and tr.spans[-1].output_tokens == pytest.approx(10)
    assert tr.spans[-1].counter_reset


def test_stalled_sensor_is_accounted_after_max_lag_and_ignored_when_stale():
    tr = EfficiencyTracker(windows_s=(10,), max_lag_s=3, stale_s=5)
    d = Driver(tr)
    d.run(1, 100)
    d.run(2, 100)
    n = tr.intervals
    # the meter stops; scrapes go on
    for k in range(1, 8):
        tr.mark(T0 + (3 + k) * S, {"generation_tokens": d.gen, "prompt_tokens": 0, "running": 0})
    assert tr.forced >= 1 and tr.intervals > n  # forced out after max_lag_s instead of waiting forever
    assert len(tr._points) <= 3


def test_two_devices_sum_and_no_double_counting_of_contained_boundaries():
    chans = [counter("a.e", device="gpu0"), counter("b.e", device="gpu1"),
             Channel(id="n.p", sensor="n", kind="counter", quantity="energy", unit="J", boundary="node", device="bmc",
                     primary=True)]
    tr = EfficiencyTracker(windows_s=(10,))
    d = Driver(tr, chans)
    d.run(1, 100)
    d.run(10, 100, tok_s=10, running=1)
    w = tr.windows()["10s"]
    assert w["energy_j"]["accelerator"] == pytest.approx(2000)  # two GPUs at 100 W
    assert w["energy_j"]["node"] == pytest.approx(1000)  # its own meter, never the sum of parts
    assert w["j_per_output_token"]["accelerator"] == pytest.approx(20)


def test_memory_bounded_over_a_long_run():
    tr = EfficiencyTracker(windows_s=(10, 60), segments_kept=8)
    d = Driver(tr)
    d.run(1, 100)
    for i in range(30):
        d.run(10, 100 if i % 2 else 300, tok_s=0 if i % 2 else 20, running=i % 2 == 0)
    assert len(tr.spans) <= 61
    # the running window sums equal a fresh sum over the spans inside each window
    w = tr.windows()
    fresh = sum(x.energy_j["accelerator"] for x in tr.spans if x.t0_ns >= tr.spans[-1].t1_ns - 60 * S)
    assert w["1m"]["energy_j"]["accelerator"] == pytest.approx(fresh, rel=1e-12)
    assert tr.log.points() <= 10 * (5 + 2) + 2
    assert len(tr.closed) == 8 and tr.segments_closed == 29


def test_window_label():
    assert [window_label(x) for x in (10, 60, 600, 3600, 90, 1.5)] == ["10s", "1m", "10m", "1h", "90s", "1.5s"]


def test_backoff_doubles_to_cap_and_resets():
    b = Backoff(base_s=1, cap_s=5)
    delays = [b.failure(0, "x") for _ in range(5)]
    assert delays == [1, 2, 4, 5, 5] and b.errors == 5 and not b.ready(4 * S) and b.ready(5 * S)
    b.success()
    assert b.up and b.ready(0) and b.errors == 5
    with pytest.raises(ValueError):
        Backoff(base_s=2, cap_s=1)


def test_energy_per_model_from_per_model_counters():
    """Per model: a server serving two models labels its token counters per model; the monitor splits
    each interval's energy by the models' tokens in it."""
    tr = EfficiencyTracker(windows_s=(10,))
    tr.add_channels([counter()])
    e = 0.0
    toks = {"big": [0.0, 0.0], "small": [0.0, 0.0]}  # prompt, generation
    for k in range(1, 61):
        t = T0 + k * S // 10
        sec = (k - 1) // 10  # second 0..5
        e += 300.0 / 10  # 300 W
        # seconds 1-3: only "big" works (30 tok/s); seconds 4-5: both, big 30, small 90 tok/s
        if sec >= 1:
            toks["big"][1] += 3.0
        if sec >= 4:
            toks["small"][1] += 9.0
        tr.add_readings([Reading(t, "g.energy", e)])
        if k % 10 == 0:
            by_model = {m: {"prompt_tokens": v[0], "generation_tokens": v[1]} for m, v in toks.items()}
            tr.mark(t, {"generation_tokens": sum(v[1] for v in toks.values()), "prompt_tokens": 0.0,
                        "running": 1.0, "by_model": by_model})
    m = tr.snapshot().by_model
    assert m["label"] == "estimate"
    big, small = m["models"]["big"], m["models"]["small"]
    # spans are 1 s of 300 J; 3 s big alone (900 J); 2 s split 30:90 (150 J big, 450 J small)
    # (the first second, before any token, is the first mark's; 1 s -> 2 s has big's first 30 tokens)
    assert big["energy_j"]["accelerator"] == pytest.approx(3 * 300 + 2 * 75, rel=1e-9)
    assert small["energy_j"]["accelerator"] == pytest.approx(2 * 225, rel=1e-9)
    assert big["output_tokens"] == pytest.approx(150) and small["output_tokens"] == pytest.approx(180)
    assert big["share"]["accelerator"] + small["share"]["accelerator"] == pytest.approx(1.0)
    assert small["j_per_output_token"]["accelerator"] == pytest.approx(450 / 180)


def test_per_model_counters_from_an_exposition():
    from wattbench.server.metrics import parse_exposition, per_model_counters

    text = ('vllm:generation_tokens_total{model_name="a"} 10\nvllm:generation_tokens_total{model_name="b"} 5\n'
            'vllm:prompt_tokens_total{model_name="a"} 100\n')
    assert per_model_counters(parse_exposition(text), "vllm") == {
        "a": {"generation_tokens": 10.0, "prompt_tokens": 100.0}, "b": {"generation_tokens": 5.0}}
    assert per_model_counters(parse_exposition("vllm:generation_tokens_total 10\n"), "vllm") == {}


def test_per_token_figures_only_where_the_work_is():
    """A past defect (accounting.boundaries rule 10): the GPU board has J/token; its HBM rail and the host's
    CPU meter (which leaves the GPU out) have power, no J/token and no tokens per kWh."""
    chans = [counter("g.e", device="gpu0"), counter("m.e", boundary="accelerator_memory", device="gpu0"),
             counter("c.e", boundary="cpu", device="pkg0")]
    tr = EfficiencyTracker(windows_s=(10,))
    d = Driver(tr, chans)
    d.run(1, 100)
    d.run(10, 100, tok_s=10, running=1)
    w = tr.windows()["10s"]
    assert w["power_w"]["accelerator_memory"] == pytest.approx(100) and w["power_w"]["cpu"] == pytest.approx(100)
    assert w["j_per_output_token"] == {"accelerator": pytest.approx(10)}
    assert set(w["output_tokens_per_kwh"]) == {"accelerator"}


def test_monitor_sends_url_credentials_as_basic_auth_and_shows_none():
    """``monitor -t http://user:pw@host:port?sig=…``: the credentials become the Authorization
    header, the URL it scrapes and the one it shows hold neither them nor the query; a key a server
    echoes as a ``model_name`` label is shown ``***`` (two names that scrub alike add up)."""
    import base64

    from wattbench.monitor.service import Monitor
    from wattbench.monitor.sources import _scrubbed_models
    from wattbench.core import secret_scope

    m = Monitor("http://mon:pw-MON-secret1@127.0.0.1:9/?sig=sig-MON-secret2&api-version=1", ["const:node=1"],
                listen=None)
    assert m.scraper.headers["Authorization"] == "Basic " + base64.b64encode(b"mon:pw-MON-secret1").decode()
    assert "secret" not in m.scraper.url and "@" not in m.scraper.url
    assert m.target_shown == "http://***@127.0.0.1:9/?sig=***&api-version=1"
    assert secret_scope.scrub("x pw-MON-secret1 sig-MON-secret2") == "x *** ***"
    secret_scope.register_secrets("sk-MON-echoed-key")  # met while the monitor runs: in its scope
    got = _scrubbed_models({"sk-MON-echoed-key": {"generation_tokens": 5.0}, "m-sk-MON-echoed-key": {
        "generation_tokens": 2.0}, "plain": {"generation_tokens": 1.0}})
    assert got == {"***": {"generation_tokens": 5.0}, "m-***": {"generation_tokens": 2.0},
                   "plain": {"generation_tokens": 1.0}}
    m.close()  # the monitor's secrets are registered for its lifetime only
    assert secret_scope.scrub("x pw-MON-secret1 sig-MON-secret2 sk-MON-echoed-key") == \
        "x pw-MON-secret1 sig-MON-secret2 sk-MON-echoed-key"
