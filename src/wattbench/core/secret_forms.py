"""Every form a secret travels in (``secret_forms``): raw; URL-encoded (``quote`` with and without
``/`` kept, ``quote_plus``, every byte as ``%XX``, in upper- and lower-case hex); JSON-escaped (ASCII
and UTF-8, ``\\/`` for ``/``, every character as ``\\uXXXX``); HTML (``html.escape``, every
character as ``&#N;`` and ``&#xN;``); base64 (standard and URL-safe, with and without padding, and
the part of its encoding that stays the same inside a longer base64 text); for URL credentials
(``user:password``) the same for the password alone. The ``Scrubber`` (``core/scrubber.py``) masks
a short secret by these forms whole.
"""

from __future__ import annotations

import base64
import html
import json
import re
import urllib.parse

from wattbench.core.redact import MIN_SECRET, BasicCredential

__all__ = ["secret_forms", "B64_CORE_MIN"]

B64_CORE_MIN = 8  # a base64 core shorter than this (a secret under ~7 bytes) would match by chance


def _percent_all(b: bytes) -> str:
    return "".join(f"%{c:02X}" for c in b)


def _json_u(s: str) -> str:
    """Every character as a JSON ``\\uXXXX`` escape (a surrogate pair above U+FFFF)."""
    out = []
    for ch in s:
        o = ord(ch)
        if o > 0xFFFF:
            o -= 0x10000
            out.append(f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}")
        else:
            out.append(f"\\u{o:04x}")
    return "".join(out)


_PCT = re.compile(r"%[0-9A-F]{2}")


def _b64_forms(b: bytes) -> list[str]:
    """``b`` in base64 (standard and URL-safe alphabets, with and without padding), and the part of
    its encoding that is the same wherever it sits inside a longer base64 text: for each of the three
    alignments, the 4-character groups made of its bytes alone (``Basic base64(user:password)``,
    a JSON document or a header blob that holds the secret, encoded whole)."""
    out: list[str] = []
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        full = enc(b).decode()
        out += [full, full.rstrip("=")]
        for o in range(3):
            text = enc(b"\0" * o + b).decode()
            first = 1 if o else 0  # the first group holds padding bytes when o > 0
            last = (o + len(b)) // 3  # groups made of bytes up to the end of b
            core = text[4 * first:4 * last]
            if len(core) >= B64_CORE_MIN:
                out.append(core)
    return out


def _encodings(s: str) -> list[str]:
    """The encodings a text travels in: raw; URL-encoded (``quote`` with and without ``/`` kept,
    ``quote_plus``, every byte as ``%XX``, upper- and lower-case hex); JSON-escaped (ASCII and UTF-8,
    ``\\/`` for ``/``, every character as ``\\uXXXX`` in lower- and upper-case hex); HTML
    (``html.escape``, every character as ``&#N;`` and ``&#xN;``); base64 (``_b64_forms``)."""
    b = s.encode("utf-8")
    url = [urllib.parse.quote(s, safe=""), urllib.parse.quote(s), urllib.parse.quote_plus(s), _percent_all(b)]
    url += [_PCT.sub(lambda m: m.group(0).lower(), u) for u in url]
    js = [json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1]]
    js += [j.replace("/", "\\/") for j in js]
    u = _json_u(s)
    js += [u, re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), u)]
    htm = [html.escape(s, quote=True), html.escape(s, quote=False), "".join(f"&#{ord(c)};" for c in s),
           "".join(f"&#x{ord(c):x};" for c in s)]
    return [s, *url, *js, *htm, *_b64_forms(b)]


def secret_forms(secret: str) -> list[str]:
    """Every form a secret travels in (``_encodings``); for URL credentials (``user:password``) the
    same for the password alone (the ``Basic`` token is the base64 of the whole). Forms shorter than
    ``MIN_SECRET`` are left out."""
    forms = _encodings(str(secret))
    if isinstance(secret, BasicCredential):
        user, _, pw = secret.partition(":")
        if pw:
            forms += _encodings(pw)
    return [f for f in dict.fromkeys(forms) if f and len(f) >= MIN_SECRET]
