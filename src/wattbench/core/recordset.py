"""The request records of one level, held in constant memory: a spool, not a list.

``RecordSet`` is what a load level hands to the accounting (``LevelOutcome.records``). A level
can run for an hour at hundreds of requests per second (millions of records); holding each as a
``RequestRecord`` with its chunk stamps cost ~2.6 KB a request (``benches/level_memory.py``). So a
record is written out the moment it is appended, in three streams:

- **rows**: one fixed-width binary row per record (``ROW``: ids, flags, the five client stamps,
  the four token counts, the number of chunk stamps, and small integer codes for ``target``,
  ``error`` and ``token_source``). ``NONE`` (-1) stands for a missing stamp or count; client
  stamps are ``perf_counter_ns`` values, never negative, and counts are never negative;
- **chunks**: every content chunk's arrival stamp (int64 ns), record after record (the row's
  ``n_chunks`` says how many are its own, so the offsets are the running sum);
- **lines**: the record's JSON object without ``chunk_ns`` (the strings, tags, tenant, …), one
  line each, for the full record and for ``requests.jsonl``.

The three streams stay in memory until they pass ``spill_bytes`` together, then move to files in
``spool_dir`` (a private temporary directory by default) and every later record goes straight to
disk: what stays in memory is the write buffers and the code tables, whatever the number of
records.

**Durable spooling.** While a run measures a level, the sets created in its thread spool into the
run directory (``spooling_into(dir)``, set by ``run/level.py``; the load layer that creates the
sets knows nothing of run directories): on disk from the first record, and each record's line is
written through to the file (one ``write`` per record, no buffer in the process) the moment it is
appended, so a run killed outright (SIGKILL, the OOM killer) leaves every finished record of the
level in progress in ``<dir>/records-*/lines``, one JSON object per line (``read_spooled_lines``
reads them back). A durable set's files are removed by ``close()`` only (the run calls it once the
records are in ``requests.jsonl``), never when the object is dropped: a run stopped by a failed
write (disk full) keeps the level's finished records in its spool. Readers take what they need, in blocks:

- ``columns(*names)``: whole columns as numpy arrays (8 bytes a request each, transient);
- ``blocks(size)``: ``(first_row, rows)`` structured-array blocks, in append order;
- ``chunks(start, stop)``: the chunk stamps of rows ``[start, stop)`` as ``(offsets, stamps)``
  (CSR: row ``i``'s stamps are ``stamps[offsets[i - start]:offsets[i - start + 1]]``);
- ``stamp_blocks(rs, need)``: the chunk stamps of all rows in blocks of at most
  ``STAMPS_PER_BLOCK`` stamps (the statistics' reader: ITL, the tokens in a window, goodput);
- ``iter(records)``: full ``RequestRecord`` objects, one at a time (chunk stamps included), in
  append order; ``by_sent()`` in the order they were sent.

Rows are in append order: the order records finished (a load worker appends a record when its
request ends), not the order they were sent. Per-request figures computed after the level (energy,
carbon, trial) are ``annotate``-d as arrays aligned with the rows and merged into the records
when they are iterated or written.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import json
import os
import shutil
import tempfile
import weakref
from array import array
from typing import Any, BinaryIO, Iterable, Iterator, Mapping, Protocol

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from wattbench.core.errors import StorageError
from wattbench.core.schema import RequestRecord, build_record

__all__ = ["NONE", "ROW", "RecordSet", "as_record_set", "stamp_blocks", "row_ids", "STAMPS_PER_BLOCK",
           "spooling_into", "read_spooled_lines"]

# Where the sets created in this context spool durably (``spooling_into``); None: TMPDIR, lazily.
_DURABLE_DIR: contextvars.ContextVar[str | None] = contextvars.ContextVar("wattbench_record_spool", default=None)
LINES_FILE = "lines"  # a durable set's records, one JSON object per line (without chunk stamps)
SPOOL_PREFIX = "records-"


@contextlib.contextmanager
def spooling_into(path: str | os.PathLike[str]) -> Iterator[None]:
    """Every ``RecordSet`` created (without its own ``spool_dir``) in this thread while the block
    runs spools durably into a fresh ``records-*`` directory under ``path`` (module doc)."""
    os.makedirs(path, exist_ok=True)
    token = _DURABLE_DIR.set(os.fspath(path))
    try:
        yield
    finally:
        _DURABLE_DIR.reset(token)


def read_spooled_lines(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The records a durable set wrote to ``path`` (its ``lines`` file), one dict at a time; a torn
    last line (the process was killed while writing it) is left out, and so is a line that does
    not parse as an object (a write the disk took only in part, the record after it appended to it)."""
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                return  # killed mid-write: the one record in flight to the file
            line = raw.strip()
            if not line:
                continue
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict):
                yield d

