"""``history show``'s per-level table at 80 and 160 columns: no number is ever cut (a past defect:
``5…`` for 500)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rich.console import Console

from wattbench.core.numbers import fmt
from wattbench.report.history import levels_table


def _level(label: str, tok_s: float, verdict: str = "valid") -> dict:
    return {"label": label, "boundary": "node", "output_tokens_per_s": tok_s, "ttft_p99_ms": 12345.6,
            "tpot_p99_ms": 500.0, "avg_power_w": 10500.0, "j_per_output_token": 0.0123,
            "output_tokens_per_s_per_kw": 123456.0, "verdict": verdict}


@pytest.mark.parametrize("width", [80, 160])
def test_history_show_never_cuts_a_number(width):
    rec = SimpleNamespace(levels=[_level("concurrency=128 prefill-heavy long-context", 123456.0, "invalid"),
                                  _level("rate=20.5 decode-heavy", 500.0)])
    console = Console(record=True, width=width, color_system=None, file=open("/dev/null", "w"))
    console.print(levels_table(rec))
    out = console.export_text()
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= width
    flat = " ".join(out.split())
    for number in (fmt(123456.0), fmt(12345.6), fmt(500.0), fmt(10500.0), fmt(0.0123), "invalid"):
        assert f" {number} " in f" {flat} ", number
