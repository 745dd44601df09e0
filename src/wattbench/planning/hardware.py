"""The accelerator spec table: TDP, memory, bandwidth and dense peak FLOP/s, one source per row.

The table ships as package data (``wattbench/data/hardware.json``, ``{"version": N, "gpus": [...]}``)
and users extend or correct it with a file of the same shape: ``~/.config/wattbench/hardware.json``
(the platformdirs user config dir) and/or files passed explicitly (``--hardware FILE``). Rows are
merged by name: a user row whose name (or alias) matches a shipped row updates only the fields it
gives; a row with a new name must be complete and carry a ``source``.

Units are SI: W, bytes, bytes/s, FLOP/s. FLOP/s figures are *dense* (no 2:4 structured sparsity):
vendor datasheets for Hopper/Blackwell/Ada quote sparse numbers that are twice the dense ones.
"""

from __future__ import annotations

import difflib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
import platformdirs

from wattbench.core.errors import UserError

HARDWARE_TABLE_VERSION = 1
USER_FILE_NAME = "hardware.json"


class GPUSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=3)
    url: str = Field(min_length=8)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not (v.startswith("https://") or v.startswith("http://") or v.startswith("file:")):
            raise ValueError("source.url must be an http(s) or file: URL")
        return v


class GPUSpec(BaseModel):
    """One accelerator (per GPU/card/module, never per server)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    vendor: str = Field(min_length=1)
    form_factor: str = Field(min_length=1)
    tdp_w: float = Field(gt=0)
    memory_bytes: float = Field(gt=0)
    memory_bandwidth_bytes_per_s: float = Field(gt=0)
    bf16_dense_flops: float = Field(gt=0)
    fp8_dense_flops: float | None = Field(default=None, gt=0)
    source: GPUSource
    notes: str = ""

    def peak_flops(self, compute_dtype: str) -> float:
        """Dense peak FLOP/s for the math precision ``bf16`` or ``fp8``."""
        if compute_dtype == "bf16":
            return self.bf16_dense_flops
        if compute_dtype == "fp8":
            if self.fp8_dense_flops is None:
                raise UserError(
                    f"{self.name} has no FP8 tensor throughput in the hardware table; "
                    "use --dtype bf16 (or int4 weight-only), or add fp8_dense_flops in a --hardware file"
                )
            return self.fp8_dense_flops
        raise UserError(f"unknown compute precision {compute_dtype!r}; use bf16 or fp8")


class HardwareTable(BaseModel):
    model_config = ConfigDict(extra="allow")

    version: int
    gpus: list[GPUSpec]

    def names(self) -> list[str]:
        return [g.name for g in self.gpus]

    def find(self, name: str) -> GPUSpec:
        return find_gpu(name, self)


def normalize_gpu_name(name: str) -> str:
    """Lower-case, drop vendor prefixes and everything that is not a letter or digit.

    ``"H200 SXM"``, ``"h200-sxm"`` and ``"NVIDIA H200 SXM"`` all become ``"h200sxm"``.
    """
    s = name.strip().lower()
    s = re.sub(r"^(nvidia|amd|intel|habana)[\s_-]+", "", s)
    s = re.sub(r"^(tesla|instinct)[\s_-]+", "", s)
    return re.sub(r"[^a-z0-9]", "", s)


def default_user_hardware_path() -> Path:
    return Path(platformdirs.user_config_dir("wattbench")) / USER_FILE_NAME


def _read_table_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"hardware file {path} does not exist; give an existing JSON file") from None
    except json.JSONDecodeError as e:
        raise UserError(f"hardware file {path} is not valid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise UserError(f'hardware file {path} must be {{"version": {HARDWARE_TABLE_VERSION}, "gpus": [...]}}')
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise UserError(f"hardware file {path}: 'version' must be a positive integer")
    if version > HARDWARE_TABLE_VERSION:
        raise UserError(
            f"hardware file {path} has version {version}, newer than this wattbench understands "
            f"({HARDWARE_TABLE_VERSION}); upgrade wattbench or rewrite the file as version {HARDWARE_TABLE_VERSION}"
        )
    return data


def _validate_row(row: dict[str, Any], where: str) -> GPUSpec:
    try:
        return GPUSpec.model_validate(row)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err.get("loc", ()))
        raise UserError(
            f"{where}: GPU row {row.get('name', '?')!r}: {loc}: {err.get('msg', 'invalid')}"
            " (every row needs name, vendor, form_factor, tdp_w, memory_bytes, memory_bandwidth_bytes_per_s,"
            " bf16_dense_flops and source {title, url})"
        ) from None


def merge_rows(base: list[GPUSpec], rows: Iterable[dict[str, Any]], where: str) -> list[GPUSpec]:
    """Merge user rows into ``base`` by name or alias (partial update) or append (complete row)."""
    out = list(base)
    for row in rows:
        if not isinstance(row, dict) or not row.get("name"):
            raise UserError(f"{where}: every GPU row needs a 'name'")
        key = normalize_gpu_name(str(row["name"]))
        idx = next(
            (i for i, g in enumerate(out) if key in {normalize_gpu_name(n) for n in [g.name, *g.aliases]}),
            None,
        )
        if idx is None:
            out.append(_validate_row(row, where))
        else:
            merged = out[idx].model_dump()
            merged.update({k: v for k, v in row.items() if k != "name"})
            out[idx] = _validate_row(merged, where)
    return out


def load_hardware_table(
    extra_files: Iterable[str | Path] = (),
    use_user_file: bool = True,
    user_file: str | Path | None = None,
) -> HardwareTable:
    """The shipped table, then the user's config file (if present), then ``extra_files`` in order."""
    raw = json.loads((resources.files("wattbench") / "data" / "hardware.json").read_text())
    table = HardwareTable.model_validate(raw)
    gpus = table.gpus
    paths: list[Path] = []
    if use_user_file:
        up = Path(user_file) if user_file is not None else default_user_hardware_path()
        if up.is_file():
            paths.append(up)
    paths.extend(Path(p) for p in extra_files)
    for p in paths:
        data = _read_table_file(p)
        gpus = merge_rows(gpus, data["gpus"], str(p))
    _check_unique(gpus)
    return HardwareTable(version=table.version, gpus=gpus)


