"""Workload presets shaped like real traffic, and the ``--workload NAME|FILE`` resolver.

| preset | input tokens | output tokens | shape |
| --- | --- | --- | --- |
| ``chat`` | user turn ``lognormal:4.1:0.6`` (median ~60) in [4, 1024] | ``lognormal:5.0:0.5`` (median ~148) in [16, 1024] | sessions of ``uniform:2:6`` turns, context grows (earlier turns and answers), exponential think time, mean 3 s |
| ``summarize`` | ``uniform:1500:4000`` (a long document) | ``uniform:100:250`` | one request per document |
| ``generate`` | ``uniform:16:128`` | ``uniform:500:1000`` | short instruction, long answer |
| ``rag`` | 2048-token shared context + ``uniform:16:96`` question | ``uniform:64:256`` | the same long prefix on every request (prefix caching helps) |
| ``code`` | ``normal:600:200`` in [100, 1500] | ``normal:400:150`` in [50, 1000] | medium in, medium out |

``synthetic`` (the default) is ``--input-tokens`` / ``--output-tokens`` as given.
Every preset's lengths are capped to the model's context when ``max_context_tokens`` is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wattbench.core.errors import UserError, not_a_file_reason
from wattbench.workload.distributions import LengthDistribution, parse_distribution
from wattbench.workload.source import Workload, file_sha256
from wattbench.workload.tokenizer import TokenSource
from wattbench.workload.dataset import DatasetFilters, DatasetWorkload
from wattbench.workload.sessions import SessionWorkload
from wattbench.workload.synthetic import SyntheticWorkload
from wattbench.workload.trace import INPUT_FIELDS, TIME_FIELDS, TraceWorkload


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    input_tokens: LengthDistribution  # chat: per user turn; rag: the question (the shared prefix is extra)
    output_tokens: LengthDistribution
    head: str = ""
    turns: LengthDistribution | None = None
    think_time_mean_s: float = 0.0
    shared_prefix_tokens: int = 0

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "summary": self.summary, "input_tokens": self.input_tokens.describe(),
             "output_tokens": self.output_tokens.describe()}
        if self.turns is not None:
            d["turns"] = self.turns.describe()
            d["think_time_mean_s"] = self.think_time_mean_s
        if self.shared_prefix_tokens:
            d["shared_prefix_tokens"] = self.shared_prefix_tokens
        return d


PRESETS: dict[str, Preset] = {
    "chat": Preset(
        "chat", "short prompts, short answers, multi-turn sessions with growing context and think time",
        parse_distribution("lognormal:4.1:0.6", low=4, high=1024),
        parse_distribution("lognormal:5.0:0.5", low=16, high=1024),
        turns=parse_distribution("uniform:2:6"), think_time_mean_s=3.0),
    "summarize": Preset(
        "summarize", "a long document in, a short summary out",
        parse_distribution("uniform:1500:4000"), parse_distribution("uniform:100:250"),
        head=" Summarize the following document.\n\n"),
    "generate": Preset(
        "generate", "a short instruction in, a long answer out",
        parse_distribution("uniform:16:128"), parse_distribution("uniform:500:1000"),
        head=" Write a long essay about:"),
    "rag": Preset(
        "rag", "a long shared context (same prefix on every request) plus a short question",
        parse_distribution("uniform:16:96"), parse_distribution("uniform:64:256"),
        head=" Answer using the context above. Question:", shared_prefix_tokens=2048),
    "code": Preset(
        "code", "medium prompt (code and instructions), medium answer",
        parse_distribution("normal:600:200", low=100, high=1500),
        parse_distribution("normal:400:150", low=50, high=1000),
        head=" Complete the following code.\n"),
}


def _cap(d: LengthDistribution, high: int | None) -> LengthDistribution:
    if high is None:
        return d
    return d.with_bounds(low=min(d.low, high), high=min(d.high, high) if d.high is not None else high)


def preset_workload(name: str, token_source: TokenSource, seed: int = 0, *,
                    max_context_tokens: int | None = None) -> Workload:
    """The workload of a preset (see the table in the module docstring)."""
    if name not in PRESETS:
        raise UserError(f"unknown workload preset {name!r}; presets: {', '.join(PRESETS)}")
    p = PRESETS[name]
    out = p.output_tokens
    inp = p.input_tokens
    if max_context_tokens is not None:
        room = max_context_tokens - p.shared_prefix_tokens - 8
        if room < 16:
            raise UserError(f"preset {name!r} needs more than {max_context_tokens} tokens of context")
        out = _cap(out, max(1, room // 4))
        inp = _cap(inp, room - int(out.max_value()))
    if p.turns is not None:
        return SessionWorkload(p.turns, inp, out, token_source, seed, think_time_mean_s=p.think_time_mean_s,
                               max_context_tokens=max_context_tokens, name=name, head=p.head)
    if p.shared_prefix_tokens:
        return SyntheticWorkload(inp, out, token_source, seed, name=name, head=p.head,
                                 shared_prefix_tokens=p.shared_prefix_tokens)
    return SyntheticWorkload(inp, out, token_source, seed, name=name, head=p.head)


def _sniff_file(path: Path) -> str:
    """``trace`` | ``dataset`` for a workload file."""
    if path.suffix.lower() == ".csv":
        return "trace"
    with open(path, encoding="utf-8", errors="replace") as f:
        head = f.read(65536)
    s = head.lstrip()
    if s.startswith("["):
        return "dataset"
    for raw in head.splitlines():
        raw = raw.strip()
        if not raw or raw.startswith("#"):
            continue
        try:
            import json

            obj = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: a line nested too deeply for the parser
            return "dataset"  # the dataset loader reports the bad line
        if isinstance(obj, dict):
            has_time = any(n in obj for n, _ in TIME_FIELDS)
            has_len = any(n in obj for n in INPUT_FIELDS)
            if has_time and has_len and "prompt" not in obj and "messages" not in obj:
                return "trace"
        return "dataset"
    return "dataset"


def load_workload(name_or_path: str | None, token_source: TokenSource, seed: int = 0, *,
                  input_tokens: str = "256", output_tokens: str = "128", max_context_tokens: int | None = None,
                  speedup: float = 1.0, time_unit: str | None = None, kind: str | None = None,
                  dataset_filters: DatasetFilters | None = None, limit: int | None = None,
                  prefix_blocks: int | None = None, tenant_field: str = "tenant") -> Workload:
    """Resolve ``--workload NAME|FILE`` into a workload.

    ``None`` or ``"synthetic"``: ``--input-tokens``/``--output-tokens``. A preset name: that preset.
    A file: a trace (CSV, or JSONL rows with a timestamp and an input length) or a dataset (JSONL
    prompts/messages, ShareGPT JSON); ``kind="trace"|"dataset"`` forces the choice. Traces:
    ``speedup``, ``time_unit``, ``prefix_blocks`` (Mooncake hash_ids as shared blocks of that size).
    ``describe()`` of the result always carries ``name`` and, for files, ``path`` and ``sha256``.
    """
    if name_or_path is None or name_or_path == "synthetic":
        inp = parse_distribution(input_tokens)
        out = parse_distribution(output_tokens)
        if max_context_tokens is not None:
            out = _cap(out, max_context_tokens - 1)
            inp = _cap(inp, max_context_tokens - int(min(out.max_value(), max_context_tokens - 1)))
        return SyntheticWorkload(inp, out, token_source, seed)
    if name_or_path in PRESETS:
        return preset_workload(name_or_path, token_source, seed, max_context_tokens=max_context_tokens)
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        raise UserError(f"unknown workload {name_or_path!r}: not a preset ({', '.join(['synthetic', *PRESETS])}) "
                        f"and {not_a_file_reason(path)}")
    if kind is None:
        kind = _sniff_file(path)
    if kind == "trace":
        return TraceWorkload(path, token_source, seed, speedup=speedup, time_unit=time_unit,
                             max_input_tokens=max_context_tokens, limit=limit, prefix_blocks=prefix_blocks,
                             tenant_field=tenant_field)
    if kind == "dataset":
        f = DatasetFilters(**(dataset_filters or {}))
        if max_context_tokens is not None and f.get("max_total_tokens") is None:
            f["max_total_tokens"] = max_context_tokens
        return DatasetWorkload(path, token_source, seed, output_tokens=output_tokens, limit=limit,
                               tenant_field=tenant_field, **f)
    raise UserError(f"unknown workload file kind {kind!r}; use trace or dataset")


__all__ = ["PRESETS", "Preset", "preset_workload", "load_workload", "file_sha256"]
