import asyncio
import threading

import pytest
from aiohttp import web

from wattbench.core.errors import UserError
from wattbench.workload.synthetic import SyntheticWorkload
from wattbench.workload.tokenizer import (ApproxTokenizer, HFTokenizer, ServerTokenizer, open_token_source,
                                          server_count_async, server_root)


@pytest.fixture
def tokenize_server(bpe):
    """A vLLM-style /tokenize + /detokenize on 127.0.0.1 backed by the trained tokenizer."""
    calls = []

    async def tokenize(req):
        body = await req.json()
        calls.append(body)
        ids = bpe.encode(body["prompt"])
        return web.json_response({"count": len(ids), "tokens": ids, "max_model_len": 2048})

    async def detokenize(req):
        body = await req.json()
        return web.json_response({"prompt": bpe.decode(body["tokens"])})

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    th = threading.Thread(target=loop.run_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{port}/v1", calls
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    th.join(5)
    loop.close()


def test_server_root():
    assert server_root("http://h:8000/v1/") == "http://h:8000"
    assert server_root("http://h:8000") == "http://h:8000"


def test_server_tokenizer_counts_and_builds_exact_prompts(tokenize_server, bpe):
    url, calls = tokenize_server
    st = ServerTokenizer(url, "m")
    assert st.count("the river and the tree") == bpe.count("the river and the tree")
    assert calls[-1]["model"] == "m"
    w = SyntheticWorkload("uniform:20:60", "8", st, seed=1)
    specs = w.take(5)
    assert all(bpe.count(s.prompt) == s.input_tokens for s in specs)
    assert all(s.token_source == "server" for s in specs)


def test_server_count_async(tokenize_server, bpe):
    import aiohttp

    url, _ = tokenize_server

    async def go():
        async with aiohttp.ClientSession() as s:
            return await server_count_async(s, url, "m", "hello world river")

    assert asyncio.run(go()) == bpe.count("hello world river")


def test_open_token_source_order(tokenize_server, bpe_path):
    url, _ = tokenize_server
    assert isinstance(open_token_source(bpe_path), HFTokenizer)
    assert isinstance(open_token_source(None, base_url=url, model="m"), ServerTokenizer)
    assert isinstance(open_token_source(None, base_url="http://127.0.0.1:9/v1", model="m"), ApproxTokenizer)
    with pytest.raises(UserError, match="--tokenizer"):
        open_token_source(None, allow_approx=False)


def test_bad_tokenizer_path(tmp_path):
    with pytest.raises(UserError, match="tokenizer not found"):
        HFTokenizer(tmp_path / "none")
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(UserError, match="cannot load tokenizer"):
        HFTokenizer(tmp_path)


def test_approx_count():
    a = ApproxTokenizer()
    assert a.count("one two three") == 4  # ceil(3 / 0.75)
    assert a.words_for(100) == 75


def test_a_calibrated_approx_source_asks_for_the_words_the_server_counts_as_n_tokens():
    from wattbench.workload.tokenizer import ApproxTokenizer

    ts = ApproxTokenizer()
    assert ts.words_for(256) == 192  # the 0.75 guess
    ts.calibrate(2.1, 7.0, probes=24)
    # 2.1 tokens per word + 7: (256 - 7) / 2.1 = 118.6 words -> 119, counted 2.1 x 119 + 7 = 256.9
    assert ts.words_for(256) == 119
    assert ts.source == "calibrated" and ts.describe()["calibration"]["tokens_per_word"] == pytest.approx(2.1)
    with pytest.raises(ValueError):
        ts.calibrate(0.0, 1.0)
