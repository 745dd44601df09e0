"""The monitor against a real Prometheus exposition (prometheus_client's HTTP server) and a
scripted power trace: J/token and tokens per kWh against the known truth, its own exporter read
back with prometheus_client's parser, a target that goes away and comes back, a failing meter.

The monitor's time is a ``SharedClock`` (tests/fakes/scripted_clock.py): the test moves it, the
sampler thread reads the meter at its exact deadlines before the test goes on, and the scraper's
and the meter's backoff run on it, so every count below follows from the script, not the host."""

import json
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.scripted_clock import SharedClock
from tests.fakes.scripted_sensor import LivePower, ScriptedSensor
from tests.fakes.ports import refused_port
from wattbench.monitor.service import Monitor
from wattbench.monitor.snapshot import MonitorSnapshot
from wattbench.core.numbers import fmt

MS = 1_000_000


def TraceSensor(clock: SharedClock, power_w: float = 100.0, poll_interval_s: float = 0.02):  # noqa: N802
    """The suite's scripted sensor as the monitor sees a meter: one energy counter whose power the
    test sets while it runs, stamped on the monitor's clock."""
    return ScriptedSensor(LivePower(power_w), name="trace", power=False, device="d0",
                          update_period_s=poll_interval_s, poll_interval_s=poll_interval_s, clock=clock.now_ns)


def started(m: Monitor, clock: SharedClock) -> Monitor:
    """Start the monitor and have the clock wait for its sampler thread at every step. A scrape
    takes no scripted time; its real-time timeout (0.2 s at these intervals) only ends a hang here,
    so a slow answer on a loaded host is not counted as a failed scrape."""
    m.scraper.timeout_s = 60.0
    m.start()
    clock.watch(m.sampler._threads)
    return m


class FakeEngine:
    """vLLM's token counters and running gauge on a real exposition endpoint."""

    def __init__(self):
        self.reg = CollectorRegistry()
        self.gen = Counter("vllm:generation_tokens", "generated", ["engine"], registry=self.reg).labels("0")
        self.prompt = Counter("vllm:prompt_tokens", "prompt", ["engine"], registry=self.reg).labels("0")
        self.running = Gauge("vllm:num_requests_running", "running", ["engine"], registry=self.reg).labels("0")
        self.waiting = Gauge("vllm:num_requests_waiting", "waiting", ["engine"], registry=self.reg).labels("0")
        self.server = None
        self.port = 0

    def start(self):
        self.server, _ = start_http_server(self.port, addr="127.0.0.1", registry=self.reg)
        self.port = self.server.server_port
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.server = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"


def read_exporter(url):
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def ticks(m, n, interval_s, before=None):
    for _ in range(n):
        if before:
            before()
        m.clock.advance(interval_s)
        m.tick()


@pytest.fixture
def engine():
    e = FakeEngine().start()
    yield e
    if e.server is not None:
        e.stop()


