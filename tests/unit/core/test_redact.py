"""``core/redact.py``, ``core/secret_forms.py``, ``core/scrubber.py`` and ``core/secret_scope.py``:
which values are secrets, every form they travel in, JSON that stays valid after scrubbing,
stdout/stderr that never show a registered secret, and the command-line redaction (what
``wattbench measure`` writes of the command)."""

from __future__ import annotations

import base64
import io
import json
import sys
import urllib.parse

import pytest

from wattbench.core import redact
from wattbench.core import secret_forms, secret_scope
from wattbench.core.redact import MASK, REDACTED, BasicCredential, is_secret_header, redact_argv, secret_values
from wattbench.core.scrubber import Scrubber


def test_which_header_values_are_secrets():
    h = {"X-Api-Key": "k-123456789", "X-Auth-Mode": "none", "X-Gw": "Bearer tok-abcdef", "X-Route": "r1-secret",
         "X-Trace": "12345678", "Ocp-Apim-Subscription-Key": "sub-98765432", "X-Basic": "Basic " +
         base64.b64encode(b"u:pw-basic-1").decode()}
    got = secret_values("sk-key", h, marked=["x-route"])
    assert "sk-key" in got and "k-123456789" in got and "sub-98765432" in got
    assert "Bearer tok-abcdef" in got and "tok-abcdef" in got  # the credential part too
    assert "r1-secret" in got  # marked by --secret-header (any case)
    assert "u:pw-basic-1" in got  # a Basic value decoded: its password is masked too
    assert "none" not in got and "12345678" not in got  # short by-name values and plain headers are not
    assert is_secret_header("X-Private-Token", "v") and is_secret_header("X-Signature", "v")
    assert is_secret_header("X-Route", "v", ["X-ROUTE"]) and not is_secret_header("X-Route", "v")
    assert redact.redact_headers({"X-Route": "r", "X-Trace": "t"}, ["x-route"]) == {"X-Route": "<redacted>",
                                                                                     "X-Trace": "t"}


@pytest.mark.parametrize("secret", ["sk-plain-123", 'quo"te\\back', "ünï-cødé-ß", "<tag>&amp;", "a/b c+d",
                                    "\u2028line-sep"])
def test_json_stays_valid_and_holds_no_form_of_the_secret(secret):
    s = Scrubber([secret])
    doc = {"a": f"got {secret}!", "b": [f"x{secret}", 1, None, True], secret: {"n": 2.5}, "c": "clean",
           "d": json.dumps(secret)}
    for text in (json.dumps(doc, indent=2), json.dumps(doc, ensure_ascii=False), json.dumps(doc, separators=(",", ":"))):
        out = s.json_text(text)
        back = json.loads(out)  # still JSON
        assert back["c"] == "clean" and back["b"][1:] == [1, None, True]
        for form in secret_forms.secret_forms(secret):
            assert form not in out, form
        assert back["a"] == "got ***!"
    assert s.json_text('{"untouched": "text"}') == '{"untouched": "text"}'


def test_basic_credentials_every_form():
    cred = BasicCredential("user:pw-secret-9")
    s = Scrubber([cred])
    text = f"Basic {cred.token} / pw-secret-9 / pw%2Dsecret-9 / user:pw-secret-9"
    assert "pw-secret" not in s.text(text) and cred.token not in s.text(text)
    assert s.found_in(cred.token.encode()) and not s.found_in(b"nothing here")
    assert Scrubber(["ab"]).text("ab ab") == "ab ab"  # under MIN_SECRET: never masked (it would garble text)


def test_std_streams_scrub_the_secrets_added_while_they_are_guarded(monkeypatch):
    secrets = Scrubber()  # the process's own (secret_scope.registered()) when none is given
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with secret_scope.guard_std_streams(secrets):
        print("before sk-later-registered")
        secrets.add("sk-later-registered")
        print("key sk-later-registered here")
        sys.stderr.write("err sk-later-registered\n")
        assert sys.stdout.isatty() is False and sys.stdout.getvalue  # the rest is the wrapped stream's
    assert sys.stdout is out and sys.stderr is err  # restored
    assert out.getvalue() == "before sk-later-registered\nkey *** here\n"
    assert err.getvalue() == "err ***\n"


