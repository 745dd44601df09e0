"""HTML escaping end to end: a real ``wattbench run`` whose every user- or server-controlled string
carries markup — the dataset prompts and the dataset's file name, the model id the server
reports, the streamed response text (kept with --keep-output-text), a --tag — writes a report.html
that headless Chromium renders with no script of ours run, no console error, and the markup shown
as text."""

from __future__ import annotations

import json

import pytest

from tests.fakes.browser import find_chromium, inspect_page
from tests.fakes.reliability_procs import run_cli, server
from wattbench.results.rundir import load_result

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(find_chromium() is None, reason="chromium not installed (apt-get install -y chromium)"),
]

MODEL = "m<script>window.__pwned=1</script>"
TOKEN = "<img src=x onerror=window.__pwned=2>"
TAG = 't"><script>window.__pwned=3<script>'  # a tag holds no space or '/' (config.shared.name_problem): markup still fits
FILE = "d<svg onload=window.__pwned=4>.jsonl"
PROMPT = "<script>window.__pwned=5</script> tell me a story"


def test_markup_from_a_real_run_stays_text_in_the_browser(tmp_path):
    data = tmp_path / FILE
    data.write_text("\n".join(json.dumps({"prompt": f"{PROMPT} {i}", "output_tokens": 8}) for i in range(6)) + "\n")
    out = tmp_path / "run"
    with server("--ttft-ms", "5", "--itl-ms", "2", "--model", MODEL, "--token-text", TOKEN) as s:
        p = run_cli(s.base, out, "--concurrency", "2", "-n", "6", "--workload", str(data), "--keep-output-text",
                    "--tag", TAG, "--sensor", "const:accelerator=100")
    assert p.returncode == 0, p.stderr[-2000:]
    res = load_result(out)
    assert res.server.model == MODEL and TAG in res.tags
    html = out / "report.html"
    raw = html.read_text()
    assert "<script>window.__pwned" not in raw and "<img src=x onerror" not in raw and "<svg onload" not in raw
    rep = inspect_page(html, evaluate={"pwned": "typeof window.__pwned", "text": "document.body.textContent",  # includes closed <details>
                                       "imgs": "document.images.length",
                                       "title": "document.title"})
    assert rep.errors() == []
    assert all(u.startswith(("file://", "data:", "blob:", "about:")) for u in rep.requests), rep.requests
    v = rep.values
    assert v["pwned"] == "undefined"
    assert v["imgs"] == 0
    assert MODEL in v["text"] or MODEL in v["title"]
    assert TOKEN in v["text"]  # the response text is shown, as text