def test_efficiency_against_known_truth_and_exporter_readback(engine, tmp_path):
    clock = SharedClock()
    sensor = TraceSensor(clock, power_w=100.0, poll_interval_s=0.02)
    hist = tmp_path / "h.jsonl"
    m = Monitor(engine.url, [sensor], interval_s=0.1, listen="127.0.0.1:0", history_path=hist,
                sample_interval_s=0.02, windows_s=(1.0, 600.0), clock=clock)
    with started(m, clock):
        clock.advance(0.05)
        m.tick()
        ticks(m, 5, 0.1)  # idle: nothing running, no tokens
        sensor.set_power(300.0)
        engine.running.set(2)

        def serve():
            engine.gen.inc(40)
            engine.prompt.inc(80)

        ticks(m, 6, 0.1, before=serve)
        clock.advance(0.05)
        m.flush()
        snap = m.latest()
        exp = read_exporter(m.exporter.url)
    tr = m.tracker
    spans = list(tr.spans)
    truth = sensor.true_energy(spans[0].t0_ns, spans[-1].t1_ns)
    measured = sum(s.energy_j["accelerator"] for s in spans)
    assert measured == pytest.approx(truth, rel=2e-3)
    tot = snap.windows["total"]
    assert tot["output_tokens"] == 240 and tot["prompt_tokens"] == 480
    assert tot["j_per_output_token"]["accelerator"] == pytest.approx(truth / 240, rel=2e-3)
    assert tot["output_tokens_per_kwh"]["accelerator"] == pytest.approx(240 / (truth / 3.6e6), rel=2e-3)
    # per state: the counter is interpolated linearly at the scrape that separates idle from loaded;
    # with the 200 W step inside the two reads around it, the error is at most 200 W × gap / 4
    idle = [x for x in spans if x.state == "idle"]
    loaded = [x for x in spans if x.state == "loaded"]
    assert idle and loaded and idle[-1].t1_ns == loaded[0].t0_ns
    edge_j = 200.0 * sensor.bracket_gap_s(loaded[0].t0_ns) / 4 + 1e-6
    t_idle = sum(x.duration_s for x in idle)
    t_loaded = sum(x.duration_s for x in loaded)
    assert abs(snap.idle_power_w["accelerator"] - 100.0) * t_idle <= edge_j
    true_loaded = sum(sensor.true_energy(x.t0_ns, x.t1_ns) for x in loaded)
    assert abs(snap.loaded_power_w["accelerator"] * t_loaded - true_loaded) <= edge_j
    assert snap.state == "loaded" and snap.sources["server"]["errors"] == 0
    # the exporter says the same thing, through prometheus_client's own parser
    acc = (("boundary", "accelerator"),)
    assert exp[("wattbench_output_tokens_total", ())] == 240
    assert exp[("wattbench_prompt_tokens_total", ())] == 480
    assert exp[("wattbench_joules_per_output_token", (("boundary", "accelerator"), ("window", "total")))] == \
        pytest.approx(tot["j_per_output_token"]["accelerator"], rel=1e-9)
    assert exp[("wattbench_output_tokens_per_kwh", (("boundary", "accelerator"), ("window", "total")))] == \
        pytest.approx(tot["output_tokens_per_kwh"]["accelerator"], rel=1e-9)
    assert exp[("wattbench_energy_joules_total", acc)] == pytest.approx(tr.energy_total_j["accelerator"], rel=1e-9)
    assert exp[("wattbench_idle_power_watts", acc)] == pytest.approx(snap.idle_power_w["accelerator"], rel=1e-9)
    last = [x for x in spans if x.t0_ns >= spans[-1].t1_ns - 1_000_000_000]
    n_1s = sum(x.output_tokens for x in last)
    truth_1s = sum(sensor.true_energy(x.t0_ns, x.t1_ns) for x in last) / n_1s
    # exact unless the window starts right at the load step (then within the edge bound above)
    assert exp[("wattbench_joules_per_output_token", (("boundary", "accelerator"), ("window", "1s")))] == \
        pytest.approx(truth_1s, rel=2e-3, abs=edge_j / n_1s)
    assert exp[("wattbench_state", (("state", "loaded"),))] == pytest.approx(1.0, rel=1e-9)
    assert exp[("wattbench_scrape_errors_total", (("source", "server"),))] == 0
    assert exp[("wattbench_source_up", (("source", "trace"),))] == pytest.approx(1.0, rel=1e-9)
    # history: meta, one line per span, the idle segment when it closed, the summary
    lines = [json.loads(x) for x in hist.read_text().splitlines()]
    kinds = [x["type"] for x in lines]
    assert kinds[0] == "meta" and kinds[-1] == "summary"
    assert kinds.count("span") == len(spans) and kinds.count("segment") == 1
    seg = next(x for x in lines if x["type"] == "segment")
    assert seg["state"] == "idle" and seg["power_w"]["accelerator"] == pytest.approx(snap.idle_power_w["accelerator"])
    assert sum(x["output_tokens"] or 0 for x in lines if x["type"] == "span") == 240
    # the live view renders the same snapshot
    import io

    from rich.console import Console

    from wattbench.cli.monitor import _table

    con = Console(file=io.StringIO(), width=200)
    con.print(_table(snap))
    view = con.file.getvalue()
    assert "state=loaded" in view and fmt(tot['j_per_output_token']['accelerator']) in view


