"""llama.cpp's llama-server for real (CPU build from ``scripts/install-llamacpp.sh``), started by
wattbench's launcher on the tiny preset exported to GGUF. Checks the recorded server info and
detection, and that the scraped /metrics token counters equal the usage tokens of the same
requests, then a whole `wattbench run` against it (as the vLLM test does).

The binary: WATTBENCH_LLAMA_SERVER (``.ci/run`` builds it into its cache outside the clone,
``~/.cache/wattbench-ci/llamacpp-VERSION/``), else ``.llamacpp/bin/llama-server`` here, else ``llama-server``
on PATH. Skipped with the reason when neither exists.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest

from wattbench.engines.registry import launch
from wattbench.engines.llamacpp import LlamaCpp
from wattbench.server.detect import detect_server

from tests.fakes.engine_counters import (
    LENGTHS, assert_counters_equal_usage, assert_level_counters_bracket, run_cli_levels,
)

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.llamacpp, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]


def llama_server() -> str | None:
    env = os.environ.get("WATTBENCH_LLAMA_SERVER")
    if env:
        return env if Path(env).is_file() else None
    local = ROOT / ".llamacpp" / "bin" / "llama-server"
    return str(local) if local.is_file() else shutil.which("llama-server")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    binary = llama_server()
    if binary is None:
        pytest.skip("no llama-server: run scripts/install-llamacpp.sh DIR and set WATTBENCH_LLAMA_SERVER")
    pytest.importorskip("gguf")
    import psutil

    run_dir = tmp_path_factory.mktemp("llamacpp-run")
    t0 = time.monotonic()
    h = launch(LlamaCpp(binary=binary), "tiny", "cpu", ["-np", "4", "-c", "4096", "-t", "2"], run_dir,
               timeout_s=300)
    h.measured_start_s = time.monotonic() - t0
    try:
        yield h
    finally:
        pid = h.pid
        h.stop()
        deadline = time.monotonic() + 60  # ends a hang only: returns once it is gone
        while time.monotonic() < deadline and psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie":
            time.sleep(0.2)
        assert not (psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"), "llama-server left behind"


def test_server_info_and_detection(server):
    si = server.server_info
    print(f"\nllama.cpp CPU tiny: ready in {server.measured_start_s:.1f} s")
    assert si.engine == "llamacpp" and si.launched and si.version
    assert si.model == "tiny"  # served under the preset's name (-a tiny)
    eff = si.effective_config
    assert eff["total_slots"] == 4 and eff["parallel"] == "4"
    assert eff["n_ctx"] == 4096 // 4  # /props reports the context of one slot: -c is shared by -np slots
    assert eff["max_model_len"] == 1024 and eff["model_path"].endswith(".f16.gguf")
    assert si.extra_body == {"ignore_eos": True} and si.metrics_endpoint.endswith("/metrics")
    det = asyncio.run(detect_server(server.base_url))
    assert det.engine == "llamacpp"
    # its identity: /props' slots, per-slot context and build, no slot state
    props = det.identity.exposed["/props"]
    assert props["total_slots"] == 4 and props["default_generation_settings.n_ctx"] == 1024
    assert props["build_info"] == det.version and props["model_path"].endswith(".f16.gguf")
    assert not [k for k in props if any(w in k for w in ("id_task", "is_processing", "next_token", "media_marker",
                                                             "is_sleeping"))], sorted(props)
    assert det.identity.not_exposed == []


def test_scraped_token_counters_equal_usage(server):
    tl, _, elapsed_s = assert_counters_equal_usage(server.base_url, server.model, "llamacpp", force_close=True)
    out_tokens = sum(LENGTHS)
    print(f"\nllama.cpp CPU tiny: {out_tokens} output tokens in {elapsed_s:.2f} s at concurrency 3 = "
          f"{out_tokens / elapsed_s:.0f} tok/s; scraped {len(tl.scrapes)} times")



def test_wattbench_run_token_counts_equal_llamacpp_counters(server, tmp_path):
    """`wattbench run` (a real CLI process) against the real server: its token counts per level
    equal llama.cpp's own counters between the scrapes that bracket the level."""
    result, tl, recs = run_cli_levels(server.base_url, tmp_path / "run", timeout_s=600)
    si = result.server
    # the identity recorded before the load is the one the server shows after it (no slot state)
    after = asyncio.run(detect_server(server.base_url, model=si.model)).identity
    assert si.identity.exposed == after.exposed and after.exposed["/props"]["total_slots"] == 4
    assert si.engine == "llamacpp" and si.output_length_forced and si.extra_body == {"ignore_eos": True}
    for lv in result.levels:
        assert_level_counters_bracket(tl, lv)
        assert {r.output_tokens for r in recs if r.level == lv.index} == {16}