NONE = -1  # a missing stamp or count in a row
BLOCK_ROWS = 8_192  # rows per block for readers that stream (~1 MB of rows)
SPILL_BYTES = 1 << 20  # in memory below this, files above
STAMPS_PER_BLOCK = 1 << 17  # chunk stamps read at once by stamp_blocks (1 MiB)

ROW = np.dtype([
    ("id", "<i8"), ("level", "<i4"), ("worker", "<i4"), ("warmup", "?"), ("ok", "?"),
    ("sent_ns", "<i8"), ("scheduled_ns", "<i8"), ("first_token_ns", "<i8"), ("last_token_ns", "<i8"),
    ("end_ns", "<i8"),
    ("input_tokens", "<i8"), ("output_tokens", "<i8"),
    ("requested_input_tokens", "<i8"), ("requested_output_tokens", "<i8"),
    ("n_chunks", "<i8"), ("target", "<i4"), ("error", "<i4"), ("token_source", "<i4"),
    ("line_offset", "<i8"), ("line_bytes", "<i4"),
])
_INT_FIELDS = ("sent_ns", "scheduled_ns", "first_token_ns", "last_token_ns", "end_ns", "input_tokens",
               "output_tokens", "requested_input_tokens", "requested_output_tokens")
_CODED = ("target", "error", "token_source")  # strings held as codes into a per-set table
_STREAMS = ("rows", "chunks", "lines")
_ROW_NAMES: tuple[str, ...] = ROW.names or ()  # a structured dtype always has names


class Column(Protocol):
    """A per-row value of ``RecordSet.annotate``: a sequence aligned with the rows (a list, a numpy
    array, the entries of ``annotate_entry``); entry ``i`` is row ``i``'s value, None for none."""

    def __len__(self) -> int: ...

    def __getitem__(self, i: int, /) -> Any: ...


# an ``annotate_entry``-d entry's values: a float per row, or one value for all rows
EntryValues = NDArray[np.float64] | str


