"""The configuration key's identity parts (``results/configuration.py``): the server's identity and
the run's ``--config-label`` split keys; a result written before identities were recorded keys as
"identity unknown", never as a newer run's configuration."""

from __future__ import annotations

import copy
import json

from tests.fakes.results_factory import make_level, make_result
from wattbench.results.configuration import (
    IDENTITY_UNKNOWN,
    configuration,
    configuration_key,
    describe,
    run_key,
    target_text,
)
from wattbench.core.schema import Result, ServerIdentity


def _run(run_id="a", **kw):
    return make_result(run_id, levels=[make_level(0, value=8, output_tokens_per_s=1000.0, power_w=700.0)], **kw)


def _key(r):
    return configuration_key(configuration(r, r.levels[0]))


def _with(r, **ident):
    r = copy.deepcopy(r)
    r.server.identity = ServerIdentity(**{"target": "http://10.0.0.5:8000", "engine": r.server.engine,
                                          "version": r.server.version, "model": r.server.model, **ident})
    return r


def test_an_old_result_keys_as_identity_unknown_never_as_a_newer_one():
    old = _run()
    new = _with(old)
    assert configuration(old, old.levels[0])["server"] == IDENTITY_UNKNOWN
    assert _key(old) != _key(new)
    assert target_text(old) == IDENTITY_UNKNOWN and "identity unknown" in describe(configuration(old, old.levels[0]))


def test_target_exposed_settings_replicas_and_label_each_split_the_key():
    base = _with(_run(), exposed={"/props": {"total_slots": 4}})
    same = _with(_run("b"), exposed={"/props": {"total_slots": 4}})
    assert _key(base) == _key(same) and run_key(base) == run_key(same)
    port = _with(_run(), target="http://10.0.0.5:8001", exposed={"/props": {"total_slots": 4}})
    flags = _with(_run(), exposed={"/props": {"total_slots": 8}})
    replicas = _with(_run(), exposed={"/props": {"total_slots": 4}}, replicas=["http://10.0.0.6:8000"])
    labelled = copy.deepcopy(base)
    labelled.config_label = "bios-perf"
    for other in (port, flags, replicas, labelled):
        assert _key(other) != _key(base) and run_key(other) != run_key(base)
    assert target_text(base) == "10.0.0.5:8000" and target_text(replicas) == "10.0.0.5:8000 +1"
    assert "label bios-perf" in describe(configuration(labelled, labelled.levels[0]))


def test_a_launched_engine_is_named_by_engine_and_model_not_by_its_port():
    r = _with(_run(), target=None, launched="vllm")
    r.server.launched = True
    r.server.effective_config = {"preset": "tiny", "max_num_seqs": 64, "port": 41234}
    moved = copy.deepcopy(r)
    moved.server.effective_config["port"] = 50000
    assert _key(moved) == _key(r) and target_text(r) == "vllm:tiny (launched)"


def test_result_json_without_identity_or_label_reads_as_none():
    data = json.loads(_run().model_dump_json())
    data["server"].pop("identity", None)
    data.pop("config_label", None)
    r = Result.model_validate(data)
    assert r.server.identity is None and r.config_label is None
    back = Result.model_validate(json.loads(_with(_run(), exposed={"/info": {"x": 1}}).model_dump_json()))
    assert back.server.identity.exposed == {"/info": {"x": 1}}


def test_a_bad_config_label_is_one_line_and_exit_2_before_anything_runs(tmp_path):
    from typer.testing import CliRunner

    from wattbench.cli.main import build_app

    for bad, says in (("", "must not be empty"), ("a\x1bb", "control character"), ("x" * 65, "at most 64")):
        out = CliRunner().invoke(build_app(), ["run", "-t", "http://127.0.0.1:9/v1", "--config-label", bad,
                                               "--db", str(tmp_path / "h.db"), "-o", str(tmp_path / "r")])
        assert out.exit_code == 2, out.output
        lines = [x for x in out.output.splitlines() if x.strip()]
        assert len(lines) == 1 and says in lines[0] and "Traceback" not in out.output, out.output
    assert not (tmp_path / "r").exists() and not (tmp_path / "h.db").exists()


def test_history_rows_carry_target_label_and_the_run_key(tmp_path):
    from wattbench.results.store import HistoryStore

    r = _with(_run("r1"), exposed={"/props": {"total_slots": 4}})
    r.config_label = "drv-580"
    old = _run("r0")
    with HistoryStore(tmp_path / "h.db") as store:
        store.register(r, tmp_path / "r1", summary={"headline": {"level": "c=8", "value": 1428.6,
                                                                 "boundary": "accelerator"}})
        store.register(old, tmp_path / "r0")
        got = {x.run_id: x for x in store.list_runs()}
        assert [x.run_id for x in store.list_runs(label="drv")] == ["r1"]
        assert [x.run_id for x in store.list_runs(target="10.0.0.5")] == ["r1"]
    assert got["r1"].target == "10.0.0.5:8000" and got["r1"].config_label == "drv-580"
    assert got["r1"].config_id == run_key(r) and got["r0"].target == IDENTITY_UNKNOWN


def test_an_inf_rate_level_keys_the_same_registered_as_run_and_imported_from_its_file(tmp_path):
    """``run`` registers the result in memory (rate inf), ``history import`` reads result.json (the
    inf written as null): one level of one configuration, one key, the history's one series."""
    import math

    from wattbench.results.rundir import load_result, write_result

    r = make_result("a", levels=[make_level(0, mode="rate", value=math.inf)])
    write_result(tmp_path / "a", r)
    back = load_result(tmp_path / "a")
    assert configuration(back, back.levels[0])["load"]["value"] == math.inf
    assert _key(back) == _key(r)
