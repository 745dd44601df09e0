"""Every figure docs/figures.yaml lists is recomputed from committed data and found in its doc.

The manifest (``docs/figures.yaml``, its header says how to add an entry) names, per table or per
sentence of README.md and docs/*.md, the committed file a figure comes from (under
``docs/validation-data/`` or ``benches/data/``) and an expression that recomputes it. This test:

- recomputes each figure and compares it with the value **as written in the doc** (parsed from the
  table cell or the sentence), within the rounding the doc's digits imply unless the entry states a
  tolerance — so a doc edited without its data, or data replaced without its doc, fails here;
- checks that every table with figures in the documents listed under ``coverage`` is either in the
  manifest or listed as an example whose label (``says``) stands in the doc's text;
- checks the checker: a doc value off by more than the rounding, a missing cell, a number written
  where none was computed, all fail (``test_checker_*``).

Nothing here runs a benchmark; it reads the committed outputs only, so it passes from a clean clone.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
import sys
import tarfile
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "docs" / "figures.yaml"

# ------------------------------------------------------------------ reading the committed data


@lru_cache(maxsize=None)
def _tar_member(path: str, member: str) -> bytes:
    with tarfile.open(ROOT / path) as tf:
        names = [m.name for m in tf.getmembers() if m.isfile() and (m.name == member or m.name.endswith("/" + member))]
        if len(names) != 1:
            raise AssertionError(f"{path}: {len(names)} members end with {member!r} (need exactly one): {names[:5]}")
        f = tf.extractfile(names[0])
        assert f is not None
        return f.read()


def _decode(name: str, raw: bytes):
    if name.endswith(".gz"):
        raw, name = gzip.decompress(raw), name[:-3]
    if name.endswith(".jsonl"):
        out = []
        for line in raw.decode().splitlines():
            line = line.strip()
            if line.startswith("{") or line.startswith("["):
                out.append(json.loads(line))
        return out
    if name.endswith(".json"):
        return json.loads(raw)
    return raw.decode()


@lru_cache(maxsize=None)
def load_source(spec: str):
    """``path`` or ``path.tgz:member`` (a member named by its path or the unique member ending with it)."""
    if ".tgz:" in spec or ".tar.gz:" in spec:
        path, member = spec.split(":", 1)
        return _decode(member, _tar_member(path, member))
    p = ROOT / spec
    if not p.is_file():
        raise AssertionError(f"source {spec} is not a committed file")
    return _decode(spec, p.read_bytes())


# ------------------------------------------------------------------ helpers the expressions use


def level(result: dict, label):
    """A level of a result.json by its index (``0``) or its label (``"concurrency=16"``)."""
    if isinstance(label, int):
        return result["levels"][label]
    found = [lv for lv in result["levels"] if lv["label"] == label]
    if len(found) != 1:
        raise AssertionError(f"{len(found)} levels labelled {label!r}")
    return found[0]


def raw(spec: str) -> bytes:
    """A committed file's bytes (``path`` or ``path.tgz:member``), e.g. to state its size."""
    if ".tgz:" in spec:
        return _tar_member(*spec.split(":", 1))
    return (ROOT / spec).read_bytes()


@lru_cache(maxsize=None)
def xcheck_raw(tgz: str, result: str = "result.json", meter: str = "meter.jsonl") -> list[dict]:
    """The per-level crosscheck of a committed run archive, recomputed from its raw series: the
    run's result.json (its level windows and energy) against the independent observer's counter log
    (``meter.jsonl``), by ``benches/gpu/crosscheck.py``'s ``rows`` — not read from the archive's
    crosscheck.json. ``result``/``meter``: the members (or their path ends) in an archive of several runs."""
    from benches.gpu import crosscheck as cc
    doc = json.loads(_tar_member(tgz, result))
    return cc.rows(doc, _tar_member(tgz, meter).decode().splitlines())


def grab(text: str, pattern: str) -> float:
    """The number the first group of ``pattern`` captures in ``text`` (a committed log)."""
    m = re.search(pattern, text)
    if m is None:
        raise AssertionError(f"{pattern!r} not found")
    return float(m.group(1))


def grab_all(text: str, pattern: str) -> list[float]:
    """Every number the first group of ``pattern`` captures in ``text`` (e.g. a logged series)."""
    found = [float(m.group(1)) for m in re.finditer(pattern, text)]
    if not found:
        raise AssertionError(f"{pattern!r} not found")
    return found


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs)


def pctl(xs, q):
    import numpy as np

    return float(np.percentile(np.asarray(list(xs), dtype=float), q))