def test_redact_argv_masks_credentials_only():
    argv = ["vllm", "bench", "serve", "--api-key", "sk-1", "--base-url", "http://u:pw@h:1/v1", "--hf-token=abc",
            "-H", "Authorization: Bearer x", "-H", "X-Trace: 1", "--tokenizer", "/models/t",
            "--use-server-token-count", "--concurrency", "4", "--password", "--next-flag"]
    assert redact_argv(argv) == [
        "vllm", "bench", "serve", "--api-key", MASK, "--base-url", "http://***@h:1/v1", f"--hf-token={MASK}",
        "-H", f"Authorization: {REDACTED}", "-H", "X-Trace: 1", "--tokenizer", "/models/t",
        # a flag with no value does not mask the next flag; --tokenizer's value is a path, not a secret
        "--use-server-token-count", "--concurrency", "4", "--password", "--next-flag"]
    assert "sk-1" not in " ".join(redact_argv(argv)) and "pw" not in " ".join(redact_argv(argv))


# ---------------------------------------------------------------- every encoding, written here independently

KEY = "sk-Wb/Enc+key_9f3a:7c1e"


def _independent_encodings(s: str) -> dict[str, str]:
    """Each encoding a server or a tool could put a secret in, spelled out here (not taken from the
    scrubber's own list), so that dropping any one form from ``core/secret_forms.py`` fails a case."""
    b = s.encode()
    return {
        "raw": s,
        "url quote": urllib.parse.quote(s, safe=""),
        "url quote path": urllib.parse.quote(s),
        "url quote_plus": urllib.parse.quote_plus(s),
        "url every byte": "".join("%%%02X" % c for c in b),
        "url every byte lower": "".join("%%%02x" % c for c in b),
        "url lower hex": urllib.parse.quote(s, safe="").replace("%2F", "%2f").replace("%2B", "%2b").replace("%3A", "%3a"),
        "json": json.dumps(s)[1:-1],
        "json slash": json.dumps(s)[1:-1].replace("/", "\\/"),
        "json \\u lower": "".join("\\u%04x" % ord(c) for c in s),
        "json \\u upper": "".join("\\u%04X" % ord(c) for c in s),
        "html": s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"),
        "html decimal": "".join("&#%d;" % ord(c) for c in s),
        "html hex": "".join("&#x%x;" % ord(c) for c in s),
        "base64": base64.b64encode(b).decode(),
        "base64 unpadded": base64.b64encode(b).decode().rstrip("="),
        "base64 urlsafe": base64.urlsafe_b64encode(b).decode(),
        "base64 in a blob at offset 0": base64.b64encode(b + b'","n":1}').decode(),
        "base64 in a blob at offset 1": base64.b64encode(b"{" + b + b"}").decode(),
        "base64 in a blob at offset 2": base64.b64encode(b'{"' + b + b"}").decode(),
        "base64 bearer header": base64.b64encode(b"Authorization: Bearer " + b).decode(),
    }


@pytest.mark.parametrize("form", sorted(_independent_encodings(KEY)))
def test_every_encoding_of_a_key_is_scrubbed(form):
    text = "x" * 40 + " " + _independent_encodings(KEY)[form] + " tail"
    out = Scrubber([KEY]).text(text)
    assert out != text and out.endswith(" tail")
    # nothing of the key is left that decodes back to it
    for enc, dec in _decoders():
        assert KEY not in dec(out), (form, enc)
    assert KEY.encode() not in _b64_decodings(out)


def _decoders():
    import html as _html

    return [("raw", lambda t: t), ("url", urllib.parse.unquote), ("url+", urllib.parse.unquote_plus),
            ("html", _html.unescape), ("json", lambda t: json.loads('"' + t.replace('"', "") + '"')
                                        if "\\" in t else t)]


def _b64_decodings(text: str) -> bytes:
    """Every base64 run of ``text`` decoded at each of its 4 character offsets."""
    import re

    out = b""
    for run in re.findall(r"[A-Za-z0-9+/_\-]{8,}", text):
        for o in range(4):
            chunk = run[o:]
            chunk = chunk[:len(chunk) - len(chunk) % 4]
            for alt in (chunk, chunk.replace("-", "+").replace("_", "/")):
                try:
                    out += base64.b64decode(alt, validate=False) + b"|"
                except ValueError:
                    pass
    return out


@pytest.mark.parametrize("form", ["raw", "base64", "base64 in a blob at offset 1", "url every byte", "json \\u lower",
                                  "html decimal"])
def test_basic_auth_user_password_every_encoding(form):
    cred = BasicCredential("wbuser:pw-SECRET/9+x")
    for secret in ("wbuser:pw-SECRET/9+x", "pw-SECRET/9+x"):
        text = "-- " + _independent_encodings(secret)[form] + " --"
        out = Scrubber([cred]).text(text)
        assert "pw-SECRET" not in urllib.parse.unquote(out) and b"pw-SECRET" not in _b64_decodings(out), (secret, out)


