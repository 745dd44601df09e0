"""Reading and writing run directories.

A run directory holds ``result.json`` (a :class:`~wattbench.core.schema.Result`) and
``requests.jsonl`` (one :class:`~wattbench.core.schema.RequestRecord` per line). Writes are
atomic (temporary file in the same directory, fsync, ``os.replace``) so a crash mid-write leaves
the previous complete file; ``requests.jsonl`` is appended and, when a write fails half-way
(disk full), cut back to its last complete line. A failed write raises
:class:`~wattbench.core.errors.UserError` (``storage_error``: one line naming the file). Reads use JSON and pydantic only (never pickle or eval); a missing or
corrupt file raises :class:`~wattbench.core.errors.UserError` naming the file and the problem. Every
JSON file and ``requests.jsonl`` line is written without the registered secrets (``core.secret_scope.scope``:
a run's API key, URL credential, secret headers, for the run's lifetime), wherever a server put them.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, TypeVar
import errno as _errno
import shutil

from pydantic import BaseModel, ValidationError

from wattbench.accounting.boundaries import withhold_outside_work
from wattbench.core.errors import StorageError, UserError
from wattbench.core.interrupt import interrupts_deferred
from wattbench.results.recovery import (
    LEVEL_META_FILE, RUN_LOCK_FILE, SPOOL_DIR, STOPPED_MARKER_PREFIX, level_spool_dir, settle_unfinished,
)
from wattbench.core.schema import SCHEMA_VERSION, RequestRecord, Result
from wattbench.core.schema.bounds import result_problem
from wattbench.core.secret_scope import registered
from wattbench.results.jsonfile import loads_bounded, read_bounded

RESULT_FILE = "result.json"
REQUESTS_FILE = "requests.jsonl"

M = TypeVar("M", bound=BaseModel)


# ------------------------------------------------------------------ a run in progress, or one that crashed


def begin_level_spool(run_dir: str | os.PathLike[str], index: int, trial: int, label: str) -> Path:
    """Create the level's spool directory with ``level.json`` (what it is, for a reader after a
    crash); returns the directory to spool into."""
    d = level_spool_dir(run_dir, index, trial)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise storage_error(d, e) from None
    atomic_write_bytes(d / LEVEL_META_FILE,
                        json.dumps({"index": index, "trial": trial, "label": label}).encode("utf-8") + b"\n")
    return d


def end_level_spool(run_dir: str | os.PathLike[str], index: int, trial: int = 0) -> None:
    """Remove a level's spool once its records are in ``requests.jsonl`` (and ``spool/`` once empty)."""
    shutil.rmtree(level_spool_dir(run_dir, index, trial), ignore_errors=True)
    try:
        (Path(run_dir) / SPOOL_DIR).rmdir()
    except OSError:
        pass  # another level's spool, or already gone


class RunLock:
    """Held by the process writing a run directory (``flock`` on ``.running``), so a reader can
    tell a run in progress from one whose process died: the kernel drops the lock with the process,
    however it ended. ``release`` removes the file."""

    def __init__(self, run_dir: str | os.PathLike[str]):
        import fcntl

        self.path = Path(run_dir) / RUN_LOCK_FILE
        self.fd: int | None = None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as e:
            raise storage_error(self.path, e) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UserError(f"{Path(run_dir)}: another wattbench process is writing this run directory; "
                            "choose another --out") from None
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink()
        except OSError:
            pass
        os.close(self.fd)  # closing drops the flock
        self.fd = None


def storage_error(path: str | os.PathLike[str], exc: OSError) -> StorageError:
    """A failed write (disk full, quota, read-only, permissions) as one line naming the file and the fix."""
    return StorageError(path, exc)