def rel_pct(a, b):
    """``a`` relative to ``b``, in percent: 100 (a / b − 1)."""
    return 100.0 * (a / b - 1.0)


def spread_pct(xs):
    """max / min − 1, in percent."""
    xs = list(xs)
    return 100.0 * (max(xs) / min(xs) - 1.0)


def roofline_bound(batch: int, context: int, model: str = "llama-1b", gpu: str = "H200", dtype: str = "bf16"):
    from wattbench.planning.roofline import roofline

    return roofline(model, gpu, dtype=dtype, batch=batch, context=context)


def peer(run: dict, tool: str, streams: int, target: str = "scripted") -> dict:
    """One tool × streams row of a ``benches/peer_clients.py --json`` file."""
    rows = [r for r in run["runs"] if r["tool"] == tool and r["streams"] == streams and r["target"] == target]
    if len(rows) != 1:
        raise AssertionError(f"{len(rows)} runs of {tool} at {streams} streams against {target}")
    return rows[0]


def peer_ttft_err(row: dict) -> list[float]:
    """Per request: the tool's TTFT − the server's (first token written − request read), from the raw rows."""
    return [p["ttft_ms"] - p["true_ttft_ms"] for p in row["per_request"] if p.get("true_ttft_ms") is not None]


def peer_itl_err(row: dict) -> list[float]:
    """Per inter-token gap, the tool's gap − the server's gap between the same two token writes; for
    a tool that reports no gaps (GuideLLM), per request its mean ITL − the server's mean gap."""
    out = []
    per_gap = any(p.get("gaps_ms") for p in row["per_request"])
    for p in row["per_request"]:
        true = p.get("true_gaps_ms") or []
        if not true:
            continue
        if per_gap:
            out += [g - t for g, t in zip(p.get("gaps_ms") or [], true)]
        elif p.get("itl_ms") is not None:
            out.append(p["itl_ms"] - sum(true) / len(true))
    return out


@lru_cache(maxsize=None)
def llamacpp_checks(tgz: str) -> list[dict]:
    """``benches/gpu/llamacpp_summary.py``'s counter bracket checks on a committed llama.cpp run archive:
    per level, ``{"generation": BracketCheck, "prompt": BracketCheck, "level": the level's dict}``."""
    import tempfile

    from benches.gpu import llamacpp_summary  # the repository root is on the tests' path
    d = Path(tempfile.mkdtemp(prefix="doc-figures-"))
    with tarfile.open(ROOT / tgz) as t:
        run = None
        for m in t.getmembers():
            if m.isfile() and m.name.split("/")[-1] in ("result.json", "requests.jsonl", "server_timeline.jsonl"):
                t.extract(m, d, filter="data")
                run = d / Path(m.name).parent
    return [{"level": lj, "generation": gen, "prompt": prm}
            for lj, gen, prm in llamacpp_summary.level_checks(run)]


@lru_cache(maxsize=None)
def noise_runs(*tgzs: str) -> dict:
    """``benches/gpu/noise_table.py``'s tables over the run directories committed in ``tgzs`` (each a
    ``history_runs.py`` folder: ``<dir>/runs/<name>/result.json``): ``{"orders": …, "repeat": …}``
    as its ``--json`` writes them (orders keyed by concurrency, repeatability by kind, then load)."""
    import tempfile

    from benches.gpu import noise_table as mod
    d = Path(tempfile.mkdtemp(prefix="doc-figures-"))
    dirs = []
    for tgz in tgzs:
        with tarfile.open(ROOT / tgz) as t:
            for m in t.getmembers():
                parts = m.name.split("/")
                if m.isfile() and parts[-1] == "result.json" and len(parts) >= 4 and parts[-3] == "runs":
                    t.extract(m, d, filter="data")
                    dirs.append(d / Path(*parts[:-3]))
    runs = mod.find_runs(sorted(set(dirs)))
    _, repeat, within = mod.repeat_table(runs)
    _, orders = mod.orders_table(runs, within)
    return {"orders": orders, "repeat": repeat}


HELPERS = {
    "level": level, "grab": grab, "grab_all": grab_all, "raw": raw, "mean": mean, "median": statistics.median, "stdev": statistics.stdev, "pctl": pctl, "rel_pct": rel_pct,
    "spread_pct": spread_pct, "roofline_bound": roofline_bound, "peer": peer, "peer_ttft_err": peer_ttft_err,
    "peer_itl_err": peer_itl_err, "llamacpp_checks": llamacpp_checks, "noise_runs": noise_runs, "math": math, "json": json,
    "xcheck_raw": xcheck_raw,
}
BUILTINS = {n: __builtins__[n] if isinstance(__builtins__, dict) else getattr(__builtins__, n)
            for n in ("abs", "min", "max", "sum", "len", "round", "sorted", "zip", "range", "list", "dict",
                      "tuple", "any", "all", "float", "int", "str", "enumerate", "isinstance", "next", "set", "map",
                      "filter", "__import__")}


