"""Prompts from files: JSONL rows and ShareGPT-format JSON, filtered by token length, sampled by seed.

JSONL, one object per line (blank lines and lines starting with ``#`` are skipped):

- ``{"prompt": "..."}`` (completions) or ``{"messages": [{"role": ..., "content": ...}, ...]}`` (chat);
- optional output length: ``"output_tokens"`` or ``"max_tokens"`` (int >= 1); else the token length
  of a reference answer in ``"completion"`` / ``"response"``; else the ``output_tokens`` distribution
  given to the loader (default 128).

ShareGPT (a JSON array, or JSONL, of ``{"conversations": [{"from": "human"|"gpt", "value": ...}]}``):
the first human turn is the prompt and the token length of the gpt reply that follows it is the
output length. Conversations without a human turn followed by a gpt reply are *skipped and counted*
(``describe()["skipped"]``); structurally broken entries are errors.

Every bad row raises ``UserError("FILE:LINE: reason")`` (for a JSON array the line is where the
entry starts) — a file is loaded whole or not at all. Input lengths are counted with the token
source (messages: the contents joined by newlines, chat template excluded). Filters
(``min_input_tokens`` …) drop rows outside the bounds; the counts are kept in ``describe()``.
Request ``i`` is row ``order[i % rows]`` of a seeded permutation; asking for more requests than
rows cycles (repeated prompts can then hit the server's prefix cache — ``describe()`` says so).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, TypedDict
import bisect

import numpy as np

from wattbench.core.errors import UserError
from wattbench.workload.base import RequestSpec, row_labels
from wattbench.workload.distributions import LengthDistribution, parse_distribution
from wattbench.workload.source import Workload, file_sha256
from wattbench.workload.tokenizer import TokenSource


class DatasetFilters(TypedDict, total=False):
    """The token-length bounds a dataset's rows are kept within (``DatasetWorkload``'s keywords)."""

    min_input_tokens: int | None
    max_input_tokens: int | None
    min_output_tokens: int | None
    max_output_tokens: int | None
    max_total_tokens: int | None


@dataclass
class DatasetRow:
    line: int
    prompt: str | None
    messages: list[dict[str, Any]] | None
    input_tokens: int
    output_tokens: int
    output_from: str  # field | reference | distribution
    tenant: str | None = None
    user_tags: list[str] = field(default_factory=list)


def _is_pos_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _check_messages(msgs: object, where: str) -> list[dict[str, Any]]:
    if not isinstance(msgs, list) or not msgs:
        raise UserError(f"{where}: 'messages' must be a non-empty list of {{role, content}} objects")
    for k, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise UserError(f"{where}: messages[{k}] needs a string 'role' and a string 'content'")
    return msgs


MAX_LINE_BYTES = 32 << 20  # a JSONL row: one request (8M tokens of English at ~4 bytes a token)


def _read_text(p: Path, path: str) -> str:
    """The file's text. A JSONL file is read line by line, and a line longer than
    ``MAX_LINE_BYTES`` is refused when it is met, before it is held (a 200 MB line cost 1.09 GB);
    a JSON array (ShareGPT) is one document, read whole."""
    with open(p, "rb") as f:
        head = f.read(4096).lstrip()
        f.seek(0)
        if head.startswith(b"\xef\xbb\xbf"):
            head = head[3:].lstrip()
        if head.startswith(b"["):
            return f.read().decode("utf-8")
        parts: list[bytes] = []
        ln = 0
        while True:
            line = f.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            ln += 1
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                raise UserError(f"{path}:{ln}: a line longer than {MAX_LINE_BYTES >> 20} MiB; a JSONL row holds "
                                "one request (is this a JSONL dataset?)")
            parts.append(line)
    return b"".join(parts).decode("utf-8")


def _line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def _array_entries(text: str, path: str) -> list[tuple[int, object]]:
    """Parse a JSON array, returning (line where each entry starts, entry)."""
    dec = json.JSONDecoder()
    starts = _line_starts(text)
    i = len(text) - len(text.lstrip())
    if i >= len(text) or text[i] != "[":
        raise UserError(f"{path}:1: expected a JSON array of ShareGPT entries (or use JSONL)")
    i += 1
    out: list[tuple[int, object]] = []
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text):
            raise UserError(f"{path}:{len(starts)}: the JSON array is not closed (truncated file?)")
        if text[i] == "]":
            return out
        line = bisect.bisect_right(starts, i)
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        except RecursionError:
            raise UserError(f"{path}:{line}: JSON nested too deeply to be a dataset entry") from None
        out.append((line, obj))
        i = end


def _jsonl_entries(text: str, path: str) -> list[tuple[int, object]]:
    out = []
    for ln, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        try:
            out.append((ln, json.loads(s)))
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{ln}: invalid JSON: {e.msg} (column {e.colno})") from None
        except RecursionError:
            raise UserError(f"{path}:{ln}: JSON nested too deeply to be a dataset row") from None
    return out


def read_entries(path: str | Path) -> tuple[str, list[tuple[int, object]]]:
    """Read a dataset file: ``("sharegpt" | "jsonl", [(line, object), ...])``."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"dataset not found: {path}")
    try:
        text = _read_text(p, str(path))
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if text.lstrip().startswith("["):
        entries = _array_entries(text, str(path))
        return "sharegpt", entries
    entries = _jsonl_entries(text, str(path))
    if not entries:
        raise UserError(f"{path}: no rows (expected JSONL objects or a ShareGPT JSON array)")
    first = entries[0][1]
    kind = "sharegpt" if isinstance(first, dict) and "conversations" in first else "jsonl"
    return kind, entries


