"""Fuzz properties and input generators, shared by tests/unit/fuzz (hypothesis, a few hundred
cases) and benches/fuzz.py (a plain seeded generator, >= 100k cases each).

Each ``prop_*`` takes one input and raises ``AssertionError`` (or lets an unexpected exception
out) when the property fails. The property everywhere: no exception other than the documented
one (``UserError`` for user input, ``SensorError`` for a meter's answer, ``ValueError`` from
the exposition parser, which the scraper catches), and a result that is usable where there is
one. Hangs are caught by the callers (hypothesis ``deadline``, an interval timer in the bench).

``gen_*(rng)`` build inputs from the grammar's own tokens plus random mutations (so most cases
get past the first check), for the bench.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import tempfile
from pathlib import Path

import numpy as np

from wattbench.core.errors import SensorError, UserError

# ---------------------------------------------------------------- SSE


def sse_events(chunks) -> list:
    from wattbench.server.sse import SSEParser

    p = SSEParser()
    out = []
    for c in chunks:
        out.extend(p.feed(c))
    return out


def prop_sse(data: bytes, cuts: list[int]) -> None:
    """Any bytes, split anywhere: no exception, and the same events as fed in one piece."""
    whole = sse_events([data])
    pts = sorted({min(max(c, 0), len(data)) for c in cuts})
    pieces, prev = [], 0
    for c in pts + [len(data)]:
        pieces.append(data[prev:c])
        prev = c
    split = sse_events(pieces)
    assert split == whole, (data, pts, whole, split)
    for name, payload in whole:
        assert name is None or isinstance(name, str)
        assert isinstance(payload, bytes)


_SSE_TOKENS = [b"data:", b"data: ", b"event:", b"event: error", b"id: 1", b"retry: 5", b":", b": keep-alive",
               b"\n", b"\r\n", b"\r", b"\n\n", b"[DONE]", b'{"choices":[{"text":"a"}]}', b"\xff", b"\xe2\x82",
               b"data", b" ", b"{", b"}", b"\x00"]


def gen_sse(rng: random.Random) -> tuple[bytes, list[int]]:
    n = rng.randint(0, 24)
    parts = [rng.choice(_SSE_TOKENS) if rng.random() < 0.8 else rng.randbytes(rng.randint(1, 8)) for _ in range(n)]
    data = b"".join(parts)
    cuts = [rng.randint(0, len(data)) for _ in range(rng.randint(0, 6))]
    return data, cuts


# ---------------------------------------------------------------- a stream's answer (the client)


def stream_read(data: bytes, cuts: list[int], chat: bool):
    """What the streaming client reads from ``data`` split at ``cuts`` (``load.client._Stream``)."""
    from wattbench.load.client import _Stream

    st = _Stream(chat, keep=True)
    pts = sorted({min(max(c, 0), len(data)) for c in cuts})
    prev = 0
    for c in pts + [len(data)]:
        if st.done:
            break
        st.feed(data[prev:c], c)
        prev = c
    return st


def prop_stream_answer(data: bytes, cuts: list[int], chat: bool) -> None:
    """Any answer a server streams, split anywhere: the client raises nothing; a request either
    failed as ``bad_stream``/``bad_usage`` with a short detail, or what it kept is well typed —
    texts are strings (one arrival stamp each), usage counts are integers in 0..MAX_USAGE_TOKENS;
    and the outcome is the same in one piece (one read's events are one read's)."""
    from wattbench.load.client import DETAIL_CHARS, ERROR_BODY_BYTES
    from wattbench.server.openai import MAX_USAGE_TOKENS
    from wattbench.core.scrubber import Scrubber

    st = stream_read(data, cuts, chat)
    assert st.error in (None, "bad_stream", "bad_usage"), st.error
    if st.error is not None:
        # the stream's detail is bounded (a payload quoted to ERROR_BODY_BYTES); a record keeps it
        # scrubbed, then cut to DETAIL_CHARS (load.client._record: a secret at the cut leaves no prefix)
        assert isinstance(st.detail, str) and 0 < len(st.detail) < ERROR_BODY_BYTES + 100, st.detail
        assert 0 < len(Scrubber(["sk-never-in-a-fuzz-case"]).cut(st.detail, DETAIL_CHARS)) <= DETAIL_CHARS < 400
        assert st.done
    assert all(type(t) is str and t for t in st.texts) and len(st.texts) == len(st.chunk_ns)
    if st.usage is not None:
        assert type(st.usage) is dict
        for k in ("prompt_tokens", "completion_tokens"):
            v = st.usage.get(k)
            assert v is None or (type(v) is int and 0 <= v <= MAX_USAGE_TOKENS), (k, v)
    whole = stream_read(data, [], chat)
    assert (whole.error, whole.texts, whole.usage, whole.finished) == (st.error, st.texts, st.usage, st.finished), (
        (whole.error, whole.detail), (st.error, st.detail))


_VALUES = [None, True, False, 0, 1, -1, -600, 7, 2 ** 31, 2 ** 63, 10 ** 30, 1e30, 1.5, float("nan"), "", "many", "12",
           [], [1], [1, 2], {}, {"n": 5}, {"content": "x"}, [{"text": "a"}], "<script>x</script>", "\u0000"]


def _value(rng: random.Random):
    return rng.choice(_VALUES)


def _event_obj(rng: random.Random, chat: bool) -> object:
    u = rng.random()
    if u < 0.05:
        return _value(rng)  # not an object at all
    c: dict = {"index": 0}
    if chat:
        c["delta"] = ({"content": rng.choice([" tok", "", None, _value(rng)])} if rng.random() < 0.7 else _value(rng))
    else:
        c["text"] = rng.choice([" tok", "", None]) if rng.random() < 0.7 else _value(rng)
    if rng.random() < 0.2:
        c["finish_reason"] = rng.choice(["length", "stop", None, _value(rng)])
    choices = [c] if rng.random() < 0.7 else rng.choice([[], [c, c], _value(rng), {"0": c}])
    obj: dict = {"id": "x", "object": "chat.completion.chunk" if chat else "text_completion", "choices": choices}
    if rng.random() < 0.25:
        obj["usage"] = ({"prompt_tokens": rng.choice([3, _value(rng)]), "completion_tokens": rng.choice([5, _value(rng)])}
                        if rng.random() < 0.8 else _value(rng))
    if rng.random() < 0.05:
        obj["error"] = rng.choice([{"message": "boom"}, "boom", _value(rng)])
    return obj


def gen_stream_answer(rng: random.Random) -> tuple[bytes, list[int], bool]:
    chat = rng.random() < 0.5
    parts = []
    for _ in range(rng.randint(0, 8)):
        r = rng.random()
        if r < 0.8:
            body = json.dumps(_event_obj(rng, chat)).encode()
        elif r < 0.9:
            body = b"[DONE]"
        else:
            body = rng.randbytes(rng.randint(1, 12))
        if rng.random() < 0.05:  # a mutation inside the JSON
            i = rng.randint(0, len(body))
            body = body[:i] + rng.randbytes(rng.randint(1, 3)) + body[i:]
        parts.append(b"data: " + body + rng.choice([b"\n\n", b"\r\n\r\n", b"\n"]))
    data = b"".join(parts)
    return data, [rng.randint(0, len(data)) for _ in range(rng.randint(0, 5))], chat


# ---------------------------------------------------------------- Prometheus text


def prop_exposition(text: str) -> None:
    """The scraper's parse path: the parser may refuse with ValueError (the scraper counts an
    error and goes on); anything it accepts gives finite-or-NaN floats and engine values."""
    from wattbench.server.metrics import canonical_values, guess_engine, parse_exposition

    try:
        samples = parse_exposition(text)
    except ValueError:
        return
    for name, rows in samples.items():
        assert isinstance(name, str)
        for labels, v in rows:
            assert isinstance(labels, dict) and isinstance(v, float)
    eng = guess_engine(samples)
    if eng is not None:
        vals = canonical_values(samples, eng)
        assert all(isinstance(v, float) for v in vals.values())


def prop_dcgm(text: str) -> None:
    """The DCGM sensor reading an arbitrary /metrics answer: SensorError or channels, nothing else."""
    import wattbench.telemetry.prometheus as prom

    s = prom.DcgmSensor("http://127.0.0.1:9/metrics",
                        fetch=lambda url, timeout_s, what: text.encode("utf-8", "surrogatepass"))
    try:
        chans = s.open()
    except SensorError:
        return
    assert chans
    try:
        s.read()
    except SensorError:
        return


_PROM_NAMES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc",
               "vllm:prompt_tokens_total", "sglang:num_running_reqs", "tgi_queue_size", "llamacpp:requests_processing",
               "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "x_total", "a:b"]
_HELP_TEXTS = ["help", "\\", "\\n", "", "a\\b"]
_LABEL_NAMES = ["gpu", "UUID", "le", "model_name", "a", "1x", "quantile"]
_LABEL_VALUES = ["0", "1", '\\"', "\\\\", "", "x,y", "}", "+Inf", "0.5"]
_PROM_VALUES = ["1", "0", "-1", "1e308", "1e309", "NaN", "+Inf", "-Inf", "0x10", "1.5", "", "abc", "1_0"]


def gen_prom(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(0, 8)):
        r = rng.random()
        name = rng.choice(_PROM_NAMES)
        if r < 0.15:
            lines.append(f"# TYPE {name} {rng.choice(['counter', 'gauge', 'histogram', 'summary', 'untyped', 'x'])}")
        elif r < 0.25:
            lines.append("# HELP " + name + " " + rng.choice(_HELP_TEXTS))
        elif r < 0.85:
            labels = ""
            if rng.random() < 0.6:
                kv = [rng.choice(_LABEL_NAMES) + '="' + rng.choice(_LABEL_VALUES) + '"'
                      for _ in range(rng.randint(0, 3))]
                labels = "{" + ",".join(kv) + rng.choice(["}", "", ",}"])
            ts = f" {rng.randint(-5, 10**13)}" if rng.random() < 0.2 else ""
            lines.append(f"{name}{labels} {rng.choice(_PROM_VALUES)}{ts}")
        else:
            lines.append("".join(chr(rng.randint(0, 0x2FF)) for _ in range(rng.randint(0, 12))))
    return rng.choice(["\n", "\r\n", "\n\n"]).join(lines) + rng.choice(["\n", "", "\n# EOF\n"])


def prop_monitor_scrapes(texts: list[str]) -> None:
    """The monitor's scrape path over a sequence of arbitrary /metrics answers (the scraper's parse,
    its engine guess, its per-model counters under their kept names, then the tracker's accounting
    of each as a scrape): no exception but the parser's ValueError (a failed scrape, counted), the
    models kept bounded by ``models_kept`` + 1 whatever the labels, every kept name at most
    ``MAX_MODEL_CHARS``, and a snapshot the exporter renders and JSON writes."""
    import json as _json

    from prometheus_client import CollectorRegistry, generate_latest

    from wattbench.monitor.exporter import MonitorCollector
    from wattbench.monitor.sources import MAX_MODEL_CHARS, _scrubbed_models
    from wattbench.monitor.tracker import EfficiencyTracker
    from wattbench.server.metrics import canonical_values, guess_engine, parse_exposition, per_model_counters
    from wattbench.telemetry.base import Channel, Reading

    tr = EfficiencyTracker(windows_s=(10.0,), models_kept=4)
    tr.add_channels([Channel(id="g.e", sensor="g", kind="counter", quantity="energy", unit="J",
                             boundary="accelerator", device="d0", primary=True)])
    s_ns = 1_000_000_000
    for k, text in enumerate(texts, start=1):
        tr.add_readings([Reading(k * s_ns - s_ns // 2, "g.e", 100.0 * k), Reading(k * s_ns, "g.e", 100.0 * k + 50)])
        try:
            samples = parse_exposition(text)
        except ValueError:
            tr.mark(k * s_ns, None)
            continue
        eng = guess_engine(samples)
        vals: dict = canonical_values(samples, eng) if eng else {}
        by_model = _scrubbed_models(per_model_counters(samples, eng)) if eng else {}
        assert all(len(m) <= MAX_MODEL_CHARS for m in by_model)
        if by_model:
            vals["by_model"] = by_model
        tr.mark(k * s_ns, vals if "generation_tokens" in vals else None)
    tr.account(len(texts) * s_ns + 10 * s_ns)
    snap = tr.snapshot()
    models = snap.by_model.get("models") or {}
    assert len(models) <= 4 + 1
    _json.dumps(snap.to_dict(), default=str)
    reg = CollectorRegistry(auto_describe=False)
    reg.register(MonitorCollector(lambda: snap))
    generate_latest(reg)


def gen_monitor_scrapes(rng: random.Random) -> list[str]:
    """Three to six scrapes: vLLM-shaped token counters whose model names churn, grow long or hold
    hostile characters, among the grammar's other lines."""
    out = []
    total = 0
    for k in range(rng.randint(3, 6)):
        lines = [gen_prom(rng)]
        for _ in range(rng.randint(0, 12)):
            name = rng.choice(["tiny", f"m{k}-{rng.randint(0, 9)}", "x" * rng.choice([1, 200, 5000]),
                               '\\"}', "", "a b", "\u0000"])
            total += rng.randint(0, 100)
            series = rng.choice(["vllm:generation_tokens_total", "vllm:prompt_tokens_total"])
            lines.append(f'{series}{{model_name="{name}"}} {rng.choice([str(total), "NaN", "-1", "1e308"])}')
        out.append(rng.choice(["\n", "\r\n"]).join(lines) + "\n")
    return out


