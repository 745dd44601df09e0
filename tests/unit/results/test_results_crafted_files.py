"""Crafted ``result.json`` files: each is refused on load with one line naming the file and what is
wrong, before any reader shows a figure of it (``results/jsonfile.py``: size and nesting caps
before parsing; ``core/schema/bounds.py``: run id, level count, non-negative finite figures).

Before: a 100,000-deep ``extra`` raised ``RecursionError`` in report/compare/import; a 5 MB run id,
a negative energy (shown as a negative tok/s per kW) and negative token counts were read as they
were; 20,000 levels took over two minutes in ``report``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.e2e.test_run_cli import wb
from tests.fakes.results_factory import make_result
from wattbench.core.errors import UserError
from wattbench.results.jsonfile import json_depth, loads_bounded
from wattbench.results.rundir import load_result, write_result
from wattbench.core.schema.bounds import MAX_LEVELS


def _write(tmp_path: Path, name: str, edit) -> Path:
    d = tmp_path / name
    d.mkdir()
    write_result(d, make_result())
    data = json.loads((d / "result.json").read_text())
    text = edit(data)
    (d / "result.json").write_text(text if isinstance(text, str) else json.dumps(data))
    (d / "requests.jsonl").write_text("")
    return d


def _deep_extra(data):
    data["extra"] = {"x": "DEEP"}
    return json.dumps(data).replace('"DEEP"', "[" * 100_000 + "]" * 100_000)


def _neg_energy(data):
    for lv in data["levels"]:
        for b in lv["energy"].values():
            b["energy_j"] = -abs(b["energy_j"])


def _neg_tokens(data):
    data["levels"][0]["throughput"]["output_tokens"] = -9000


def _neg_per_kw(data):
    for b in data["levels"][0]["energy"].values():
        b["output_tokens_per_s_per_kw"] = -693.0


def _nan_duration(data):
    return json.dumps(data).replace('"duration_s": 60.0', '"duration_s": NaN', 1)


def _neg_window(data):
    data["levels"][1]["window"]["duration_s"] = -5.0


def _neg_ttft(data):
    data["levels"][0]["latency"]["ttft_ms"]["p99"] = -3.0


def _big_id(data):
    data["run_id"] = "A" * 5_000_000


def _markup_id(data):
    data["run_id"] = "[/x]"


def _escape_id(data):
    data["run_id"] = "run\x1b]0;pwned\x07"


def _many_levels(data):
    lv = data["levels"][0]
    data["levels"] = [dict(lv, index=i) for i in range(MAX_LEVELS + 1)]


CASES = {
    "deep_extra": (_deep_extra, "nested 100002 levels deep"),
    "negative_energy": (_neg_energy, "energy.accelerator.energy_j is negative"),
    "negative_tokens": (_neg_tokens, "throughput.output_tokens is negative"),
    "negative_per_kw": (_neg_per_kw, "output_tokens_per_s_per_kw is negative"),
    "nan_duration": (_nan_duration, "not a finite number"),
    "negative_window": (_neg_window, "level 1: window.duration_s is negative"),
    "negative_latency": (_neg_ttft, "latency.ttft_ms.p99 is negative"),
    "huge_run_id": (_big_id, "run_id is 5,000,000 characters long"),
    "markup_run_id": (_markup_id, "holds characters a run id does not"),
    "escape_run_id": (_escape_id, "holds characters a run id does not"),
    "too_many_levels": (_many_levels, f"{MAX_LEVELS + 1:,} levels"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_crafted_result_is_refused_on_load_with_one_line(tmp_path, case):
    edit, msg = CASES[case]
    d = _write(tmp_path, case, edit)
    with pytest.raises(UserError) as e:
        load_result(d)
    text = str(e.value)
    assert msg in text and str(d / "result.json") in text and "\n" not in text, text
    assert len(text) < 400


def test_the_unedited_file_still_loads(tmp_path):
    d = _write(tmp_path, "ok", lambda data: None)
    res = load_result(d)
    assert res.run_id == "run-a" and len(res.levels) == 2


def test_a_negative_dynamic_energy_is_a_measurement_not_an_edit(tmp_path):
    """Gross minus idle goes below zero when the idle baseline read higher than the load."""
    def edit(data):
        for b in data["levels"][0]["energy"].values():
            b["dynamic_energy_j"] = -12.5
    assert load_result(_write(tmp_path, "dyn", edit)).levels[0].energy["accelerator"].dynamic_energy_j == \
        pytest.approx(-12.5)


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(tmp_path):
    d = _write(tmp_path, "big", lambda data: None)
    size = (d / "result.json").stat().st_size
    assert load_result(d, max_bytes=size).run_id == "run-a"  # at the cap: read
    with pytest.raises(UserError, match="larger than the"):
        load_result(d, max_bytes=size - 1)


def test_json_depth_ignores_brackets_in_strings():
    assert json_depth(b'{"a": "[[[[[[", "b": [1, {"c": "]]]\\"[["}]}') == 3
    assert json_depth(b"1") == 0 and json_depth("[]") == 1
    with pytest.raises(ValueError, match="nested 70 levels deep"):
        loads_bounded("[" * 70 + "]" * 70)
    assert loads_bounded("[" * 64 + "]" * 64) is not None


def test_a_deep_request_line_is_one_line(tmp_path):
    from wattbench.results.rundir import load_requests

    (tmp_path / "requests.jsonl").write_text('{"id": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(UserError, match="line 1: nested too deep"):
        load_requests(tmp_path)


@pytest.mark.parametrize("cmd", ["report", "compare", "import"])
def test_report_compare_and_import_say_one_line_and_exit_2(tmp_path, cmd):
    bad = _write(tmp_path, "bad", _deep_extra)
    if cmd == "report":
        args = ["report", str(bad)]
    elif cmd == "compare":
        args = ["compare", str(_write(tmp_path, "ok", lambda data: None)), str(bad)]
    else:
        args = ["history", "import", str(bad), "--db", str(tmp_path / "h.db")]
    t0 = time.monotonic()
    p = wb(*args, cwd=tmp_path)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in p.stderr and "RecursionError" not in p.stderr, p.stderr[-2000:]
    if cmd == "import":  # import goes on past a file it cannot read and names it
        assert any("nested 100002 levels deep" in ln for ln in lines), p.stderr
    else:
        assert p.returncode == 2 and len(lines) == 1 and "nested 100002 levels deep" in lines[0], p.stderr
    assert time.monotonic() - t0 < 120
