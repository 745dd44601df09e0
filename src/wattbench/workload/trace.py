"""Trace replay: rows of (timestamp, input tokens, output tokens[, session]) sent at their recorded gaps.

Files: JSONL (one object per line) or CSV with a header row. Field names, first match wins:

| meaning | accepted names |
| --- | --- |
| time | ``arrival_s``, ``timestamp_s``, ``time_s`` (seconds); ``timestamp_ms`` (ms); ``timestamp`` (Mooncake: **ms**, or ``time_unit``); ``TIMESTAMP`` (Azure: a datetime string such as ``2023-11-16 18:15:46.6805900``) |
| input tokens | ``input_tokens``, ``input_length`` (Mooncake), ``ContextTokens`` (Azure), ``prompt_tokens`` |
| output tokens | ``output_tokens``, ``output_length`` (Mooncake), ``GeneratedTokens`` (Azure), ``completion_tokens`` |
| session | ``session_id``, ``conversation_id``, ``chat_id`` (optional) |
| prefix blocks | ``hash_ids`` (Mooncake; recorded in the spec's tags) |

A timestamp that is a number is read in the field's unit; a string that is not a number is read as
an ISO-8601 date-time (any number of fractional digits; no zone = UTC). Rows are replayed in time
order (a file out of order is sorted; ``describe()`` counts the rows that were). Row ``i`` is sent
at ``arrival_s = (t_i - t_first) / speedup`` seconds after the level starts, with a synthetic
token-exact prompt of its input length and ``max_tokens`` = its output length.

With ``prefix_blocks=B`` (Mooncake uses B = 512) and rows carrying ``hash_ids``, prompts are built
from blocks instead: each hash id stands for the same B-token text wherever it appears, the full
blocks are concatenated and the last (partial) block is filled to the exact input length from a
generator seeded by its hash id. Requests that share hash ids then share prompt prefixes, so the
server's prefix cache sees the reuse the trace recorded.

A trace's input length already includes any conversation context, so every row is an independent
request sent at its own time: a session id is kept in ``tags["trace_session_id"]``, not in
``RequestSpec.session_id`` (which would make the client prepend earlier turns a second time).

A row with a missing or unreadable field, or a negative length, is an error naming ``FILE:LINE``.
Rows with 0 input or 0 output tokens (a request that cannot be replayed as a generation) are
skipped and counted in ``describe()["skipped"]``.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Iterable, Mapping
from typing import Any, Iterator
import zlib

from wattbench.core.secret_scope import clip
from wattbench.core.errors import UserError
from wattbench.workload.base import RequestSpec, row_labels
from wattbench.workload.source import Workload, file_sha256
from wattbench.workload.synthetic import PromptBuilder, request_rng
from wattbench.workload.tokenizer import TokenSource

# (field, units per second: a number in the field is divided by this)
TIME_FIELDS = (("arrival_s", 1.0), ("timestamp_s", 1.0), ("time_s", 1.0), ("timestamp_ms", 1000.0),
               ("timestamp", None), ("TIMESTAMP", 1.0))
INPUT_FIELDS = ("input_tokens", "input_length", "ContextTokens", "prompt_tokens")
OUTPUT_FIELDS = ("output_tokens", "output_length", "GeneratedTokens", "completion_tokens")
SESSION_FIELDS = ("session_id", "conversation_id", "chat_id")
UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}  # units per second

_DT = re.compile(r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2})(?:\.(\d+))?\s*(Z|[+-]\d{2}:?\d{2})?$")


@dataclass
class TraceRow:
    line: int
    t_s: float  # on the trace's own time axis
    input_tokens: int
    output_tokens: int
    session_id: str | None = None
    hash_ids: list[object] | None = None
    tenant: str | None = None
    user_tags: list[str] | None = None


def parse_datetime_s(text: str) -> float:
    """Seconds since the epoch of an ISO-8601 date-time string, keeping every fractional digit."""
    m = _DT.match(text.strip())
    if not m:
        raise ValueError(f"not a date-time: {text!r}")
    base, frac, zone = m.groups()
    dt = datetime.fromisoformat(base.replace(" ", "T"))
    if zone and zone != "Z":
        z = zone.replace(":", "")
        sign = 1 if z[0] == "+" else -1
        offset_s = sign * (int(z[1:3]) * 3600 + int(z[3:5]) * 60)
    else:
        offset_s = 0
    whole = dt.replace(tzinfo=timezone.utc).timestamp() - offset_s
    return whole + (int(frac) / 10 ** len(frac) if frac else 0.0)


def _pick(obj: Mapping[str, object], names: Iterable[str]) -> tuple[str | None, object]:
    for name in names:
        if name in obj and obj[name] not in (None, ""):
            return name, obj[name]
    return None, None


def _tokens(v: object, where: str, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):  # float() of anything else: TypeError
        raise UserError(f"{where}: '{field}' must be a token count, got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise UserError(f"{where}: '{field}' must be a token count, got {v!r}") from None
    if not math.isfinite(f) or f != int(f):
        raise UserError(f"{where}: '{field}' must be a whole token count, got {v!r}")
    if f < 0:
        raise UserError(f"{where}: '{field}' is negative ({v!r})")
    return int(f)


def parse_row(obj: Mapping[str, object], line: int, path: str, time_unit: str | None = None, tenant_field: str = "tenant") -> TraceRow:
    where = f"{path}:{line}"
    name, tv = _pick(obj, [n for n, _ in TIME_FIELDS])
    if name is None:
        raise UserError(f"{where}: no timestamp field (one of {', '.join(n for n, _ in TIME_FIELDS)})")
    per_s = dict(TIME_FIELDS)[name]
    if per_s is None:  # "timestamp": in --time-unit, else milliseconds (Mooncake)
        per_s = UNITS[time_unit] if time_unit else 1e3
    if isinstance(tv, bool) or not isinstance(tv, (int, float, str)):  # float() of anything else: TypeError
        raise UserError(f"{where}: '{name}' is not a time: {tv!r}")
    try:
        t_s = float(tv) / per_s
    except (TypeError, ValueError):
        if not isinstance(tv, str):
            raise UserError(f"{where}: '{name}' is not a time: {tv!r}") from None
        try:
            t_s = parse_datetime_s(tv)
        except ValueError:
            raise UserError(f"{where}: '{name}' is neither a number nor a date-time: {tv!r}") from None
    if not math.isfinite(t_s):
        raise UserError(f"{where}: '{name}' is not finite: {tv!r}")
    iname, iv = _pick(obj, INPUT_FIELDS)
    if iname is None:
        raise UserError(f"{where}: no input-length field (one of {', '.join(INPUT_FIELDS)})")
    oname, ov = _pick(obj, OUTPUT_FIELDS)
    if oname is None:
        raise UserError(f"{where}: no output-length field (one of {', '.join(OUTPUT_FIELDS)})")
    _, sid = _pick(obj, SESSION_FIELDS)
    hash_ids: object = obj.get("hash_ids")
    if isinstance(hash_ids, str):
        try:
            hash_ids = json.loads(hash_ids)
        except json.JSONDecodeError:
            raise UserError(f"{where}: 'hash_ids' is not a JSON list: {clip(hash_ids, 60)!r}") from None
    if hash_ids is not None and not isinstance(hash_ids, list):
        raise UserError(f"{where}: 'hash_ids' must be a list, got {type(hash_ids).__name__}")
    tenant, tags = row_labels(obj, where, tenant_field)
    return TraceRow(line, t_s, _tokens(iv, where, iname), _tokens(ov, where, oname),
                    None if sid is None else str(sid), hash_ids, tenant, tags)


def read_trace(path: str | Path, time_unit: str | None = None) -> list[tuple[int, dict[str, object]]]:
    """The raw rows of a JSONL or CSV trace as (line, dict)."""
    try:
        return _read_trace_rows(path, time_unit)
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


MAX_LINE_CHARS = 32 << 20  # a JSONL trace row (the dataset's cap, workload/dataset.py)


def _read_trace_rows(path: str | Path, time_unit: str | None) -> list[tuple[int, dict[str, object]]]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"trace not found: {path}")
    if time_unit is not None and time_unit not in UNITS:
        raise UserError(f"unknown trace time unit {time_unit!r}; use one of {', '.join(UNITS)}")
    out: list[tuple[int, dict[str, object]]] = []
    with open(p, encoding="utf-8", newline="") as f:
        first = f.read(4096)
        f.seek(0)
        if first.lstrip().startswith("{"):
            for ln, raw in enumerate(iter(lambda: f.readline(MAX_LINE_CHARS + 1), ""), start=1):
                if len(raw) > MAX_LINE_CHARS and not raw.endswith("\n"):
                    raise UserError(f"{path}:{ln}: a line longer than {MAX_LINE_CHARS >> 20} Mi characters; "
                                    "a trace row holds one request (is this a JSONL trace?)")
                s = raw.strip()
                if not s or s.startswith("#"):
                    continue
                try:
                    obj = json.loads(s)
                except json.JSONDecodeError as e:
                    raise UserError(f"{path}:{ln}: invalid JSON: {e.msg} (column {e.colno})") from None
                except RecursionError:
                    raise UserError(f"{path}:{ln}: JSON nested too deeply to be a trace row") from None
                if not isinstance(obj, dict):
                    raise UserError(f"{path}:{ln}: expected a JSON object, got {type(obj).__name__}")
                out.append((ln, obj))
        else:
            reader = csv.DictReader(f)
            if not reader.fieldnames:
                raise UserError(f"{path}:1: empty trace (expected a CSV header or JSONL rows)")
            prev = reader.line_num
            for row in reader:
                ln = prev + 1
                prev = reader.line_num
                if None in row:
                    raise UserError(f"{path}:{ln}: more fields than the header has")
                if any(v is None for v in row.values()):
                    raise UserError(f"{path}:{ln}: fewer fields than the header has")
                out.append((ln, {k.strip(): (v.strip() if isinstance(v, str) else v) for k, v in row.items()}))
    if not out:
        raise UserError(f"{path}: the trace has no rows")
    return out


class TraceWorkload(Workload):
    """Replays a trace (see the module docstring). ``speedup`` > 1 compresses time."""

    def __init__(self, path: str | Path, token_source: TokenSource, seed: int = 0, *, speedup: float = 1.0,
                 time_unit: str | None = None, max_input_tokens: int | None = None,
                 max_output_tokens: int | None = None, limit: int | None = None, name: str | None = None,
                 builder: PromptBuilder | None = None, prefix_blocks: int | None = None,
                 tenant_field: str = "tenant"):
        if prefix_blocks is not None and prefix_blocks < 1:
            raise UserError(f"prefix block size must be >= 1 token, got {prefix_blocks}")
        self.prefix_blocks = prefix_blocks
        self._blocks: dict[str, str] = {}
        if not (isinstance(speedup, (int, float)) and math.isfinite(speedup) and speedup > 0):
            raise UserError(f"--speedup must be > 0, got {speedup!r}")
        self.path = str(path)
        self.name = name or Path(path).name
        self.seed = int(seed)
        self.speedup = float(speedup)
        self.time_unit = time_unit
        self.ts = token_source
        self.token_source = token_source.source
        self.builder = builder or PromptBuilder(token_source, seed)
        self.skipped: dict[str, int] = {}
        rows = []
        for line, obj in read_trace(path, time_unit):
            r = parse_row(obj, line, self.path, time_unit, tenant_field)
            if r.input_tokens < 1:
                self.skipped["zero_input_tokens"] = self.skipped.get("zero_input_tokens", 0) + 1
                continue
            if r.output_tokens < 1:
                self.skipped["zero_output_tokens"] = self.skipped.get("zero_output_tokens", 0) + 1
                continue
            if max_input_tokens is not None and r.input_tokens > max_input_tokens:
                raise UserError(f"{self.path}:{r.line}: {r.input_tokens} input tokens exceed the limit "
                                f"{max_input_tokens} (the model's context); filter the trace or raise the limit")
            if max_output_tokens is not None and r.output_tokens > max_output_tokens:
                r.output_tokens = max_output_tokens
                self.skipped["output_clipped"] = self.skipped.get("output_clipped", 0) + 1
            rows.append(r)
        if not rows:
            raise UserError(f"{self.path}: no replayable rows ({sum(self.skipped.values())} skipped: {self.skipped})")
        self.out_of_order = sum(1 for a, b in zip(rows, rows[1:]) if b.t_s < a.t_s)
        rows.sort(key=lambda r: r.t_s)  # stable: equal times keep file order
        if limit is not None:
            if limit < 1:
                raise UserError(f"trace row limit must be >= 1, got {limit}")
            rows = rows[:limit]
        self.rows = rows
        self.t0_s = rows[0].t_s

    def arrival_s(self, i: int) -> float:
        return (self.rows[i].t_s - self.t0_s) / self.speedup

    def size(self) -> int:
        return len(self.rows)

    def duration_s(self) -> float:
        return self.arrival_s(len(self.rows) - 1)

    def specs(self, n: int | None = None, start: int = 0) -> Iterator[RequestSpec]:
        """Rows ``start .. start+n-1`` (never past the last row); arrival offsets from the trace's first row."""
        stop = len(self.rows) if n is None else min(len(self.rows), start + n)
        batch = 64
        for b in range(start, stop, batch):
            idx = list(range(b, min(stop, b + batch)))
            jobs = [(self.rows[i].input_tokens, i, request_rng(self.seed, i, stream=3)) for i in idx]
            plain = [j for j, i in zip(jobs, idx) if not self._uses_blocks(self.rows[i])]
            built = iter(self.builder.unique_prompts(plain)) if plain else iter(())
            prompts = [self._block_prompt(self.rows[i]) if self._uses_blocks(self.rows[i]) else next(built)
                       for i in idx]
            for i, prompt in zip(idx, prompts):
                r = self.rows[i]
                tags = {"workload": self.name, "line": r.line}
                if r.session_id is not None:
                    tags["trace_session_id"] = r.session_id
                if r.hash_ids is not None:
                    tags["hash_ids"] = r.hash_ids
                yield RequestSpec(prompt=prompt, max_tokens=r.output_tokens, input_tokens=r.input_tokens,
                                  token_source=self.token_source,
                                  arrival_s=self.arrival_s(i), min_tokens=r.output_tokens, tags=tags,
                                  tenant=r.tenant, user_tags=list(r.user_tags or []))

    def _uses_blocks(self, r: TraceRow) -> bool:
        return bool(self.prefix_blocks and r.hash_ids)

    def _block_text(self, h: object, size: int) -> str:
        key = str(h)
        t = self._blocks.get(key)
        if t is None:
            rng = request_rng(self.seed, zlib.crc32(key.encode()), stream=11)
            t = self.builder.text(size, rng, "")
            if len(self._blocks) < 100_000:
                self._blocks[key] = t
        return t

    def _block_prompt(self, r: TraceRow) -> str:
        """Full blocks of the row's hash ids, then the last block filled to the exact input length."""
        b, ids = self.prefix_blocks, r.hash_ids
        if not b or not ids:  # every caller asks _uses_blocks first
            raise ValueError(f"row {r.line} has no prefix blocks to build")
        full = min(len(ids) - 1, (r.input_tokens - 1) // b)
        prefix = "".join(self._block_text(h, b) for h in ids[:full])
        last = str(ids[full]) if full < len(ids) else "end"
        rng = request_rng(self.seed, zlib.crc32(f"{last}/{r.input_tokens}".encode()), stream=12)
        while prefix and self.builder.count(prefix) >= r.input_tokens:  # joins merged: drop a block
            full -= 1
            prefix = "".join(self._block_text(h, b) for h in ids[:full])
        return self.builder.text(r.input_tokens, rng, prefix)

    def describe(self) -> dict[str, Any]:
        n = len(self.rows)
        return {"name": self.name, "kind": "trace", "path": self.path, "sha256": file_sha256(self.path),
                "seed": self.seed, "token_source": self.token_source, "tokenizer": self.ts.describe(),
                "rows": n, "skipped": dict(self.skipped), "rows_out_of_order": self.out_of_order,
                "speedup": self.speedup, "time_unit": self.time_unit, "prefix_blocks": self.prefix_blocks,
                "replay_duration_s": self.duration_s(),
                "trace_rate_rps": (n - 1) / (self.duration_s() * self.speedup) if n > 1 and self.duration_s() > 0
                else None,
                "input_tokens_mean": sum(r.input_tokens for r in self.rows) / n,
                "output_tokens_mean": sum(r.output_tokens for r in self.rows) / n}