def test_target_goes_away_and_comes_back(engine):
    """Scrapes every 100 ms; backoff 0.1 s doubling to a 0.4 s cap. The server goes away after the
    scrape at 350 ms: attempts at 450 (retry in 0.1), 550 (0.2), 750 (0.4), 1150 (0.4), 1550 fail;
    the 7 ticks between are skipped. It comes back at 1550 and the attempt due at 1950 finds it."""
    clock = SharedClock()
    sensor = TraceSensor(clock, power_w=200.0)
    m = Monitor(engine.url, [sensor], interval_s=0.1, listen="127.0.0.1:0", sample_interval_s=0.02,
                backoff_cap_s=0.4, clock=clock)
    with started(m, clock):
        clock.advance(0.05)
        m.tick()
        ticks(m, 3, 0.1, before=lambda: engine.gen.inc(10))
        engine.stop()
        engine.gen.inc(100)  # served while the monitor cannot see
        ticks(m, 12, 0.1)
        st = m.latest().sources["server"]
        assert not st["up"] and st["last_error"]
        assert st["errors"] == 5 and m.scraper.skipped == 7  # backing off, not hammering (12 ticks)
        assert st["retry_in_s"] == pytest.approx(0.4)  # capped
        engine.start()  # same port
        n = 0
        for n in range(1, 31):
            clock.advance(0.1)
            m.tick()
            if m.latest().sources["server"]["up"]:
                break
        assert n == 4 and m.scraper.skipped == 10  # 1650..1850 skipped, 1950 due and up
        ticks(m, 2, 0.1)
        clock.advance(0.05)
        m.flush()
        exp = read_exporter(m.exporter.url)
        snap = m.latest()
    assert snap.sources["server"]["up"] and snap.sources["server"]["errors"] == 5
    assert snap.windows["total"]["output_tokens"] == 130  # 30 seen + 100 counted over the outage
    gap = max(m.tracker.spans, key=lambda s: s.duration_s)
    # one span from the last scrape before the outage (350 ms) to the first after it (1950 ms)
    assert gap.output_tokens == 100 and gap.t0_ns == clock.start_ns + 350 * MS and gap.t1_ns == clock.start_ns + 1950 * MS
    assert gap.energy_j["accelerator"] == pytest.approx(sensor.true_energy(gap.t0_ns, gap.t1_ns), rel=5e-3)
    assert exp[("wattbench_scrape_errors_total", (("source", "server"),))] == 5
    assert exp[("wattbench_source_up", (("source", "server"),))] == pytest.approx(1.0, rel=1e-9)


