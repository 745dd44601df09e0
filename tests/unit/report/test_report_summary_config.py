"""The configuration the reports show is the one that applied (a past defect: a closed-loop --target run's
HTML showed ``engine transformers`` and ``arrival poisson``, defaults it never used)."""

from __future__ import annotations

import json
import math

import pytest

from tests.fakes.results_factory import make_level, make_result
from wattbench.core.schema import RecordedConfig
from wattbench.report import summary as S
from wattbench.report.labels import short_label
from wattbench.report.html import build_html
from wattbench.results.rundir import write_result


def _with_config(levels, **cfg):
    r = make_result("cfg", levels=levels)
    r.config = RecordedConfig.model_validate({
        "engine": "transformers", "engine_model": None, "engine_args": [], "device": None, "arrival": "poisson",
        "rate": [], "concurrency": [8], "num_requests": 32, **cfg})
    return r


def test_a_closed_loop_target_run_shows_no_engine_and_no_arrival(tmp_path):
    r = _with_config([make_level(0, value=8)], target="http://127.0.0.1:8000")
    keys = [k for k, _ in S.applied_config(r)]
    assert "engine" not in keys and "device" not in keys and "arrival" not in keys
    assert keys == sorted(keys) and "target" in keys and "concurrency" in keys
    write_result(tmp_path / "r", r)
    from wattbench.report.data import RunData

    page = build_html([RunData(tmp_path / "r")])
    conf = page.split("<h3>Configuration</h3>", 1)[1].split("</table>", 1)[0]
    assert "transformers" not in conf and "poisson" not in conf and "http://127.0.0.1:8000" in conf


def test_an_open_loop_launched_run_shows_both():
    r = _with_config([make_level(0, mode="rate", value=4.0)], rate=[4.0])
    keys = dict(S.applied_config(r))
    assert keys["engine"] == "transformers" and keys["arrival"] == "poisson"


def test_an_inf_rate_level_read_back_counts_as_measured(tmp_path):
    """An interrupted run's unmeasured levels: the recorded ladder's inf rate and the level that
    measured it, both written as null (JSON has no inf), read back as inf; it is not listed as
    unmeasured, and is named as in memory."""
    from wattbench.results.rundir import load_result

    r = _with_config([make_level(0, mode="rate", value=2.0), make_level(1, mode="rate", value=math.inf)],
                     rate=[2.0, math.inf], num_requests=10)
    r.status = "interrupted"
    assert S.unmeasured_levels(r) == []  # in memory
    write_result(tmp_path / "r", r)
    back = load_result(tmp_path / "r")
    raw = json.loads((tmp_path / "r" / "result.json").read_text())
    assert raw["config"]["rate"][0] == pytest.approx(2.0, rel=1e-12) and raw["config"]["rate"][1] is None and raw["levels"][1]["load"]["target_rate_rps"] is None
    assert back.config.rate == pytest.approx([2.0, math.inf], rel=1e-12)
    assert back.levels[1].load.target_rate_rps == math.inf
    assert short_label(back.levels[1]) == "r=inf"
    from wattbench.report.data import RunData

    assert "r=inf" in build_html([RunData(tmp_path / "r")])  # an inf rate has no place on a load axis: labels
    assert S.unmeasured_levels(back) == []
    back.levels = back.levels[:1]  # the inf level not measured: listed
    assert S.unmeasured_levels(back) == ["r=inf"]
