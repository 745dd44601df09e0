"""A hostile OpenAI-compatible server: one scripted misbehaviour per process.

``--behaviour NAME`` picks what it does wrong; requests it answers wrongly are counted in
``faults`` and every stream it completes normally (usage and ``[DONE]`` written) in ``completed``,
so a test can check that no finished record was lost. Per-request behaviours hit every third
completion request (request 1, 4, 7 … counting from 0); the rest are answered normally, so a level
goes on with some failed requests. ``GET /stats`` returns ``{"requests", "completed", "faults",
"tokenize"}``; ``GET /log`` the requests it received (method, path, lower-cased headers).

Behaviours (``BEHAVIOURS``):

- bad values, per request: ``usage_huge`` (``completion_tokens: 1e30``), ``usage_string``
  (``"many"``), ``usage_list``, ``usage_object``, ``usage_negative`` (-600), ``choices_dict``,
  ``choices_string``, ``choices_int_list`` (``[1]``), ``delta_string`` (chat: ``"delta": "hi"``),
  ``invalid_sse`` (malformed JSON), ``endless_line`` (10 MiB of one SSE line, never ended);
- failures that always passed, per request: ``http_500``, ``http_429`` (``Retry-After``),
  ``big_error_body`` (a 10 MB 500 body), ``stall`` (two tokens, then silence, connection open),
  ``never_ending`` (a token every 20 ms until the client leaves), ``script_text`` (every request's
  text is ``<script>…</script>``; not a fault);
- secrets echoed, per request: ``echo_401`` (401 whose body quotes the ``Authorization``,
  ``X-Api-Key`` and ``X-Route`` headers it got), ``echo_sse_error`` (an SSE error event quoting
  them), ``echo_text`` (the generated text quotes them; the request succeeds), ``echo_query`` (401
  whose body starts by quoting the path and query string the request came with, as a gateway that
  refuses a signature does);
- redirects to ``--other`` (another origin): ``redirect_302_all`` (every path, ``/v1/models``
  included), ``redirect_307_load`` (the completion endpoints only), ``redirect_307_post_only`` (a
  completion POST is redirected, a GET of the endpoint answers 405: past the pre-flight, every
  request of the load is redirected), ``redirect_tokenize``
  (``/tokenize`` 302), ``redirect_metrics`` (``/metrics`` 302), and ``redirect_same_origin``
  (completions 307 to ``/v1/moved/...`` on this server, which answers there);
- ``tokenize_cut``: ``/tokenize`` announces 5000 bytes, sends 20 and closes;
- ``recorder``: a normal server that logs every request (the "other origin": a test reads its
  ``/log`` to see whether anything, a credential above all, reached it).

Run: ``python tests/fakes/hostile_server.py --behaviour usage_huge [--other URL]``; it prints
``LISTENING <port>`` once bound (127.0.0.1 only). Every response closes its connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

PER_REQUEST = {"usage_huge", "usage_string", "usage_list", "usage_object", "usage_negative", "choices_dict",
               "choices_string", "choices_int_list", "delta_string", "invalid_sse", "endless_line", "http_500",
               "http_429", "big_error_body", "stall", "never_ending", "echo_401", "echo_sse_error", "echo_text",
               "echo_query"}
BEHAVIOURS = sorted(PER_REQUEST | {"script_text", "redirect_302_all", "redirect_307_load", "redirect_307_post_only",
                                   "redirect_tokenize",
                                   "redirect_metrics", "redirect_same_origin", "tokenize_cut", "recorder", "ok"})
BAD_USAGE = {"usage_huge": 1e30, "usage_string": "many", "usage_list": [1, 2], "usage_object": {"n": 5},
             "usage_negative": -600}
MODEL = "hostile-model"

# ---- round 3, faults: usage that contradicts the stream or the request, answers past every cap
#   per request: ``usage_second_800`` (a second usage event after the right one claims 800
#   completion tokens), ``usage_second_less`` (a second one claims fewer than the first),
#   ``usage_zero_chunks`` (``completion_tokens: 0`` beside the content chunks), ``text_huge`` (each
#   content chunk is 256 KiB of text: a request streams MiBs); whole server: ``models_huge``
#   (``/v1/models`` answers 20 MiB).
FAULTS_PER_REQUEST = {"usage_second_800", "usage_second_less", "usage_zero_chunks", "text_huge"}
FAULTS_BEHAVIOURS = {"models_huge"}
HUGE_CHUNK_CHARS = 256 << 10


def faults_usage_events(bad: str | None, n: int, words: int) -> list[dict] | None:
    """The usage events a round-3 behaviour sends in place of the one right event (None: not one)."""
    right = {"prompt_tokens": words, "completion_tokens": n, "total_tokens": words + n}
    if bad == "usage_second_800":
        return [right, dict(right, completion_tokens=800)]
    if bad == "usage_second_less":
        return [right, dict(right, completion_tokens=max(0, n - 2))]
    if bad == "usage_zero_chunks":
        return [dict(right, completion_tokens=0)]
    return None


def faults_models_body() -> bytes:
    return json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model",
                                                   "description": "x" * (20 << 20)}]}).encode()


PER_REQUEST |= FAULTS_PER_REQUEST
BEHAVIOURS = sorted(set(BEHAVIOURS) | FAULTS_PER_REQUEST | FAULTS_BEHAVIOURS)


def _event(obj) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class State:
    def __init__(self, a):
        self.a = a
        self.requests = 0  # completion requests
        self.completed = 0  # streams completed normally
        self.faults = 0
        self.tokenize = 0
        self.log: list[dict] = []


class Proto(asyncio.Protocol):
    def __init__(self, st: State):
        self.st = st
        self.buf = b""
        self.transport = None
        self.timer = None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.transport = None
        if self.timer is not None:
            self.timer.cancel()

    def data_received(self, data):
        self.buf += data
        i = self.buf.find(b"\r\n\r\n")
        if i < 0:
            return
        head = self.buf[:i].decode("latin-1").split("\r\n")
        headers = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length") or 0)
        if len(self.buf) < i + 4 + n:
            return
        body = self.buf[i + 4:i + 4 + n]
        self.buf = b""
        method, path = (head[0].split(" ") + ["/"])[:2]
        self.query = path.partition("?")[2]
        self.handle(method, path.split("?", 1)[0], headers, body)

    # ------------------------------------------------------------------ writing

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def respond(self, status: int, body: bytes, ctype: str = "application/json", extra: str = "") -> None:
        self.write(f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n{extra}"
                   f"Connection: close\r\n\r\n".encode() + body)
        self.close()

    def redirect(self, status: int, location: str) -> None:
        self.respond(status, b"", extra=f"Location: {location}\r\n")

    def stream_head(self) -> None:
        self.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                   b"Connection: close\r\n\r\n")

    def events(self, *objs_or_bytes) -> None:
        for o in objs_or_bytes:
            self.write(_chunk(o if isinstance(o, bytes) else _event(o)))

    def end_stream(self) -> None:
        self.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        self.close()

    # ------------------------------------------------------------------ routes

    def handle(self, method: str, path: str, headers: dict, body: bytes) -> None:
        st, a = self.st, self.st.a
        b = a.behaviour
        if path == "/stats":
            self.respond(200, json.dumps({"requests": st.requests, "completed": st.completed, "faults": st.faults,
                                          "tokenize": st.tokenize}).encode())
            return
        if path == "/log":
            self.respond(200, json.dumps(st.log).encode())
            return
        st.log.append({"method": method, "path": path, "query": getattr(self, "query", ""), "headers": headers})
        if b in SECRET_BEHAVIOURS and secrets_route(self, method, path, headers, body):
            return
        if b == "redirect_302_all":
            self.redirect(302, a.other + path)
            return
        if path in ("/v1/completions", "/v1/chat/completions") and b == "redirect_307_load":
            self.redirect(307, a.other + path)
            return
        if path in ("/v1/completions", "/v1/chat/completions") and b == "redirect_307_post_only":
            if method == "POST":
                st.requests += 1
                st.faults += 1
                self.redirect(307, a.other + path)
            else:
                self.respond(405, b'{"error": {"message": "method not allowed"}}')
            return
        if path in ("/v1/completions", "/v1/chat/completions") and b == "redirect_same_origin":
            self.redirect(307, path.replace("/v1/", "/v1/moved/"))
            return
        if path == "/tokenize" and b == "redirect_tokenize":
            self.redirect(302, a.other + path)
            return
        if path == "/metrics" and b == "redirect_metrics":
            self.redirect(302, a.other + path)
            return
        if method == "GET" and b in PROBE_BEHAVIOURS and (answer := probes_body(b, path)) is not None:
            self.respond(200, answer)
            return
        if method == "GET" and path == "/v1/models" and b == "models_huge":
            self.respond(200, faults_models_body())
            return
        if method == "GET" and path == "/v1/models":
            self.respond(200, json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode())
            return
        if method == "POST" and path == "/tokenize":
            st.tokenize += 1
            if b == "tokenize_cut":
                self.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n"
                           b"Connection: close\r\n\r\n" + b'{"count": 2, "tokens"')
                self.close()
                return
            self.respond(404, b'{"error": "no tokenizer"}')
            return
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions", "/v1/moved/completions",
                                         "/v1/moved/chat/completions"):
            self.completion(path, headers, body)
            return
        self.respond(404, b'{"error": {"message": "not found"}}')

    def completion(self, path: str, headers: dict, body: bytes) -> None:
        st, b = self.st, self.st.a.behaviour
        chat = path.endswith("chat/completions")
        try:
            req = json.loads(body)
        except ValueError:
            self.respond(400, b'{"error": {"message": "bad json"}}')
            return
        i = st.requests
        st.requests += 1
        bad = b if (b in PER_REQUEST and i % 3 == 1) else None
        if bad:
            st.faults += 1
        n = max(1, min(int(req.get("max_tokens") or 4), 64))
        words = len(str(req.get("prompt") or req.get("messages") or "").split())
        echoed = (f"Authorization: {headers.get('authorization', '')}; X-Api-Key: {headers.get('x-api-key', '')}; "
                  f"X-Route: {headers.get('x-route', '')}")
        if bad == "http_500":
            self.respond(500, b'{"error": {"message": "scripted 500"}}')
            return
        if bad == "http_429":
            self.respond(429, b'{"error": {"message": "slow down"}}', extra="Retry-After: 1\r\n")
            return
        if bad == "big_error_body":
            self.respond(500, b"E" * 10_000_000, ctype="text/plain")
            return
        if bad == "echo_query":
            got = f"{path}?{getattr(self, 'query', '')}"
            self.respond(401, json.dumps({"error": {"message": f"signature refused for {got}"}}).encode())
            return
        if bad == "echo_401":
            self.respond(401, json.dumps({"error": {"message": f"Incorrect API key provided: {echoed}"}}).encode())
            return
        text = "<script>alert('xss')</script>" if b == "script_text" else " tok"
        if bad == "text_huge":
            text = "x" * HUGE_CHUNK_CHARS

        def piece(t: str, finish=None) -> dict:
            c = {"index": 0, "finish_reason": finish}
            if chat:
                c["delta"] = {"content": t} if t else {}
            else:
                c["text"] = t
            return {"id": "h", "object": "chat.completion.chunk" if chat else "text_completion", "model": MODEL,
                    "choices": [c]}

        self.stream_head()
        if b == "calibration_stall" and n == 1:
            st.faults += 1
            self.events(piece(text))
            return  # silence, connection open
        if bad == "endless_line":
            self.write(_chunk(b'data: {"choices": [{"text": "'))
            for _ in range(10):  # 10 MiB, never ended; the client gives up at its line cap
                self.write(_chunk(b"a" * (1 << 20)))
            return  # the connection stays open
        if bad == "stall":
            self.events(piece(text), piece(text))
            return  # silence, connection open
        if bad == "never_ending":
            def tick():
                if self.transport is None or self.transport.is_closing():
                    return
                self.events(piece(text))
                self.timer = asyncio.get_event_loop().call_later(0.02, tick)

            tick()
            return
        first = piece(text)
        if bad == "choices_dict":
            first["choices"] = {"0": first["choices"][0]}
        elif bad == "choices_string":
            first["choices"] = "abc"
        elif bad == "choices_int_list":
            first["choices"] = [1]
        elif bad == "delta_string":
            first["choices"][0]["delta"] = "hi"
        elif bad == "echo_text":
            first = piece(" " + echoed)
        self.events(first)
        if bad == "invalid_sse":
            self.events(b'data: {"choices": [{"text": "x"\n\n')
            self.end_stream()
            return
        if bad == "echo_sse_error":
            self.events({"error": {"message": f"upstream refused: {echoed}", "type": "auth"}})
            self.end_stream()
            return
        for _ in range(n - 1):
            self.events(piece(text))
        comp = BAD_USAGE.get(bad, n) if bad else n
        usages = faults_usage_events(bad, n, words) or [{"prompt_tokens": PROMPT_TOKENS.get(b, words),
                                                          "completion_tokens": comp, "total_tokens": 1}]
        self.events(piece("", "length"), *({"id": "h", "model": MODEL, "choices": [], "usage": u} for u in usages))
        if bad is None or bad in ("echo_text", "text_huge"):
            st.completed += 1
        self.end_stream()


# ============================================================== secrets, escapes, userinfo redirects
# (kept in one block: other behaviours are added above)
#
# - ``echo_encoded``: every secret the server receives (the ``Authorization`` value and its
#   credential, ``user:password`` of a Basic value and the password alone, every ``X-…`` header
#   value, the string values of the request body but the prompt and the model) is echoed in every
#   encoding of ``encodings()`` (raw, URL, JSON ``\u``, HTML entities, base64 at each alignment):
#   ``/v1/models`` serves a model id holding the received key; completion request 0, 3, 6 … are
#   refused with a plain-text 401 whose body holds the first secret at character 290 and then every form;
#   request 1, 4, 7 … end in an SSE error event quoting every form; the others succeed with a
#   generated text quoting every form (kept with ``--keep-output-text``); ``/metrics`` has vLLM's
#   token counters labelled ``model_name=<the received key>``;
# - ``escape_model``: ``/v1/models`` serves an id holding OSC and CSI terminal sequences, other
#   control characters and rich markup (``[/x]``); 401s, SSE errors and texts hold the same;
# - ``redirect_userinfo_load``: completion request 1, 4, 7 … 307 to this same origin with
#   ``user:password@`` in the ``Location`` (the others answered normally);
#   ``redirect_userinfo_models``: ``/v1/models`` 302 the same way.

# - ``echo_pieces_llamacpp`` / ``echo_pieces_vllm``: pieces of the received key (``piece_forms``): the
#   start of it as providers echo it ("Incorrect API key provided: sk-…", 27 characters) in the 401s of
#   completion request 0, 3, 6 …; an SSE error event and the generated text quoting 8-to-27-character
#   pieces upper-cased, lower-cased, as hex and partly ``\u``/``%XX``/``&#x…;``-escaped; and the whole
#   key after 171 filler characters (so that a 200-character cut falls inside it) as the served
#   model id, and as llama.cpp's ``/props`` ``model_alias`` (``..._llamacpp``: ``/v1/models`` owned by
#   llamacpp) or a ``vllm:cache_config_info`` label (``..._vllm``: vLLM's ``/metrics``);
# - ``dcgm``: ``/metrics`` is a DCGM exporter's page (100 W on GPU 0), every request logged (a sensor on
#   another origin, which must never receive a target's query string).

SECRET_BEHAVIOURS = {"echo_encoded", "escape_model", "redirect_userinfo_load", "redirect_userinfo_models",
                     "echo_pieces_llamacpp", "echo_pieces_vllm", "dcgm"}
FILLER = "f" * 171  # the key then straddles the 200-character cut of identity settings and model ids


def piece_forms(key: str) -> list[str]:
    """Pieces of ``key`` as a server could echo them, written here (independently of wattbench):
    its first 27 characters; 8-, 12- and 20-character pieces upper- and lower-cased; as hex (either
    case); with every other character ``\\uXXXX``-, ``%XX``- or ``&#xN;``-escaped."""
    out = [key[:27]]
    for n, at in ((8, 3), (12, 10), (20, 14), (8, len(key) - 8)):
        p = key[at:at + n]
        out += [p.upper(), p.lower(), p.encode().hex(), p.encode().hex().upper(),
                "".join("\\u%04x" % ord(c) if i % 2 else c for i, c in enumerate(p)),
                "".join("%%%02X" % ord(c) if i % 2 == 0 else c for i, c in enumerate(p)),
                "".join("&#x%x;" % ord(c) if i % 2 else c for i, c in enumerate(p.upper()))]
    return out