# ---------------------------------------------------------------- spec strings


def prop_sensor_spec(spec: str) -> None:
    """--sensor: a sensor object (not opened) or one UserError line; nothing started."""
    from wattbench.telemetry.base import Sensor
    from wattbench.telemetry.spec import parse_sensor_spec

    try:
        s = parse_sensor_spec(spec)
    except UserError as e:
        assert str(e).strip()
        return
    assert isinstance(s, Sensor)


_SENSOR_HEADS = ["nvml", "nvidia-smi", "rapl", "ipmi", "redfish", "dcgm", "prom", "jetson", "amd", "cmd", "file",
                 "const", "estimate", "NVML", "x", ""]
_SENSOR_ITEMS = ["0", "1", "-1", "a", "samples=off", "aux=0", "interval=0.1", "interval=-1", "interval=nan",
                 "interval_ms=100", "oneshot", "root=/nonexistent", "package", "lan=127.0.0.1", "user=u",
                 "password_file=/nonexistent", "https://127.0.0.1", "http://127.0.0.1:9/metrics", "insecure",
                 "chassis=1", "query=up", "query=", "boundary=node", "boundary=moon", "node=700", "wall=-1",
                 "accelerator=1e309", "tdp=100", "idle=-5", "cpu", '["/bin/true","x"]', "[", "/bin/true",
                 "timeout=1", "gpu=0", "=", ",", "", "creds=/nonexistent"]


