"""``server/redact.py``: which values are secrets, every form they travel in, JSON that stays valid
after scrubbing, stdout/stderr that never show a registered secret, and the command-line redaction
(what ``wattbench measure`` writes of the command)."""

from __future__ import annotations

import base64
import io
import json
import sys

import pytest

from wattbench.server import redact
from wattbench.server.redact import MASK, REDACTED, BasicCredential, Scrubber, is_secret_header, redact_argv, secret_values


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
        for form in redact.secret_forms(secret):
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


def test_std_streams_scrub_registered_secrets(monkeypatch):
    monkeypatch.setattr(redact, "_REGISTERED", Scrubber())
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with redact.guard_std_streams():
        print("before sk-later-registered")
        redact.register_secrets("sk-later-registered")
        print("key sk-later-registered here")
        sys.stderr.write("err sk-later-registered\n")
        assert sys.stdout.isatty() is False and sys.stdout.getvalue  # the rest is the wrapped stream's
    assert sys.stdout is out and sys.stderr is err  # restored
    assert out.getvalue() == "before sk-later-registered\nkey *** here\n"
    assert err.getvalue() == "err ***\n"
    assert redact.scrub("x sk-later-registered") == "x ***"


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