class DatasetWorkload(Workload):
    """Requests from a JSONL or ShareGPT file (see the module docstring)."""

    builds_prompt_lengths = False  # its prompts are the file's text: counted, never asked for

    def __init__(self, path: str | Path, token_source: TokenSource, seed: int = 0, *,
                 output_tokens: str | LengthDistribution = "128", min_input_tokens: int | None = None,
                 max_input_tokens: int | None = None, min_output_tokens: int | None = None,
                 max_output_tokens: int | None = None, max_total_tokens: int | None = None,
                 limit: int | None = None, name: str | None = None, tenant_field: str = "tenant"):
        self.tenant_field = tenant_field
        self.path = str(path)
        self.name = name or Path(path).name
        self.seed = int(seed)
        self.ts = token_source
        self.token_source = token_source.source
        self.output_dist = (output_tokens if isinstance(output_tokens, LengthDistribution)
                            else parse_distribution(output_tokens))
        self.filters = {"min_input_tokens": min_input_tokens, "max_input_tokens": max_input_tokens,
                        "min_output_tokens": min_output_tokens, "max_output_tokens": max_output_tokens,
                        "max_total_tokens": max_total_tokens}
        self.format, entries = read_entries(path)
        self.skipped: dict[str, int] = {}
        rows = self._parse(entries)
        self.rows_read = len(rows)
        kept = [r for r in rows if self._keep(r)]
        self.filtered_out = len(rows) - len(kept)
        if not kept:
            raise UserError(f"{self.path}: no rows left after filtering ({len(rows)} read, "
                            f"filters {self._filters_text()}); loosen the token-length bounds")
        rng = np.random.default_rng([self.seed, 0x64617461])
        order = rng.permutation(len(kept))
        if limit is not None:
            if limit < 1:
                raise UserError(f"dataset sample size must be >= 1, got {limit}")
            order = order[:limit]
        self.rows = [kept[i] for i in order]

    def _filters_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.filters.items() if v is not None) or "none"

    def _keep(self, r: DatasetRow) -> bool:
        f = self.filters
        if f["min_input_tokens"] is not None and r.input_tokens < f["min_input_tokens"]:
            return False
        if f["max_input_tokens"] is not None and r.input_tokens > f["max_input_tokens"]:
            return False
        if f["min_output_tokens"] is not None and r.output_tokens < f["min_output_tokens"]:
            return False
        if f["max_output_tokens"] is not None and r.output_tokens > f["max_output_tokens"]:
            return False
        if f["max_total_tokens"] is not None and r.input_tokens + r.output_tokens > f["max_total_tokens"]:
            return False
        return True

    def _skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def _parse(self, entries: list[tuple[int, object]]) -> list[DatasetRow]:
        rows = []
        for line, obj in entries:
            where = f"{self.path}:{line}"
            if not isinstance(obj, dict):
                raise UserError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            if self.format == "sharegpt":
                row = self._sharegpt_row(obj, line, where)
            else:
                row = self._jsonl_row(obj, line, where)
            if row is not None:
                row.tenant, row.user_tags = row_labels(obj, where, self.tenant_field)
                rows.append(row)
        return rows

    def _count(self, text: str, where: str) -> int:
        n = self.ts.count(text)
        if n < 1:
            raise UserError(f"{where}: the prompt is empty (0 tokens)")
        return n

    def _jsonl_row(self, obj: Mapping[str, Any], line: int, where: str) -> DatasetRow:
        prompt, messages = obj.get("prompt"), obj.get("messages")
        if prompt is None and messages is None:
            raise UserError(f"{where}: a row needs 'prompt' (string) or 'messages' (list); "
                            f"found keys {sorted(obj)[:8]}")
        if prompt is not None and messages is not None:
            raise UserError(f"{where}: give 'prompt' or 'messages', not both")
        if prompt is not None:
            if not isinstance(prompt, str):
                raise UserError(f"{where}: 'prompt' must be a string, got {type(prompt).__name__}")
            n_in = self._count(prompt, where)
        else:
            messages = _check_messages(messages, where)
            n_in = self._count("\n".join(m["content"] for m in messages), where)
        out, src = None, "field"
        for key in ("output_tokens", "max_tokens"):
            if key in obj:
                if not _is_pos_int(obj[key]):
                    raise UserError(f"{where}: '{key}' must be an integer >= 1, got {obj[key]!r}")
                out = obj[key]
                break
        if out is None:
            for key in ("completion", "response"):
                if isinstance(obj.get(key), str) and obj[key]:
                    out, src = self.ts.count(obj[key]), "reference"
                    break
                if key in obj and not isinstance(obj[key], str):
                    raise UserError(f"{where}: '{key}' must be a string, got {type(obj[key]).__name__}")
        if out is None or out < 1:
            out = int(self.output_dist.sample(np.random.default_rng([self.seed, line, 0x6F7574])))
            src = "distribution"
        return DatasetRow(line, prompt, messages, n_in, int(out), src)

    def _sharegpt_row(self, obj: Mapping[str, Any], line: int, where: str) -> DatasetRow | None:
        conv = obj.get("conversations")
        if conv is None:
            raise UserError(f"{where}: a ShareGPT entry needs 'conversations' (a list of {{from, value}})")
        if not isinstance(conv, list):
            raise UserError(f"{where}: 'conversations' must be a list, got {type(conv).__name__}")
        for k, turn in enumerate(conv):
            if not isinstance(turn, dict) or not isinstance(turn.get("from"), str) \
                    or not isinstance(turn.get("value"), str):
                raise UserError(f"{where}: conversations[{k}] needs string 'from' and 'value'")
        for k in range(len(conv) - 1):
            if conv[k]["from"] in ("human", "user") and conv[k + 1]["from"] in ("gpt", "assistant", "chatgpt"):
                prompt, reply = conv[k]["value"], conv[k + 1]["value"]
                if not prompt.strip():
                    self._skip("empty_prompt")
                    return None
                n_in = self.ts.count(prompt)
                n_out = self.ts.count(reply)
                if n_out < 1:
                    self._skip("empty_reply")
                    return None
                return DatasetRow(line, prompt, None, n_in, n_out, "reference")
        self._skip("no_human_gpt_pair")
        return None

    def size(self) -> int:
        return len(self.rows)

    def specs(self, n: int | None = None, start: int = 0) -> Iterator[RequestSpec]:
        """Requests ``start .. start+n-1`` (``n=None``: one pass from ``start`` to the last row)."""
        stop = len(self.rows) if n is None else start + n
        for i in range(start, stop):
            r = self.rows[i % len(self.rows)]
            yield RequestSpec(prompt=r.prompt, messages=r.messages, max_tokens=r.output_tokens,
                              input_tokens=r.input_tokens, token_source=self.token_source,
                              min_tokens=r.output_tokens, tenant=r.tenant, user_tags=list(r.user_tags or []),
                              tags={"workload": self.name, "line": r.line, "output_from": r.output_from,
                                    "cycle": i // len(self.rows)})

    def describe(self) -> dict[str, Any]:
        ins = np.array([r.input_tokens for r in self.rows])
        outs = np.array([r.output_tokens for r in self.rows])
        return {"name": self.name, "kind": "dataset", "format": self.format, "path": self.path,
                "sha256": file_sha256(self.path), "seed": self.seed, "token_source": self.token_source,
                "tokenizer": self.ts.describe(), "rows_read": self.rows_read, "rows_used": len(self.rows),
                "filtered_out": self.filtered_out, "skipped": dict(self.skipped), "filters": self.filters,
                "default_output_tokens": self.output_dist.describe(),
                "input_tokens": {"mean": float(ins.mean()), "min": int(ins.min()), "max": int(ins.max())},
                "output_tokens": {"mean": float(outs.mean()), "min": int(outs.min()), "max": int(outs.max())},
                "cycles_repeat_prompts": True}