def gen_sensor_spec(rng: random.Random) -> str:
    head = rng.choice(_SENSOR_HEADS)
    items = [rng.choice(_SENSOR_ITEMS) for _ in range(rng.randint(0, 4))]
    s = head + (":" + ",".join(items) if items or rng.random() < 0.3 else "")
    return _mutate(rng, s)


def prop_slo(spec: str) -> None:
    from wattbench.metrics.slo import parse_slos

    try:
        slos = parse_slos(spec)
    except UserError:
        return
    for s in slos:
        assert s.threshold_ms > 0 and math.isfinite(s.threshold_ms) or s.threshold_ms == math.inf, s


_SLO_ITEMS = ["ttft_p99=500ms", "tpot_p99=50ms", "itl_max=1s", "e2e_mean=2.5s", "ttft_p50=0ms", "ttft_p99=500",
              "ttft_p99=1e400ms", "TTFT_P99 = 5 MS", "foo_p99=1ms", "ttft_p42=1ms", "ttft_p99=.5s", "ttft_p99=-1ms",
              "=", "", " "]


def gen_slo(rng: random.Random) -> str:
    return _mutate(rng, ",".join(rng.choice(_SLO_ITEMS) for _ in range(rng.randint(0, 4))))


def prop_distribution(spec: str) -> None:
    """--input-tokens/--output-tokens: a distribution whose samples are whole numbers >= 1, or UserError."""
    from wattbench.workload.distributions import parse_distribution

    try:
        d = parse_distribution(spec)
    except UserError as e:
        assert str(e).strip()
        return
    x = np.asarray(d.sample(np.random.default_rng(0), 8))
    assert x.dtype.kind in "iu" and (x >= 1).all(), (spec, x)
    m = d.mean()
    assert m == m  # not NaN
    d.describe()