def test_a_key_quoted_at_character_290_leaves_no_prefix():
    """Scrubbed first, then cut: a key that straddles the 300-character cut leaves nothing."""
    detail = "e" * 290 + KEY + " more"
    out = Scrubber([KEY]).cut(detail, 300)
    assert out == "e" * 290 + MASK + " more"[:7]
    assert KEY[:8] not in out and len(out) <= 300


def test_url_query_is_secret_unless_known_harmless():
    u = "https://u:pw@h.example:443/api/v1?api-version=2024-06-01&sig=SIGsecret123&code=fn-CODE-456&sv=2022&flag#frag"
    shown = redact.redact_url(u)
    assert shown == "https://***@h.example:443/api/v1?api-version=2024-06-01&sig=***&code=***&sv=***&***#***"
    got = redact.url_secrets(u)
    assert "SIGsecret123" in got and "fn-CODE-456" in got and "flag" in got and "u:pw" in got
    assert "2024-06-01" not in got
    from wattbench.server.openai import safe_url

    assert "SIGsecret123" not in safe_url(u)


def test_extra_body_credentials():
    body = {"top_k": 20, "api_key": "body-SECRET-1", "headers": {"Authorization": "Bearer body-SECRET-2"},
            "max_tokens": 8, "tokenizer_mode": "auto", "extra": ["Basic dTpwdy1zZWNyZXQ="]}
    got = redact.body_secrets(body)
    assert {"body-SECRET-1", "Bearer body-SECRET-2", "body-SECRET-2", "Basic dTpwdy1zZWNyZXQ="} <= set(got)
    assert "auto" not in got and 20 not in got and 8 not in got
    assert redact.redact_body(body) == {"top_k": 20, "api_key": REDACTED, "headers": {"Authorization": REDACTED},
                                        "max_tokens": 8, "tokenizer_mode": "auto", "extra": [REDACTED]}


@pytest.mark.parametrize("argv,secret", [
    (["vllm", "bench", "serve", "--header", "Authorization=Bearer sk-argv-SECRET-01"], "sk-argv-SECRET-01"),
    (["vllm", "bench", "serve", "--header=Authorization=Bearer argv-SECRET-02"], "argv-SECRET-02"),
    (["vllm", "bench", "serve", "--header", "x-api-key=argv-SECRET-03"], "argv-SECRET-03"),
    (["guidellm", "benchmark", "--backend-args", '{"api_key": "argv-SECRET-04"}'], "argv-SECRET-04"),
    (["guidellm", "benchmark", "--backend-args={\"headers\": {\"Authorization\": \"Bearer argv-SECRET-05\"}}"],
     "argv-SECRET-05"),
    (["env", "OPENAI_API_KEY=argv-SECRET-06", "python", "load.py"], "argv-SECRET-06"),
    (["sh", "-c", "curl -s -H 'Authorization: Bearer argv-SECRET-07' http://h:1/v1/models"], "argv-SECRET-07"),
    (["tool", "--token", "argv-SECRET-08"], "argv-SECRET-08"),
    (["tool", "--key", "argv-SECRET-09"], "argv-SECRET-09"),
    (["tool", "-k", "argv-SECRET-10"], "argv-SECRET-10"),
    (["tool", "--target", "https://h.example/v1?sig=argv-SECRET-11"], "argv-SECRET-11"),
    (["tool", "--target=https://h.example/v1?code=argv-SECRET-12&api-version=1"], "argv-SECRET-12"),
    (["tool", "sk-proj-argvSECRET13abcdef"], "sk-proj-argvSECRET13abcdef"),
])
def test_redact_argv_every_credential_form(argv, secret):
    out = redact_argv(argv)
    assert secret not in " ".join(out), out
    assert len(out) == len(argv)
    assert secret in redact.argv_secrets(argv)
    assert out[0] == argv[0]


def test_env_secrets_by_name():
    env = {"OPENAI_API_KEY": "sk-env-123456", "HF_TOKEN": "hf_abcdefgh12", "TOKENIZERS_PARALLELISM": "false",
           "PATH": "/usr/bin", "AWS_SECRET_ACCESS_KEY": "aws-secret-value-1", "MY_PW": "short"}
    assert sorted(redact.env_secrets(env)) == ["aws-secret-value-1", "hf_abcdefgh12", "sk-env-123456"]


# ---------------------------------------------------------------- pieces of a secret: any run of 8 characters

AUDIT_KEY = "sk-AUDITkeyQ7w3Zp9Lm2Xc8VbN4tR6yU1"  # 34 characters


