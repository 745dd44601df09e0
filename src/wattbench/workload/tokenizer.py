"""Where token counts come from when building prompts: a local tokenizer, the server, or an estimate.

Three sources, best first, each recording ``source`` (which goes into ``RequestSpec.token_source``
and the result):

- ``tokenizer``: a local Hugging Face tokenizer (``tokenizer.json`` or a directory holding one),
  loaded with the ``tokenizers`` library. Exact.
- ``server``: the server's ``/tokenize`` and ``/detokenize`` endpoints (vLLM, SGLang):
  ``POST {base without /v1}/tokenize {"model", "prompt"}`` answers ``{"count", "tokens"}``. Exact
  for the model being served; costs one HTTP round trip per call.
- ``approx``: no tokenizer at all; lengths from word counts at ~0.75 words per token (English
  prose under common BPE vocabularies). Lengths are then approximate and the result says so.

``open_token_source(tokenizer=PATH or None, base_url=..., model=...)`` picks the best one that
works. Token counts exclude special tokens (BOS) and any chat template.
"""

from __future__ import annotations

from wattbench.core.secret_scope import clip
from wattbench.core.redact import authorization  # noqa: E402  (one home for Authorization values)

import http.client
import json
import math
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from wattbench.core.errors import UserError
from wattbench.core import origin

if TYPE_CHECKING:  # for the annotations only: the tokenizer library and aiohttp load when used
    import aiohttp
    from tokenizers import Tokenizer

MAX_TOKENIZE_BYTES = 64 << 20  # of one /tokenize answer (a 1M-token prompt's ids are ~8 MB of JSON)
MAX_TOKEN_COUNT = 100_000_000  # a count above this is not one (load/client.py's MAX_USAGE_TOKENS)

WORDS_PER_TOKEN = 0.75  # approx source: ~0.75 English words per BPE token
# the most words a prompt of N tokens is given, whatever a calibration says: no tokenizer splits
# fewer than one token out of 4 words (a server answering `prompt_tokens: 1` to every probe once
# fitted 145 words a token and built 4.3-million-word prompts: 23 GB, the OOM killer)
MAX_WORDS_PER_TOKEN = 4.0


class TokenSource(Protocol):
    source: str  # tokenizer | server | approx
    exact: bool

    def count(self, text: str) -> int: ...

    def describe(self) -> dict[str, Any]: ...