_DIST_ITEMS = ["uniform", "normal", "lognormal", "choice", "UNIFORM", "fixed", "1", "128", "0", "-1", "1.5", "1e3",
               "1e400", "nan", "inf", "-inf", "3", "20", "21", "1e18", "9" * 30, ",", ""]


def gen_distribution(rng: random.Random) -> str:
    n = rng.randint(1, 4)
    s = ":".join(rng.choice(_DIST_ITEMS) for _ in range(n))
    if rng.random() < 0.2:
        s = "choice:" + ",".join(rng.choice(_DIST_ITEMS) for _ in range(rng.randint(0, 4)))
    return _mutate(rng, s)


# ---------------------------------------------------------------- files


class FileFuzz:
    """Writes each case to one reused file (in /dev/shm when present) and loads it."""

    def __init__(self, suffix: str):
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.dir = tempfile.mkdtemp(prefix="wattbench-fuzz-", dir=base)
        self.path = Path(self.dir) / f"case{suffix}"
        from wattbench.workload.tokenizer import ApproxTokenizer

        self.ts = ApproxTokenizer()

    def write(self, data: bytes) -> Path:
        self.path.write_bytes(data)
        return self.path

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def prop_dataset(ff: FileFuzz, data: bytes) -> None:
    """A dataset file: a workload whose first requests can be built, or UserError."""
    from wattbench.workload.dataset import DatasetWorkload

    try:
        w = DatasetWorkload(ff.write(data), ff.ts, 0)
    except UserError as e:
        assert str(e).strip()
        return
    assert w.size() >= 1
    specs = w.take(min(3, w.size()))
    for s in specs:
        assert s.max_tokens >= 1 and (s.prompt is not None or s.messages)


def prop_trace(ff: FileFuzz, data: bytes) -> None:
    """A trace file: rows with finite times and whole lengths, or UserError."""
    from wattbench.workload.trace import TraceWorkload

    try:
        w = TraceWorkload(ff.write(data), ff.ts, 0)
    except UserError as e:
        assert str(e).strip()
        return
    assert w.size() >= 1
    for i in range(w.size()):
        assert math.isfinite(w.arrival_s(i)) and w.arrival_s(i) >= 0
        r = w.rows[i]
        assert r.input_tokens >= 1 and r.output_tokens >= 1


_JSON_VALUES = [None, True, False, 0, 1, -1, 7, 1.5, 1e308, "x", "", "hello world", [], {}, [1], {"a": 1},
                float("nan"), float("inf"), 10**30, "12", "2024-01-01T00:00:00Z", "2024-13-45T99:99:99",
                "1e400", "\u0000", "\ud800"]
_DATASET_KEYS = ["prompt", "messages", "output_tokens", "max_tokens", "completion", "response", "conversations"]
_TRACE_KEYS = ["arrival_s", "timestamp", "timestamp_ms", "TIMESTAMP", "input_length", "output_length",
               "input_tokens", "output_tokens", "hash_ids", "session_id", "ContextTokens", "GeneratedTokens"]


