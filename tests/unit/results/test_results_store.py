"""SQLite history: register, resolve refs, tags, baselines, import, concurrency, migrations."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3

import pytest

from tests.fakes.results_factory import make_level, make_result
from wattbench.analysis.comparability import check_runs
from wattbench.core.errors import UserError
from wattbench.results.configuration import run_configuration, run_key
from wattbench.results.rundir import write_result
from wattbench.core.schema import TrialsBlock
from wattbench.results.store import SCHEMA_VERSION, HistoryStore, load_ref, register_run_dir, resolve_run_path


@pytest.fixture
def store(tmp_path):
    s = HistoryStore(tmp_path / "db" / "h.sqlite3")
    yield s
    s.close()


def _write(tmp_path, run_id, **kw):
    r = make_result(run_id, **kw)
    d = tmp_path / "runs" / run_id
    write_result(d, r)
    return r, d


def test_register_and_get_round_trip(tmp_path, store):
    r, d = _write(tmp_path, "20261129-aaaa11", power_limit_w=700.0,
                  levels=[make_level(0, value=8, output_tokens_per_s=1000, power_w={"accelerator": 600, "node": 900})])
    rec = store.register(r, d)
    assert rec.run_id == r.run_id and rec.kind == "run"
    assert rec.path == str(d.resolve())
    assert rec.model == "Qwen/Qwen2.5-0.5B-Instruct" and rec.engine == "vllm" and rec.engine_version == "0.11.0"
    assert rec.gpu == "1x NVIDIA H200"
    assert rec.boundaries == ["accelerator", "node"]
    lv = rec.levels[0]
    # the headline boundary, the same rule the reports and the runner use (results.headline):
    # both measured, so the outer one, the node
    assert lv["boundary"] == "node" and lv["avg_power_w"] == 900
    assert lv["output_tokens_per_s_per_kw"] == pytest.approx(1000 / 0.9)
    assert lv["mode"] == "concurrency" and lv["target"] == 8
    # every kind of ref resolves
    assert store.get(str(d)).run_id == r.run_id
    assert store.get(str(d / "result.json")).run_id == r.run_id
    assert store.get("20261129-aaaa11").run_id == r.run_id
    assert store.get("20261129-aa").run_id == r.run_id
    # re-registering updates, no duplicates
    r.status = "interrupted"
    store.register(r, d)
    assert [x.status for x in store.list_runs()] == ["interrupted"]


def test_a_run_whose_server_gave_no_model_id_goes_by_the_model_its_settings_named(tmp_path, store):
    """The server's model id, else --model (``Result.served_model``): the history's model column,
    the configuration key's model and the comparison's model check read the same one."""
    a = make_result("20261129-aaaa11", model="org/alpha")
    b = make_result("20261129-bbbb22", model="org/beta")
    for r in (a, b):
        r.server.model = None
    da = tmp_path / "runs" / a.run_id
    write_result(da, a)
    assert store.register(a, da).model == "org/alpha"
    assert run_configuration(a)["model"] == "org/alpha" and run_key(a) != run_key(b)
    assert [(i.baseline, i.candidate) for i in check_runs(a, b) if i.field == "model"] == [("org/alpha", "org/beta")]


def test_a_level_with_trials_is_indexed_at_its_trial_means(tmp_path, store):
    """With --trials the history holds the trials' mean (the headline rule), not the last trial's."""
    lv = make_level(0, value=8, output_tokens_per_s=1000, power_w={"accelerator": 600})
    lv.trials = TrialsBlock.model_validate({"n": 5, "figures": {
        "output_tokens_per_s": {"mean": 980.0, "ci_low": 960.0, "ci_high": 1000.0},
        "avg_power_w@accelerator": {"mean": 610.0, "ci_low": 600.0, "ci_high": 620.0},
        "j_per_output_token@accelerator": {"mean": 0.62, "ci_low": 0.6, "ci_high": 0.64},
        "output_tokens_per_s_per_kw@accelerator": {"mean": 1606.0, "ci_low": 1550.0, "ci_high": 1660.0}}})
    r, d = _write(tmp_path, "20261129-trial1", levels=[lv])
    got = store.register(r, d).levels[0]
    assert [got[k] for k in ("output_tokens_per_s", "avg_power_w", "j_per_output_token", "output_tokens_per_s_per_kw")
            ] == pytest.approx([980.0, 610.0, 0.62, 1606.0], rel=1e-12)


def test_tags_unique_and_forced_move(tmp_path, store):
    a, da = _write(tmp_path, "run-aaaa")
    b, db = _write(tmp_path, "run-bbbb")
    store.register(a, da)
    store.register(b, db)
    store.tag("run-aaaa", "v1")
    assert store.get("v1").run_id == "run-aaaa"
    with pytest.raises(UserError, match="tag 'v1' already names run run-aaaa; pass --force"):
        store.tag("run-bbbb", "v1")
    store.tag("run-bbbb", "v1", force=True)
    assert store.get("v1").run_id == "run-bbbb"
    assert store.get("run-bbbb").tags == ["v1"]
    with pytest.raises(UserError, match="must be non-empty without spaces"):
        store.tag("run-aaaa", "bad tag")


def test_baseline_and_ambiguous_prefix(tmp_path, store):
    a, da = _write(tmp_path, "run-aaaa")
    b, db = _write(tmp_path, "run-aaab")
    store.register(a, da)
    store.register(b, db)
    store.set_baseline("main", "run-aaab")
    assert store.get("main").run_id == "run-aaab"
    store.set_baseline("main", "run-aaaa")
    assert store.get("main").run_id == "run-aaaa"
    assert store.baselines() == {"main": "run-aaaa"}
    with pytest.raises(UserError, match="'run-aa' is ambiguous: it begins run-aaaa, run-aaab"):
        store.get("run-aa")
    with pytest.raises(UserError, match="'nope': no such run directory, run id, tag or baseline"):
        store.get("nope")


def test_result_tags_applied_when_free(tmp_path, store):
    a, da = _write(tmp_path, "run-t1", tags=["nightly"])
    b, db = _write(tmp_path, "run-t2", tags=["nightly", "fresh"])
    store.register(a, da)
    rec = store.register(b, db)
    assert store.get("nightly").run_id == "run-t1"
    assert store.get("fresh").run_id == "run-t2"
    assert any("'nightly' already names run run-t1" in n for n in rec.notes)


def test_import_recursive_and_reports_corrupt(tmp_path, store):
    for i, gpu in enumerate(["NVIDIA H200", "NVIDIA H100", "NVIDIA H200"]):
        _write(tmp_path, f"imp-{i}", gpu_name=gpu, created_at=f"2026-11-0{i + 1}T00:00:00Z")
    bad = tmp_path / "runs" / "nested" / "broken"
    bad.mkdir(parents=True)
    (bad / "result.json").write_text("{not json")
    recs, problems = store.import_dirs([tmp_path / "runs"])
    assert sorted(r.run_id for r in recs) == ["imp-0", "imp-1", "imp-2"]
    assert len(problems) == 1 and "broken/result.json: not valid JSON at line 1" in problems[0]
    runs = store.list_runs()
    assert [r.run_id for r in runs] == ["imp-2", "imp-1", "imp-0"]  # newest first
    assert [r.run_id for r in store.list_runs(gpu="h100")] == ["imp-1"]
    assert [r.run_id for r in store.list_runs(since="2026-11-02")] == ["imp-2", "imp-1"]
    assert [r.run_id for r in store.list_runs(limit=1)] == ["imp-2"]


def test_resolve_run_path_without_db_does_not_create_one(tmp_path):
    db = tmp_path / "none.sqlite3"
    _, d = _write(tmp_path, "p-1")
    assert resolve_run_path(str(d), db) == d
    assert not db.exists()
    with pytest.raises(UserError, match=r"gone: no such run directory, and no history database at"):
        resolve_run_path("gone", db)
    assert not db.exists()


def test_load_ref_by_tag_and_moved_dir(tmp_path):
    db = tmp_path / "h.sqlite3"
    r, d = _write(tmp_path, "lr-1")
    with HistoryStore(db) as s:
        s.register(r, d)
        s.tag("lr-1", "base")
    assert load_ref("base", db).run_id == "lr-1"
    (d / "result.json").unlink()
    d.rmdir()
    with pytest.raises(UserError, match="no longer exists"):
        load_ref("base", db)


def test_env_var_chooses_db(tmp_path, monkeypatch):
    monkeypatch.setenv("WATTBENCH_DB", str(tmp_path / "env.sqlite3"))
    with HistoryStore() as s:
        assert s.path == tmp_path / "env.sqlite3"
    assert (tmp_path / "env.sqlite3").exists()


def test_wal_and_schema_version(tmp_path, store):
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.schema_version() == SCHEMA_VERSION


def test_newer_db_schema_refused(tmp_path):
    p = tmp_path / "h.sqlite3"
    HistoryStore(p).close()
    c = sqlite3.connect(p)
    c.execute("UPDATE schema_meta SET version = 99")
    c.commit()
    c.close()
    with pytest.raises(UserError, match="history schema version 99 is newer"):
        HistoryStore(p)


def test_not_a_database(tmp_path):
    p = tmp_path / "h.sqlite3"
    p.write_text("this is not sqlite" * 100)
    with pytest.raises(UserError, match="not a usable wattbench history database"):
        HistoryStore(p)


def _register_many(db: str, base: str, prefix: str, n: int) -> None:
    from tests.fakes.results_factory import make_result as mk
    from wattbench.results.store import HistoryStore as HS

    with HS(db) as s:
        for i in range(n):
            r = mk(f"{prefix}-{i}")
            s.register(r, f"{base}/{prefix}-{i}")
            s.tag(r.run_id, f"{prefix}-tag-{i}")


def test_two_processes_register_concurrently(tmp_path):
    # neither process finds the database: both create and migrate it at once, then register
    db = str(tmp_path / "c.sqlite3")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_register_many, args=(db, str(tmp_path), p, 15)) for p in ("px", "py")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    with HistoryStore(db) as s:
        assert len(s.list_runs()) == 30
        assert len(s.tags()) == 30
        n_levels = s.conn.execute("SELECT count(*) FROM levels").fetchone()[0]
        assert n_levels == 60


def _race_writer(dbs: list[str], barrier, prefix: str, n: int) -> None:
    from tests.fakes.results_factory import make_result as mk
    from wattbench.results.store import HistoryStore as HS

    for db in dbs:
        barrier.wait(60)  # every writer opens the fresh database at the same instant
        with HS(db) as s:
            for i in range(n):
                r = mk(f"{prefix}-{i}")
                s.register(r, f"/runs/{prefix}-{i}")
                s.tag(r.run_id, f"{prefix}-tag-{i}")


def test_many_processes_create_and_register_at_once(tmp_path):
    """Eight writers open each of twelve fresh databases at the same instant (a barrier), so they
    race to switch it to WAL and migrate it — where SQLite answers "database is locked" without
    waiting (a possible deadlock) — and every one must wait its turn and succeed."""
    ctx = mp.get_context("spawn")
    dbs = [str(tmp_path / f"race{k}.sqlite3") for k in range(12)]
    writers = 8
    barrier = ctx.Barrier(writers)
    procs = [ctx.Process(target=_race_writer, args=(dbs, barrier, f"w{j}", 2)) for j in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0] * writers
    for db in dbs:
        with HistoryStore(db) as s:
            assert len(s.list_runs()) == writers * 2 and len(s.tags()) == writers * 2
            assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_register_run_dir_helper(tmp_path):
    r, d = _write(tmp_path, "helper-1")
    rec = register_run_dir(d, db=tmp_path / "x.sqlite3")
    assert rec.run_id == "helper-1" and rec.path == str(d.resolve())
    assert register_run_dir(d, r, db=tmp_path / "x.sqlite3").run_id == "helper-1"


def test_import_of_a_copy_reusing_a_run_id_is_refused_and_the_run_stays(tmp_path, store):
    """A directory whose result.json reuses a registered run id (a copy, or a crafted file) would
    silently re-point that run, its tags and its baselines at other data: it is skipped with one
    line naming both directories. A run directory that was moved (the old one is gone) re-imports."""
    r, d = _write(tmp_path, "clash-1")
    store.register(r, d)
    store.set_baseline("main", "clash-1")
    store.tag("clash-1", "good")
    other = tmp_path / "elsewhere" / "copy"
    write_result(other, make_result("clash-1", gpu_name="NVIDIA H100"))
    recs, problems = store.import_dirs([other])
    assert recs == [] and len(problems) == 1
    assert "clash-1 already names the run in" in problems[0] and str(d.resolve()) in problems[0]
    rec = store.get("main")
    assert rec.path == str(d.resolve()) and rec.gpu == "1x NVIDIA H200" and store.get("good").run_id == "clash-1"
    # the same directory again: updated, no problem
    assert [x.run_id for x in store.import_dirs([d])[0]] == ["clash-1"]
    # moved: the old directory is gone, the new place is taken
    import shutil

    moved = tmp_path / "moved"
    shutil.move(str(d), str(moved))
    recs, problems = store.import_dirs([moved])
    assert problems == [] and store.get("main").path == str(moved.resolve())
