"""The ``Scrubber``: removes every form of a set of secrets, and every piece of one, from any text,
bytes, JSON text (string by string, so the JSON stays valid) or nested object, wherever a server
echoed them (a 401 body, an SSE error event, generated text, a model id) — any run of ``GRAM`` (8)
characters of a secret, in any letter case, as hex, base64, or with some or all of its characters
escaped (``\\uXXXX``, ``%XX``, ``&#N;`` …), so a server that echoes the start of a key, or a text cut
through one, leaves nothing of it. A secret shorter than ``GRAM`` is masked whole, in every form of
``core/secret_forms.secret_forms``.

The pieces of long secrets are compiled once per ``add`` into tries of alternations
(``_trie_pattern``, ``_Pieces``): anchors searched in the whole text first, the pieces only around
each hit, so a text without any costs one scan or two. ``redact_text(text, secrets)`` is one text
scrubbed of the secrets given; the secrets registered for what runs now are ``core/secret_scope``'s.
"""

from __future__ import annotations

import base64
import bisect
import html
import itertools
import json
import re
from typing import Any, Iterable, TypeVar, cast, overload

from wattbench.core.redact import MASK, MIN_SECRET, SCHEME_VALUE, BasicCredential
from wattbench.core.secret_forms import secret_forms

_T = TypeVar("_T")

__all__ = ["Scrubber", "redact_text", "GRAM", "GRAM_SECRET_CHARS", "PUBLIC_WORDS"]


def redact_text(text: str | None, secrets: Iterable[str | None]) -> str | None:
    """``text`` with every form of every secret replaced by ``***``."""
    if not text:
        return text
    return Scrubber(secrets).text(text)


_NAME_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a JSON object key that is a field name
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)

GRAM = 8  # a run of this many characters of a secret (or more) is masked wherever it shows
GRAM_SECRET_CHARS = 8192  # the pieces of a longer secret are taken from its first this many characters
# escapes a piece of a secret can hide in, partly or whole: JSON/JS ``\uXXXX`` (a run, surrogate pairs
# joined) and ``\xNN``; URL ``%XX`` (a run: UTF-8 bytes); HTML ``&#N;``, ``&#xN;``, ``&name;``; JSON's
# short escapes
_ESCAPE = re.compile(r"(?:\\u[0-9a-fA-F]{4})+|(?:\\x[0-9a-fA-F]{2})+|(?:%[0-9a-fA-F]{2})+|&#[0-9]{1,7};"
                     r"|&#[xX][0-9a-fA-F]{1,6};|&[a-zA-Z][a-zA-Z0-9]{1,31};|\\[/\"\\'bfnrt]")
