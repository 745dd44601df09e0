"""Tiny OpenAI-compatible stand-ins with known answers, for `agree` tests.

Each server runs an aiohttp app on its own event loop in a thread, bound to 127.0.0.1 on a free
port (real sockets). ``answers`` maps a prompt (or a chat's last user message) to the answer text;
an unknown prompt gets ``default``. Tokens returned in ``logprobs`` are the answer split into
word pieces with their leading space (like a BPE tokenizer's), so token and whitespace bases
differ in a way a test can check. ``logprobs_supported=False`` answers 400 to any request asking
for logprobs, like a server without them.
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any


def bpe_like_tokens(text: str) -> list[str]:
    return re.findall(r"\s*\S+", text)


class FakeOpenAIServer:
    def __init__(self, model: str, answers: dict[str, str], default: str = "I don't know.",
                 logprobs_supported: bool = True, fail_prompts: set[str] | None = None, fail_status: int = 503,
                 api_key: str | None = None, authorization: str | None = None):
        self.api_key = api_key  # when set, every request must carry "Authorization: Bearer <key>"
        self.authorization = authorization  # when set, every request must carry exactly this Authorization
        self.model = model
        self.answers = answers
        self.default = default
        self.logprobs_supported = logprobs_supported
        self.fail_prompts = set(fail_prompts or ())
        self.fail_status = fail_status
        self.requests: list[dict[str, Any]] = []
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _answer(self, prompt: str) -> str:
        return self.answers.get(prompt, self.default)

    def _refused(self, request):
        from aiohttp import web

        want = self.authorization or (f"Bearer {self.api_key}" if self.api_key else None)
        if want and request.headers.get("Authorization") != want:
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        return None

    async def _models(self, request):
        from aiohttp import web

        if (r := self._refused(request)) is not None:
            return r
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def _complete(self, request, chat: bool):
        from aiohttp import web

        if (r := self._refused(request)) is not None:
            return r
        body = await request.json()
        body["_path"] = request.path
        self.requests.append(body)
        if body.get("logprobs") and not self.logprobs_supported:
            return web.json_response({"error": {"message": "logprobs is not supported"}}, status=400)
        if chat:
            users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
            prompt = users[-1] if users else ""
        else:
            prompt = body.get("prompt", "")
        if prompt in self.fail_prompts:
            return web.json_response({"error": {"message": "refused"}}, status=self.fail_status)
        toks = bpe_like_tokens(self._answer(prompt))[: int(body.get("max_tokens", 16))]
        text = "".join(toks)
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length" if len(toks) == body.get("max_tokens")
                                  else "stop"}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [{"token": t, "logprob": -0.1} for t in toks]}
        else:
            choice["text"] = text
            if body.get("logprobs"):
                choice["logprobs"] = {"tokens": toks, "token_logprobs": [-0.1] * len(toks)}
        return web.json_response({"id": "cmpl-1", "object": "text_completion", "model": self.model,
                                  "choices": [choice],
                                  "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(toks)}})

    def start(self) -> "FakeOpenAIServer":
        from aiohttp import web

        async def comp(req):
            return await self._complete(req, chat=False)

        async def chat(req):
            return await self._complete(req, chat=True)

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            app = web.Application()
            app.router.add_get("/v1/models", self._models)
            app.router.add_post("/v1/completions", comp)
            app.router.add_post("/v1/chat/completions", chat)
            self._runner = web.AppRunner(app)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]
            self._ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name=f"fake-openai-{self.model}", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
