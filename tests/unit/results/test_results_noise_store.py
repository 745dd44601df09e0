"""The configuration key and the history's run-to-run spread (``results/configuration.py``,
``HistoryStore.noise``): which levels measured "the same thing", and their spread by hand."""

from __future__ import annotations

import copy
import math

import pytest

from tests.fakes.results_factory import make_level, make_result
from wattbench.core.schema import FigureKey
from wattbench.results.configuration import configuration, configuration_key, describe, level_figure
from wattbench.results.store import HistoryStore


def _run(run_id, tok_s, value=8, created="2026-11-29T12:00:00Z", **kw):
    # 700 W: tok/s per kW = tok/s / 0.7
    return make_result(run_id, levels=[make_level(0, value=value, output_tokens_per_s=tok_s, power_w=700.0)],
                       created_at=created, **kw)


def _key(r):
    return configuration_key(configuration(r, r.levels[0]))


def test_the_key_names_machine_engine_model_flags_shape_load_and_boundary():
    a = _run("a", 1000.0)
    assert _key(a) == _key(_run("b", 1200.0))  # another run of it, another figure: the same configuration
    seeded = copy.deepcopy(a)
    seeded.config.seed = 9
    assert _key(seeded) == _key(a)  # the seed is not the shape
    for other in (_run("c", 1000.0, value=16), _run("d", 1000.0, gpu_name="NVIDIA H100"),
                  _run("e", 1000.0, engine_version="0.12.0"), _run("f", 1000.0, model="other/model"),
                  _run("g", 1000.0, api="chat")):
        assert _key(other) != _key(a), other.run_id
    launched = copy.deepcopy(a)
    launched.server.launched = True
    launched.server.effective_config = {"preset": "llama-1b", "cb_use_cuda_graph": True, "port": 1234}
    flags = copy.deepcopy(launched)
    flags.server.effective_config["cb_use_cuda_graph"] = False
    moved = copy.deepcopy(launched)
    moved.server.effective_config["port"] = 5678
    assert _key(flags) != _key(launched) and _key(moved) == _key(launched)  # flags count, a port does not
    conf = configuration(launched, launched.levels[0])
    assert conf["model"] == "llama-1b" and conf["boundary"] == "accelerator"
    assert describe(conf).startswith("NVIDIA H200 · vllm 0.11.0 · llama-1b")
    assert level_figure(a.levels[0]) == (FigureKey("output_tokens_per_s_per_kw", "accelerator"), pytest.approx(1000.0 / 0.7))


def test_the_history_keeps_the_spread_of_repeated_runs(tmp_path):
    with HistoryStore(tmp_path / "h.db") as store:
        for i, tok_s in enumerate((1000.0, 1100.0, 1200.0)):
            store.register(_run(f"r{i}", tok_s, created=f"2026-11-29T12:0{i}:00Z"), tmp_path / f"r{i}")
        store.register(_run("other", 900.0, value=16), tmp_path / "other")
        key = _key(_run("x", 1.0))
        sp = store.noise(key)
        # per kW 1428.6, 1571.4, 1714.3: mean 1571.4; sd of ln(figure) 9.12% (2 df), one segment (no move
        # beyond ±25% before the series has 2 df)
        logs = [math.log(x / 0.7) for x in (1000.0, 1100.0, 1200.0)]
        m = sum(logs) / 3
        assert sp.runs == 3 and sp.mean == pytest.approx(1100.0 / 0.7) and sp.df == 2
        assert sp.rel_sd == pytest.approx(math.sqrt(sum((x - m) ** 2 for x in logs) / 2)) == pytest.approx(0.09119, rel=1e-3)
        assert sp.run_ids == ["r0", "r1", "r2"] and sp.change_points == []
        assert sp.figure == "output_tokens_per_s_per_kw@accelerator"
        assert store.noise(key, exclude_runs=["r2"]).runs == 2
        # any stored figure of the configuration, by name: throughput 1000/1100/1200 (the same sd of ln:
        # power is constant), power 700 W in every run (sd 0), J/output token = 0.7 / 1.0..1.2
        tp = store.noise(key, figure="output_tokens_per_s")
        assert (tp.figure, tp.runs, tp.df) == ("output_tokens_per_s", 3, 2)
        assert tp.rel_sd == pytest.approx(sp.rel_sd, rel=1e-9) and tp.mean == pytest.approx(1100.0)
        pw = store.noise(key, figure="avg_power_w@accelerator")
        assert pw.runs == 3 and pw.rel_sd == pytest.approx(0.0, abs=1e-12) and pw.text().endswith("3 runs, sd 0%, 2 df")
        assert store.noise(key, figure="avg_power_w@node") is None  # stored at the accelerator, not the node
        assert store.noise(key, figure="ttft_p50_ms") is None  # not stored: no spread
        assert [s.runs for s in store.noise_table(min_runs=2)] == [3]
        assert [s.runs for s in store.noise_table(min_runs=1)] == [3, 1]
        assert store.noise_table(min_runs=2, gpu="h100") == []