def _check_unique(gpus: list[GPUSpec]) -> None:
    seen: dict[str, str] = {}
    for g in gpus:
        for n in [g.name, *g.aliases]:
            k = normalize_gpu_name(n)
            if k in seen and seen[k] != g.name:
                raise UserError(f"hardware table: name or alias {n!r} is used by both {seen[k]!r} and {g.name!r}")
            seen[k] = g.name


def find_gpu(name: str, table: HardwareTable | None = None) -> GPUSpec:
    """Look a GPU up by name or alias, forgiving case, spaces, dashes and vendor prefixes.

    An exact normalized match wins; otherwise a unique row whose normalized name starts with the query
    (``"l40"`` -> nothing unique, ``"mi325"`` -> MI325X). Unknown -> UserError listing the known names.
    """
    table = table or load_hardware_table()
    key = normalize_gpu_name(name)
    if not key:
        raise UserError("empty GPU name; give e.g. --gpu H200")
    for g in table.gpus:
        if key in {normalize_gpu_name(n) for n in [g.name, *g.aliases]}:
            return g
    prefixed = [g for g in table.gpus if normalize_gpu_name(g.name).startswith(key)]
    if len(prefixed) == 1:
        return prefixed[0]
    known = ", ".join(table.names())
    if len(prefixed) > 1:
        raise UserError(f"GPU {name!r} is ambiguous ({', '.join(g.name for g in prefixed)}); known GPUs: {known}")
    by_key = {normalize_gpu_name(n): g.name for g in table.gpus for n in [g.name, *g.aliases]}
    close = difflib.get_close_matches(key, list(by_key), n=1, cutoff=0.6)
    hint = f" (did you mean {by_key[close[0]]}?)" if close else ""
    raise UserError(
        f"unknown GPU {name!r}{hint}; known GPUs: {known}. "
        "Add a row with --hardware FILE or in " + str(default_user_hardware_path())
    )