def check_output_dir(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Refuse, before anything is written, a directory that cannot be created or written: one line
    naming ``flag``. ``path`` may not exist yet: then the nearest existing folder above it must be
    a directory in which a directory can be created (a file on the way, a read-only filesystem,
    ``/proc`` or ``/sys`` fail here, not as a traceback half-way through the run). The probe
    creates and removes an empty temporary directory: nothing is left behind."""
    p = Path(path).expanduser()
    check_name_lengths(p, flag)
    probe_in = p
    while not probe_in.exists():
        if probe_in.parent == probe_in:
            break
        probe_in = probe_in.parent
    if not probe_in.is_dir():
        raise UserError(f"{flag} {p}: {probe_in} is a file, not a directory; choose a directory")
    if probe_in == p:
        check_no_links(p, flag)
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".wattbench-probe-", dir=str(probe_in)))
    except OSError as e:
        where = "in" if probe_in == p else "under"
        raise UserError(f"{flag} {p}: cannot create a directory {where} {probe_in} "
                        f"({e.strerror or type(e).__name__}); choose a writable directory on a disk") from None
    return p


def check_name_lengths(p: Path, flag: str) -> None:
    """Refuse a path with a name longer than a file name may be (``NAME_MAX``, 255 bytes on Linux
    filesystems): one line naming ``flag``, not ``ENAMETOOLONG`` half-way through the run."""
    try:
        name_max = os.pathconf("/", "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    for part in p.parts:
        n = len(os.fsencode(part))
        if n > name_max:
            raise UserError(f"{flag}: the name {part[:24]}… is {n} bytes, more than the {name_max} a file name "
                            "may have; choose a shorter name")


LINK_SCAN_MAX_ENTRIES = 100_000  # entries of an existing --out looked at for links (a run directory holds a few)


def check_no_links(path: str | os.PathLike[str], flag: str = "--out") -> None:
    """Refuse an existing run directory that holds a symbolic link anywhere inside it (``--out``
    itself may be one): a planted ``requests.jsonl -> ~/.bashrc`` would have the run append to the
    file it points at. One line naming the link; nothing is followed or written."""
    top = Path(path)
    seen = 0
    stack = [top]
    while stack and seen < LINK_SCAN_MAX_ENTRIES:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            seen += 1
            if e.is_symlink():
                rel = Path(e.path).relative_to(top)
                raise UserError(f"{flag} {top}: holds a symbolic link ({rel}); wattbench follows no link in a run "
                                "directory (a link would send its writes elsewhere): remove it or choose another "
                                "directory")
            if e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: into a temporary file beside it, synced, then
    renamed over it; on any failure (a full disk, a folder made read-only) the temporary file is
    removed and ``StorageError`` says why — the old file, if any, is unchanged."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    except OSError as e:
        raise storage_error(path, e) from None
    try:
        os.fchmod(fd, 0o644 & ~_umask())  # like a plainly created file, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:  # gone already, or the directory became unwritable (chattr +i) mid-write
            pass
        if isinstance(e, OSError):
            raise storage_error(path, e) from None
        raise
    try:  # make the rename durable too (not possible on every platform)
        dfd = os.open(str(path.parent), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def write_json_atomic(path: str | os.PathLike[str], model: BaseModel) -> Path:
    """Write a pydantic model as indented JSON, atomically, without any of the registered
    secrets (``core/secret_scope.py``: those of every open scope: every string that holds one is scrubbed, the JSON stays valid).
    Ctrl-C and SIGTERM wait for the write's end (``core.interrupt.interrupts_deferred``): one that
    lands inside pydantic's serializer (a Python callback of its Rust core) would come out as a
    ``PydanticSerializationError`` — a traceback, and the file not written — instead of the
    ``KeyboardInterrupt`` that ends a run as interrupted with what it measured."""
    p = Path(path)
    with interrupts_deferred():
        text = registered().json_text(model.model_dump_json(indent=2))
        atomic_write_bytes(p, (text + "\n").encode("utf-8"))
    return p


def write_result(run_dir: str | os.PathLike[str], result: Result) -> Path:
    """Write ``result.json`` into ``run_dir`` atomically; returns the file's path."""
    return write_json_atomic(Path(run_dir) / RESULT_FILE, result)


def close_result(run_dir: str | os.PathLike[str], result: Result) -> None:
    """The closing write of a run that stopped (a write failed, a worker died): ``write_result``,
    and when that fails too (the disk is still full; the directory went read-only or immutable, so
    no temporary file can be made there), what can still be done, in order:

    1. rewrite ``result.json`` in place, but only once the file holds the space the new text needs
       (``posix_fallocate``): a write that can no longer run out of space, so never a torn file;
    2. else leave an empty marker ``.stopped-<ERRNO>`` (no data block needed) that tells a reader the
       run stopped on that write error, not a crash (``recovery.settle_unfinished``).

    Raises ``StorageError`` when nothing could be written (the reader then sees a crash)."""
    try:
        write_result(run_dir, result)
        return
    except StorageError as e:
        first = e
    path = Path(run_dir) / RESULT_FILE
    data = (registered().json_text(result.model_dump_json(indent=2)) + "\n").encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        fd = None
    if fd is not None:
        try:
            os.posix_fallocate(fd, 0, len(data))  # the space first: the write below cannot tear
            _write_all(fd, data)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
            return
        except (OSError, AttributeError):
            pass
        finally:
            os.close(fd)
    name = STOPPED_MARKER_PREFIX + (errno_name(first.errno) if first.errno else "EIO")
    try:
        os.close(os.open(Path(run_dir) / name, os.O_WRONLY | os.O_CREAT, 0o644))
    except OSError:
        raise first from None


def errno_name(code: int) -> str:
    return _errno.errorcode.get(code, "EIO")


WRITE_BATCH_BYTES = 1 << 20  # requests.jsonl is written this much at a time


def _request_lines(records: Iterable[RequestRecord | dict[str, Any]], keep_chunks: bool) -> Iterator[bytes]:
    exclude = None if keep_chunks else {"chunk_ns"}
    secrets = registered()
    for r in records:
        if not isinstance(r, BaseModel):
            r = RequestRecord.model_validate(r)
        line = r.model_dump_json(exclude=exclude)
        if secrets.found_in(line):  # a server echoed a secret the client could not know of: scrub here too
            line = secrets.json_text(line)
        yield line.encode("utf-8") + b"\n"


def append_requests(run_dir: str | os.PathLike[str], records: Iterable[RequestRecord | dict[str, Any]], *,
                    keep_chunks: bool = True) -> Path:
    """Append request records to ``requests.jsonl`` (one JSON object per line) and fsync.

    ``records`` is streamed (a level's ``RecordSet`` is read one record at a time and written a
    megabyte at a time): memory does not grow with the number of records. Without
    ``keep_chunks`` the lines leave out ``chunk_ns`` (every content chunk's arrival stamp: most of
    a record's bytes); readers then use the first and last token stamps. A write that fails
    half-way (disk full) cuts the file back to where this append started: no torn line, and the
    records appended before are unchanged."""
    path = Path(run_dir) / REQUESTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # never through a link planted after the run started (ELOOP: one line, as any failed write)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        raise storage_error(path, e) from None
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        try:
            buf: list[bytes] = []
            held = 0
            for line in _request_lines(records, keep_chunks):
                buf.append(line)
                held += len(line)
                if held >= WRITE_BATCH_BYTES:
                    _write_all(fd, b"".join(buf))
                    buf, held = [], 0
            _write_all(fd, b"".join(buf))
            os.fsync(fd)
        except BaseException as e:  # disk full half-way (or a bad record): cut back to where we started
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            if isinstance(e, OSError):
                raise storage_error(path, e) from None
            raise
    finally:
        os.close(fd)
    return path


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # unbuffered: nothing is left to flush after a failure
        view = view[os.write(fd, view):]


def describe_validation_error(exc: ValidationError, limit: int = 3) -> str:
    """One line naming the fields that are missing or wrong."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(x) for x in err.get("loc", ()))
        if err.get("type") == "missing":
            parts.append(f"missing field {loc}")
        else:
            msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            parts.append(f"field {loc}: {msg}" if loc else msg)
    more = len(exc.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more problem(s)")
    return "; ".join(parts)


RESULT_MAX_BYTES = 64 << 20  # a result.json of 2,000 levels is ~7 MB


def read_json_file(path: Path, max_bytes: int = RESULT_MAX_BYTES) -> Any:
    """Parse a JSON file; UserError naming the file and where it is broken. The file's size and
    nesting are capped before it is parsed (``results/jsonfile.py``)."""
    try:
        data = read_bounded(path, max_bytes)
    except FileNotFoundError:
        raise UserError(f"{path}: missing (no such file)") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a JSON file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:  # too large
        raise UserError(f"{path}: {e}; is it a file wattbench wrote?") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not text.strip():
        raise UserError(f"{path}: empty file (the run may have been killed before writing it)")
    try:
        return loads_bounded(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}: not valid JSON at line {e.lineno} column {e.colno} ({e.msg})") from None
    except ValueError as e:  # nested too deep
        raise UserError(f"{path}: {e}; is it a file wattbench wrote?") from None


def result_path(path_or_dir: str | os.PathLike[str]) -> Path:
    """The ``result.json`` a path names: the file itself, or the one inside a directory."""
    p = Path(path_or_dir)
    if p.is_dir():
        return p / RESULT_FILE
    return p


def check_schema_version(path: Path, data: dict[str, Any], supported: int = SCHEMA_VERSION) -> None:
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise UserError(f"{path}: schema_version {version!r} is not an integer")
    if version > supported:
        raise UserError(
            f"{path}: schema_version {version} is newer than this wattbench reads ({supported}); "
            "upgrade wattbench to read it"
        )


def load_model(path: Path, model: type[M], what: str = "result", supported: int = SCHEMA_VERSION,
               max_bytes: int = RESULT_MAX_BYTES) -> M:
    """The ``model`` a JSON file holds (``read_json_file``, at most ``max_bytes``); UserError naming
    the file when it is not one, or was written by a newer wattbench than ``supported``."""
    data = read_json_file(path, max_bytes)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object ({what}), found {type(data).__name__}")
    check_schema_version(path, data, supported)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise UserError(f"{path}: {describe_validation_error(e)}") from None


def load_result(path_or_dir: str | os.PathLike[str], *, max_bytes: int = RESULT_MAX_BYTES) -> Result:
    """Read a run's ``result.json`` (give the run directory or the file; a file over ``max_bytes``
    is refused before it is read). A result whose status is still ``running`` is read as what it
    is (``results.recovery.settle_unfinished``, the one rule every reader gets here): a run in
    progress, or a run that crashed — ``invalid`` either way, with the reason and what its spool
    still holds."""
    p = Path(path_or_dir)
    if not p.exists():
        raise UserError(f"{p}: no such run directory or result file")
    if p.is_dir() and not (p / RESULT_FILE).exists() and (p / "agreement.json").exists():
        raise UserError(f"{p}: an output-agreement run, not a benchmark result (show it with "
                        "`wattbench compare A B --agreement RUN`)")
    path = result_path(p)
    result = load_model(path, Result, "result", max_bytes=max_bytes)
    problem = result_problem(result)
    if problem:
        raise UserError(f"{path}: {problem}; is it a file wattbench wrote, unedited?")
    for lv in result.levels:  # a file written before the rule: per-token figures only where the work is
        withhold_outside_work(lv)
    if result.status == "running":
        settle_unfinished(result, path.parent)
    return result


def load_requests(run_dir: str | os.PathLike[str], notes: list[str] | None = None) -> list[RequestRecord]:
    """Read ``requests.jsonl``; a bad line is reported with its line number.

    With ``notes`` (a list to append to), reading is lenient where a crash explains the damage:
    a missing file gives no records and a note, and a torn LAST line (the run was killed while
    appending) is skipped with a note. Damage anywhere else is always an error.
    """
    return list(iter_requests(run_dir, notes))


def iter_requests(run_dir: str | os.PathLike[str], notes: list[str] | None = None) -> Iterator[RequestRecord]:
    """``load_requests`` one record at a time, in file order: the same records and the same rules
    for damage (raised when the reader reaches it), holding one line at a time, not the file."""
    path = Path(run_dir)
    if path.is_dir():
        path = path / REQUESTS_FILE
    if not path.exists():
        if notes is not None:
            notes.append(f"{REQUESTS_FILE} is missing: no per-request data")
            return
        raise UserError(f"{path}: missing (no such file)")
    with open(path, "rb") as f:
        offset, lineno = 0, 0
        for raw in f:
            lineno += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UserError(f"{path}: line {lineno}: not UTF-8 text ({e.reason} at byte {offset + e.start})"
                                ) from None
            offset += len(raw)
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except RecursionError:
                raise UserError(f"{path}: line {lineno}: nested too deep to be a request record") from None
            except json.JSONDecodeError as e:
                if notes is not None and not any(r.decode("utf-8", "replace").strip() for r in f):  # last line
                    notes.append(f"{REQUESTS_FILE}: last line {lineno} is truncated (run stopped while writing); "
                                 f"skipped")
                    return
                raise UserError(f"{path}: line {lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(data, dict):
                raise UserError(f"{path}: line {lineno}: expected a JSON object")
            try:
                yield RequestRecord.model_validate(data)
            except ValidationError as e:
                raise UserError(f"{path}: line {lineno}: {describe_validation_error(e)}") from None