def test_history_noise_prints_each_configuration_at_80_columns(tmp_path):
    from typer.testing import CliRunner

    from wattbench.cli.main import build_app

    db = tmp_path / "h.db"
    with HistoryStore(db) as store:
        for i, tok_s in enumerate((1000.0, 1100.0, 1200.0)):
            store.register(_run(f"r{i}", tok_s, created=f"2026-11-29T12:0{i}:00Z"), tmp_path / f"r{i}")
    out = CliRunner().invoke(build_app(), ["history", "noise", "--db", str(db)], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    # a result without a server identity (written before they were recorded) says so; folded at 80
    assert lines[0] == "NVIDIA H200 · vllm 0.11.0 · Qwen/Qwen2.5-0.5B-Instruct · identity unknown"
    assert lines[1] == "    c=8 @ accelerator"
    lines = lines[1:]
    # per kW 1428.6 / 1571.4 / 1714.3: sd of ln 9.12% (2 df); t(0.975, 2) x 9.12% = 39.2%: over ±25%
    key = _key(_run("x", 1.0))
    assert lines[1] == "  tok/s/kW mean 1,571, range 1,429–1,714"
    # the basis in the sentence compare and regress print for it (metrics/figure_noise.history_text)
    assert lines[2] == f"  noise: history of key {key}: 3 runs, sd 9.1%, 2 df"
    assert lines[3] == "  one more run within ±39.2% (95%): too wide to judge by (over ±25%)"
    assert "inconclusive" in lines[4]
    assert all(len(x) <= 80 for x in out.output.splitlines())
    empty = CliRunner().invoke(build_app(), ["history", "noise", "--db", str(db), "--min-runs", "4"])
    assert empty.exit_code == 0 and "no configuration measured by 4+ complete runs" in empty.output


def test_history_noise_shows_a_change_point_not_a_spread_across_it(tmp_path):
    from typer.testing import CliRunner

    from wattbench.cli.main import build_app

    db = tmp_path / "h.db"
    # three runs at 1,000 tok/s, then the server restarted with other flags: two at 500
    figures = (1000.0, 1010.0, 990.0, 500.0, 505.0)
    with HistoryStore(db) as store:
        for i, tok_s in enumerate(figures):
            store.register(_run(f"r{i}", tok_s, created=f"2026-11-29T12:0{i}:00Z"), tmp_path / f"r{i}")
        sp = store.noise(_key(_run("x", 1.0)))
    assert sp.runs == 5 and sp.segment_runs == [3, 2] and sp.df == 3
    assert [c["run_id"] for c in sp.change_points] == ["r3"]
    assert sp.mean == pytest.approx(502.5 / 0.7)  # the configuration as it is now
    assert sp.rel_sd < 0.01  # within the segments; all five pooled would be 36%
    out = CliRunner().invoke(build_app(), ["history", "noise", "--db", str(db)], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert "  c=8 moved -50% at run r3: a configuration change?" in lines
    assert any(x.startswith("    (beyond its noise ±") for x in lines)
    assert any(x.startswith("  one more run within ±") and "of the mean (95%)" in x for x in lines)
    assert all(len(x) <= 80 for x in lines)


def _bloated(run_id: str, tok_s: float, created: str, levels: int = 8):
    """A run whose server exposed a 16 KiB identity (the most ``server/identity`` keeps)."""
    from wattbench.core.schema import ServerIdentity
    from wattbench.server.identity.common import MAX_IDENTITY_BYTES, cap_exposed

    lvls = [make_level(i, value=2 ** i, output_tokens_per_s=tok_s, power_w=700.0) for i in range(levels)]
    r = make_result(run_id, levels=lvls, created_at=created)
    kept, capped = cap_exposed({"/props": {f"p{i:04d}": "v" * 190 for i in range(200)}}, MAX_IDENTITY_BYTES)
    r.server.identity = ServerIdentity(target="http://h:8080", model="m", engine="llamacpp", exposed=kept,
                                       capped=capped)
    return r


def _register_as_schema_3(db, result, path) -> None:
    """Write ``result``'s rows as a schema-3 database held them: each level's whole configuration."""
    import json
    import sqlite3

    from wattbench.results.store_schema import LEVEL_COLUMNS, MIGRATIONS, level_rows

    conn = sqlite3.connect(db, isolation_level=None)
    if conn.execute("SELECT name FROM sqlite_master WHERE name='schema_meta'").fetchone() is None:
        conn.execute("CREATE TABLE schema_meta (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_meta VALUES (3)")
        for m in MIGRATIONS[:3]:
            m(conn)
    conn.execute("INSERT INTO runs(run_id, kind, path, created_at, registered_at, status) VALUES (?,?,?,?,?,?)",
                 (result.run_id, "run", str(path), result.created_at, result.created_at, "complete"))
    for row, lv in zip(level_rows(result), result.levels):
        row = list(row)
        row[LEVEL_COLUMNS.index("config")] = json.dumps(configuration(result, lv), sort_keys=True)
        conn.execute(f"INSERT INTO levels ({', '.join(LEVEL_COLUMNS)}) VALUES ({', '.join('?' * len(row))})", row)
    conn.close()


def test_an_old_database_is_split_on_open_and_keeps_its_spread(tmp_path):
    import json
    import sqlite3

    db = tmp_path / "old.db"
    for i, tok_s in enumerate((1000.0, 1100.0)):
        _register_as_schema_3(db, _bloated(f"o{i}", tok_s, f"2026-11-29T12:0{i}:00Z"), tmp_path / f"o{i}")
    new = _bloated("n0", 1200.0, "2026-11-29T12:05:00Z")
    key = configuration_key(configuration(new, new.levels[3]))
    with HistoryStore(db) as store:  # migrated here: the run's part moves to runs.config, once
        store.register(new, tmp_path / "n0")
        sp = store.noise(key)
        # the old runs and the new one share the key: per kW 1428.6, 1571.4, 1714.3 at c=8
        assert sp is not None and sp.runs == 3 and sp.run_ids == ["o0", "o1", "n0"]
        assert sp.low == pytest.approx(1000.0 / 0.7) and sp.high == pytest.approx(1200.0 / 0.7)
        assert sp.config == configuration(new, new.levels[3])  # joined back whole
    conn = sqlite3.connect(db)
    for run_id, text in conn.execute("SELECT run_id, config FROM levels"):
        assert set(json.loads(text)) == {"load", "boundary"}, run_id  # the level's own part only
    runs = dict(conn.execute("SELECT run_id, config FROM runs"))
    assert all(json.loads(runs[r])["server"]["exposed"]["/props"] for r in ("o0", "o1", "n0"))
    assert conn.execute("SELECT version FROM schema_meta").fetchone()[0] == 4


def test_a_capped_identity_is_stored_once_per_run(tmp_path):
    """3 runs of 8 levels of one bloated identity made an 86 MB database; capped to 16 KiB and
    stored once per run, the identity is 3 × 16 KiB of it."""
    import sqlite3

    db = tmp_path / "h.db"
    with HistoryStore(db) as store:
        for i in range(3):
            store.register(_bloated(f"b{i}", 1000.0 + i, f"2026-11-29T12:0{i}:00Z"), tmp_path / f"b{i}")
    conn = sqlite3.connect(db)
    run_bytes = conn.execute("SELECT sum(length(config)) FROM runs").fetchone()[0]
    level_bytes = conn.execute("SELECT sum(length(config)) FROM levels").fetchone()[0]
    assert 3 * 15_000 < run_bytes < 3 * 18_000  # each run's identity once: ~16 KiB of settings
    assert level_bytes < 24 * 200  # 24 levels: their load and boundary only


def test_figures_far_apart_or_zero_neither_break_nor_pad_the_spread(tmp_path):
    """Two imported runs of one configuration at 1e-300 and 1e300 tok/s (per kW) are a change point
    (a finite ratio), not an OverflowError for the whole history; a run whose figure is 0.0 (every
    request failed) is no sample: left out of the spread, the run count and the range."""
    from typer.testing import CliRunner

    from wattbench.cli.main import build_app

    db = tmp_path / "h.db"
    with HistoryStore(db) as store:
        for i, tok_s in enumerate((700.0, 700.0, 1000.0, 1100.0, 500.0)):
            store.register(_run(f"r{i}", tok_s, created=f"2026-11-29T12:0{i}:00Z"), tmp_path / f"r{i}")
    import sqlite3

    with sqlite3.connect(db) as conn:  # as imported runs store them (r4: every request failed)
        for run_id, figure in (("r0", 1e-300), ("r1", 1e300), ("r4", 0.0)):
            conn.execute("UPDATE levels SET figure = ? WHERE run_id = ?", (figure, run_id))
    with HistoryStore(db) as store:
        sp = store.noise(_key(_run("x", 1.0)))
        assert sp.runs == 4 and "r4" not in sp.run_ids  # the 0.0 run is not counted
        assert sp.low == pytest.approx(1e-300) and sp.high == pytest.approx(1e300)
        assert sp.change_points and all(math.isfinite(c["ratio"]) for c in sp.change_points)
    out = CliRunner().invoke(build_app(), ["history", "noise", "--db", str(db)], terminal_width=80)
    assert out.exit_code == 0, out.output
    assert "Traceback" not in out.output and "4 runs" in out.output