class Namespace(dict):
    """Sources by name (each loaded on first use), ``let`` expressions, the helpers."""

    def __init__(self, manifest: dict):
        super().__init__(HELPERS)
        self._sources = manifest.get("sources") or {}
        self._lets = manifest.get("let") or {}

    def resolve(self, name: str) -> None:
        if name in self:
            return
        if name in self._sources:
            self[name] = load_source(self._sources[name])
        elif name in self._lets:
            self[name] = evaluate(self._lets[name], self)


def _names(code) -> set[str]:
    out = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            out |= _names(c)
    return out


def evaluate(expr: str, ns: Namespace, **local):
    """``expr`` with the sources and lets it names loaded, ``local`` bound (a row's ``r``, its key ``k``)."""
    code = compile(str(expr), "<docs/figures.yaml>", "eval")
    for name in _names(code) - set(local):
        ns.resolve(name)
    scope = dict(ns)
    scope.update(local)
    scope["__builtins__"] = BUILTINS
    return eval(code, scope)  # noqa: S307 — the repository's own manifest


# ------------------------------------------------------------------ reading the docs

NUM = re.compile(r"(?<![\w.])[+\-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def numbers(text: str) -> list[tuple[float, float]]:
    """Each number written in ``text``, with half a unit of its last digit (the rounding it implies).

    ``1,547`` → (1547, 0.5); ``−0.069%`` → (−0.069, 0.0005); ``c=16`` gives 16 too, so key columns
    are left out of the checked cells."""
    out = []
    for m in NUM.finditer(text.replace("**", "")):
        s = m.group(0).replace("−", "-").replace(",", "")
        decimals = len(s.split(".")[1]) if "." in s else 0
        out.append((float(s), 0.5 * 10.0 ** -decimals))
    return out


def _split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip() for c in cells[1:-1]]


def tables(text: str) -> list[dict]:
    """Markdown tables: header cells, body rows, line number and the section they are in."""
    lines = text.split("\n")
    out, section, i = [], "", 0
    while i < len(lines):
        if lines[i].startswith("#"):
            section = lines[i]
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|\s*:?-{3}", lines[i + 1]):
            j, body = i + 2, []
            while j < len(lines) and lines[j].startswith("|"):
                body.append(_split_row(lines[j]))
                j += 1
            out.append({"line": i + 1, "header_line": lines[i], "header": _split_row(lines[i]), "rows": body,
                        "section": section})
            i = j
        else:
            i += 1
    return out


@lru_cache(maxsize=None)
def doc_text(doc: str) -> str:
    return (ROOT / doc).read_text()


def find_table(doc: str, header: str, section: str | None = None) -> dict:
    found = [t for t in tables(doc_text(doc)) if t["header_line"].startswith(header)
             and (section is None or t["section"].startswith(section))]
    if len(found) != 1:
        raise AssertionError(f"{doc}: {len(found)} tables whose header starts with {header!r}"
                             f"{'' if section is None else f' in {section!r}'} (need exactly one)")
    return found[0]


def section_text(doc: str, heading: str) -> str:
    """From the heading line that starts with ``heading`` to the next heading of the same or a higher level."""
    lines = doc_text(doc).split("\n")
    starts = [i for i, ln in enumerate(lines) if ln.startswith("#") and ln.startswith(heading)]
    if len(starts) != 1:
        raise AssertionError(f"{doc}: {len(starts)} headings start with {heading!r} (need exactly one)")
    i = starts[0]
    depth = len(lines[i]) - len(lines[i].lstrip("#"))
    j = i + 1
    while j < len(lines) and not (lines[j].startswith("#") and len(lines[j]) - len(lines[j].lstrip("#")) <= depth):
        j += 1
    return "\n".join(lines[i:j])


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# ------------------------------------------------------------------ comparing