# the longest escape of one character (``\\uD83D\\uDE00``), times GRAM: how far from an escape a
# piece of a secret that holds it can reach
_ESCAPE_REACH = 12 * GRAM
_SHORT_ESCAPES = {"/": "/", '"': '"', "\\": "\\", "'": "'", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _trie_pattern(words: Iterable[str]) -> str:
    """A regular expression matching any of ``words`` (a trie of alternations: at each position of a
    text the match fails after a character or two, as an Aho–Corasick automaton would)."""
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = None

    def walk(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + walk(node[ch]) for ch in sorted(k for k in node if k)]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if "" in node:  # a word ends here and longer ones go on
            return f"(?:{body})?"
        return body

    return walk(trie)


def _decode_escape(m: re.Match[str]) -> list[tuple[str, int]]:
    """One escape (or run of escapes) as (character, length of its escape in the text) pairs; ``[]``
    for an unknown HTML entity (left as it is)."""
    s = m.group(0)
    if s.startswith("\\u"):
        units = [int(s[i + 2:i + 6], 16) for i in range(0, len(s), 6)]
        out: list[tuple[str, int]] = []
        i = 0
        while i < len(units):
            u = units[i]
            if 0xD800 <= u < 0xDC00 and i + 1 < len(units) and 0xDC00 <= units[i + 1] < 0xE000:
                out.append((chr(0x10000 + ((u - 0xD800) << 10) + (units[i + 1] - 0xDC00)), 12))
                i += 2
            else:
                out.append((chr(u), 6))
                i += 1
        return out
    if s[0] in "%\\" and len(s) >= 3 and s[1] != "\\" and (s[0] == "%" or s[1] == "x"):
        step = 3 if s[0] == "%" else 4
        data = bytes(int(s[i + step - 2:i + step], 16) for i in range(0, len(s), step))
        return [(ch, step * len(ch.encode("utf-8", "surrogateescape"))) for ch in data.decode("utf-8", "surrogateescape")]
    if s[0] == "\\":
        return [(_SHORT_ESCAPES[s[1]], 2)]
    if s.startswith("&#"):
        try:
            n = int(s[3:-1], 16) if s[2] in "xX" else int(s[2:-1])
            return [(chr(n), len(s))]
        except (ValueError, OverflowError):
            return []
    ch = html.unescape(s)
    return [(ch, len(s))] if ch != s and len(ch) == 1 else []


def _decoded(text: str, lo: int, hi: int) -> tuple[str, list[int], list[int]] | None:
    """``text[lo:hi]`` with its escapes decoded, and for each decoded character where it starts and
    ends in ``text``; None when the part holds no escape."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    at = lo
    found = False
    for m in _ESCAPE.finditer(text, lo, hi):
        dec = _decode_escape(m)
        if not dec:
            continue
        found = True
        for i in range(at, m.start()):
            chars.append(text[i])
            starts.append(i)
            ends.append(i + 1)
        pos = m.start()
        for ch, n in dec:
            chars.append(ch)
            starts.append(pos)
            ends.append(pos + n)
            pos += n
        at = m.end()
    if not found:
        return None
    for i in range(at, hi):
        chars.append(text[i])
        starts.append(i)
        ends.append(i + 1)
    return "".join(chars), starts, ends


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


class _Pieces:
    """The pieces of a set of long secrets (``GRAM`` characters or more), compiled once.

    Finding them is two steps, so that a text without any costs one scan or two: anchors — pieces
    of 4 (hex: 8) characters taken every 4 of the secret, of which any run of ``GRAM`` holds one;
    the base64 of every 3 bytes, of which any base64 run of 8 bytes holds one whole — are searched
    in the whole text (lower-cased, and as it is for base64), escapes that decode to a character of a
    secret likewise; then only around each hit are the pieces themselves matched (raw characters in
    any case, hex, base64, and the same text with its escapes decoded)."""

    __slots__ = ("grams", "text_grams", "anchors", "anchors_i", "b64_anchors", "escapes")

    def __init__(self, secrets: Iterable[str]):
        text_g: set[str] = set()
        hex_g: set[str] = set()
        b64_g: set[str] = set()
        text_a: set[str] = set()
        b64_a: set[str] = set()
        chars: set[str] = set()
        for secret in secrets:
            s = str(secret)[:GRAM_SECRET_CHARS]
            low = s.lower()
            texts = {low, low.replace(" ", "+")}  # quote_plus writes a space as +
            text_g |= {t[i:i + GRAM] for t in texts for i in range(len(t) - GRAM + 1)}
            text_a |= {t[i:i + 4] for t in texts for i in range(0, len(t) - 3, 4)}
            b = s.encode("utf-8", "surrogateescape")
            hex_g |= {b[i:i + GRAM].hex() for i in range(len(b) - GRAM + 1)}
            text_a |= {b[i:i + 4].hex() for i in range(0, len(b) - 3, 4)}
            for enc in (base64.b64encode, base64.urlsafe_b64encode):
                b64_g |= {enc(b[i:i + 6]).decode() for i in range(len(b) - 5)}
                b64_a |= {enc(b[i:i + 3]).decode() for i in range(len(b) - 2)}
            chars |= set(s) | set(low) | set(s.upper())
        text_pat = _trie_pattern(text_g)
        # a lookahead: a match at every position a piece starts, overlapping ones too (a run of 12
        # characters of a key is the pieces at 0..4, merged)
        # group 1: a raw or hex piece; group 2: a base64 window
        self.grams = re.compile(f"(?=((?i:{text_pat}|{_trie_pattern(hex_g)}))|({_trie_pattern(b64_g)}))")
        self.text_grams = re.compile(f"(?=({text_pat}))", re.I)
        self.anchors = re.compile(_trie_pattern(text_a))
        self.anchors_i = re.compile(_trie_pattern(text_a), re.I)  # for a text that lower() lengthens
        self.b64_anchors = re.compile(_trie_pattern(b64_a))
        self.escapes = re.compile(_trie_pattern({e for c in chars for e in _escapes_of(c)}))

    def spans(self, text: str, first: bool = False) -> list[tuple[int, int]]:
        """Where pieces show in ``text`` (merged spans; ``first``: stop at the first)."""
        spans: list[tuple[int, int]] = []
        low = text.lower()
        hits = (self.anchors.finditer(low) if len(low) == len(text) else self.anchors_i.finditer(text))
        for hit in itertools.chain(hits, self.b64_anchors.finditer(text)):
            p = hit.start()
            # a raw piece starts at most 4 before its anchor, a hex one 8 (16 long), a base64 one 4 (8 long)
            for m in self.grams.finditer(text, max(0, p - 8), p + 16):
                if m.group(1) is not None:
                    if _public(m.group(1)):
                        continue
                    spans.append(m.span(1))
                else:  # a base64 window: with the last group and padding of the secret's base64 after it
                    a, b = m.span(2)
                    tail = _B64_TAIL.match(text, b)
                    spans.append((a, tail.end() if tail else b))
                if first:
                    return spans
        regions: list[tuple[int, int]] = []
        for m in self.escapes.finditer(text):
            # a piece with an escape in it reaches at most _ESCAPE_REACH characters from it
            a, b = max(0, m.start() - _ESCAPE_REACH), min(len(text), m.end() + _ESCAPE_REACH)
            if regions and a <= regions[-1][1]:
                regions[-1] = (regions[-1][0], max(b, regions[-1][1]))
            else:
                regions.append((a, b))
        for lo, hi in regions:
            dec = _decoded(text, lo, hi)
            if dec is None:
                continue
            chars, starts, ends = dec
            for m in self.text_grams.finditer(chars):
                spans.append((starts[m.start(1)], ends[m.end(1) - 1]))
                if first:
                    return spans
        return _merged(spans)


# Text wattbench itself writes in every file and line (its name: ``wattbench: error:``,
# ``wattbench_version``): an 8-character run of a secret that lies inside it teaches no one anything
# of the secret, and masking it would turn the tool's own words (and result.json's field) into ``***``.
PUBLIC_WORDS = ("wattbench",)


def _public(piece: str) -> bool:
    """Whether a raw piece is part of ``PUBLIC_WORDS`` (case-folded)."""
    low = piece.lower()
    return any(low in w for w in PUBLIC_WORDS)


# what ends a secret's base64 after its last whole window: the group its last bytes share, and padding
_B64_TAIL = re.compile(r"[A-Za-z0-9+/_\-]{0,3}={0,2}")


def _escapes_of(c: str) -> set[str]:
    """The escapes that decode to ``c`` (``_ESCAPE``'s kinds), in lower- and upper-case hex."""
    out: set[str] = set()
    o = ord(c)
    units = [o] if o <= 0xFFFF else [0xD800 + ((o - 0x10000) >> 10), 0xDC00 + ((o - 0x10000) & 0x3FF)]
    for x in ("x", "X"):  # the hex digits in lower and upper case
        out.add("".join(f"\\u{u:04{x}}" for u in units))
        out.add(f"&#x{o:{x}};")
        out.add(f"&#X{o:{x}};")
        for byte in c.encode("utf-8", "surrogateescape"):  # a byte of a run of %XX / \xNN
            out.add(f"%{byte:02{x}}")
            out.add(f"\\x{byte:02{x}}")
    out.add(f"&#{o};")
    out |= {e for e, ch in _NAMED.items() if ch == c}
    return out


# the short escapes _ESCAPE decodes whose character can be in a secret: JSON's and HTML's named ones
_NAMED = {"\\/": "/", '\\"': '"', "\\\\": "\\", "\\'": "'", "\\b": "\b", "\\f": "\f", "\\n": "\n", "\\r": "\r",
          "\\t": "\t", "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'"}


class Scrubber:
    """Removes every secret of a set, and every piece of one, replacing it with ``***``.

    A secret of ``GRAM`` (8) characters or more is masked wherever any run of 8 or more of its
    characters shows (a server that echoes the start of a key, a text cut through one), in any
    letter case, in any mix of raw characters and escapes (``\\uXXXX``, ``\\xNN``, ``%XX``, HTML
    entities: a key URL-encoded, JSON-escaped or HTML-escaped, whole or in part), as hex and as
    base64 (``_Pieces``); a shorter one by whole value in every form of ``secret_forms``. The pieces
    are compiled once per ``add``.

    ``text`` for any text (a message, an HTML page), ``json_text`` for JSON (each string literal is
    decoded, scrubbed and re-encoded, so the document stays valid JSON whatever the secret holds),
    ``obj`` for nested dicts/lists, ``found_in`` for a quick test of text or bytes, ``cut`` to cut a
    text after scrubbing it. An empty scrubber returns its input unchanged at the cost of one truth
    test."""

    __slots__ = ("_forms", "_probes", "_bprobes", "_pieces", "secrets")

    def __init__(self, secrets: Iterable[str | None] = ()):
        self.secrets: list[str] = []
        self._forms: list[str] = []
        self._probes: list[str] = []
        self._bprobes: list[bytes] = []
        self._pieces: _Pieces | None = None
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        kept = list(self.secrets)
        for s in secrets:
            if s and len(s) >= MIN_SECRET and s not in kept:
                kept.append(s)
        self._compile(kept)

    def discard(self, *secrets: str) -> None:
        """Stop removing ``secrets`` (a scope that registered them ended: ``scope``)."""
        gone = set(secrets)
        if any(s in gone for s in self.secrets):
            self._compile([s for s in self.secrets if s not in gone])

    def _compile(self, secrets: list[str]) -> None:
        """Search for ``secrets`` from now on. Each search table is built first and then swapped in
        whole, so a thread that scrubs meanwhile uses the old table or the new one, each complete:
        while secrets are added it masks at least the old ones, while some are discarded at least
        those that stay."""
        # a ``<scheme> <credential>`` value (``Bearer sk-…``): the credential's pieces (the scheme and
        # its space are no secret: ``key: sk-…`` keeps its space)
        creds = [s.split(None, 1)[1].strip() if SCHEME_VALUE.match(s) else s for s in secrets]
        # by whole value: what is too short for pieces (a short credential behind its scheme too)
        short = [s for s, c in zip(secrets, creds) if len(c) < GRAM]
        # a URL credential's password, shorter than GRAM, by whole value (its pieces are too short)
        short += [s.partition(":")[2] for s in secrets if isinstance(s, BasicCredential)
                  and MIN_SECRET <= len(s.partition(":")[2]) < GRAM]
        forms = {f for s in short for f in secret_forms(s)}
        # what a short secret looks like inside JSON text as well (each form's JSON escape)
        probes = forms | {json.dumps(f)[1:-1] for f in forms} | {json.dumps(f, ensure_ascii=False)[1:-1] for f in forms}
        probe_list = sorted((p for p in probes if len(p) >= MIN_SECRET), key=len, reverse=True)
        long = [c for c in dict.fromkeys(creds) if len(c) >= GRAM]
        # a secret inside another (the key inside ``Bearer <key>``, a password inside ``user:password``)
        # has no piece the other's pieces lack: searched once, through the longer
        cut = [str(s)[:GRAM_SECRET_CHARS] for s in long]
        long = [s for s, c in zip(long, cut) if not any(c != o and c in o for o in cut)]
        pieces = _Pieces(long) if long else None
        self.secrets = secrets
        self._forms = sorted(forms, key=len, reverse=True)  # the longest first: a form inside another
        self._probes = probe_list
        self._bprobes = [p.encode("utf-8") for p in probe_list]
        self._pieces = pieces

    def __bool__(self) -> bool:
        return bool(self._forms) or self._pieces is not None

    def _spans(self, text: str, first: bool = False) -> list[tuple[int, int]]:
        return self._pieces.spans(text, first) if self._pieces is not None else []

    def found_in(self, data: str | bytes) -> bool:
        """Whether a secret (any form), or a piece of one, occurs in ``data``."""
        if not self or not data:
            return False
        if isinstance(data, (bytes, bytearray, memoryview)):
            if any(p in data for p in self._bprobes):
                return True
            return bool(self._pieces is not None and self._spans(bytes(data).decode("utf-8", "surrogateescape"), True))
        return any(p in data for p in self._probes) or bool(self._spans(data, True))

    @overload
    def text(self, text: str) -> str: ...

    @overload
    def text(self, text: _T) -> _T: ...

    def text(self, text: object) -> object:
        """``text`` with every form of every secret, and every piece of one, replaced by ``***``
        (non-strings unchanged)."""
        if not self or not text or not isinstance(text, str):
            return text
        spans = self._spans(text)
        if spans:
            parts, at = [], 0
            for a, b in spans:
                parts += [text[at:a], MASK]
                at = b
            parts.append(text[at:])
            text = "".join(parts)
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def whole(self, text: str) -> str:
        """``text`` with every form of every whole secret replaced by ``***`` (pieces left)."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def bytes(self, data: bytes) -> bytes:
        """``data`` (a child's output line) with every form of every secret replaced by ``***``."""
        if not self.found_in(data):
            return data
        return self.text(bytes(data).decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    @overload
    def cut(self, text: str, limit: int, ellipsis: str = "") -> str: ...

    @overload
    def cut(self, text: _T, limit: int, ellipsis: str = "") -> _T: ...

    def cut(self, text: object, limit: int, ellipsis: str = "") -> object:
        """``text`` scrubbed, then cut to ``limit`` characters (the last one ``ellipsis`` when
        given and something was cut): in this order, so that a secret that straddles the cut leaves
        no piece behind. A text far longer than ``limit`` is first bounded (to ``4 * limit +
        _ESCAPE_REACH``: whatever is masked, what is kept lies in it), so scrubbing 1 MB costs
        nothing when 200 characters are kept."""
        if not isinstance(text, str):
            return text
        bound = 4 * limit + _ESCAPE_REACH
        clean = self.text(text[:bound] if len(text) > bound else text)
        if len(clean) <= limit:
            return clean
        return clean[:max(0, limit - len(ellipsis))] + ellipsis if ellipsis else clean[:limit]

    def json_text(self, text: str) -> str:
        """JSON text with every string literal scrubbed (keys too); the structure is untouched. A
        literal that holds an escaped backslash (``"\\\\u0073k-…"``: a text that held escapes) is
        decoded and searched too. Where only pieces of long secrets can be, the text is searched once
        and only the literals that hold a hit are decoded."""
        if not self or not text:
            return text
        nested = "\\\\u" in text or "\\\\x" in text
        spans = self._spans(text)
        whole = any(p in text for p in self._probes)  # a short secret, by whole value
        if not (spans or whole or (nested and self.found_in(text.replace("\\\\", "\\")))):
            return text
        starts = [a for a, _ in spans]

        def hit(a: int, b: int) -> bool:
            i = bisect.bisect_left(starts, b) - 1  # the last span starting before the literal ends
            return i >= 0 and spans[i][1] > a

        def one(m: re.Match[str]) -> str:
            lit = m.group(0)
            if whole or nested:
                if not (self.found_in(lit) or (nested and ("\\\\u" in lit or "\\\\x" in lit))):
                    return lit
            elif not hit(m.start(), m.end()):
                return lit
            try:
                value = json.loads(lit)
            except ValueError:
                return self.text(lit)
            # an object key that is a plain name (``wattbench_version``, ``output_tokens_per_s``) is the
            # writer's own field, never a place a server echoes a key: a secret that shares eight
            # characters with it (a key holding "wattbench") must not make the file unreadable; the
            # whole secret is still masked there
            key = text[m.end():m.end() + 8].lstrip().startswith(":") and _NAME_KEY.fullmatch(value) is not None
            clean = self.whole(value) if key else self.text(value)
            return lit if clean == value else json.dumps(clean, ensure_ascii=False)

        return _JSON_STRING.sub(one, text)

    def obj(self, o: _T) -> _T:
        """A copy of nested dicts/lists/tuples with every string scrubbed (keys too)."""
        if not self:
            return o
        # each copy has the type of what it copies (a str, dict, list or tuple of scrubbed values)
        if isinstance(o, str):
            return cast(_T, self.text(o))
        if isinstance(o, dict):
            return cast(_T, {self.text(k) if isinstance(k, str) else k: self.obj(v) for k, v in o.items()})
        if isinstance(o, (list, tuple)):
            return cast(_T, type(o)(self.obj(v) for v in o))
        return o
