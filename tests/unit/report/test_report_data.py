import shutil

import orjson
import pytest

from wattbench.core.errors import UserError
from wattbench.report.data import RunData, load_runs


def test_reads_every_file(report_run_dir):
    run = RunData(report_run_dir)
    assert run.run_id == "run-report-fake"
    assert len(run.result.levels) == 3
    assert len(run.requests) > 400
    assert set(run.telemetry.channels) == {"nvml0.power", "nvml0.energy", "ipmi.node"}
    t, v = run.telemetry.series("nvml0.power")
    assert len(t) == len(v) > 500
    assert "vllm:num_requests_waiting" in run.server_timeline
    assert run.notes == []


def test_batched_and_single_sample_telemetry_read_the_same(report_batched_dir, tmp_path):
    from tests.fakes.report_runs import write_run

    single = RunData(write_run(tmp_path / "s", seed=3, node_label="declared"))
    batched = RunData(report_batched_dir)
    for cid in single.telemetry.channels:
        assert single.telemetry.series(cid) == batched.telemetry.series(cid)
    assert batched.telemetry.channels["ipmi.node"].method == "declared"


def test_truncated_last_line_is_skipped_and_noted(report_run_dir, tmp_path):
    d = tmp_path / "r"
    shutil.copytree(report_run_dir, d)
    n = len(RunData(d).requests)
    with (d / "requests.jsonl").open("ab") as f:
        f.write(b'{"id": 99999, "level": 0, "sent')
    run = RunData(d)
    assert len(run.requests) == n
    assert any("truncated" in x for x in run.notes)


def test_corrupt_line_in_the_middle_is_an_error(report_run_dir, tmp_path):
    d = tmp_path / "r"
    shutil.copytree(report_run_dir, d)
    lines = (d / "telemetry.jsonl").read_bytes().split(b"\n")
    lines[5] = b"{not json"
    (d / "telemetry.jsonl").write_bytes(b"\n".join(lines))
    with pytest.raises(UserError, match="line 6"):
        RunData(d).telemetry


@pytest.mark.parametrize("what", ["missing_dir", "no_result", "bad_json", "not_result", "newer"])
def test_bad_run_dirs_are_one_clear_error(tmp_path, what):
    d = tmp_path / "r"
    if what != "missing_dir":
        d.mkdir()
    if what == "bad_json":
        (d / "result.json").write_text("{oops")
    elif what == "not_result":
        (d / "result.json").write_text('{"run_id": 3}')
    elif what == "newer":
        (d / "result.json").write_bytes(orjson.dumps({"schema_version": 999}))
    with pytest.raises(UserError) as ei:
        load_runs([d])
    msg = str(ei.value)
    assert str(d) in msg and "\n" not in msg
    if what == "newer":
        assert "upgrade" in msg


def test_missing_side_files_are_notes_not_errors(report_run_dir, tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    shutil.copy(report_run_dir / "result.json", d / "result.json")
    run = RunData(d)
    assert run.requests == [] and len(run.telemetry) == 0 and run.server_timeline == {}
    assert any("requests.jsonl is missing" in x for x in run.notes)
