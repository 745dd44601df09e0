"""Coverage by default: every number written in README.md and docs/*.md is either checked by
docs/figures.yaml (tests/unit/test_doc_figures.py recomputes it), inside a block marked as an
example, not a measurement by the rules below, or listed in docs/figures-unchecked.json — the
explicit, reviewed list of measured numbers that no committed data backs yet. A number added or
changed anywhere else fails this test, naming the line and what to do.

The rules (the manifest's header, docs/figures.yaml, states them for writers):
  - example blocks: a line ``<!-- example -->`` marks the next block (a fenced code block, a
    table or a paragraph: up to the next blank line after it starts) as an example;
  - input, not output: fenced code blocks tagged with an input language (bash, sh, yaml, toml,
    json, python, …) hold commands and configuration; inline code spans hold commands, flags,
    names and paths; a fenced block with no tag or ``text`` is output and is scanned;
  - not measurements: headings, links and URLs, dates and times, versions (three-part numbers
    and the number after a software name), commit hashes and other runs of 7+ digits written without
    thousands separators, part/section/step/issue numbers, flag
    values (``--flag 16``), list enumerators, and digits glued to letters (``h200``, ``1b``,
    ``p99``, ``x2``).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "docs" / "figures-unchecked.json"
MANIFEST = ROOT / "docs" / "figures.yaml"
EXAMPLE = re.compile(r"^\s*<!--\s*example\b.*-->\s*$")
INPUT_LANGS = {"bash", "sh", "shell", "zsh", "console", "yaml", "yml", "toml", "json", "jsonl", "python", "py",
               "ini", "dockerfile", "sql", "diff", "make", "cfg"}
NUM = re.compile(r"(?<![\w.])[+\-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
SOFTWARE = (r"(?:Python|python|torch|transformers|CUDA|cuda|driver|nvcc|glibc|Ubuntu|Linux|vLLM|vllm|SGLang|"
            r"llama\.cpp|aiohttp|numpy|pydantic|typer|GNU|Hopper|NVML|nvidia-ml-py|pytest|version|schema|"
            r"format|build|release|Rust|Go|Node|node|macOS|Windows|Debian|Fedora|kernel)")
NOT_MEASUREMENTS = [
    r"`[^`]*`",                                              # inline code: commands, flags, names, paths
    r"\]\([^)]*\)", r"<[^>]*>", r"https?://\S+",             # links, HTML, URLs
    r"\b\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+)?(?:Z|[+-]\d{2}:?\d{2})?",  # dates
    r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s*[–-]\s*\d{1,2}:\d{2}(?::\d{2})?)?",  # times and time ranges
    r"\b\d+(?:\.\d+){2,}\S*",                                # versions a.b.c
    SOFTWARE + r"\s+v?\d+(?:\.\d+)*",                        # the version after a software name
    r"\b[0-9a-f]*[a-f][0-9a-f]*\d[0-9a-f]*\b(?<=\w{7})",      # commit hashes (hex with a letter and a digit)
    r"\b[0-9a-f]*\d[0-9a-f]*[a-f][0-9a-f]*\b(?<=\w{7})",
    r"\b\d{7,}\b",                                          # 7+ digits, no commas: hashes, run ids, stamps
    r"(?:\b(?:[Pp]arts?|[Ss]ections?|[Ss]teps?|[Ii]ssues?|[Pp]hases?|PR|rule|[Gg]oal|item|question)\s+#?\d+[a-z]?"
    r"(?:\s*(?:[–,-]|and|or|to)\s*\d+[a-z]?)*)",             # part/section/step/issue numbers
    r"§\s*\d+(?:\.\d+)*[a-z]?", r"\bG\d+[a-z]?\b",
    r"--[\w-]+(?:[ =](?!-)[^\s,;)]+)?",                      # flags and their values
    r"^\s*(?:\d+\.|[-*+])\s",                                # list enumerators
]
_STRIP = re.compile("|".join(f"(?:{p})" for p in NOT_MEASUREMENTS), re.M)


def docs() -> list[str]:
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def _manifest() -> dict:
    import yaml

    return yaml.safe_load(MANIFEST.read_text())


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def blocks(text: str) -> list[dict]:
    """The doc cut into blocks: ``kind`` (heading, code, table, para), ``lines`` (1-based start),
    ``text``, ``example`` (marked), ``lang`` (code)."""
    lines = text.split("\n")
    out, i, marked = [], 0, False
    while i < len(lines):
        ln = lines[i]
        if EXAMPLE.match(ln):
            marked, i = True, i + 1
            continue
        if not ln.strip():
            i += 1
            continue
        fence = re.match(r"^\s*(```+|~~~+)\s*([\w+-]*)", ln)
        if fence:
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence.group(1)):
                j += 1
            out.append({"kind": "code", "line": i + 1, "text": "\n".join(lines[i + 1:j]),
                        "lang": fence.group(2).lower(), "example": marked})
            i, marked = j + 1, False
            continue
        if ln.startswith("#"):
            out.append({"kind": "heading", "line": i + 1, "text": ln, "example": False})
            i += 1
            continue
        kind = "table" if ln.lstrip().startswith("|") else "para"
        j = i
        while j < len(lines) and lines[j].strip() and not re.match(r"^\s*(```|~~~)", lines[j]) \
                and not lines[j].startswith("#") and not EXAMPLE.match(lines[j]) \
                and (lines[j].lstrip().startswith("|")) == (kind == "table"):
            j += 1
        out.append({"kind": kind, "line": i + 1, "text": "\n".join(lines[i:j]), "example": marked})
        i, marked = j, False
    return out


def candidates(doc: str, text: str, manifest: dict) -> list[tuple[int, str, str]]:
    """(line, number as written, context) for every number of ``text`` that no rule, example mark
    or manifest entry accounts for."""
    covered_tables = [e["header"] for sect in ("tables", "examples") for e in (manifest.get(sect) or []) if e["doc"] == doc]
    figure_texts = sorted({_flat(e["text"]) for e in (manifest.get("figures") or []) if e["doc"] == doc}, key=len,
                          reverse=True)
    out = []
    for b in blocks(text):
        if b["example"] or b["kind"] == "heading":
            continue
        if b["kind"] == "code" and b["lang"] in INPUT_LANGS:
            continue
        if b["kind"] == "table" and any(b["text"].lstrip().startswith(h) for h in covered_tables):
            continue
        body = b["text"]
        skip = 0
        if b["kind"] == "table":  # the header and separator rows name columns
            skip = 2
        elif b["kind"] == "code":
            skip = -1  # the fence line precedes the text
        # strip what is not a measurement over the whole block (an inline code span may break a line)
        stripped = _STRIP.sub(lambda m: " " + "\n" * m.group(0).count("\n"), body)
        raw_lines, lines = body.split("\n"), stripped.split("\n")
        found = []
        for k, ln in enumerate(lines):
            if k < skip:
                continue
            found += [(b["line"] + k - min(skip, 0), m.group(0), raw_lines[k].strip()[:120]) for m in NUM.finditer(ln)]
        # a sentence the manifest checks covers its numbers, wherever its line breaks fall
        covered: Counter = Counter()
        for t in figure_texts:
            for _ in range(_flat(body).count(t)):
                covered.update(m.group(0) for m in NUM.finditer(_STRIP.sub(" ", t)))
        out += _discount(found, covered)
    return out


def _discount(found: list, covered: Counter) -> list:
    """``found`` less one occurrence of each number a manifest sentence of this block covers."""
    if not covered:
        return found
    left = Counter(covered)
    keep = []
    for c in reversed(found):
        if left[c[1]] > 0:
            left[c[1]] -= 1
            continue
        keep.append(c)
    return list(reversed(keep))


def scan() -> dict[str, list[tuple[int, str, str]]]:
    manifest = _manifest()
    return {doc: candidates(doc, (ROOT / doc).read_text(), manifest) for doc in docs()}


def _baseline() -> dict[str, dict[str, int]]:
    return json.loads(BASELINE.read_text()) if BASELINE.is_file() else {}


def write_baseline() -> None:
    found = scan()
    data = {doc: dict(sorted(Counter(n for _, n, _ in c).items())) for doc, c in found.items() if c}
    BASELINE.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")


@pytest.mark.parametrize("doc", docs())
def test_every_number_in_the_docs_is_checked_marked_or_listed(doc):
    allowed = Counter(_baseline().get(doc, {}))
    found = candidates(doc, (ROOT / doc).read_text(), _manifest())
    seen: Counter = Counter()
    extra = []
    for line, num, ctx in found:
        seen[num] += 1
        if seen[num] > allowed[num]:
            extra.append(f"{doc}:{line}: {num!r} in {ctx!r}")
    assert not extra, (
        "numbers written that nothing checks (a measurement: add its committed data and an entry to "
        "docs/figures.yaml; an illustration: put `<!-- example -->` on the line before its block; neither — "
        "a figure from data never committed, or a number the rules miss — regenerate the reviewed list with "
        "`python tests/unit/test_doc_coverage.py --update` and say why in the commit):\n" + "\n".join(extra)
    )


def test_the_unchecked_list_names_only_existing_docs():
    assert set(_baseline()) <= set(docs())


def test_scanner_rules(tmp_path):
    text = "\n".join([
        "# Part 3 of 2026",
        "The run took 12.5 s on the h200 with llama-1b at 2026-12-01 15:42 UTC (torch 2.11.0, part 4, §9).",
        "Run `wattbench run -c 16` or --concurrency 64 at commit 4160335.",
        "",
        "<!-- example -->",
        "```",
        "answer: 3,693 tok/s per kW",
        "```",
        "",
        "```",
        "answer: 5,012 tok/s per kW",
        "```",
        "",
        "```bash",
        "wattbench run --duration 30",
        "```",
        "",
        "<!-- example -->",
        "| a | b |",
        "|---|---|",
        "| 7 | 8 |",
        "",
        "| c | d |",
        "|---|---|",
        "| 9 | 1.5 |",
    ])
    got = [n for _, n, _ in candidates("x.md", text, {"figures": [{"doc": "x.md", "text": "took 12.5 s"}]})]
    assert got == ["5,012", "9", "1.5"]
    # the sentence stops being covered when its number changes
    changed = text.replace("took 12.5 s", "took 12.6 s")
    assert [n for _, n, _ in candidates("x.md", changed, {"figures": [{"doc": "x.md", "text": "took 12.5 s"}]})][0] == "12.6"


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        write_baseline()
        print(f"wrote {BASELINE.relative_to(ROOT)}")
    else:
        print("usage: python tests/unit/test_doc_coverage.py --update", file=sys.stderr)
        sys.exit(2)
