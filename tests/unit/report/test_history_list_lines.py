"""``history list`` at 80 columns: one line per run, the run id shortened the way git shortens a
commit (the shortest unique prefix, which every command resolves back to the run), the headline
figure and verdict never cut, the target, configuration and tags giving way; ``--full-ids`` and
``--json`` keep the whole id."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.fakes.results_factory import make_level, make_result
from wattbench.cli.main import build_app
from wattbench.core.numbers import fmt
from wattbench.report.summary import history_summary
from wattbench.results.rundir import write_result
from wattbench.results.store import HistoryStore

IDS = ["20261201-121821-2a2a5a", "20261201-121821-2a2a5b", "20261201-093000-ffffff", "20261130-235959-000001"]


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "h.db"
    for i, rid in enumerate(IDS):
        res = make_result(rid, levels=[make_level(0, value=8, power_w=500.0 + 100 * i)])
        res.config_label = "a-rather-long-configuration-label-" + str(i)
        write_result(tmp_path / rid, res)
        with HistoryStore(path) as store:
            store.register(res, tmp_path / rid, summary=history_summary(res))
    with HistoryStore(path) as store:
        store.tag(IDS[3], "a-very-long-tag-name-for-the-old-run")
    return path


def test_short_ids_are_the_shortest_unique_prefixes(db):
    with HistoryStore(db) as store:
        short = store.short_ids(IDS)
        # two runs of one second differ in their last character: whole; the others by their time
        assert short[IDS[0]] == IDS[0] and short[IDS[1]] == IDS[1]
        assert short[IDS[2]] == "20261201-0" and short[IDS[3]] == "20261130"  # at least the date
        for rid, s in short.items():
            assert store.get(s).run_id == rid  # every command resolves it back
        store.tag(IDS[2], "20261201-0")  # a tag by that name would win the lookup: one more character
        assert store.short_ids([IDS[2]])[IDS[2]] == "20261201-09"


def test_history_list_is_one_line_per_run_at_80_columns(db):
    r = CliRunner().invoke(build_app(), ["history", "list", "--db", str(db)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) == 2 + len(IDS), r.output  # header, rule, one line per run
    assert max(len(x) for x in lines) <= 80
    with HistoryStore(db) as store:
        short = store.short_ids(IDS)
        for rid in IDS:
            rec = store.get(rid)
            row = next(x for x in lines if x.split()[0] == short[rid])
            # the headline as the answer gives it, whole (c=8, its tok/s per kW at the node)
            h = rec.summary["headline"]
            assert f"{h['level']} {fmt(h['value'])} {h['boundary']}" in row and rec.verdict in row.split()
    assert "…" in r.output  # the long labels and tag gave way, not the figures
    full = CliRunner().invoke(build_app(), ["history", "list", "--db", str(db), "--full-ids"],
                              env={"COLUMNS": "80"})
    assert full.exit_code == 0 and all(any(x.startswith(rid + " ") for x in full.output.splitlines()) for rid in IDS)
    assert max(len(x) for x in full.output.splitlines()) <= 80
    js = CliRunner().invoke(build_app(), ["history", "list", "--db", str(db), "--json"])
    assert sorted(x["run_id"] for x in json.loads(js.output)) == sorted(IDS)
