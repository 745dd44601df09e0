"""Hostile ``tune --space`` files and ``--axis`` values (tune/space.py): each is one ``UserError``
line, quickly, before anything is enumerated or started.

Before: a billion-laughs YAML was accepted and expanded to 666 MB (MemoryError one step later); a
1,000,000-value axis and 30 axes of 10 values hung the tune for over 90 s while it listed them; a
NaN range bound and a non-UTF-8 file raised tracebacks; a range to infinity looped for ever."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.fakes.reliability_procs import child_env
from wattbench.core.errors import UserError
from wattbench.tune.space import MAX_CONFIGURATIONS, build_space


def _laughs() -> str:
    lines = ["axes:", "  max-num-seqs: [64, 128]", 'l0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"l{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append("  # the values of an axis made of the last alias:")
    lines.append("more: {axes: *a9}")
    return "\n".join(lines) + "\n"


def _few_aliases_wide() -> str:
    """Under the alias cap, yet expanding past the value cap: 8 levels of 8 aliases."""
    lines = ["axes:", "  max-num-seqs: [64, 128]", "l0: &a0 [1, 2, 3, 4, 5, 6, 7, 8]"]
    for i in range(1, 6):
        lines.append(f"l{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 8) + "]")
    return "\n".join(lines) + "\n"


CASES = {
    "billion_laughs.yaml": (_laughs(), "more than 64 YAML aliases"),
    "wide_aliases.yaml": (_few_aliases_wide(), "expands to more than 20,000 values"),
    "million.yaml": ("axes:\n  max-num-seqs: [" + ",".join(str(i) for i in range(200_000)) + "]\n",
                     "larger than the 64 KiB"),
    "million.json": ('{"axes": {"max-num-seqs": [' + ",".join(str(i) for i in range(5000)) + "]}}",
                     "5,000 values, more than 1000"),
    "many_values.yaml": ("axes:\n  max-num-seqs: [" + ",".join(str(i) for i in range(4500)) + "]\n",
                         "more than 4,000 values"),
    "thirty_axes.yaml": ("axes:\n" + "".join(f"  a{i}: [{', '.join(str(j) for j in range(10))}]\n" for i in range(30)),
                         "about 1e30 configurations"),
    "nan_range.yaml": ("axes:\n  max-num-seqs: {min: .nan, max: 256, step: 64}\n", "finite numbers min <= max"),
    "inf_range.yaml": ("axes:\n  max-num-seqs: {min: 1, max: .inf, factor: 2}\n", "finite numbers min <= max"),
    "tiny_factor.yaml": ("axes:\n  max-num-seqs: {min: 1.0e-300, max: 1.0e+300, factor: 1.0000001}\n",
                         "values (at most 1000)"),
    "tiny_step.yaml": ("axes:\n  max-num-seqs: {min: -1.0e+300, max: 1.0e+300, step: 1.0e-300}\n",
                       "more than 1000 values"),
    "nan_step.yaml": ("axes:\n  max-num-seqs: {min: 1, max: 5, step: .nan}\n", "finite step"),
    "reversed.yaml": ("axes:\n  max-num-seqs: {min: 256, max: 64, step: 64}\n", "min <= max"),
    "nan_value.yaml": ("axes:\n  cb-max-memory-percent: [0.5, .nan]\n", "is not a finite number"),
    "nested_value.yaml": ("axes:\n  max-num-seqs: [[1, 2], {x: 1}]\n", "is not a number, a word"),
    "when_list.yaml": ("axes:\n  a: [1, 2]\n  b: {values: [1], when: [1, 2]}\n", "'when' must map"),
    "values_int.yaml": ("axes:\n  a: {values: 5}\n", "'values' must be a list"),
    "deep.yaml": ("axes:\n  a: " + "[" * 5000 + "]" * 5000 + "\n", "cannot parse"),
    "deep.json": ('{"axes": {"a": ' + "[" * 5000 + "]" * 5000 + "}}", "nested 5002 levels deep"),
    "long_value.yaml": ("axes:\n  a: [" + "x" * 1000 + "]\n", "1,000 characters"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hostile_space_file_is_one_line(tmp_path, name):
    text, words = CASES[name]
    p = tmp_path / name
    p.write_text(text)
    t0 = time.monotonic()
    with pytest.raises(UserError) as e:
        build_space("vllm", space_file=str(p))
    took = time.monotonic() - t0
    msg = str(e.value)
    assert words in msg and str(p) in msg and "\n" not in msg and len(msg) < 400, msg
    assert took < 30, took  # before: minutes, or for ever; here well under a second on a quiet machine


def test_a_space_file_not_utf8_is_one_line(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_bytes(b"axes:\n  max-num-seqs: [\xff\xfe]\n")
    with pytest.raises(UserError, match="not UTF-8"):
        build_space("vllm", space_file=str(p))


def test_a_few_anchors_still_work(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("axes:\n  cb-use-cuda-graph: &sw [false, true]\n  enforce-eager: *sw\n"
                 "  max-num-seqs: {min: 64, max: 256, factor: 2}\n")
    space = build_space("vllm", space_file=str(p))
    assert [a.values for a in space.axes] == [[False, True], [False, True], [64, 128, 256]]
    assert space.size() == 12


def test_true_and_1_stay_two_values(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("axes:\n  a: [1, true, 1.0]\n")
    assert build_space("vllm", space_file=str(p)).axes[0].values == [1, True]


def test_a_million_value_axis_on_the_command_line_is_one_line():
    t0 = time.monotonic()
    with pytest.raises(UserError, match="more than 1000 values"):
        build_space("vllm", axes=["max-num-seqs=" + ",".join(str(i) for i in range(1_000_000))])
    assert time.monotonic() - t0 < 30


def test_the_space_size_is_counted_before_it_is_listed():
    axes = [f"a{i}=" + ",".join(str(j) for j in range(10)) for i in range(5)]  # 100,000 configurations
    with pytest.raises(UserError, match=f"more than the {MAX_CONFIGURATIONS:,} a tune tries"):
        build_space("vllm", axes=axes)
    assert build_space("vllm", axes=axes[:4]).size() == 10_000


def test_tune_with_a_billion_laughs_is_one_line_exit_2(tmp_path):
    p = tmp_path / "laughs.yaml"
    p.write_text(_laughs())
    r = subprocess.run([sys.executable, "-m", "wattbench", "tune", "--engine", "vllm", "--space", str(p), "--out",
                        str(tmp_path / "t")], capture_output=True, text=True, timeout=120, env=child_env(),
                       cwd=tmp_path)
    assert r.returncode == 2 and "YAML aliases" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "t").exists()