def test_failing_meter_backs_off_and_recovers(engine):
    """Meter read every 20 ms; its backoff is 0.5 s (floor and cap). It fails from 250 ms to 850 ms:
    the read due at 260 ms fails, the next attempt is at 760 ms (fails), then 1260 ms (succeeds);
    the 28 polls between are not attempts."""
    clock = SharedClock()
    sensor = TraceSensor(clock, power_w=150.0, poll_interval_s=0.02)
    m = Monitor(engine.url, [sensor], interval_s=0.1, listen=None, sample_interval_s=0.02, backoff_cap_s=0.5,
                clock=clock)
    with started(m, clock):
        clock.advance(0.05)
        m.tick()
        ticks(m, 2, 0.1)
        a0 = sensor.attempts
        assert a0 == 13  # 0, 20, ..., 240 ms
        sensor.failing = True
        ticks(m, 6, 0.1)
        during = sensor.attempts - a0
        st = m.latest().sources["trace"]
        assert st["errors"] == during == 2  # 30 polls were due
        assert [t - clock.start_ns for t in sensor.read_times[a0:]] == [260 * MS, 760 * MS]
        assert not st["up"] and "scripted meter failure" in st["last_error"]
        sensor.failing = False
        ticks(m, 12, 0.1)
        clock.advance(0.05)
        m.flush()
        st = m.latest().sources["trace"]
    assert st["up"] and st["errors"] == 2
    assert sensor.read_times[a0 + 2] - clock.start_ns == 1260 * MS  # the next attempt, back to every 20 ms
    spans = list(m.tracker.spans)
    total = sum(s.energy_j.get("accelerator", 0.0) for s in spans)
    assert total == pytest.approx(sensor.true_energy(spans[0].t0_ns, spans[-1].t1_ns), rel=5e-3)


def test_no_sensor_is_a_user_error(engine):
    from wattbench.core.errors import UserError

    s = TraceSensor(SharedClock())

    def boom():
        from wattbench.core.errors import SensorError

        raise SensorError("meter unplugged", "plug it in")

    s.open = boom
    with pytest.raises(UserError, match="meter unplugged"):
        Monitor(engine.url, [s], listen=None).start()


def test_cli_monitor_json_and_history(engine, tmp_path):
    from typer.testing import CliRunner

    from wattbench.cli.main import build_app

    engine.gen.inc(5)
    h = tmp_path / "m.jsonl"
    r = CliRunner().invoke(build_app(), ["monitor", "--target", engine.url, "--sensor", "const:node=500",
                                         "--duration", "0.8", "--interval", "0.2", "--listen", "off",
                                         "--history", str(h), "--json"])
    assert r.exit_code == 0, r.output
    s = json.loads(r.output)
    assert s["windows"]["total"]["power_w"]["node"] == pytest.approx(500.0)
    assert s["sources"]["server"]["engine"] == "vllm"
    assert h.read_text().splitlines()[0].startswith('{"type":"meta"')
    # the JSON summary and the history's summary line keep the keys, in the order, they always had
    old_keys = ["t_s", "state", "power_w", "running", "waiting", "windows", "idle_power_w", "loaded_power_w",
                "segmentation", "segment", "energy_total_j", "by_model", "counter_resets", "intervals",
                "forced_intervals", "buffered_points", "sources", "problems", "ticks", "exporter", "segments",
                "history"]
    assert list(s) == old_keys
    last = json.loads(h.read_text().splitlines()[-1])
    assert list(last) == ["type", *old_keys]
    back = MonitorSnapshot.from_dict(last)  # the history's summary line reads back as the snapshot it was
    assert back.windows["total"]["power_w"]["node"] == pytest.approx(500.0)
    assert back.ticks == s["ticks"] and back.sources["server"]["engine"] == "vllm" and back.exporter is None
    r = CliRunner().invoke(build_app(), ["monitor", "--sensor", "const:node=500", "--listen", "nonsense"])
    assert r.exit_code == 2 and "--listen" in r.output
    r = CliRunner().invoke(build_app(), ["monitor", "--sensor", "const:node=500", "--interval", "0"])
    assert r.exit_code == 2