def _piece_forms(p: str) -> dict[str, str]:
    """The forms a piece of a key shows in, spelled out here: letter case, hex, escapes whole and in
    part (every other character), URL, HTML, base64 inside a longer text at each byte alignment."""
    b = p.encode()
    return {
        "raw": p, "upper": p.upper(), "lower": p.lower(), "hex": b.hex(), "HEX": b.hex().upper(),
        "json \\u": "".join("\\u%04x" % ord(c) for c in p),
        "json \\u partly": "".join("\\u%04X" % ord(c) if i % 2 else c for i, c in enumerate(p)),
        "\\x partly": "".join("\\x%02x" % ord(c) if i % 3 == 0 else c for i, c in enumerate(p)),
        "url every byte": "".join("%%%02X" % c for c in b),
        "url partly upper": "".join("%%%02x" % ord(c) if i % 2 else c for i, c in enumerate(p.upper())),
        "url quote": urllib.parse.quote(p, safe=""),
        "html decimal": "".join("&#%d;" % ord(c) for c in p),
        "html hex partly": "".join("&#x%X;" % ord(c) if i % 2 == 0 else c for i, c in enumerate(p)),
        "base64 at 0": base64.b64encode(b + b'"}').decode(),
        "base64 at 1": base64.b64encode(b"{" + b + b'"}').decode(),
        "base64 at 2": base64.b64encode(b'{"' + b + b'"}').decode(),
    }


