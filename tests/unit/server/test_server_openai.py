"""Base URLs, request bodies, chunk parsing and the target pre-flight check."""

import asyncio
import socket

import pytest

from tests.fakes.ports import refused_port
from wattbench.core.errors import TargetError, UserError
from wattbench.core.target import TargetSpec
from wattbench.server.openai import (
    build_payload,
    check_target,
    chunk_text,
    normalize_base_url,
    safe_url,
    stream_error,
)
from wattbench.workload.base import RequestSpec


@pytest.mark.parametrize(
    "url,want",
    [
        ("http://h:8000", "http://h:8000/v1"),
        ("http://h:8000/", "http://h:8000/v1"),
        ("http://h:8000/v1", "http://h:8000/v1"),
        ("http://h:8000/v1/", "http://h:8000/v1"),
        ("https://api.example.com/openai/v1", "https://api.example.com/openai/v1"),
        (" http://127.0.0.1:9/ ", "http://127.0.0.1:9/v1"),
    ],
)
def test_normalize_base_url(url, want):
    assert normalize_base_url(url) == want


@pytest.mark.parametrize("url", ["ftp://h/", "h:8000", "", "http://"])
def test_normalize_rejects_non_http(url):
    with pytest.raises(UserError, match="not an http"):
        normalize_base_url(url)


def test_safe_url_strips_credentials():
    assert safe_url("http://user:s3cret@h:80/v1") == "http://***@h:80/v1"
    assert safe_url("http://h:80/v1?sig=s3cret&api-version=1") == "http://h:80/v1?sig=***&api-version=1"
    with pytest.raises(UserError) as e:
        normalize_base_url("ftp://user:s3cret@h/")
    assert "s3cret" not in str(e.value)


def test_payload_completions():
    strict = TargetSpec(base_url="http://h/v1", model="m")
    assert "min_tokens" not in build_payload(RequestSpec(prompt="hi", max_tokens=7, min_tokens=7), strict)
    t = TargetSpec(base_url="http://h/v1", model="m", extra_body={"ignore_eos": True}, send_min_tokens=True)
    body = build_payload(RequestSpec(prompt="hi", max_tokens=7, min_tokens=7), t)
    assert body == {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 7,
        "temperature": 0,
        "prompt": "hi",
        "min_tokens": 7,
        "ignore_eos": True,
    }


def test_payload_chat_wraps_prompt_and_keeps_messages():
    t = TargetSpec(base_url="http://h/v1", model="m", api="chat")
    assert build_payload(RequestSpec(prompt="hi"), t)["messages"] == [{"role": "user", "content": "hi"}]
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    body = build_payload(RequestSpec(messages=msgs), t)
    assert body["messages"] == msgs and "prompt" not in body


def test_payload_completions_refuses_messages():
    t = TargetSpec(base_url="http://h/v1", model="m")
    with pytest.raises(UserError, match="--api chat"):
        build_payload(RequestSpec(messages=[{"role": "user", "content": "u"}]), t)


def test_extra_body_wins():
    t = TargetSpec(base_url="http://h/v1", model="m", extra_body={"temperature": 0.5})
    assert build_payload(RequestSpec(prompt="x"), t)["temperature"] == pytest.approx(0.5, rel=1e-9)


def test_chunk_text_and_errors():
    assert chunk_text({"choices": [{"text": "ab"}]}) == "ab"
    assert chunk_text({"choices": [{"delta": {"content": "c"}}]}) == "c"
    assert chunk_text({"choices": [{"delta": {"reasoning_content": "r"}}]}) == "r"
    assert chunk_text({"choices": [], "usage": {"completion_tokens": 3}}) is None
    assert chunk_text({"choices": [{"delta": {"role": "assistant"}}]}) is None
    assert stream_error({"error": {"message": "boom"}}) == "boom"
    assert stream_error({"object": "error", "message": "bad"}) == "bad"
    assert stream_error({"choices": []}) is None


def test_repr_never_shows_key():
    t = TargetSpec(base_url="http://h/v1", model="m", api_key="sk-SECRET")
    assert "SECRET" not in repr(t)


def test_check_target_connection_refused_names_url_and_fix():
    with refused_port() as port, pytest.raises(TargetError) as e:
        asyncio.run(check_target(f"http://127.0.0.1:{port}", "sk-SECRET", None, timeout_s=5))
    msg = str(e.value)
    assert f"127.0.0.1:{port}/v1" in msg and "start the server or fix --target" in msg
    assert "SECRET" not in msg and "\n" not in msg


def _serve(handler_body: bytes, status: bytes = b"200 OK", ctype: bytes = b"application/json"):
    """A one-shot-per-connection HTTP server on a thread answering every request the same."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def loop():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            c.recv(65536)
            c.sendall(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype + b"\r\nContent-Length: "
                + str(len(handler_body)).encode() + b"\r\nConnection: close\r\n\r\n" + handler_body
            )
            c.close()

    th = threading.Thread(target=loop, daemon=True)
    th.start()
    return srv.getsockname()[1], lambda: (stop.set(), th.join(), srv.close())


def test_check_target_models_and_default():
    port, close = _serve(b'{"object":"list","data":[{"id":"a"},{"id":"b"}]}')
    try:
        assert asyncio.run(check_target(f"http://127.0.0.1:{port}/v1/", None, None)) == ("a", ["a", "b"])
        assert asyncio.run(check_target(f"http://127.0.0.1:{port}", None, "b"))[0] == "b"
        with pytest.raises(TargetError, match=r"model 'zz' is not served .*available: a, b"):
            asyncio.run(check_target(f"http://127.0.0.1:{port}", None, "zz"))
    finally:
        close()


@pytest.mark.parametrize(
    "body,status,ctype",
    [
        (b"<html>hello</html>", b"200 OK", b"text/html"),
        (b'{"models": []}', b"200 OK", b"application/json"),
        (b"nope", b"404 Not Found", b"text/plain"),
    ],
)
def test_check_target_not_openai(body, status, ctype):
    port, close = _serve(body, status, ctype)
    try:
        with pytest.raises(TargetError, match="not OpenAI-compatible"):
            asyncio.run(check_target(f"http://127.0.0.1:{port}", "sk-SECRET", None))
    finally:
        close()


def test_check_target_auth_refused_does_not_echo_key():
    port, close = _serve(b'{"error":"bad key"}', b"401 Unauthorized")
    try:
        with pytest.raises(TargetError, match="HTTP 401") as e:
            asyncio.run(check_target(f"http://127.0.0.1:{port}", "sk-SECRET", None))
        assert "SECRET" not in str(e.value)
    finally:
        close()
