"""Drive Debian's headless ``chromium`` over the DevTools protocol (aiohttp websocket client).

``inspect_page(path, evaluate={...}, screenshot=PNG)`` opens a local file, waits for the load
event and for ``wait_js`` to become true, and returns what the page did: console messages, uncaught
exceptions, log entries, every network request URL, the values of the given JS expressions, and
optionally a PNG screenshot. The browser runs with a fresh profile and no network features, and is
stopped (by its own PID) before returning.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        p = shutil.which(name)
        if p:
            return p
    return None


@dataclass
class PageReport:
    console: list[dict] = field(default_factory=list)  # {"type": "error"|"log"|..., "text": str}
    exceptions: list[str] = field(default_factory=list)
    log_entries: list[dict] = field(default_factory=list)  # {"level":..., "text":..., "url":...}
    requests: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: Path | None = None
    load_s: float = 0.0

    def errors(self) -> list[str]:
        """Console errors, exceptions and error-level log entries, as text."""
        out = [c["text"] for c in self.console if c["type"] in ("error", "assert")]
        out += self.exceptions
        out += [f"{x.get('text')} ({x.get('url', '')})" for x in self.log_entries if x.get("level") == "error"]
        return out


class _CDP:
    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future] = {}
        self.events: list[dict] = []
        self.waiters: list[tuple[str, asyncio.Future]] = []

    async def reader(self):
        import aiohttp

        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = msg.json()
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)
                for name, fut in list(self.waiters):
                    if name == data["method"] and not fut.done():
                        fut.set_result(data)

    async def send(self, method: str, **params) -> dict:
        i = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[i] = fut
        await self.ws.send_json({"id": i, "method": method, "params": params})
        data = await fut
        if "error" in data:
            raise RuntimeError(f"{method}: {data['error']}")
        return data.get("result", {})

    def wait_for(self, method: str) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append((method, fut))
        return fut


async def _drive(port: int, url: str, evaluate: dict[str, str], wait_js: str | None, screenshot: Path | None,
                 width: int, height: int, timeout_s: float, full_page: bool,
                 slices: list[tuple[Path, int]]) -> PageReport:
    import aiohttp

    rep = PageReport()
    async with aiohttp.ClientSession() as http:
        async with http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as resp:
            target = await resp.json(content_type=None)
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            cdp = _CDP(ws)
            reader = asyncio.create_task(cdp.reader())
            try:
                for dom in ("Page", "Runtime", "Log", "Network"):
                    await cdp.send(f"{dom}.enable")
                await cdp.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                               deviceScaleFactor=1, mobile=False)
                loaded = cdp.wait_for("Page.loadEventFired")
                t = time.perf_counter()
                await cdp.send("Page.navigate", url=url)
                await asyncio.wait_for(loaded, timeout_s)
                if wait_js:
                    deadline = time.perf_counter() + timeout_s
                    while True:
                        r = await cdp.send("Runtime.evaluate", expression=wait_js, returnByValue=True)
                        if r.get("result", {}).get("value"):
                            break
                        if time.perf_counter() > deadline:
                            raise TimeoutError(f"page never satisfied {wait_js!r}")
                        await asyncio.sleep(0.2)
                rep.load_s = time.perf_counter() - t
                for name, expr in evaluate.items():
                    r = await cdp.send("Runtime.evaluate", expression=expr, returnByValue=True)
                    rep.values[name] = r.get("result", {}).get("value")
                if screenshot is not None:
                    params: dict[str, Any] = {"format": "png"}
                    if full_page:
                        m = await cdp.send("Page.getLayoutMetrics")
                        size = m.get("cssContentSize") or m["contentSize"]
                        params.update(captureBeyondViewport=True,
                                      clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
                    shot = await cdp.send("Page.captureScreenshot", **params)
                    screenshot.write_bytes(base64.b64decode(shot["data"]))
                    rep.screenshot = screenshot
                for shot_path, y in slices:
                    clip = {"x": 0, "y": y, "width": width, "height": height, "scale": 1}
                    shot = await cdp.send("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
                    Path(shot_path).write_bytes(base64.b64decode(shot["data"]))
            finally:
                reader.cancel()
    for ev in cdp.events:
        m, p = ev["method"], ev.get("params", {})
        if m == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            rep.console.append({"type": p.get("type"), "text": text})
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            rep.exceptions.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
        elif m == "Log.entryAdded":
            en = p.get("entry", {})
            rep.log_entries.append({"level": en.get("level"), "text": en.get("text"), "url": en.get("url", "")})
        elif m == "Network.requestWillBeSent":
            rep.requests.append(p.get("request", {}).get("url", ""))
    return rep


def inspect_page(path: str | Path, *, evaluate: dict[str, str] | None = None, wait_js: str | None = None,
                 screenshot: str | Path | None = None, width: int = 1400, height: int = 1000,
                 timeout_s: float = 90.0, full_page: bool = False,
                 slices: list[tuple[str | Path, int]] | None = None) -> PageReport:
    """Open a local HTML file in headless chromium and report what happened (see module doc).

    ``slices``: extra screenshots, one viewport high, of the page from the given y offsets (px).
    """
    exe = find_chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed (apt-get install -y chromium)")
    profile = Path(tempfile.mkdtemp(prefix="wattbench-chromium-"))
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
            f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
            "about:blank"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {proc.returncode} before opening DevTools")
            if time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port within 30 s")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        url = Path(path).resolve().as_uri()
        shot = Path(screenshot) if screenshot is not None else None
        return asyncio.run(_drive(port, url, evaluate or {}, wait_js, shot, width, height, timeout_s, full_page,
                                 [(Path(p), y) for p, y in slices or []]))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(profile, ignore_errors=True)


def png_stats(path: str | Path) -> dict[str, Any]:
    """Size and colour variety of a PNG (decoded with the stdlib): width, height, distinct colours
    in a sample of pixels, and the fraction of sampled pixels that are not near-white."""
    import struct
    import zlib

    raw = Path(path).read_bytes()
    if raw[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", 0
    h = color_type = bit_depth = 0
    while pos < len(raw):
        (n,), kind = struct.unpack(">I", raw[pos:pos + 4]), raw[pos + 4:pos + 8]
        body = raw[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, bit_depth, color_type = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    if bit_depth != 8 or color_type not in (2, 6):
        raise ValueError(f"unsupported PNG (bit depth {bit_depth}, colour type {color_type})")
    bpp = 3 if color_type == 2 else 4
    data = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    colors: set[tuple[int, ...]] = set()
    sampled = nonwhite = 0
    off = 0
    for y in range(h):
        ftype = data[off]
        line = bytearray(data[off + 1:off + 1 + stride])
        off += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        if y % 7 == 0:
            for x in range(0, w, 5):
                px = tuple(line[x * bpp:x * bpp + 3])
                colors.add(px)
                sampled += 1
                nonwhite += min(px) < 235
    return {"width": w, "height": h, "colors": len(colors), "nonwhite_fraction": nonwhite / max(1, sampled)}