def _rand_value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth < 2 and r < 0.1:
        return [_rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2 and r < 0.2:
        return {rng.choice(["role", "content", "from", "value", "x"]): _rand_value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    if r < 0.3:
        return [{"role": rng.choice(["user", "assistant", 1]), "content": rng.choice(["hi", "", None])}
                for _ in range(rng.randint(0, 2))]
    if r < 0.4:
        return [{"from": rng.choice(["human", "gpt", "user", "x"]), "value": rng.choice(["hi there", "", 3])}
                for _ in range(rng.randint(0, 3))]
    return rng.choice(_JSON_VALUES)


def _dump(obj, rng: random.Random) -> str:
    s = json.dumps(obj, ensure_ascii=rng.random() < 0.5, allow_nan=True)
    return s


def _rows(rng: random.Random, keys: list[str]) -> list[dict]:
    return [{rng.choice(keys): _rand_value(rng) for _ in range(rng.randint(0, 4))} for _ in range(rng.randint(0, 4))]


def gen_dataset(rng: random.Random) -> bytes:
    rows = _rows(rng, _DATASET_KEYS)
    r = rng.random()
    if r < 0.2:
        text = "[" + ",".join(_dump(x, rng) for x in rows) + rng.choice(["]", "", ",]", "]]"])
    else:
        text = "\n".join(_dump(x, rng) if rng.random() < 0.9 else _mutate(rng, _dump(x, rng)) for x in rows)
    data = text.encode("utf-8", "surrogatepass")
    return _mutate_bytes(rng, data)


def gen_trace(rng: random.Random) -> bytes:
    rows = _rows(rng, _TRACE_KEYS)
    if rng.random() < 0.3:  # CSV
        keys = sorted({k for row in rows for k in row}) or [rng.choice(_TRACE_KEYS)]
        lines = [",".join(keys)] + [",".join(str(row.get(k, rng.choice(["", "1", "x"]))) for k in keys)
                                    for row in rows]
        text = "\n".join(lines)
    else:
        text = "\n".join(_dump(x, rng) for x in rows)
    return _mutate_bytes(rng, text.encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------- mutation


def _mutate(rng: random.Random, s: str) -> str:
    if rng.random() < 0.6 or not s:
        return s
    i = rng.randrange(len(s) + 1)
    op = rng.random()
    if op < 0.4:
        return s[:i] + chr(rng.choice([0, 9, 10, 13, 32, 44, 58, 61, 0x7F, 0xA0, 0x2028, rng.randint(0, 0x10FFFF)])) + s[i:]
    if op < 0.7:
        return s[:i] + s[i + 1:]
    return s[:i] + s[i:][::-1]


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    if rng.random() < 0.7 or not data:
        return data
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(b) + 1)
        op = rng.random()
        if op < 0.4:
            b[i:i] = bytes([rng.choice([0, 0x0A, 0x0D, 0x22, 0x2C, 0x5B, 0x7B, 0x80, 0xFF, rng.randrange(256)])])
        elif op < 0.7 and i < len(b):
            del b[i]
        else:
            b[i:i] = b"[" * rng.choice([1, 10, 100, 5000])
    return bytes(b)


# ---------------------------------------------------------------- load generators' result files (measure)

TOOL_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tools"
_HOSTILE = [None, True, False, 0, -1, -32, 1, 2 ** 63, 10 ** 30, 1e300, -1e300, 1.5, float("nan"), float("inf"),
            float("-inf"), "", "x", "inf", "12", [], {}, [1, "a"], {"value": None}, {"value": -5}, {"value": "x"},
            "\u001b]0;t\u0007"]
_TOOL_BASES: dict = {}


def _tool_bases() -> dict:
    if not _TOOL_BASES:
        _TOOL_BASES["vllm-bench-serve"] = json.loads((TOOL_FIXTURES / "vllm_bench_serve.json").read_text())
        g = json.loads((TOOL_FIXTURES / "guidellm_benchmarks.json").read_text())
        for b in g["benchmarks"]:  # keep the case small: 4 requests, totals to match
            b["requests"]["successful"] = b["requests"]["successful"][:4]
            b["metrics"]["request_totals"]["total"] = 4
        _TOOL_BASES["guidellm"] = g
        lines = [json.loads(x) for x in (TOOL_FIXTURES / "aiperf" / "profile_export.jsonl").read_text().splitlines()
                 if x.strip()]
        _TOOL_BASES["aiperf"] = (lines[:6], json.loads((TOOL_FIXTURES / "aiperf" / "profile_export_aiperf.json")
                                                        .read_text()))
        for k in list(_TOOL_BASES):
            _TOOL_BASES[k + ":text"] = json.dumps(_TOOL_BASES[k])
    return _TOOL_BASES


def _random_slot(rng: random.Random, doc):
    """A random (container, key) of a JSON document: a random walk down from its root."""
    c = doc
    while isinstance(c, (dict, list)) and c:
        k = rng.choice(list(c.keys())) if isinstance(c, dict) else rng.randrange(len(c))
        v = c[k]
        if isinstance(v, (dict, list)) and v and rng.random() < 0.8:
            c = v
            continue
        return c, k
    return None


def _hostile_edit(rng: random.Random, doc) -> None:
    for _ in range(rng.randint(1, 4)):
        slot = _random_slot(rng, doc)
        if slot is None:
            return
        c, k = slot
        r = rng.random()
        if r < 0.75:
            c[k] = copy.deepcopy(rng.choice(_HOSTILE))
        elif r < 0.85 and isinstance(c, dict):
            c.pop(k, None)
        elif r < 0.92:
            v = c[k]
            c[k] = -v if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        else:
            c[k] = f"__DEEP_{rng.choice([10, 70, 100, 5000])}__"  # made a nested array once dumped


def _deepen(text: str) -> str:
    import re

    return re.sub(r'"__DEEP_(\d+)__"', lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)


def gen_tool_file(rng: random.Random) -> tuple[str, bytes, bytes | None]:
    """(tool, the result file, AIPerf's summary beside it): a tool's own file with 1-4 fields set to
    hostile values (null, strings, negatives, 2**63, NaN, ±inf, nested lists/objects, a 5000-deep
    array), keys dropped, signs flipped, then byte mutations."""
    tool = rng.choice(["vllm-bench-serve", "aiperf", "guidellm"])
    base = json.loads(_tool_bases()[tool + ":text"])
    summary = None
    if tool == "aiperf":
        lines, s = base
        _hostile_edit(rng, lines if rng.random() < 0.7 else s)
        text = _deepen("\n".join(_dump(x, rng) for x in lines) + "\n")
        summary = _mutate_bytes(rng, _deepen(_dump(s, rng)).encode("utf-8", "surrogatepass"))
    else:
        _hostile_edit(rng, base)
        text = _deepen(_dump(base, rng))
        if tool == "vllm-bench-serve" and rng.random() < 0.1:  # --append-result: one object a line
            text = text + "\n" + _deepen(_dump(base, rng))
    return tool, _mutate_bytes(rng, text.encode("utf-8", "surrogatepass")), summary


class ToolFuzz:
    """A directory a tool's files are written to for each case (in /dev/shm when present)."""

    def __init__(self):
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.dir = Path(tempfile.mkdtemp(prefix="wattbench-fuzz-tools-", dir=base))

    def write(self, tool: str, data: bytes, summary: bytes | None) -> Path:
        name = {"aiperf": "profile_export.jsonl", "guidellm": "benchmarks.json"}.get(tool, "vllm.json")
        p = self.dir / name
        p.write_bytes(data)
        s = self.dir / "profile_export_aiperf.json"
        if summary is not None:
            s.write_bytes(summary)
        elif s.exists():
            s.unlink()
        return p

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def prop_tool_file(tf: ToolFuzz, tool: str, data: bytes, summary: bytes | None) -> None:
    """A tool's file through its reader (the module itself, not the net under ``read_tool``): a
    ``ToolRun`` whose requests hold only non-negative, finite, ordered stamps and whole token counts
    in range, or one ``UserError`` line naming the file."""
    import importlib

    from wattbench.results.tools.base import MAX_TOKENS, check_order

    mod = importlib.import_module("wattbench.results.tools." + {"vllm-bench-serve": "vllm_bench"}.get(tool, tool))
    p = tf.write(tool, data, summary)
    try:
        run = mod.read([p])
    except UserError as e:
        text = str(e)
        assert text.strip() and "\n" not in text and len(text) < 1000, text[:300]
        return
    for lv in run.levels:
        assert lv.mode in ("concurrency", "rate", "trace") and (lv.value == lv.value) and lv.value >= 0
        assert lv.max_in_flight is None or lv.max_in_flight >= 1
        for r in lv.requests:
            for t in (r.start_ns, r.first_token_ns, r.last_token_ns, r.end_ns):
                assert t is None or (isinstance(t, int) and 0 <= t < 2 ** 63)
            for n in (r.input_tokens, r.output_tokens):
                assert n is None or (isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_TOKENS)
            assert check_order(r) is None
        for v in lv.figures.values():
            assert v is None or math.isfinite(v)


_MARK_TIMES = ["1.5", "0", "1796125468.531687", "-1", "inf", "nan", "1e300", "1e400", "x", "", "2", "1_0", "0x10"]


def gen_markers(rng: random.Random) -> bytes:
    lines = []
    for _ in range(rng.randint(0, 6)):
        kind = rng.choice(["start", "end", "START", "stop", "#", ""])
        lines.append(f"{kind} {rng.choice(_MARK_TIMES)} {rng.choice(['', 'a', 'label x', '#c'])}")
    return _mutate_bytes(rng, "\n".join(lines).encode("utf-8", "surrogatepass"))


def prop_markers(ff: FileFuzz, data: bytes) -> None:
    """A ``--window-from`` file: finite ordered windows, or UserError."""
    from wattbench.results.tools.markers import read_markers

    try:
        marks = read_markers(ff.write(data))
    except UserError as e:
        assert str(e).strip() and "\n" not in str(e)
        return
    assert marks
    for _, a, b in marks:
        assert 0 <= a < b < 2 ** 63


# ---------------------------------------------------------------- tune --space files

_AXIS_NAMES = ["max-num-seqs", "enforce-eager", "power-limit", "sm-clocks", "a", "b-c", "x y", "", "--x", "1"]
_SPACE_VALUES = ["64", "128", "true", "false", "default", "null", "0.5", "-1", ".nan", ".inf", "-.inf", "1e400",
                 "x", "'1'", "[1, 2]", "{a: 1}", "~", "1.0e+300", "1.0e-300", "0"]


def _axis_yaml(rng: random.Random, name: str, anchors: list[str]) -> str:
    r = rng.random()
    if r < 0.4:
        vals = ", ".join(rng.choice(_SPACE_VALUES) for _ in range(rng.randint(0, 5)))
        a = ""
        if rng.random() < 0.3:
            anchors.append(f"a{len(anchors)}")
            a = f"&{anchors[-1]} "
        return f"  {name}: {a}[{vals}]"
    if r < 0.5 and anchors:
        return f"  {name}: *{rng.choice(anchors)}"
    if r < 0.8:
        parts = [f"{k}: {rng.choice(_SPACE_VALUES)}" for k in rng.sample(["min", "max", "step", "factor"],
                                                                          rng.randint(1, 4))]
        return f"  {name}: {{{', '.join(parts)}}}"
    when = f"{{{rng.choice(_AXIS_NAMES)}: {rng.choice(_SPACE_VALUES)}}}" if rng.random() < 0.8 else rng.choice(
        _SPACE_VALUES)
    return f"  {name}: {{values: [{rng.choice(_SPACE_VALUES)}, {rng.choice(_SPACE_VALUES)}], when: {when}}}"


def gen_space(rng: random.Random) -> tuple[str, bytes]:
    """(suffix, a space file): YAML axes of lists, ranges (min/max/step/factor of any value, NaN and
    inf included), conditions and anchors/aliases; sometimes a billion-laughs block, a wide axis, or
    JSON; then byte mutations."""
    r = rng.random()
    if r < 0.1:  # JSON
        axes = {rng.choice(_AXIS_NAMES): rng.choice([[1, 2], {"min": 1, "max": rng.choice([8, 1e300, float("nan")]),
                                                              "step": rng.choice([1, 1e-300, 0, -1])},
                                                     list(range(rng.choice([2, 2000]))), "x", None])
                for _ in range(rng.randint(0, 4))}
        return ".json", _mutate_bytes(rng, json.dumps({"axes": axes}, allow_nan=True).encode())
    anchors: list[str] = []
    lines = ["axes:"] + [_axis_yaml(rng, rng.choice(_AXIS_NAMES), anchors) for _ in range(rng.randint(0, 5))]
    if r < 0.2:  # nested aliases
        n, k = rng.choice([(4, 4), (9, 9), (6, 8)])
        lines.append("l0: &l0 [1, 2, 3, 4, 5, 6, 7, 8, 9]")
        lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * k) + "]" for i in range(1, n)]
        lines.append(f"  wide: *l{n - 1}" if rng.random() < 0.5 else f"x: *l{n - 1}")
    elif r < 0.28:  # many axes or values
        if rng.random() < 0.5:
            lines += [f"  a{i}: [{', '.join(str(j) for j in range(rng.choice([3, 10])))}]" for i in range(rng.choice([5, 30]))]
        else:
            lines.append("  big: [" + ", ".join(str(j) for j in range(rng.choice([500, 5000]))) + "]")
    return ".yaml", _mutate_bytes(rng, "\n".join(lines).encode("utf-8", "surrogatepass"))