def compare(written: list[tuple[float, float]], computed, spec: dict, where: str) -> list[str]:
    """Problems (empty: agrees). ``computed`` is a number or a list of numbers, one per number written."""
    if isinstance(computed, (int, float)) and not isinstance(computed, bool):
        computed = [computed]
    computed = list(computed)
    if len(computed) != len(written):
        return [f"{where}: the doc writes {len(written)} number(s) {[w for w, _ in written]}, "
                f"the expression gives {len(computed)}: {computed}"]
    cmps = spec.get("cmp", "=")
    cmps = cmps if isinstance(cmps, list) else [cmps] * len(written)
    problems = []
    for (w, half_unit), c, cmp in zip(written, computed, cmps):
        if c is None or (isinstance(c, float) and math.isnan(c)):
            problems.append(f"{where}: the doc writes {w}, the data gives {c}")
            continue
        tol = max(spec["tol"] if "tol" in spec else half_unit, abs(c) * spec.get("rtol", 0.0)) + 1e-9 * abs(c)
        ok = {"=": abs(c - w) <= tol, "<=": c <= w + tol, ">=": c >= w - tol, "abs<=": abs(c) <= w + tol}[cmp]
        if not ok:
            problems.append(f"{where}: the doc writes {w}, the data gives {c:.6g} (cmp {cmp!r}, tolerance {tol:.3g})")
    return problems


def _cell_spec(spec) -> dict:
    return {"expr": spec} if isinstance(spec, str) else dict(spec)


def check_table(entry: dict, ns: dict) -> list[str]:
    doc = entry["doc"]
    t = find_table(doc, entry["header"], entry.get("section"))
    header = t["header"]
    key_cols = entry.get("key", 0)
    key_cols = key_cols if isinstance(key_cols, list) else [key_cols]
    cells = {k: _cell_spec(v) for k, v in (entry.get("cells") or {}).items()}
    unchecked = entry.get("unchecked") or {}
    problems = []
    for name in list(cells) + list(unchecked):
        if name not in header:
            problems.append(f"{doc}:{t['line']}: no column {name!r} in {header}")
    rows = entry.get("rows") or {}
    if isinstance(rows, str):  # one expression giving {row name: the row's value (bound to r)}
        rows = evaluate(rows, ns)
    rows = {str(k): v for k, v in rows.items()}
    seen = set()
    for row in t["rows"]:
        key = " ".join(row[c].replace("**", "").replace("`", "") for c in key_cols)
        where = f"{doc}:{t['line']} row {key!r}"
        if key not in rows:
            problems.append(f"{where}: not in the manifest's rows ({sorted(rows)})")
            continue
        seen.add(key)
        bind = rows[key]
        local = {"k": key}
        if isinstance(entry.get("rows"), str):
            local["r"] = bind
        elif isinstance(bind, dict):
            local.update({n: evaluate(e, ns, k=key) for n, e in bind.items()})
        else:
            local["r"] = evaluate(bind, ns, k=key)
        for ci, name in enumerate(header):
            if ci in key_cols or ci >= len(row):
                continue
            written = numbers(row[ci])
            if name in cells:
                spec = cells[name]
                try:
                    value = evaluate(spec["expr"], ns, **local)
                except Exception as e:  # noqa: BLE001 — the manifest's expression failed: say which
                    problems.append(f"{where} column {name!r}: {spec['expr']!r} raised {type(e).__name__}: {e}")
                    continue
                problems += compare(written, value, spec, f"{where} column {name!r}")
            elif name not in unchecked and written:
                problems.append(f"{where} column {name!r}: writes {row[ci]!r} but the manifest neither "
                                "computes it (cells) nor says why not (unchecked)")
    for key in set(rows) - seen:
        problems.append(f"{doc}:{t['line']}: the manifest's row {key!r} is not in the table")
    return problems


def check_figure(entry: dict, ns: dict) -> list[str]:
    doc, text = entry["doc"], entry["text"]
    where = f"{doc} [{entry['section']}] {text!r}"
    if _flat(text) not in _flat(section_text(doc, entry["section"])):
        return [f"{where}: not found in that section"]
    written = numbers(text)
    if "numbers" in entry:  # only some of the text's numbers are figures (e.g. a count beside them)
        if any(i >= len(written) for i in entry["numbers"]):
            return [f"{where}: numbers {entry['numbers']} picks beyond the {len(written)} numbers written: "
                    f"{list(enumerate(w for w, _ in written))}"]
        written = [written[i] for i in entry["numbers"]]
    try:
        value = evaluate(entry["expr"], ns)
    except Exception as e:  # noqa: BLE001
        return [f"{where}: {entry['expr']!r} raised {type(e).__name__}: {e}"]
    return compare(written, value, entry, where)


# ------------------------------------------------------------------ the tests


@lru_cache(maxsize=None)
def manifest() -> dict:
    return yaml.safe_load(MANIFEST.read_text())


@lru_cache(maxsize=None)
def namespace() -> Namespace:
    return Namespace(manifest())