def test_a_summary_line_of_an_earlier_history_file_still_loads():
    """A history file written before the snapshot was typed (its summary line as that version wrote
    it: the dict fields sometimes null, no 'exporter', a key this version does not know) loads."""
    line = ('{"type":"summary","t_s":12.5,"state":"idle","power_w":{"node":480.0},"running":0,"waiting":0,'
            '"windows":{"total":{"duration_s":12.0,"output_tokens":600.0,"output_tokens_per_s":50.0,'
            '"power_w":{"node":490.0}}},"idle_power_w":{"node":480.0},"loaded_power_w":null,'
            '"segmentation":{"segments_closed":1},"segment":null,"energy_total_j":{"node":5880.0},'
            '"by_model":{},"counter_resets":1,"intervals":60,"forced_intervals":2,"buffered_points":33,'
            '"sources":{"server":{"up":true,"errors":0}},"problems":["a problem"],"ticks":61,'
            '"segments":[],"history":"m.jsonl","a_later_key":1}')
    s = MonitorSnapshot.from_dict(json.loads(line))
    assert s.t_s == pytest.approx(12.5, rel=1e-12)
    assert (s.state, s.running, s.counter_resets, s.intervals, s.forced_intervals, s.ticks) == ("idle", 0, 1, 60, 2, 61)
    assert s.windows["total"]["output_tokens_per_s"] == pytest.approx(50.0, rel=1e-12)
    assert s.energy_total_j == pytest.approx({"node": 5880.0}, rel=1e-12)
    assert s.loaded_power_w == {} and s.problems == ("a problem",) and s.exporter is None
    assert s.to_dict()["loaded_power_w"] == {} and list(s.to_dict())[:2] == ["t_s", "state"]


def test_history_rotation(tmp_path):
    from wattbench.monitor.history import HistoryWriter

    w = HistoryWriter(tmp_path / "h.jsonl", max_bytes=200, backups=2)
    for i in range(20):
        w.write({"type": "span", "i": i, "pad": "x" * 40})
    w.close()
    assert w.rotations >= 3
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["h.jsonl", "h.jsonl.1", "h.jsonl.2"]
    last = [json.loads(x)["i"] for x in (tmp_path / "h.jsonl").read_text().splitlines()]
    assert last[-1] == 19 and all((tmp_path / f).stat().st_size <= 200 for f in files)


def test_parse_listen():
    from wattbench.core.errors import UserError
    from wattbench.monitor.exporter import parse_listen

    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen("9000") == ("127.0.0.1", 9000)
    assert parse_listen(":9000") == ("127.0.0.1", 9000)
    assert parse_listen("[::1]:9000") == ("::1", 9000)
    with pytest.raises(UserError):
        parse_listen("host:99999")


def test_a_server_without_metrics_is_refused_in_one_line(tmp_path):
    """A server that answers but has no /metrics (here: 404 to every GET) is refused before the
    monitor starts, in one line naming the URL, the status and the fix: the monitor could only show
    dashes. Nothing is written (no history file) and no exporter is left listening."""
    import http.server
    import threading

    from wattbench.core.errors import UserError

    class NoMetrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(404)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoMetrics)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        m = Monitor(url, ["const:node=500"], interval_s=0.1, listen="127.0.0.1:0", history_path=tmp_path / "h.jsonl")
        m.scraper.timeout_s = 60.0  # ends a hang only: the 404 is what is judged, however slow
        with pytest.raises(UserError) as e:
            m.start()
        m.close()
        msg = str(e.value)
        assert "\n" not in msg and "HTTP 404" in msg and f"{url}/metrics" in msg and "--target" in msg
        assert not (tmp_path / "h.jsonl").exists()  # refused before anything is written
        assert m.exporter is None  # nor left listening
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_server_not_up_yet_is_watched_and_named_at_the_first_tick():
    """A target that does not answer (nothing listens yet) is not refused: a monitor may start
    before its server. Its problem is named at the first tick, once."""
    seen = []
    with refused_port() as port:  # nothing listens there
        m = Monitor(f"http://127.0.0.1:{port}", ["const:node=500"], interval_s=0.1, listen=None)
        try:
            m.run(0.35, on_tick=lambda s: seen.append(len([p for p in s.problems if "no token" in p])))
        finally:
            m.close()
    assert seen and seen[0] == 1 and seen[-1] == 1  # known at the first tick, said once