def prop_space(ffs: dict, suffix: str, data: bytes) -> None:
    """A ``tune --space`` file: a Space of at most MAX_CONFIGURATIONS configurations of finite scalar
    values, or UserError."""
    from wattbench.tune.space import MAX_CONFIGURATIONS, build_space

    p = ffs[suffix].write(data)
    try:
        space = build_space("vllm", space_file=str(p))
    except UserError as e:
        assert str(e).strip() and "\n" not in str(e) and len(str(e)) < 1000
        return
    n = 1
    for a in space.axes:
        n *= len(a.values)
        for v in a.values:
            assert isinstance(v, (str, int, float, bool)) and not (isinstance(v, float) and not math.isfinite(v))
    assert n <= MAX_CONFIGURATIONS
    assert 1 <= space.size() <= n


# ---------------------------------------------------------------- a server's identity probes

_PROBE_PATHS = ("/v1/models", "/version", "/get_server_info", "/info", "/props", "/health", "/metrics")
_PROBE_KEYS = {
    "/props": ["total_slots", "default_generation_settings", "model_alias", "model_path", "build_info", "modalities",
               "chat_template", "n_ctx", "params", "speculative", "api_key", "host", "x" * 200],
    "/get_server_info": ["tp_size", "model_path", "mem_fraction_static", "version", "internal_states", "random_seed",
                         "context_length", "stream_interval", "api_key", "port", "attention_backend"],
    "/info": ["model_id", "max_total_tokens", "max_input_tokens", "version", "sha", "docker_label", "router",
              "max_concurrent_requests", "model_dtype"],
    "/version": ["version"],
    "/health": ["status"],
}
_MODEL_KEYS = ["id", "object", "owned_by", "max_model_len", "root", "status", "created", "permission", "parent"]


