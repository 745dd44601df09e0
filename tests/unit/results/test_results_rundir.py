"""Run directory IO: atomic writes, round trip, and errors that name the file and the problem."""

from __future__ import annotations

import json
import os

import pytest

from tests.fakes.results_factory import make_result
from wattbench.core.errors import UserError
from wattbench.core.schema import SCHEMA_VERSION
from wattbench.results.rundir import append_requests, load_requests, load_result, write_result
from wattbench.core.schema import RequestRecord


def test_round_trip(tmp_path):
    r = make_result("rt-1")
    path = write_result(tmp_path / "run", r)
    assert path.name == "result.json"
    back = load_result(tmp_path / "run")
    assert back == r
    assert load_result(path).levels[1].energy["accelerator"].avg_power_w == pytest.approx(600.0, rel=1e-9)
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


def _chunked(n: int) -> list[RequestRecord]:
    return [RequestRecord(id=i, level=0, sent_ns=1000 + i, first_token_ns=1100 + i, last_token_ns=1300 + i,
                          end_ns=1310 + i, chunk_ns=[1100 + i, 1200 + i, 1300 + i], output_tokens=3,
                          tags=["t"], energy_j={"node": 0.5 * i}) for i in range(n)]


def test_a_record_set_streams_into_requests_jsonl_with_annotations_and_without_stamps(tmp_path):
    import numpy as np

    from wattbench.core.recordset import RecordSet

    recs = _chunked(300)
    rs = RecordSet.from_records(recs, spill_bytes=2000)
    assert rs.spilled
    rs.annotate("trial", np.full(len(rs), 1, dtype=object))
    append_requests(tmp_path / "a", rs, keep_chunks=False)
    back = load_requests(tmp_path / "a")
    assert [r.id for r in back] == list(range(300))
    assert all(r.chunk_ns == [] and r.trial == 1 for r in back)  # stamps dropped, the annotation merged
    # everything else is the record as it was
    want = [r.model_dump(exclude={"chunk_ns"}) for r in recs]
    assert [r.model_dump(exclude={"chunk_ns", "trial"}) for r in back] == want
    assert "chunk_ns" not in (tmp_path / "a" / "requests.jsonl").read_text()
    # with --keep-chunks: the stamps are written, record for record
    append_requests(tmp_path / "b", rs, keep_chunks=True)
    assert [r.chunk_ns for r in load_requests(tmp_path / "b")] == [r.chunk_ns for r in recs]


def test_a_write_failing_half_way_cuts_the_append_back(tmp_path, monkeypatch):
    """Disk full after some batches went out: the file is cut back to where this append began
    (no torn line, earlier records kept) and the error names the file."""
    import errno

    from wattbench.results import rundir

    append_requests(tmp_path, _chunked(5))
    before = (tmp_path / "requests.jsonl").read_bytes()
    monkeypatch.setattr(rundir, "WRITE_BATCH_BYTES", 300)  # several batches
    real_write, calls = os.write, []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) == 3:  # the third batch: half of it, then the disk is full
            real_write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(rundir.os, "write", write)
    with pytest.raises(UserError, match="cannot write .*requests.jsonl: No space left on device"):
        append_requests(tmp_path, _chunked(50))
    assert len(calls) == 3
    assert (tmp_path / "requests.jsonl").read_bytes() == before


@pytest.mark.parametrize("where", ["requests.jsonl", "spool/level-0-trial-0", "result.json", "dangling"])
def test_an_out_holding_a_link_is_refused_before_anything_is_written(tmp_path, where):
    """A planted ``requests.jsonl -> victim`` would have the run append to the file it points at:
    an existing ``--out`` that holds a symbolic link anywhere is refused in one line, nothing followed."""
    from wattbench.core.errors import UserError
    from wattbench.results.rundir import check_output_dir

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    link = out / where
    link.parent.mkdir(parents=True)
    link.symlink_to(victim if where != "dangling" else tmp_path / "nowhere")
    with pytest.raises(UserError, match=r"--out .*holds a symbolic link"):
        check_output_dir(out, "--out")
    assert victim.read_text() == "precious\n"
    # --out itself may be a link to a directory (a user's choice), when nothing inside is
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    check_output_dir(tmp_path / "via", "--out")


def test_requests_are_never_appended_through_a_link(tmp_path):
    """Planted after the run started: the append refuses the link (one line, as any failed write)."""
    from wattbench.core.errors import StorageError
    from wattbench.results.rundir import append_requests

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "requests.jsonl").symlink_to(victim)
    with pytest.raises(StorageError):
        append_requests(run, [])
    assert victim.read_text() == "precious\n"


def test_an_interrupt_inside_the_serializer_waits_for_the_write(tmp_path):
    """SIGTERM (delivered as Ctrl-C) that lands while pydantic serializes a result — inside a Python
    callback of its Rust core, where a ``KeyboardInterrupt`` came out as a
    ``PydanticSerializationError``: a traceback and no file (a run stopped in its first second did,
    1 in 4 beside a CPU hog) — waits for the write: the file is whole, then the interrupt is raised."""
    import json
    import signal

    import pytest
    from pydantic import BaseModel, field_serializer

    from wattbench.results.rundir import write_json_atomic

    class Interrupted(BaseModel):
        name: str = "run"

        @field_serializer("name")
        def _ser(self, v: str) -> str:
            signal.raise_signal(signal.SIGINT)  # Python's handler: KeyboardInterrupt, here
            return v

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    path = tmp_path / "result.json"
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, Interrupted())
    assert json.loads(path.read_text()) == {"name": "run"}