def _id(e: dict) -> str:
    return f"{e['doc']}::{(e.get('header') or e.get('section') or '')[:40]}::{(e.get('text') or '')[:30]}"


@pytest.mark.parametrize("entry", manifest().get("tables") or [], ids=_id)
def test_table_figures_recompute_from_committed_data(entry):
    problems = check_table(entry, namespace())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("entry", manifest().get("figures") or [], ids=_id)
def test_sentence_figures_recompute_from_committed_data(entry):
    problems = check_figure(entry, namespace())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("entry", manifest().get("examples") or [], ids=_id)
def test_example_tables_say_so_in_their_doc(entry):
    """A table whose output was not committed is kept only as a labelled example: the doc's text in
    the same section says so (``says``, which must name it an example and give the command)."""
    t = find_table(entry["doc"], entry["header"], entry.get("section"))
    says = entry["says"]
    assert "example" in says.lower(), f"{entry['doc']}:{t['line']}: 'says' must call the figures an example: {says!r}"
    assert "`" in says, f"{entry['doc']}:{t['line']}: 'says' must name the command in backquotes: {says!r}"
    section = _flat(section_text(entry["doc"], t["section"])) if t["section"] else _flat(doc_text(entry["doc"]))
    assert _flat(says) in section, f"{entry['doc']}:{t['line']}: the label {says!r} is not in {t['section']!r}"


def _coverage_params():
    return [(doc, t["header_line"], t["line"]) for doc in manifest().get("coverage") or []
            for t in tables(doc_text(doc)) if any(numbers(" ".join(r)) for r in t["rows"])]


@pytest.mark.parametrize("doc,header,line", _coverage_params(), ids=lambda x: str(x)[:50])
def test_every_table_of_figures_is_backed_or_labelled(doc, header, line):
    listed = [find_table(doc, e["header"], e.get("section"))["line"]
              for e in (manifest().get("tables") or []) + (manifest().get("examples") or []) if e["doc"] == doc]
    assert line in listed, (
        f"{doc}:{line}: a table of figures that docs/figures.yaml neither recomputes (tables) nor lists as a "
        f"labelled example (examples): {header[:100]}")


def test_every_manifest_source_is_committed_and_read():
    for name, spec in (manifest().get("sources") or {}).items():
        assert load_source(spec) is not None, name


# ------------------------------------------------------------------ the checker can fail


def test_checker_numbers_and_rounding():
    assert numbers("2,471.0 + 2,480.6") == [(2471.0, 0.05), (2480.6, pytest.approx(0.05))]
    assert numbers("**−0.069%**") == [(-0.069, pytest.approx(0.0005))]
    assert numbers("16.9 / 62.4 ms") == [(16.9, pytest.approx(0.05)), (62.4, pytest.approx(0.05))]
    assert [w for w, _ in numbers("c=16 warn (p99 from 32)")] == [16, 32]  # "p99" is a name, not a figure


def test_checker_fails_a_value_off_by_more_than_its_rounding():
    assert compare(numbers("1,547"), 1547.4, {}, "x") == []
    assert compare(numbers("1,547"), 1547.6, {}, "x")  # rounds to 1,548
    assert compare(numbers("−0.069%"), -0.0687, {}, "x") == []
    assert compare(numbers("−0.069%"), -0.0696, {}, "x")
    assert compare(numbers("0.2%"), 0.192, {"cmp": "<="}, "x") == []
    assert compare(numbers("0.2%"), 0.353, {"cmp": "<="}, "x")
    assert compare(numbers("1 / 2"), [1], {}, "x")  # a number written that nothing computes


def test_checker_fails_a_table_whose_cell_drifted(tmp_path, monkeypatch):
    doc = tmp_path / "d.md"
    doc.write_text("# T\n\n| level | J | W |\n|---|---:|---:|\n| c=1 | 13,056.8 | 277 |\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    doc_text.cache_clear()
    try:
        ns = Namespace({"let": {"data": "{'j': 13056.84, 'w': 276.8}"}})
        entry = {"doc": "d.md", "header": "| level |", "rows": {"c=1": "data"},
                 "cells": {"J": "r['j']", "W": "r['w']"}}
        assert check_table(entry, ns) == []
        assert check_table({**entry, "cells": {"J": "r['j'] + 0.06", "W": "r['w']"}}, ns)
        assert check_table({**entry, "cells": {"J": "r['j']"}}, ns)  # W written, neither computed nor excused
        assert check_table({**entry, "rows": {"c=1": "data", "c=2": "data"}}, ns)  # a row the doc lost
    finally:
        doc_text.cache_clear()