def _probe_value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if r < 0.05:
        return _nest(rng.choice([3, 20, 63]))
    if r < 0.1:
        return "v" * rng.choice([0, 201, 5000])
    if depth < 3 and r < 0.25:
        return {rng.choice(_MODEL_KEYS + ["n_ctx", "params", "a.b", ""]): _probe_value(rng, depth + 1)
                for _ in range(rng.randint(0, 4))}
    if depth < 3 and r < 0.35:
        return [_probe_value(rng, depth + 1) for _ in range(rng.randint(0, 40))]
    return rng.choice(_HOSTILE)


def _nest(n: int):
    v: object = 1
    for _ in range(n):
        v = [v]
    return v


def gen_identity_probes(rng: random.Random) -> tuple[str | None, dict]:
    """``(model asked, {path: (status, headers, body)})``: each probe's answer an engine's keys with
    hostile values (nesting up to 63 deep, long strings, lists of 40, NaN, 2**63 …), bodies mutated
    (a byte, or thousands of ``[`` inserted), any status; ``/metrics`` a vLLM info gauge with random
    labels."""
    out: dict = {}
    models = [rng.choice(["m", "", "x" * 300, "m\x1b[2J", 7]) for _ in range(rng.choice([0, 1, 2, 80]))]
    entries = [{k: (mid if k == "id" else _probe_value(rng)) for k in rng.sample(_MODEL_KEYS, rng.randint(1, 5))}
               for mid in models]
    for e in entries:
        e.setdefault("id", rng.choice(models) if models else "m")
    listing = rng.choice([{"object": "list", "data": entries}, {"data": "x"}, entries, None])
    for path in _PROBE_PATHS:
        status = rng.choice([200, 200, 200, 404, 0, 500])
        if path == "/v1/models":
            body = json.dumps(listing, allow_nan=True).encode()
            status = rng.choice([200, 200, 200, 200, 404])
        elif path == "/metrics":
            labels = ",".join(f'{rng.choice(["block_size", "gpu_memory_utilization", "engine", "x" * 150, "a"])}'
                              f'="{rng.choice(["16", "0.9", "", "v" * 300, "1"])}"' for _ in range(rng.randint(0, 8)))
            body = (f"vllm:cache_config_info{{{labels}}} 1.0\nvllm:num_requests_running 0\n").encode()
        else:
            keys = _PROBE_KEYS[path]
            body = json.dumps({rng.choice(keys): _probe_value(rng) for _ in range(rng.randint(0, 8))},
                              allow_nan=True).encode()
        out[path] = (status, {"server": rng.choice(["", "llama.cpp", "text-generation-inference"])},
                     _mutate_bytes(rng, body))
    return rng.choice(["m", None, "x" * 300]), out