def _b64_cores(p: str) -> list[str]:
    """The 4-character groups of base64 made of ``p``'s bytes alone, at each alignment."""
    b, out = p.encode(), []
    for o in range(3):
        enc = base64.b64encode(b"\0" * o + b).decode()
        first = 1 if o else 0
        out.append(enc[4 * first:4 * ((o + len(b)) // 3)])
    return out


def _decoded_views(text: str) -> list[str]:
    """``text`` read back every way a reader could: raw, URL-, HTML-, JSON- and hex-decoded, lower-cased."""
    import html as _html
    import re as _re

    views = [text, urllib.parse.unquote(text), _html.unescape(text),
             _re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text),
             _re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text)]
    for run in _re.findall(r"[0-9a-fA-F]{16,}", text):
        for o in (0, 1):
            chunk = run[o:]
            views.append(bytes.fromhex(chunk[:len(chunk) - len(chunk) % 2]).decode("latin-1"))
    return [v.lower() for v in views]


def test_every_eight_character_piece_of_a_key_in_every_form_is_masked():
    """A server that echoes part of a key (the start: 'Incorrect API key: sk-AUDITkeyQ7w3Zp9Lm2Xc8V…',
    or any 8 characters of it) in any form: no 8 consecutive characters of it are left."""
    s = Scrubber([AUDIT_KEY])
    pieces = [AUDIT_KEY[i:i + 8] for i in range(len(AUDIT_KEY) - 7)] + [AUDIT_KEY[:27], AUDIT_KEY[5:30]]
    for p in pieces:
        for name, form in _piece_forms(p).items():
            text = "Incorrect API key provided: " + form + "… see https://example.com/keys"
            out = s.text(text)
            assert out.endswith(" see https://example.com/keys"), (p, name, out)
            assert MASK in out, (p, name, out)
            for view in _decoded_views(out):
                assert p.lower() not in view, (p, name, out)
            if name.startswith("base64"):
                assert not any(c in out for c in _b64_cores(p)), (p, name, out)
            assert s.found_in(text) and s.found_in(text.encode())


def test_seven_characters_of_a_key_and_clean_text_are_left_alone():
    """Under 8 characters a piece is no secret's (text stays readable); nothing else is touched."""
    s = Scrubber([AUDIT_KEY])
    for i in range(len(AUDIT_KEY) - 6):
        seven = AUDIT_KEY[i:i + 7]
        assert s.text(f"id {seven} ok") == f"id {seven} ok"
    clean = "prompt lengths 256 tokens, 50% &amp; \\u00e9 \\\\ %2F ZXhhbXBsZQ== 0123456789abcdef"
    assert s.text(clean) == clean and not s.found_in(clean)


def test_a_piece_in_json_keeps_the_json_valid():
    s = Scrubber([AUDIT_KEY])
    doc = {"error": "Incorrect API key: " + AUDIT_KEY[:27] + "…", "model": "m-\\u0053K-AUDITkeyq7W3",
           "hex": AUDIT_KEY.encode().hex()[4:40], "n": 3}
    out = s.json_text(json.dumps(doc, ensure_ascii=True))
    back = json.loads(out)
    assert back["n"] == 3 and back["error"] == "Incorrect API key: ***…"
    assert back["model"] == "m-***" and back["hex"] == "***"


def test_cut_scrubs_first_so_a_key_after_171_characters_leaves_nothing():
    """The identity's 200-character cut: the key at character 171 would leave 29 characters cut
    first; scrubbed first, none."""
    text = "f" * 171 + AUDIT_KEY + "-tail"
    out = Scrubber([AUDIT_KEY]).cut(text, 200)
    assert out == "f" * 171 + MASK + "-tail"
    out = Scrubber([AUDIT_KEY]).cut("g" * 190 + AUDIT_KEY, 200, "…")
    assert out == "g" * 190 + MASK
    assert Scrubber([AUDIT_KEY]).cut("h" * 5000, 200, "…") == "h" * 199 + "…"


def test_terminal_text_is_scrubbed_before_it_is_cut(monkeypatch):
    """``safe_text.term`` (every untrusted field a table shows) cuts with ``clip``: a key that
    straddles the 200-character cut leaves nothing."""
    from wattbench.core.safe_text import term

    monkeypatch.setattr(secret_scope, "_REGISTERED", Scrubber([AUDIT_KEY]))
    assert term("f" * 190 + AUDIT_KEY + " tail", 200) == "f" * 190 + MASK + " tail"
    assert term("g" * 180 + AUDIT_KEY.upper(), 185) == "g" * 180 + MASK
    assert secret_scope.clip("h" * 171 + AUDIT_KEY, 200) == "h" * 171 + MASK


def test_a_base64_credential_is_masked_whole_to_its_padding():
    """``Basic base64(user:password)`` as a model id suffix: one ``***``, no group of it left."""
    cred = BasicCredential("wbuser:pw-SECRET/url+7c1e")
    s = Scrubber([cred])
    assert s.text(f"hostile-model-{cred.token}") == "hostile-model-***"
    assert s.text(f"Authorization: Basic {cred.token}, next") == "Authorization: Basic ***, next"


def test_a_secret_inside_another_is_still_masked_in_every_form():
    """The key and ``Bearer <key>`` registered together: the key's pieces are searched through the
    longer one's, and each still shows nowhere (raw, upper-case, hex, base64)."""
    s = Scrubber([AUDIT_KEY, "Bearer " + AUDIT_KEY, "wbuser:" + AUDIT_KEY])
    for form in (AUDIT_KEY[:9], AUDIT_KEY[-9:].upper(), AUDIT_KEY.encode()[5:14].hex(),
                 base64.b64encode(b"{" + AUDIT_KEY.encode()[10:20] + b"}").decode()):
        out = s.text(f"x {form} y")
        assert out.startswith("x ") and out.endswith(" y") and MASK in out, (form, out)
        pieces = [AUDIT_KEY[i:i + 8].lower() for i in range(len(AUDIT_KEY) - 7)]
        assert not any(p in v for v in _decoded_views(out) for p in pieces), (form, out)
        assert not any(c in out for c in _b64_cores(AUDIT_KEY[10:20])), (form, out)


def test_a_field_name_that_shares_eight_characters_with_a_secret_keeps_the_file_readable():
    """A key holding "wattbench" shares eight characters with the field ``wattbench_version``:
    masking that piece in a JSON key made result.json unreadable by its own loader. A key that is a
    plain name is the writer's own field: only the whole secret is masked there; values (and keys
    that are not plain names) still lose every piece."""
    import json as _json

    key = "sk-wattbench-SECRET-api-7f3a9c1e"
    sc = Scrubber([key])
    doc = _json.dumps({"wattbench_version": "0.1.0", "echo": key, "piece": "a wattbench-SECRET b",
                       "sk-wattbench-SECRET": 1, key: 2})
    out = _json.loads(sc.json_text(doc))
    assert out["wattbench_version"] == "0.1.0"  # the field kept: the file loads
    assert out["echo"] == "***" and "SECRET" not in out["piece"]
    assert all("SECRET" not in k for k in out)  # a key that is not a plain name still loses its pieces


def test_the_programs_own_name_is_no_piece_of_a_secret():
    """A key holding "wattbench": the tool's own words (``wattbench: error:``) stay as they are;
    every other run of eight of the key's characters is still masked."""
    key = "sk-wattbench-SECRET-api-7f3a9c1e"
    sc = Scrubber([key])
    assert sc.text("wattbench: error: bad input") == "wattbench: error: bad input"
    assert sc.text("Wattbench 0.1") == "Wattbench 0.1"
    assert sc.text("key sk-wattbench-SEC...") == "key ***..."
    assert "SECRET" not in sc.text("x -SECRET-api y") and sc.text(key) == "***"
