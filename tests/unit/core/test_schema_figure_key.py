"""``FigureKey``: the one parser and writer of a trial figure's key, and its lookup in a trials block,
on the forms committed files hold (``name@boundary``; plain names in a file whose run measured one
boundary)."""

from __future__ import annotations

import pytest

from wattbench.core.schema import FigureKey, TrialsBlock
from wattbench.results.headline import BOUNDARY_FIGURES, trial_entry
from wattbench.core.schema import LevelResult


@pytest.mark.parametrize("text,figure,boundary", [
    ("output_tokens_per_s_per_kw@accelerator", "output_tokens_per_s_per_kw", "accelerator"),
    ("j_per_output_token@accelerator_memory", "j_per_output_token", "accelerator_memory"),
    ("ttft_p99_ms", "ttft_p99_ms", None),
    ("avg_power_w@", "avg_power_w", None),  # an empty boundary is none
])
def test_parse_and_text_round_trip(text: str, figure: str, boundary: str | None) -> None:
    key = FigureKey.parse(text)
    assert (key.figure, key.boundary) == (figure, boundary)
    assert FigureKey.parse(key.text()) == key
    assert str(key) == key.text() == (text.rstrip("@"))


def test_at_keeps_the_boundary_only_for_a_boundary_figure() -> None:
    assert FigureKey.at("avg_power_w", "host", BOUNDARY_FIGURES).text() == "avg_power_w@host"
    assert FigureKey.at("ttft_p99_ms", "host", BOUNDARY_FIGURES).text() == "ttft_p99_ms"
    assert FigureKey.at("avg_power_w", None, BOUNDARY_FIGURES).text() == "avg_power_w"


def test_lookup_reads_a_plain_name_only_where_no_key_names_a_boundary() -> None:
    one_boundary = {"avg_power_w": 1.0, "ttft_p99_ms": 2.0}  # an older file: plain names
    many = {"avg_power_w@accelerator": 3.0, "avg_power_w": 9.0, "ttft_p99_ms": 4.0}
    key = FigureKey("avg_power_w", "host")
    assert key.lookup(one_boundary) == pytest.approx(1.0, rel=1e-12)
    assert key.lookup(many) is None  # another boundary's figure is never this one's
    assert FigureKey("avg_power_w", "accelerator").lookup(many) == pytest.approx(3.0, rel=1e-12)
    assert FigureKey("ttft_p99_ms").lookup(many) == pytest.approx(4.0, rel=1e-12)
    assert FigureKey("missing").lookup(many) is None


def test_trial_entry_reads_through_the_key() -> None:
    block = TrialsBlock.model_validate({"n": 2, "figures": {
        "avg_power_w@accelerator": {"mean": 300.0}, "avg_power_w@host": {"mean": 90.0},
        "ttft_p99_ms": {"mean": 12.0}}})
    lv = LevelResult.model_validate({"index": 0, "label": "c=1", "trials": block.model_dump()})
    got = trial_entry(lv, "avg_power_w", "host")
    assert got is not None and got.mean == pytest.approx(90.0, rel=1e-12)
    latency = trial_entry(lv, "ttft_p99_ms", "host")
    assert latency is not None and latency.mean == pytest.approx(12.0, rel=1e-12)
    assert trial_entry(lv, "avg_power_w", "wall") is None
