"""Quick fuzzing (hypothesis, a few hundred cases per parser; benches/fuzz.py runs >= 100k each).

Property everywhere: no exception but the documented one (UserError; SensorError for a meter's
answer; ValueError from the exposition parser, which the scraper catches), a usable result where
there is one, and no hang (hypothesis ``deadline``: a case slower than 2 s fails). Inputs are both
unstructured (any text/bytes) and grammar-driven (the generators of tests/fakes/reliability_fuzz.py
fed by hypothesis' random). Bugs the fuzzer found are pinned by regression tests at the end.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes import reliability_fuzz as F

FUZZ = settings(max_examples=200, deadline=2000, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def grammar(gen):
    """Inputs from a grammar generator, driven by hypothesis' random."""
    return st.randoms(use_true_random=False).map(gen)


@FUZZ
@given(st.one_of(st.tuples(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=6)), grammar(F.gen_sse)))
def test_sse_parser_split_anywhere(case):
    F.prop_sse(*case)


@FUZZ
@given(st.one_of(st.tuples(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=5), st.booleans()),
                 grammar(F.gen_stream_answer)))
def test_the_client_reads_any_stream_answer(case):
    """A malformed answer costs that request (bad_stream/bad_usage), never an exception."""
    F.prop_stream_answer(*case)


@FUZZ
@given(st.one_of(st.text(max_size=300), grammar(F.gen_prom)))
def test_prometheus_exposition_parse(text):
    F.prop_exposition(text)


@FUZZ
@given(st.one_of(st.text(max_size=300), grammar(F.gen_prom)))
def test_dcgm_sensor_on_any_metrics_answer(text):
    F.prop_dcgm(text)


@FUZZ
@given(st.one_of(st.text(max_size=120), grammar(F.gen_sensor_spec)))
def test_sensor_spec(spec):
    F.prop_sensor_spec(spec)


@FUZZ
@given(st.one_of(st.text(max_size=120), grammar(F.gen_slo)))
def test_slo_spec(spec):
    F.prop_slo(spec)


@pytest.fixture(scope="module")
def dataset_file():
    ff = F.FileFuzz(".jsonl")
    yield ff
    ff.close()


@pytest.fixture(scope="module")
def trace_file():
    ff = F.FileFuzz(".trace")
    yield ff
    ff.close()


# -------------------------------------------------- file loaders (any bytes, deep nesting, non-UTF-8)


@FUZZ
@given(data=st.one_of(st.binary(max_size=300), grammar(F.gen_dataset)))
def test_dataset_loader(dataset_file, data):
    F.prop_dataset(dataset_file, data)


@FUZZ
@given(data=st.one_of(st.binary(max_size=300), grammar(F.gen_trace)))
def test_trace_loader(trace_file, data):
    F.prop_trace(trace_file, data)


_SANE = st.one_of(st.text(max_size=40), grammar(F.gen_distribution))


@FUZZ
@given(_SANE)
def test_distribution_strings(spec):
    F.prop_distribution(spec)


# Bugs the fuzzer found in workload/ (fixed): each input must now give a clean UserError.
def test_pinned_trace_not_utf8(trace_file):
    F.prop_trace(trace_file, b"input_tokens,output_tokens,arrival_s\n1,1,0\n\xff,1,1\n")


def test_pinned_dataset_deep_nesting(dataset_file):
    F.prop_dataset(dataset_file, b'{"prompt": ' + b"[" * 5000 + b"]" * 5000 + b"}\n")


def test_pinned_trace_deep_nesting(trace_file):
    F.prop_trace(trace_file, b'{"arrival_s": ' + b"[" * 5000 + b"]" * 5000 + b"}\n")


def test_pinned_distribution_huge_fixed():
    F.prop_distribution("99999999999999999999999999999")


def test_pinned_distribution_huge_uniform():
    F.prop_distribution("uniform:1:99999999999999999999999999999")


def test_pinned_distribution_huge_sigma():
    F.prop_distribution("normal:1.5:999999999999999999999999999999")
    F.prop_distribution("lognormal:-1:1e3")


# -------------------------------------------------- `measure`'s tool readers and `tune --space`


@pytest.fixture(scope="module")
def tool_dir():
    tf = F.ToolFuzz()
    yield tf
    tf.close()


@pytest.fixture(scope="module")
def space_files():
    ffs = {".yaml": F.FileFuzz(".yaml"), ".json": F.FileFuzz(".json"), "marks": F.FileFuzz(".marks")}
    yield ffs
    for ff in ffs.values():
        ff.close()


@FUZZ
@given(case=grammar(F.gen_tool_file))
def test_measure_tool_readers(tool_dir, case):
    """vLLM / AIPerf / GuideLLM files with hostile fields: a checked ToolRun or one UserError line."""
    F.prop_tool_file(tool_dir, *case)


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), grammar(F.gen_markers)))
def test_measure_markers(space_files, data):
    F.prop_markers(space_files["marks"], data)


@FUZZ
@given(case=st.one_of(st.tuples(st.sampled_from([".yaml", ".json"]), st.binary(max_size=300)), grammar(F.gen_space)))
def test_tune_space_loader(space_files, case):
    F.prop_space(space_files, *case)


# ---------------------------------------------------------------- identity probes and the calibration fit

@FUZZ
@given(case=st.one_of(
    grammar(F.gen_identity_probes),
    st.tuples(st.sampled_from(["m", None]), st.dictionaries(
        st.sampled_from(["/v1/models", "/version", "/get_server_info", "/info", "/props", "/health", "/metrics"]),
        st.tuples(st.sampled_from([200, 404, 0]), st.just({}), st.binary(max_size=200)), min_size=7, max_size=7)
    ).filter(lambda c: len(c[1]) == 7)))
def test_identity_probes(case):
    F.prop_identity(*case)


@FUZZ
@given(case=st.one_of(grammar(F.gen_calibration), st.tuples(
    st.lists(st.integers(-5, 10 ** 7), max_size=3),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3))))
def test_calibration_fit(case):
    F.prop_calibration(*case)


def test_pinned_sglang_stream_interval_nested():
    """SGLang's ``stream_interval`` was stored raw in ``server.stream_batching``: a 20-deep list in
    ``/get_server_info`` nested the ``ServerInfo`` past what the bounded reader takes (found by the
    identity-probe fuzzer, seed 0 case 367)."""
    import json

    responses = {p: (404, {}, b"") for p in ("/version", "/info", "/props", "/health", "/metrics")}
    responses["/v1/models"] = (200, {}, json.dumps({"data": [{"id": "m"}]}).encode())
    responses["/get_server_info"] = (200, {}, json.dumps({"tp_size": 1, "stream_interval": F._nest(20)}).encode())
    F.prop_identity("m", responses)
    from wattbench.server.detect import classify

    assert classify("http://h:1", responses, "m").stream_batching.model_dump() == {"stream_interval": None}


# ---------------------------------------------------------------- the monitor's scrapes

@FUZZ
@given(texts=st.one_of(grammar(F.gen_monitor_scrapes), st.lists(st.text(max_size=300), min_size=1, max_size=4)))
def test_monitor_scrapes(texts):
    F.prop_monitor_scrapes(texts)