def _values(rec: RequestRecord | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(rec, BaseModel):
        d = dict(rec.__dict__)
        if rec.__pydantic_extra__:
            d.update(rec.__pydantic_extra__)
        return d
    return dict(rec)


class RecordSet:
    """The records of one level (see the module docstring). Append, then read; not thread-safe."""

    def __init__(self, spool_dir: str | os.PathLike[str] | None = None, *, spill_bytes: int = SPILL_BYTES,
                 durable: bool | None = None, stamps_per_block: int = STAMPS_PER_BLOCK):
        self.stamps_per_block = stamps_per_block  # stamp_blocks' block size (tests make it small)
        durable_dir = _DURABLE_DIR.get() if spool_dir is None and durable is not False else None
        self._durable = bool(durable) or durable_dir is not None
        self._spool_parent = spool_dir if spool_dir is not None else durable_dir
        self._spill_bytes = spill_bytes
        self._dir: str | None = None
        self._io: dict[str, BinaryIO] = {k: io.BytesIO() for k in _STREAMS}  # files once spilled
        self._row_buf = np.zeros(256, dtype=ROW)
        self._row_fill = 0
        self._chunk_buf = array("q")
        self._n = 0
        self._n_chunks = 0
        self._line_bytes = 0
        self._codes: dict[str, dict[str | None, int]] = {k: {} for k in _CODED}
        self._labels: dict[str, list[str | None]] = {k: [] for k in _CODED}
        self._annotations: dict[str, Column] = {}
        self._finalizer: weakref.finalize[[str | None, list[BinaryIO], bool], RecordSet] | None = None
        self._broken: StorageError | None = None
        if self._durable:  # on disk from the first record, each line written through
            try:
                self._spill()
            except OSError as e:  # the run directory went read-only or full since it was checked
                raise StorageError(self._spool_parent or tempfile.gettempdir(), e) from None

    @classmethod
    def from_records(cls, records: Iterable[RequestRecord | Mapping[str, Any]], **kw: Any) -> "RecordSet":
        rs = cls(**kw)
        rs.extend(records)
        return rs

    # ------------------------------------------------------------------ writing

    def _code(self, name: str, value: str | None) -> int:
        if value is None:
            return NONE
        table = self._codes[name]
        c = table.get(value)
        if c is None:
            c = table[value] = len(self._labels[name])
            self._labels[name].append(value)
        return c

    def append(self, rec: RequestRecord | Mapping[str, Any]) -> None:
        """Add a record. A durable set whose file cannot take its line (disk full, a directory made
        read-only) raises ``StorageError`` naming the file, and every later append does too: the
        records before stay in the file, the set is left as it was before the failed one."""
        if self._broken is not None:
            raise self._broken
        d = _values(rec)
        chunks = d.pop("chunk_ns", None) or ()
        line = json.dumps(d, separators=(",", ":"), default=_json_default).encode() + b"\n"
        if self._durable:  # first, so a line the file refuses leaves no row behind
            try:
                _write_through(self._io["lines"], line)
            except OSError as e:
                self._broken = StorageError(os.path.join(self._dir or "", LINES_FILE), e)
                raise self._broken from None
        else:
            self._io["lines"].write(line)
        get = d.get
        self._row_buf[self._row_fill] = (
            get("id", self._n), get("level", 0), get("worker", 0) or 0, bool(get("warmup", False)),
            get("ok", True) is not False,
            *(NONE if (v := get(f)) is None else v for f in _INT_FIELDS),
            len(chunks), self._code("target", get("target")), self._code("error", get("error")),
            self._code("token_source", get("token_source", "usage")), self._line_bytes, len(line))
        self._row_fill += 1
        if chunks:
            self._chunk_buf.extend(chunks)
        self._line_bytes += len(line)
        self._n += 1
        self._n_chunks += len(chunks)
        if (self._row_fill == len(self._row_buf) or len(self._chunk_buf) >= 8192
                or (self._dir is None and self._line_bytes + self._n * ROW.itemsize + self._n_chunks * 8
                    > self._spill_bytes)):
            try:
                self._flush_buffers()
            except OSError as e:
                self._broken = StorageError(self._dir or self._spool_parent or tempfile.gettempdir(), e)
                raise self._broken from None

    def extend(self, records: Iterable[RequestRecord | Mapping[str, Any]]) -> None:
        for r in records:
            self.append(r)

    def _flush_buffers(self) -> None:
        if self._row_fill:
            self._io["rows"].write(self._row_buf[: self._row_fill].tobytes())
            self._row_fill = 0
        if self._chunk_buf:
            self._io["chunks"].write(self._chunk_buf.tobytes())
            self._chunk_buf = array("q")
        if self._dir is None and sum(self._io[k].tell() for k in _STREAMS) > self._spill_bytes:
            self._spill()

    def _spill(self) -> None:
        prefix = SPOOL_PREFIX if self._durable else "wattbench-records-"
        self._dir = tempfile.mkdtemp(prefix=prefix, dir=self._spool_parent)
        self._finalizer = weakref.finalize(self, _cleanup, self._dir, list(self._io.values()), not self._durable)
        for k in _STREAMS:
            mem = self._io[k]
            assert isinstance(mem, io.BytesIO)  # in memory until this spill
            # a durable set's lines go through to the file at each append (no buffer to lose)
            f = open(os.path.join(self._dir, k), "w+b", buffering=0 if (self._durable and k == LINES_FILE) else -1)
            _write_through(f, mem.getbuffer())
            self._io[k] = f
        self._finalizer.detach()
        # a durable set's files outlive the object: they are the only copy of its records until the
        # run writes them to requests.jsonl and removes the level's spool (``rundir.end_level_spool``);
        # a set dropped on the way out of a failed write (disk full) must not take them with it
        self._finalizer = weakref.finalize(self, _cleanup, self._dir, list(self._io.values()),
                                           not self._durable)

    def close(self) -> None:
        """Remove the spool files (the set is empty afterwards, and no longer spools anywhere). The
        caller's word that the records are kept elsewhere (or not wanted): a durable set's files are
        removed only here, never when the object is merely dropped."""
        if self._finalizer is not None:
            self._finalizer.detach()
            _cleanup(self._dir, list(self._io.values()), True)
        RecordSet.__init__(self, None if self._durable else self._spool_parent, spill_bytes=self._spill_bytes, durable=False)

    @property
    def spool_path(self) -> str | None:
        """The directory of the set's spool files (None while they are in memory)."""
        return self._dir

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    @property
    def spilled(self) -> bool:
        """Whether the records are on disk (the set outgrew ``spill_bytes``)."""
        return self._dir is not None

    def labels(self, name: str) -> list[str | None]:
        """The strings behind the codes of column ``name`` (``target``, ``error``, ``token_source``)."""
        return list(self._labels[name])

    def _read(self, stream: str, offset: int, nbytes: int) -> bytes:
        self._flush_buffers()
        f = self._io[stream]
        if isinstance(f, io.BytesIO):
            return bytes(f.getbuffer()[offset: offset + nbytes])
        f.flush()
        return os.pread(f.fileno(), nbytes, offset)

    def rows(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows ``[start, stop)`` as a structured array (a copy)."""
        stop = self._n if stop is None else min(stop, self._n)
        if stop <= start:
            return np.zeros(0, dtype=ROW)
        return np.frombuffer(self._read("rows", start * ROW.itemsize, (stop - start) * ROW.itemsize), dtype=ROW)

    def blocks(self, size: int = BLOCK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """``(first_row, rows)`` blocks of at most ``size`` rows, in append order."""
        for start in range(0, self._n, size):
            yield start, self.rows(start, start + size)

    def columns(self, *names: str) -> dict[str, np.ndarray]:
        """Whole columns (``ROW`` names, or ``annotate``-d ones) as arrays, read block by block."""
        out = {n: np.empty(self._n, dtype=(ROW[n] if n in _ROW_NAMES else np.float64)) for n in names}
        for start, block in self.blocks():
            for n in names:
                if n in _ROW_NAMES:
                    out[n][start: start + len(block)] = block[n]
        for n in names:
            if n not in _ROW_NAMES:
                out[n][:] = self._annotations[n]
        return out

    def chunk_offsets(self) -> np.ndarray:
        """Where each row's chunk stamps start in the chunk stream (``n + 1`` entries)."""
        counts = self.columns("n_chunks")["n_chunks"]
        off = np.zeros(self._n + 1, dtype=np.int64)
        np.cumsum(counts, out=off[1:])
        return off

    def chunks(self, start: int, stop: int, offsets: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Chunk stamps of rows ``[start, stop)``: ``(offsets, stamps)``, offsets relative to ``stamps``.
        Pass ``offsets`` (from ``chunk_offsets``) when reading many ranges."""
        off = self.chunk_offsets() if offsets is None else offsets
        stop = min(stop, self._n)
        a, b = int(off[start]), int(off[stop])
        stamps = np.frombuffer(self._read("chunks", a * 8, (b - a) * 8), dtype="<i8")
        return off[start: stop + 1] - a, stamps

    def iter_chunks(self, size: int = BLOCK_ROWS) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
        """``(first_row, rows, offsets, stamps)`` per block: rows with their chunk stamps."""
        off = self.chunk_offsets()
        for start, block in self.blocks(size):
            o, s = self.chunks(start, start + len(block), off)
            yield start, block, o, s

    def annotate(self, name: str, values: Column) -> None:
        """Attach a per-row value (aligned with the rows: a sequence of length ``len(self)``) that
        iteration merges into each record as field ``name`` (``None`` entries are left out)."""
        if len(values) != self._n:
            raise ValueError(f"annotation {name!r}: {len(values)} values for {self._n} records")
        self._annotations[name] = values

    def __iter__(self) -> Iterator[RequestRecord]:
        """Every record in append order, rebuilt one at a time with its chunk stamps and annotations."""
        off = self.chunk_offsets()
        for start, block in self.blocks(4096):
            o, stamps = self.chunks(start, start + len(block), off)
            for i, d in enumerate(self._block_dicts(block)):
                d["chunk_ns"] = stamps[o[i]: o[i + 1]].tolist()
                for name, vals in self._annotations.items():
                    v = vals[start + i]
                    if v is not None:
                        d[name] = v
                yield build_record(**d)

    def _block_dicts(self, block: np.ndarray) -> Iterator[dict[str, Any]]:
        """The stored JSON objects of a block's rows, one at a time (one read for the block)."""
        a = int(block["line_offset"][0])
        text = self._read("lines", a, int(block["line_offset"][-1] + block["line_bytes"][-1]) - a)
        for line in text.split(b"\n")[: len(block)]:
            yield json.loads(line)

    def _record(self, row: np.ndarray, stamps: np.ndarray, index: int) -> RequestRecord:
        d = json.loads(self._read("lines", int(row["line_offset"]), int(row["line_bytes"])))
        d["chunk_ns"] = stamps.tolist()
        for name, vals in self._annotations.items():
            v = vals[index]
            if v is not None:
                d[name] = v
        return build_record(**d)

    def by_sent(self) -> Iterator[RequestRecord]:
        """Every record in the order it was sent (stable on ties), read one at a time."""
        order = np.argsort(self.columns("sent_ns")["sent_ns"], kind="stable")
        off = self.chunk_offsets()
        for i in order.tolist():
            row = self.rows(i, i + 1)[0]
            _, stamps = self.chunks(i, i + 1, off)
            yield self._record(row, stamps, i)

    def iter_dicts(self, size: int = 4096) -> Iterator[dict[str, Any]]:
        """Every record's stored JSON object (no chunk stamps, no annotations), in append order: the
        strings (tenant, tags, model, …) of a record without building it."""
        for _, block in self.blocks(size):
            yield from self._block_dicts(block)

    def annotate_entry(self, name: str, key: str, values: EntryValues, present: np.ndarray | None = None) -> None:
        """Merge one entry into the dict-valued field ``name`` of the records (``energy_j`` =
        ``{boundary: J}``): row ``i`` gets ``name[key] = values[i]`` where ``present[i]`` (every row
        when ``present`` is None). ``values``: a float array aligned with the rows (NaN is written as
        None) or one value for all rows. Entries of several keys merge in the order they were added;
        a row without any entry keeps the record's own field, a row with entries gets only them."""
        col = self._annotations.get(name)
        if not isinstance(col, _Entries):
            col = _Entries(self._n)
            self.annotate(name, col)
        col.add(key, values, present)

    def entry(self, name: str, key: str) -> tuple[EntryValues, NDArray[np.bool_]] | None:
        """``(values, present)`` of an ``annotate_entry``-d entry, or None where there is none."""
        col = self._annotations.get(name)
        return col.entries.get(key) if isinstance(col, _Entries) else None


class _Entries:
    """Per-row dicts built from per-key arrays (``RecordSet.annotate_entry``): no object per row."""

    def __init__(self, n: int):
        self.n = n
        self.entries: dict[str, tuple[EntryValues, NDArray[np.bool_]]] = {}

    def add(self, key: str, values: EntryValues, present: np.ndarray | None) -> None:
        if isinstance(values, np.ndarray) and len(values) != self.n:
            raise ValueError(f"entry {key!r}: {len(values)} values for {self.n} records")
        mask = np.ones(self.n, dtype=bool) if present is None else np.asarray(present, dtype=bool)
        if len(mask) != self.n:
            raise ValueError(f"entry {key!r}: {len(mask)} flags for {self.n} records")
        self.entries[key] = (values, mask)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, float | str | None] | None:
        out: dict[str, float | str | None] = {}
        for key, (values, mask) in self.entries.items():
            if mask[i]:
                if isinstance(values, np.ndarray):
                    v = float(values[i])
                    out[key] = None if v != v else v
                else:
                    out[key] = values
        return out or None


def _json_default(o: object) -> int | float | dict[str, Any]:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, BaseModel):
        return o.model_dump(mode="json")
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def _write_through(f: BinaryIO, data: bytes | memoryview) -> None:
    """All of ``data`` to ``f`` (an unbuffered file may take it in parts)."""
    view = memoryview(data)
    while view:
        n = f.write(view)
        view = view[n if n is not None else len(view):]


def _cleanup(path: str | None, handles: list[BinaryIO], remove: bool) -> None:
    for h in handles:
        try:
            h.close()
        except Exception:  # noqa: BLE001 - closing at interpreter exit
            pass
    if remove and path is not None:
        shutil.rmtree(path, ignore_errors=True)


def as_record_set(records: RecordSet | Iterable[RequestRecord | Mapping[str, Any]]) -> RecordSet:
    """``records`` as a ``RecordSet`` (a set is returned as is; a list or iterable is copied in)."""
    return records if isinstance(records, RecordSet) else RecordSet.from_records(records)


def stamp_blocks(rs: RecordSet, need: np.ndarray | None = None, *, max_stamps: int | None = None,
                 offsets: np.ndarray | None = None) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """``(start, stop, offsets, stamps)``: rows ``[start, stop)`` with their chunk stamps (CSR, as
    ``RecordSet.chunks``), at most ``max_stamps`` (default: the set's ``stamps_per_block``) stamps a
    block (or one row); ranges with no row flagged in ``need`` are skipped unread."""
    max_stamps = rs.stamps_per_block if max_stamps is None else max_stamps
    off = rs.chunk_offsets() if offsets is None else offsets
    n, start = len(rs), 0
    while start < n:
        stop = int(np.searchsorted(off, off[start] + max_stamps, side="right")) - 1
        stop = min(max(stop, start + 1), start + BLOCK_ROWS, n)
        if need is None or need[start:stop].any():
            o, s = rs.chunks(start, stop, off)
            yield start, stop, o, s
        start = stop


def row_ids(offsets: np.ndarray) -> np.ndarray:
    """The row (0-based within the block) of every stamp of a CSR block."""
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
