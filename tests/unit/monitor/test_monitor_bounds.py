"""The monitor's memory and files stay bounded whatever a server's ``/metrics`` or the disk does:
label churn, a 1 MiB label, a history path that is a FIFO or a device, a full disk mid-run, and
exporter clients that connect and send nothing."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from tests.fakes.churn_metrics import ChurnServer
from wattbench.core.errors import UserError
from wattbench.core.secret_scope import scope
from wattbench.monitor.exporter import Exporter
from wattbench.monitor.history import HistoryWriter
from wattbench.monitor.sources import MAX_MODEL_CHARS, model_name
from wattbench.monitor.tracker import OTHER_MODELS, EfficiencyTracker
from wattbench.telemetry.base import Channel, Reading

S = 1_000_000_000
T0 = 5_000 * S


def counter() -> Channel:
    return Channel(id="g.energy", sensor="g", kind="counter", quantity="energy", unit="J", boundary="accelerator",
                   device="d0", primary=True)


def feed(tr: EfficiencyTracker, scrapes: list[dict[str, dict[str, float]]], power_w: float = 300.0) -> None:
    """One second per scrape at ``power_w``, sampled at 10 Hz; each scrape's total is the sum of its models."""
    e = 0.0
    k = 0
    for by_model in scrapes:
        for _ in range(10):
            k += 1
            e += power_w / 10
            tr.add_readings([Reading(T0 + k * S // 10, "g.energy", e)])
        gen = sum(m.get("generation_tokens", 0.0) for m in by_model.values())
        tr.mark(T0 + k * S // 10, {"generation_tokens": gen, "prompt_tokens": 0.0, "running": 1.0,
                                  "by_model": by_model})


def test_label_churn_keeps_the_models_bounded_and_the_figures_whole():
    """2,000 new model names a scrape for 60 scrapes (120,000 names): at most ``models_kept`` names
    plus OTHER_MODELS are kept, in the totals and in every span; the steady model keeps its exact
    tokens; the models' energies still add up to the whole."""
    tr = EfficiencyTracker(windows_s=(600,), models_kept=8)
    tr.add_channels([counter()])
    scrapes = []
    for k in range(1, 61):
        d = {"tiny": {"generation_tokens": 100.0 * k}}
        d.update({f"m{k}-{i}": {"generation_tokens": 1.0} for i in range(2000)})
        scrapes.append(d)
    feed(tr, scrapes)
    models = tr.models()["models"]
    assert len(models) <= 8 + 1
    assert all(len(s.tokens_by_model or {}) <= 8 + 1 for s in tr.spans)
    assert models["tiny"]["output_tokens"] == pytest.approx(100.0 * 59)  # 59 spans after the first mark
    total_e = sum(m["energy_j"]["accelerator"] for m in models.values())
    assert total_e == pytest.approx(tr.energy_total_j["accelerator"], rel=1e-9) == 59 * 300.0
    assert sum(m["share"]["accelerator"] for m in models.values()) == pytest.approx(1.0)


def test_a_model_that_outgrows_the_least_kept_takes_its_place_and_nothing_is_lost():
    tr = EfficiencyTracker(windows_s=(60,), models_kept=2)
    tr.add_channels([counter()])
    scrapes = []
    for k in range(1, 11):  # a: 10/s, b: 5/s from the start; c: 50/s from the 6th scrape
        d = {"a": {"generation_tokens": 10.0 * k}, "b": {"generation_tokens": 5.0 * k}}
        if k >= 6:
            d["c"] = {"generation_tokens": 50.0 * (k - 5)}
        scrapes.append(d)
    feed(tr, scrapes)
    m = tr.models()
    assert set(m["models"]) == {"a", "c", OTHER_MODELS} and m["models_folded"] == 1
    assert m["models"]["a"]["output_tokens"] == pytest.approx(90)
    assert m["models"]["c"]["output_tokens"] == pytest.approx(250)
    assert m["models"][OTHER_MODELS]["output_tokens"] == pytest.approx(45)  # b's, folded with its energy
    e = sum(x["energy_j"]["accelerator"] for x in m["models"].values())
    assert e == pytest.approx(9 * 300.0, rel=1e-9)


def test_a_model_name_is_scrubbed_then_cut():
    """A 1 MiB label becomes MAX_MODEL_CHARS characters; a key echoed at the cut leaves no
    8-character piece of itself (scrub first: a cut key would no longer match)."""
    assert len(model_name("L" * (1 << 20))) == MAX_MODEL_CHARS
    key = "sk-MonitorKey7f3Q9zX2Lp8Vw"
    with scope(key):  # what the monitor registers while it runs
        name = model_name("x" * (MAX_MODEL_CHARS - 10) + key)
    assert len(name) <= MAX_MODEL_CHARS
    assert not any(key[i:i + 8] in name for i in range(len(key) - 7))


def test_a_history_path_that_is_a_fifo_or_a_device_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    t = time.monotonic()
    with pytest.raises(UserError) as e:
        HistoryWriter(fifo)  # no reader: a blocking open would never return
    assert time.monotonic() - t < 5 and "--history" in str(e.value)
    with pytest.raises(UserError) as e:
        HistoryWriter("/dev/full")
    assert "not a regular file" in str(e.value)


def _limited(fsize: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
    return apply


def test_a_history_that_cannot_be_written_mid_run_stops_the_monitor_in_one_line(tmp_path):
    """A file that stops taking writes mid-run (the size limit stands in for a full disk): the
    monitor stops, prints its summary (the figures so far), says why in one line, exits 2, no
    traceback."""
    srv = ChurnServer(churn=0).start()
    hist = tmp_path / "h.jsonl"
    try:
        out = subprocess.run([sys.executable, "-m", "wattbench", "monitor", "-t", srv.url, "-s", "const:node=500",
                              "--interval", "0.2", "--duration", "30", "--history", str(hist), "--listen", "off",
                              "--json"], capture_output=True, text=True, timeout=120, preexec_fn=_limited(4000))
    finally:
        srv.stop()
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    said = [ln for ln in out.stderr.splitlines() if "cannot write it" in ln]
    assert len(said) == 1 and str(hist) in said[0] and "stopped" in said[0]
    summary = json.loads(out.stdout)
    assert summary["ticks"] < 140  # stopped well before the 30 s end
    lines = hist.read_text().splitlines()
    assert lines and all(json.loads(ln) for ln in lines)  # every line written whole


def test_the_exporter_closes_idle_connections_and_caps_them():
    ex = Exporter(lambda: {}, "127.0.0.1:0", idle_timeout_s=0.5, max_connections=4).start()
    socks = []
    try:
        base = threading.active_count()
        for _ in range(12):  # clients that connect and send nothing (half-open, vanished)
            s = socket.create_connection(("127.0.0.1", ex.port))
            socks.append(s)
        time.sleep(0.3)
        assert threading.active_count() <= base + 4
        time.sleep(1.5)  # past the idle timeout: their threads are gone
        assert threading.active_count() <= base
        with urllib.request.urlopen(ex.url, timeout=5) as r:
            assert r.status == 200 and b"wattbench_state" in r.read()
    finally:
        for s in socks:
            s.close()
        ex.stop()


def test_monitor_against_label_churn_keeps_flat_memory_and_small_files(tmp_path):
    """The whole command against 2,000 new model names a scrape (and one 64 KiB label), under a
    memory limit: between its 10th scrape and its last (≥ 40,000 more names) its RSS grows by less
    than 20 MB (unbounded, each name kept cost about 1 KB), the exporter's page and each history
    line stay small."""
    import psutil

    srv = ChurnServer(churn=2000, label_bytes=64 << 10).start()
    hist = tmp_path / "h.jsonl"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "wattbench", "monitor", "-t", srv.url, "-s", "const:node=500",
                             "--interval", "0.1", "--duration", "600", "--history", str(hist),
                             "--listen", f"127.0.0.1:{port}", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_limited(1 << 30))
    rss: list[tuple[int, int]] = []  # (scrapes served so far, the monitor's RSS)
    page = 0
    t0 = time.monotonic()
    try:
        p = psutil.Process(proc.pid)
        while proc.poll() is None and srv.scrapes < 32 and time.monotonic() - t0 < 240:
            rss.append((srv.scrapes, p.memory_info().rss))
            if srv.scrapes >= 2:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                    page = max(page, len(r.read()))
            time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)  # a clean stop: the summary is printed
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        srv.stop()
    assert proc.returncode == 0, err
    assert srv.scrapes >= 32, "the monitor stopped scraping"
    summary = json.loads(out)
    assert len(summary["by_model"]["models"]) <= summary["by_model"]["models_kept"] + 1
    at10 = min(r for k, r in rss if k >= 10)
    assert max(r for _, r in rss) - at10 < 20 << 20, rss
    assert page < 200_000
    assert max(len(ln) for ln in hist.read_text().splitlines()) < 20_000
