"""Run directory IO: atomic writes, round trip, and errors that name the file and the problem."""

from __future__ import annotations

import json
import os

import pytest

from tests.fakes.results_factory import make_result
from wattbench.errors import UserError
from wattbench.results.schema import SCHEMA_VERSION
from wattbench.results.rundir import append_requests, load_requests, load_result, write_result
from wattbench.results.schema import RequestRecord


def test_round_trip(tmp_path):
    r = make_result("rt-1")
    path = write_result(tmp_path / "run", r)
    assert path.name == "result.json"
    back = load_result(tmp_path / "run")
    assert back == r
    assert load_result(path).levels[1].energy["accelerator"].avg_power_w == 600.0
    # no temporary files left behind
    assert sorted(os.listdir(tmp_path / "run")) == ["result.json"]


def test_rewrite_replaces_atomically(tmp_path):
    r = make_result("rt-2")
    write_result(tmp_path, r)
    r.status = "interrupted"
    write_result(tmp_path, r)
    assert load_result(tmp_path).status == "interrupted"
    assert sorted(os.listdir(tmp_path)) == ["result.json"]


def test_requests_append_and_load(tmp_path):
    recs = [RequestRecord(id=i, level=0, sent_ns=1000 + i, end_ns=2000 + i, output_tokens=10) for i in range(3)]
    append_requests(tmp_path, recs[:2])
    append_requests(tmp_path, [recs[2].model_dump()])
    back = load_requests(tmp_path)
    assert [r.id for r in back] == [0, 1, 2]
    assert back[2].end_ns == 2002


def test_missing_dir_names_it(tmp_path):
    with pytest.raises(UserError, match=r"run-x: no such run directory"):
        load_result(tmp_path / "run-x")


def test_missing_result_file_names_it(tmp_path):
    (tmp_path / "run-x").mkdir()
    with pytest.raises(UserError, match=r"run-x/result.json: missing"):
        load_result(tmp_path / "run-x")


def test_corrupt_json_names_line(tmp_path):
    d = tmp_path / "run-x"
    d.mkdir()
    (d / "result.json").write_text('{\n  "run_id": "x",\n  "levels": [,]\n}\n')
    with pytest.raises(UserError, match=r"run-x/result.json: not valid JSON at line 3 column 14"):
        load_result(d)


def test_missing_field_named(tmp_path):
    data = json.loads(make_result("mf").model_dump_json())
    del data["run_id"]
    (tmp_path / "result.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"result.json: missing field run_id"):
        load_result(tmp_path)


def test_wrong_type_named(tmp_path):
    data = json.loads(make_result("wt").model_dump_json())
    data["levels"][0]["throughput"]["output_tokens_per_s"] = "fast"
    (tmp_path / "result.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"field levels\.0\.throughput\.output_tokens_per_s"):
        load_result(tmp_path)


def test_newer_schema_refused(tmp_path):
    data = json.loads(make_result("nv").model_dump_json())
    data["schema_version"] = 99
    (tmp_path / "result.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=rf"schema_version 99 is newer than this wattbench reads \({SCHEMA_VERSION}\); upgrade"):
        load_result(tmp_path)


def test_empty_and_non_object(tmp_path):
    (tmp_path / "result.json").write_text("")
    with pytest.raises(UserError, match="empty file"):
        load_result(tmp_path)
    (tmp_path / "result.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="expected a JSON object"):
        load_result(tmp_path)


def test_bad_request_line_numbered(tmp_path):
    good = RequestRecord(id=0, level=0, sent_ns=1).model_dump_json()
    (tmp_path / "requests.jsonl").write_text(good + "\n" + good + "\n{\"id\": 3, \"level\"\n")
    with pytest.raises(UserError, match=r"requests.jsonl: line 3: not valid JSON"):
        load_requests(tmp_path)
    (tmp_path / "requests.jsonl").write_text('{"id": 1, "level": 0}\n')
    with pytest.raises(UserError, match=r"line 1: missing field sent_ns"):
        load_requests(tmp_path)


def test_agreement_dir_is_not_a_result(tmp_path):
    (tmp_path / "agreement.json").write_text("{}")
    with pytest.raises(UserError, match="an output-agreement run, not a benchmark result"):
        load_result(tmp_path)