def prop_identity(model: str | None, responses: dict) -> None:
    """``server.detect.classify`` reads any probe answers: a ``ServerInfo`` or a ``TargetError`` (the
    pre-flight's one line), never another exception; what it keeps is bounded — the identity's
    settings within ``MAX_IDENTITY_BYTES``, an effective configuration of scalars nested at most
    ``MAX_CONFIG_DEPTH`` under its names, at most ``MAX_MODELS`` (+ the run's) model ids — and
    written as JSON it nests within what wattbench's own reader reads back."""
    from wattbench.core.errors import TargetError
    from wattbench.core.jsontext import MAX_EMBEDDED_DEPTH, loads_bounded, value_depth
    from wattbench.server.detect import MAX_MODELS, classify
    from wattbench.server.engine_rules import MAX_CONFIG_DEPTH, MAX_CONFIG_ITEMS
    from wattbench.server.identity.common import MAX_IDENTITY_BYTES

    try:
        info = classify("http://127.0.0.1:8000", responses, model)
    except TargetError:
        return
    ident = info.identity
    assert ident is not None
    assert len(json.dumps(ident.exposed, separators=(",", ":"), default=str).encode()) <= MAX_IDENTITY_BYTES
    assert len(info.effective_config) <= MAX_CONFIG_ITEMS
    assert all(value_depth(v) <= MAX_CONFIG_DEPTH for v in info.effective_config.values())
    assert len(info.models) <= MAX_MODELS + 1
    text = info.model_dump_json()
    assert value_depth(loads_bounded(text, MAX_EMBEDDED_DEPTH)) <= MAX_EMBEDDED_DEPTH


# ---------------------------------------------------------------- the prompt calibration's fit

_COUNTS = [0, 1, 7, 0.5, -1, 1e308, float("inf"), float("nan"), 2 ** 63, 48.0, 100.0, 101.0, 200.0, 5000.0]


def gen_calibration(rng: random.Random) -> tuple[list[int], list[float]]:
    """``(words per length, the server's mean count per length)``: one or two lengths (equal ones
    too), words from 0 to a million, counts from a real tokenizer's line (0.25-8 tokens a word plus
    an overhead, with noise) or any hostile number."""
    n = rng.choice([1, 2, 2, 2, 0, 3])
    words = sorted(rng.choice([0, 1, 5, 48, 96, 96, 10 ** 6, rng.randint(1, 5000)]) for _ in range(n))
    if rng.random() < 0.5:
        a, b = rng.uniform(0.1, 10.0), rng.uniform(-50, 50)
        counts = [a * w + b + rng.gauss(0, 2) for w in words]
    else:
        counts = [float(rng.choice(_COUNTS)) for _ in words]
    if rng.random() < 0.1 and counts:
        counts = counts[:-1]  # a length the server never counted
    return words, counts


def prop_calibration(words: list[int], counts: list[float]) -> None:
    """``run/prime.fit_calibration`` fits or refuses (``ValueError``, one line naming the counts), and
    what it fits, a calibrated ``ApproxTokenizer`` takes, giving every prompt between 1 and
    ``MAX_WORDS_PER_TOKEN`` words a token."""
    from wattbench.run.prime import MAX_TOKENS_PER_WORD, MIN_TOKENS_PER_WORD, fit_calibration
    from wattbench.workload.tokenizer import MAX_WORDS_PER_TOKEN, ApproxTokenizer

    try:
        a, b = fit_calibration(words, counts)
    except ValueError as e:
        assert "\n" not in str(e) and len(str(e)) < 400, str(e)
        return
    assert MIN_TOKENS_PER_WORD <= a <= MAX_TOKENS_PER_WORD and math.isfinite(b)
    ts = ApproxTokenizer()
    ts.calibrate(a, b)
    for n in (1, 8, 30_000, 10 ** 6):
        assert 1 <= ts.words_for(n) <= max(1, math.ceil(MAX_WORDS_PER_TOKEN * n))