ESCAPES = "\x1b]0;pwned-title\x07\x1b[2J\x1b[31mRED\x1b[0m\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\" \
          "\r\x08\x9b1m[/x][bold]bold[/bold]\u202eevil"


def encodings(s: str) -> dict[str, str]:
    """Every encoding of ``s`` a server or tool could put it in, written here, independently of
    wattbench's scrubber: raw; URL (``quote`` with and without ``/``, ``quote_plus``, every byte
    ``%XX`` upper and lower); JSON (``\\/``, every character ``\\uXXXX`` lower and upper);
    HTML (entities, ``&#N;``, ``&#xN;``); base64 (standard, unpadded, URL-safe, and inside a longer
    base64 text at each of the three byte alignments)."""
    import base64
    import urllib.parse

    b = s.encode()
    out = {"raw": s, "url": urllib.parse.quote(s, safe=""), "url path": urllib.parse.quote(s),
           "url plus": urllib.parse.quote_plus(s), "url all": "".join("%%%02X" % c for c in b),
           "url all lower": "".join("%%%02x" % c for c in b),
           "json slash": json.dumps(s)[1:-1].replace("/", "\\/"),
           "json u": "".join("\\u%04x" % ord(c) for c in s), "json U": "".join("\\u%04X" % ord(c) for c in s),
           "html": s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;"),
           "html dec": "".join("&#%d;" % ord(c) for c in s), "html hex": "".join("&#x%x;" % ord(c) for c in s),
           "b64": base64.b64encode(b).decode(), "b64 unpadded": base64.b64encode(b).decode().rstrip("="),
           "b64 urlsafe": base64.urlsafe_b64encode(b).decode()}
    for o, pre in enumerate((b"", b"{", b'{"')):
        out[f"b64 in blob {o}"] = base64.b64encode(pre + b + b'"}').decode()
    return out