@runtime_checkable
class Codec(Protocol):
    """What an exact token source adds (``HFTokenizer``, ``ServerTokenizer``): token ids both ways,
    with which ``PromptBuilder`` builds prompts of an exact length."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class HFTokenizer:
    """A local Hugging Face fast tokenizer (``tokenizers.Tokenizer``)."""

    source = "tokenizer"
    exact = True

    def __init__(self, path: str | Path):
        p = Path(path).expanduser()
        if p.is_dir():
            p = p / "tokenizer.json"
        if not p.is_file():
            raise UserError(f"tokenizer not found: {path} (give a tokenizer.json file or a directory holding one)")
        from tokenizers import Tokenizer

        try:
            self._tok = Tokenizer.from_file(str(p))
        except Exception as e:  # the library raises a plain Exception on bad files
            raise UserError(f"cannot load tokenizer {p}: {e} (is it a Hugging Face tokenizer.json?)") from None
        self.path = str(p)

    @classmethod
    def from_object(cls, tok: Tokenizer, name: str = "<in-memory>") -> "HFTokenizer":
        self = cls.__new__(cls)
        self._tok = tok
        self.path = name
        return self

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def decode_batch(self, seqs: list[list[int]]) -> list[str]:
        return self._tok.decode_batch([list(s) for s in seqs], skip_special_tokens=False)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def vocab(self) -> dict[str, int]:
        return self._tok.get_vocab(with_added_tokens=False)

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "path": self.path, "vocab_size": self._tok.get_vocab_size()}


def server_root(base_url: str) -> str:
    """The server root for /tokenize: the base URL without a trailing ``/v1``."""
    u = base_url.rstrip("/")
    return u[: -len("/v1")] if u.endswith("/v1") else u


def _tokenize_body(model: str, prompt: str) -> dict[str, object]:
    return {"model": model, "prompt": prompt, "add_special_tokens": False}


class _NoEndpoint(UserError):
    """The server has no such endpoint (HTTP 404/405/501)."""


def _count_from(resp: object, url: str) -> tuple[int, list[int] | None]:
    """The count (and the token ids, when given) of a ``/tokenize`` answer, checked: an object
    whose ``count`` is a whole number in 0..``MAX_TOKEN_COUNT`` and whose ``tokens`` are integers;
    anything else is a ``UserError`` (the caller falls back: no tokenizer)."""
    if not isinstance(resp, dict):
        raise UserError(f"{url} answered {type(resp).__name__}, not a JSON object")
    tokens = resp.get("tokens")
    if tokens is not None and not (isinstance(tokens, list) and all(type(t) is int for t in tokens)):
        raise UserError(f"{url} answered 'tokens' that are not a list of integers")
    count = resp.get("count")
    if count is not None:
        if type(count) is not int or not 0 <= count <= MAX_TOKEN_COUNT:
            raise UserError(f"{url} answered a 'count' that is not a whole number in 0..{MAX_TOKEN_COUNT}")
        return count, tokens
    if tokens is not None:
        return len(tokens), tokens
    # the answer's keys, not its body: a server's raw JSON is no message (and its text is untrusted)
    keys = ", ".join("".join(ch for ch in str(k)[:32] if ch.isalnum() or ch in "_-.") for k in list(resp)[:8])
    raise UserError(f"{url} answered without 'count' or 'tokens' (its keys: {keys or 'none'})")


class ServerTokenizer:
    """The server's ``/tokenize`` (and ``/detokenize``) endpoints, synchronously (stdlib HTTP).

    Use :func:`server_count_async` from inside an event loop.
    """

    source = "server"
    exact = True

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 30.0):
        self.root = server_root(base_url)
        self.model = model
        self._api_key = api_key
        self.timeout_s = timeout_s

    def _post(self, path: str, body: dict[str, object]) -> object:
        url = self.root + path
        headers = {"Content-Type": "application/json"}
        auth = authorization(self._api_key)
        if auth:
            headers["Authorization"] = auth
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with origin.urlopen(req, timeout=self.timeout_s) as r:  # another host: refused (core/origin.py)
                raw = r.read(MAX_TOKENIZE_BYTES + 1)
                left = getattr(r, "length", None)  # bytes its Content-Length announced and never sent
            if left and len(raw) <= MAX_TOKENIZE_BYTES:
                raise http.client.IncompleteRead(raw, left)
        except urllib.error.HTTPError as e:
            err = _NoEndpoint if e.code in (404, 405, 501) else UserError
            raise err(f"{url} answered HTTP {e.code}; the server has no usable {path} "
                      f"(give --tokenizer PATH for exact lengths)") from None
        except http.client.IncompleteRead as e:
            raise UserError(f"{url} closed its answer after {len(e.partial)} bytes "
                            f"(give --tokenizer PATH for exact lengths)") from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as e:
            raise UserError(f"cannot use {url}: {type(e).__name__}: {clip(str(e), 200)} "
                            f"(give --tokenizer PATH for exact lengths)") from None
        if len(raw) > MAX_TOKENIZE_BYTES:
            raise UserError(f"{url} answered more than {MAX_TOKENIZE_BYTES} bytes (give --tokenizer PATH)")
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise UserError(f"{url} did not answer JSON (give --tokenizer PATH for exact lengths)") from None

    def encode(self, text: str) -> list[int]:
        n, tokens = _count_from(self._post("/tokenize", _tokenize_body(self.model, text)), self.root + "/tokenize")
        if tokens is None:
            raise UserError(f"{self.root}/tokenize returns a count but no token ids; exact prompts need ids "
                            f"(give --tokenizer PATH)")
        return [int(t) for t in tokens]

    def decode(self, ids: list[int]) -> str:
        resp = self._post("/detokenize", {"model": self.model, "tokens": [int(i) for i in ids]})
        text = resp.get("prompt", resp.get("text")) if isinstance(resp, dict) else None
        if not isinstance(text, str):
            raise UserError(f"{self.root}/detokenize answered without 'prompt': {clip(str(resp), 200)}")
        return text

    def count(self, text: str) -> int:
        return _count_from(self._post("/tokenize", _tokenize_body(self.model, text)), self.root + "/tokenize")[0]

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "endpoint": self.root + "/tokenize", "model": self.model}


async def server_count_async(session: aiohttp.ClientSession, base_url: str, model: str, text: str, api_key: str | None = None) -> int:
    """Count ``text``'s tokens with the server's ``/tokenize`` using an ``aiohttp.ClientSession``."""
    url = server_root(base_url) + "/tokenize"
    headers = {"Authorization": authorization(api_key)} if api_key else {}
    async with origin.request(session, "POST", url, json=_tokenize_body(model, text), headers=headers) as r:
        if r.status != 200:
            raise UserError(f"{url} answered HTTP {r.status} (give --tokenizer PATH for exact lengths)")
        raw = await origin.read_body(r, MAX_TOKENIZE_BYTES)
    try:
        resp = json.loads(raw)
    except (ValueError, RecursionError):
        raise UserError(f"{url} did not answer JSON (give --tokenizer PATH for exact lengths)") from None
    return _count_from(resp, url)[0]


async def server_has_tokenize(session: aiohttp.ClientSession, base_url: str, model: str) -> bool:
    """Whether the server answers ``/tokenize`` with a usable count (aiohttp session)."""
    try:
        await server_count_async(session, base_url, model, "hello")
        return True
    except Exception:
        return False


_WORD = re.compile(r"\S+")


class ApproxTokenizer:
    """No tokenizer: ``ceil(words / 0.75)`` tokens. Lengths are estimates (``token_source=approx``).

    ``calibrate(tokens_per_word, overhead_tokens)`` replaces the 0.75 guess by the server's own
    count (``run/prime.calibrate_prompts`` fits it from ``usage.prompt_tokens`` of probe prompts
    built like the run's): a prompt of ``W`` words is ``tokens_per_word · W + overhead_tokens``
    tokens as the server counts them (its chat template, BOS and the prompt's tag in the overhead),
    so ``words_for(n)`` asks ``(n − overhead) / tokens_per_word`` words and the source reads
    ``calibrated``."""

    source = "approx"
    exact = False
    why: str | None = None  # why the server's /tokenize was not used, when one was tried

    def __init__(self, words_per_token: float = WORDS_PER_TOKEN):
        self.words_per_token = words_per_token
        self.overhead_tokens = 0.0
        self.calibration: dict[str, object] | None = None

    def calibrate(self, tokens_per_word: float, overhead_tokens: float, **how: object) -> None:
        """Use the server's measured ``tokens_per_word`` and ``overhead_tokens`` from now on."""
        if not (1 / MAX_WORDS_PER_TOKEN <= tokens_per_word < math.inf and math.isfinite(overhead_tokens)):
            raise ValueError(f"not a calibration: {tokens_per_word} tokens per word + {overhead_tokens}")
        self.words_per_token = 1.0 / tokens_per_word
        self.overhead_tokens = float(overhead_tokens)
        self.source = "calibrated"
        self.calibration = {"tokens_per_word": tokens_per_word, "overhead_tokens": overhead_tokens, **how}

    def count(self, text: str) -> int:
        """Tokens of a piece of text (the overhead of a whole prompt not included)."""
        return int(math.ceil(len(_WORD.findall(text)) / self.words_per_token))

    def words_for(self, n_tokens: int) -> int:
        """How many words make about ``n_tokens`` tokens of a whole prompt (at least 1, at most
        ``MAX_WORDS_PER_TOKEN`` a token)."""
        words = max(1, int(round((n_tokens - self.overhead_tokens) * self.words_per_token)))
        return min(words, max(1, int(math.ceil(MAX_WORDS_PER_TOKEN * n_tokens))))

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source, "words_per_token": self.words_per_token}
        if self.calibration is not None:
            d["calibration"] = dict(self.calibration)
        return d


def open_token_source(tokenizer: str | Path | None = None, *, base_url: str | None = None,
                      model: str | None = None, api_key: str | None = None,
                      allow_approx: bool = True) -> TokenSource:
    """The best available token source: ``--tokenizer PATH``, else the server's ``/tokenize``, else approx.

    A given tokenizer path that cannot be loaded is an error (never silently approximate).
    """
    if tokenizer:
        return HFTokenizer(tokenizer)
    why = None
    if base_url and model:
        st = ServerTokenizer(base_url, model, api_key=api_key, timeout_s=10.0)
        try:
            st.encode("hello world")
            st.decode([0])
            return st
        except _NoEndpoint:  # the server has none: the plain "no tokenizer" case
            pass
        except UserError as e:  # a /tokenize that failed: no tokenizer, and why (in the result's warning)
            why = str(e)
    if not allow_approx:
        raise UserError("no tokenizer: give --tokenizer PATH (a tokenizer.json or a model directory) for "
                        "exact prompt lengths")
    approx = ApproxTokenizer()
    approx.why = why
    return approx
