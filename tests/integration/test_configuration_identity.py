"""The configuration key against ground truth (the scripted streaming server): which runs measured
"the same configuration" (``results/configuration.py``, ``server/identity``).

- two identical servers on two ports are two configurations; one server measured twice is one;
- a server restarted on its port with another ITL that it exposes (``--expose-config``: a vLLM-like
  ``vllm:cache_config_info`` gauge) is another configuration, restarted with the same settings the
  same one (its ``num_gpu_blocks`` and ``/v1/models``' ``created`` move at every start: volatile);
- a server that exposes nothing restarted with another ITL cannot be told apart — recorded as not
  exposed — and ``--config-label`` is what splits it;
- ``history list`` rows tell the runs apart: target, label or key, headline figure and boundary.

Before identities, every run here had one key (no target, no server configuration in it).
"""

from __future__ import annotations

import re

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.results.configuration import configuration, configuration_key
from wattbench.run import run_benchmark

pytestmark = pytest.mark.slow

NODE_W = 300.0


def _run(base: str, out, db=None, **kw):
    cfg = RunConfig(target=base, sensors=[f"const:node={NODE_W:g}"], idle_s=0, prime=False, history_check=False,
                    concurrency=[1], num_requests=4, input_tokens="8", output_tokens="8", html=False,
                    register_run=db is not None, db=str(db) if db else None, out=str(out), **kw)
    return run_benchmark(cfg)


def _key(result) -> str:
    return configuration_key(configuration(result, result.levels[0]))


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def _differs(a, b) -> list[str]:
    ca, cb = configuration(a, a.levels[0]), configuration(b, b.levels[0])
    return sorted(k for k in ca if ca[k] != cb[k])


def test_two_identical_servers_on_two_ports_are_two_configurations_one_server_twice_is_one(tmp_path):
    args = ("--expose-config", "--ttft-ms", "5", "--itl-ms", "2")
    with stream_server(*args) as (a, _), stream_server(*args) as (b, _):
        ra1 = _run(a, tmp_path / "a1")
        ra2 = _run(a, tmp_path / "a2")
        rb = _run(b, tmp_path / "b")
    assert _key(ra1) == _key(ra2)  # one server, measured twice
    assert _key(ra1) != _key(rb)
    assert _differs(ra1, rb) == ["server"]
    assert ra1.server.identity.target == f"http://127.0.0.1:{_port(a)}"
    assert rb.server.identity.target == f"http://127.0.0.1:{_port(b)}"


def test_a_restart_with_other_flags_it_exposes_is_another_configuration(tmp_path):
    runs = {}
    with stream_server("--expose-config", "--itl-ms", "2") as (base, _):
        runs["itl2"] = _run(base, tmp_path / "itl2")
    port = str(_port(base))
    for name, itl in (("itl2-again", "2"), ("itl4", "4")):  # the same port, a new process each
        with stream_server("--expose-config", "--itl-ms", itl, "--port", port) as (b, _):
            assert _port(b) == int(port)
            runs[name] = _run(b, tmp_path / name)
    ident = runs["itl4"].server.identity
    gauge = ident.exposed["/metrics vllm:cache_config_info"]
    assert gauge["scripted_itl_ms"] == "4" and "num_gpu_blocks" not in gauge  # profiled at start: volatile
    assert "created" not in ident.exposed["/v1/models"] and ident.exposed["/v1/models"]["max_model_len"] == 4096
    assert runs["itl2"].server.version == "0.0.0-scripted"
    assert _key(runs["itl2"]) == _key(runs["itl2-again"])  # restarted with the same settings: the same
    assert _key(runs["itl4"]) != _key(runs["itl2"])
    assert _differs(runs["itl2"], runs["itl4"]) == ["server"]


def test_what_a_server_does_not_expose_is_named_and_a_config_label_splits_it(tmp_path):
    with stream_server("--itl-ms", "2") as (base, _):
        plain = _run(base, tmp_path / "plain")
    port = str(_port(base))
    with stream_server("--itl-ms", "4", "--port", port) as (b, _):
        unseen = _run(b, tmp_path / "unseen")
        labelled = _run(b, tmp_path / "labelled", config_label="itl-4ms")
    assert plain.server.identity.not_exposed == ["an OpenAI-compatible server exposes no server configuration"]
    assert _key(plain) == _key(unseen)  # nothing the server exposes changed: wattbench cannot see it
    assert _key(labelled) != _key(unseen) and _differs(unseen, labelled) == ["label"]
    assert labelled.config_label == "itl-4ms"
    from wattbench.report.terminal import title_line

    assert "· label itl-4ms" in title_line(labelled).plain and "label" not in title_line(unseen).plain


def test_history_list_rows_show_target_label_or_key_and_the_headline(tmp_path):
    from typer.testing import CliRunner

    from wattbench.cli.main import build_app

    db = tmp_path / "h.db"
    with stream_server("--expose-config", "--itl-ms", "2") as (a, _), \
            stream_server("--expose-config", "--itl-ms", "2") as (b, _):
        ra = _run(a, tmp_path / "a", db=db)
        rb = _run(b, tmp_path / "b", db=db, config_label="bios-b")
    out = CliRunner().invoke(build_app(), ["history", "list", "--db", str(db)], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert all(len(x) <= 80 for x in lines), out.output
    # each row one line, led by its run id shortened as git shortens a commit (a unique prefix)
    row_a = next(x for x in lines if x.split() and len(x.split()[0]) >= 8 and ra.run_id.startswith(x.split()[0]))
    row_b = next(x for x in lines if x.split() and len(x.split()[0]) >= 8 and rb.run_id.startswith(x.split()[0]))
    assert row_a != row_b
    assert f"127.0.0.1:{_port(a)}" in row_a and f"127.0.0.1:{_port(b)}" in row_b
    from wattbench.results.configuration import run_key

    assert run_key(ra)[:8] in row_a and "bios-b" in row_b
    for r, row in ((ra, row_a), (rb, row_b)):
        per_kw = r.levels[0].energy["node"].output_tokens_per_s_per_kw
        # the headline: the level, its tok/s per kW (= tok/s / 0.3 kW) and the boundary, as `run` prints it
        m = re.search(r"c=1 ([\d,.]+) node", row)
        assert m, row
        assert float(m.group(1).replace(",", "")) == pytest.approx(per_kw, rel=0.01)
        assert per_kw == pytest.approx(r.levels[0].throughput.output_tokens_per_s / (NODE_W / 1000), rel=0.05)