def base64_cores(s: str) -> list[str]:
    """What of ``s`` shows in any longer base64 text: for each byte alignment, the 4-character
    groups made of its bytes alone (computed here, not by wattbench)."""
    import base64

    b, out = s.encode(), []
    for alphabet in (base64.b64encode, base64.urlsafe_b64encode):
        for o in range(3):
            enc = alphabet(b"\0" * o + b).decode()
            first = 0 if o == 0 else 1
            core = enc[4 * first:4 * ((o + len(b)) // 3)]
            if len(core) >= 8:
                out.append(core)
    return out


def received_secrets(headers: dict, body: bytes) -> list[str]:
    import base64

    out = []
    auth = headers.get("authorization", "")
    if auth:
        out.append(auth)
        scheme, _, cred = auth.partition(" ")
        out.append(cred)
        if scheme.lower() == "basic":
            try:
                plain = base64.b64decode(cred).decode()
            except ValueError:
                plain = ""
            out += [plain, plain.partition(":")[2]]
    out += [v for k, v in headers.items() if k.startswith("x-") and v]
    try:
        req = json.loads(body) if body else {}
    except ValueError:
        req = {}

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k not in ("prompt", "model", "messages"):
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
        elif isinstance(o, str) and len(o) >= 8:
            out.append(o)

    walk(req)
    return [x for x in dict.fromkeys(out) if x and len(x) >= 6]


def every_form(secrets: list[str]) -> str:
    return " | ".join(f for s in secrets for f in encodings(s).values())


def secrets_route(proto: "Proto", method: str, path: str, headers: dict, body: bytes) -> bool:
    """The routes of ``SECRET_BEHAVIOURS``; False: answered as the normal server does."""
    st, b = proto.st, proto.st.a.behaviour
    host = headers.get("host", "127.0.0.1")
    if b == "redirect_userinfo_models" and path == "/v1/models":
        proto.redirect(302, f"http://intruder:pw-in-redirect@{host}/v1/models")
        return True
    if b == "redirect_userinfo_load" and path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
        if st.requests % 3 != 1:
            return False  # answered normally (and counted) by completion()
        st.requests += 1
        st.faults += 1
        proto.redirect(307, f"http://intruder:pw-in-redirect@{host}/v1/moved{path[3:]}")
        return True
    secrets = received_secrets(headers, body)
    key = secrets[1] if len(secrets) > 1 else (secrets[0] if secrets else "none")
    if b == "dcgm":
        if path == "/metrics":
            proto.respond(200, b'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 100.0\n', ctype="text/plain; version=0.0.4")
        else:
            proto.respond(404, b"{}")
        return True
    if b in ("echo_pieces_llamacpp", "echo_pieces_vllm"):
        return pieces_route(proto, method, path, key)
    if path == "/metrics":
        st.tokenize += 1  # scrapes, counted
        label = key if b == "echo_encoded" else ESCAPES
        n = 10 * st.tokenize
        text = (f'vllm:generation_tokens_total{{model_name="{label}"}} {n}\n'
                f'vllm:prompt_tokens_total{{model_name="{label}"}} {n}\n'
                f'vllm:num_requests_running{{model_name="{label}"}} 0\n')
        proto.respond(200, text.encode(), ctype="text/plain; version=0.0.4")
        return True
    if method == "GET" and path == "/v1/models":
        mid = (f"{MODEL}-{key}" if b == "echo_encoded" else f"{MODEL}{ESCAPES}")
        proto.respond(200, json.dumps({"object": "list", "data": [{"id": mid, "object": "model"}]}).encode())
        return True
    if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
        i = st.requests
        st.requests += 1
        echo = every_form(secrets) if b == "echo_encoded" else ESCAPES
        first = (secrets[0] if secrets else "") if b == "echo_encoded" else ESCAPES
        chat = path.endswith("chat/completions")
        if i % 3 == 0:
            st.faults += 1
            # a plain-text body: the first secret starts at character 290 of what the client reads
            proto.respond(401, ("e" * 290 + first + " | " + echo).encode(), ctype="text/plain")
            return True

        def piece(t, finish=None):
            c = {"index": 0, "finish_reason": finish}
            c.update({"delta": {"content": t} if t else {}} if chat else {"text": t})
            return {"id": "h", "model": MODEL, "choices": [c]}

        proto.stream_head()
        proto.events(piece(" tok"))
        if i % 3 == 1:
            st.faults += 1
            proto.events({"error": {"message": "upstream refused: " + echo, "type": "auth"}})
            proto.end_stream()
            return True
        proto.events(piece(" " + echo), piece("", "length"),
                     {"id": "h", "model": MODEL, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2,
                                                                          "total_tokens": 5}})
        st.completed += 1
        proto.end_stream()
        return True
    return False


# ============================================================== identity probes and prompt calibration
# (kept in one block)
#
# - answers that nest past any parser: ``props_deep`` (llama.cpp's ``/props`` 200,000 deep under
#   ``default_generation_settings``), ``server_info_deep`` (SGLang's ``/get_server_info`` 5,000 deep),
#   ``info_deep_value`` (TGI's ``/info`` whole, its ``sha`` a value 62 deep: parsed, and stored);
# - ``props_bloat``: llama.cpp's ``/props`` with 3.3 MB of settings (1,500 params of 2 KB values, a
#   100 KB name) and ``/v1/models`` listing 15,000 ids of 200 characters (the run's model first;
#   each answer under the probes' 4 MiB cap);
# - prompt counts, every answer: ``prompt_tokens_0``, ``prompt_tokens_1``, ``prompt_tokens_7``
#   (``usage.prompt_tokens`` that many, whatever the prompt);
# - ``calibration_stall``: every one-token request (the calibration's probes; the levels ask more)
#   sends one token and then silence, connection open.

DEEP_PROPS = 200_000
DEEP_SERVER_INFO = 5_000
DEEP_INFO_VALUE = 62  # parsed (the reader takes 64), and 65 deep in result.json were it stored whole
PROMPT_TOKENS = {"prompt_tokens_0": 0, "prompt_tokens_1": 1, "prompt_tokens_7": 7}
PROBE_BEHAVIOURS = {"props_deep", "server_info_deep", "info_deep_value", "props_bloat", "calibration_stall",
                    *PROMPT_TOKENS}
BLOAT_MODELS = 15_000


def _deep(n: int) -> bytes:
    return b"[" * n + b"1" + b"]" * n


def probes_body(b: str, path: str) -> bytes | None:
    """The answer of a ``PROBE_BEHAVIOURS`` server to a GET of ``path`` (None: the normal answer)."""
    if path == "/v1/models" and b == "props_bloat":
        ids = [MODEL] + [f"m{i:05d}-" + "x" * 193 for i in range(BLOAT_MODELS - 1)]
        return json.dumps({"object": "list", "data": [{"id": i, "object": "model", "owned_by": "llamacpp"}
                                                      for i in ids]}).encode()
    if path == "/props" and b == "props_deep":
        return b'{"total_slots": 1, "default_generation_settings": ' + _deep(DEEP_PROPS) + b"}"
    if path == "/props" and b == "props_bloat":
        params = {f"param_{i:05d}_" + "n" * 40: "v" * 2000 for i in range(1500)}
        return json.dumps({"total_slots": 4, "build_info": "b" * 100_000, "model_alias": MODEL, "n" * 100_000: 1,
                           "default_generation_settings": {"n_ctx": 4096, "params": params}}).encode()
    if path == "/get_server_info" and b == "server_info_deep":
        return b'{"tp_size": 1, "model_path": "m", "extra": ' + _deep(DEEP_SERVER_INFO) + b"}"
    if path == "/info" and b == "info_deep_value":
        deep = json.loads(_deep(DEEP_INFO_VALUE - 1).decode())
        return json.dumps({"model_id": MODEL, "max_total_tokens": 4096, "max_input_tokens": 2048, "version": "3.0",
                           "docker_label": "x", "sha": deep}).encode()
    return None


def pieces_route(proto: "Proto", method: str, path: str, key: str) -> bool:
    st, b = proto.st, proto.st.a.behaviour
    echoed = FILLER + key
    if method == "GET" and path == "/v1/models":
        owner = "llamacpp" if b == "echo_pieces_llamacpp" else "vllm"
        proto.respond(200, json.dumps({"object": "list", "data": [{"id": echoed, "object": "model",
                                                                   "owned_by": owner}]}).encode())
        return True
    if path == "/props" and b == "echo_pieces_llamacpp":
        proto.respond(200, json.dumps({"default_generation_settings": {"n_ctx": 512}, "total_slots": 1,
                                       "build_info": "b1-hostile", "model_alias": echoed}).encode())
        return True
    if path == "/metrics" and b == "echo_pieces_vllm":
        st.tokenize += 1  # scrapes, counted
        n = 10 * st.tokenize
        text = (f'vllm:cache_config_info{{block_size="16",swap_space_label="{echoed}"}} 1.0\n'
                f'vllm:generation_tokens_total{{model_name="m"}} {n}\n'
                f'vllm:num_requests_running{{model_name="m"}} 0\n')
        proto.respond(200, text.encode(), ctype="text/plain; version=0.0.4")
        return True
    if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
        i = st.requests
        st.requests += 1
        forms = " | ".join(piece_forms(key))
        chat = path.endswith("chat/completions")
        if i % 3 == 0:
            st.faults += 1
            proto.respond(401, json.dumps({"error": {"message": f"Incorrect API key provided: {key[:27]}…",
                                                     "type": "invalid_request_error"}}).encode())
            return True

        def piece(t, finish=None):
            c = {"index": 0, "finish_reason": finish}
            c.update({"delta": {"content": t} if t else {}} if chat else {"text": t})
            return {"id": "h", "model": MODEL, "choices": [c]}

        proto.stream_head()
        proto.events(piece(" tok"))
        if i % 3 == 1:
            st.faults += 1
            proto.events({"error": {"message": "upstream refused key " + forms, "type": "auth"}})
            proto.end_stream()
            return True
        proto.events(piece(" " + forms), piece("", "length"),
                     {"id": "h", "model": MODEL, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2,
                                                                          "total_tokens": 5}})
        st.completed += 1
        proto.end_stream()
        return True
    return False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--behaviour", choices=sorted({*BEHAVIOURS, *SECRET_BEHAVIOURS, *PROBE_BEHAVIOURS}), default="ok")
    p.add_argument("--other", default="http://127.0.0.1:9", help="the other origin redirects point to")
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args(argv)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    st = State(a)
    server = loop.run_until_complete(loop.create_server(lambda: Proto(st), "127.0.0.1", a.port))
    sys.stdout.write(f"LISTENING {server.sockets[0].getsockname()[1]}\n")
    sys.stdout.flush()
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    loop.run_until_complete(stop)
    server.close()
    loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
