"""The common launcher: start an inference server as a child process, wait until healthy, stop it.

Every engine module gives an ``Engine`` (how to find it, the argv, the environment, how to read
its effective config); this module owns the process: a free loopback port, ``Popen`` with an argv
list in its own session (so the whole process group can be signalled), stdout+stderr streamed
into ``<run_dir>/server.log`` through ``core.process_output.LinePump`` (each line scrubbed of the
run's secrets, of the secrets in the engine's own command line — ``--api-key`` among its engine
arguments — and of the credential variables of its environment, then made safe; its command line
written there and recorded as ``launch_command`` with those masked, ``redact.redact_argv``), a health poll with a timeout and early-exit detection, and a stop
by PID (SIGTERM to the group, wait, SIGKILL). Stops also happen on failure, on Ctrl-C (the
context manager's exit), on SIGTERM (turned into ``SystemExit`` while an engine runs, where no
handler is installed; the previous handler is back once the last engine stops) and at
interpreter exit (``atexit``). On Linux the child also gets ``PR_SET_PDEATHSIG`` so a killed
parent does not leave it behind.
"""

from __future__ import annotations

from wattbench.core.redact import argv_secrets, authorization_header, env_secrets, redact_argv  # noqa: E402

import atexit
import http.client
from abc import ABC, abstractmethod
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO, NoReturn

from wattbench.core.clock import now_ns
from wattbench.core.errors import EngineError, TargetError
from wattbench.core.argv import has_flag
from wattbench.core.interrupt import Handler, restore_handler
from wattbench.core.process_output import LinePump, ProcessSecrets
from wattbench.core.schema import ServerInfo, StreamBatching
from wattbench.core import origin
from wattbench.engines.presets import default_cache_dir

LOG_TAIL_LINES = 30
DEFAULT_HOST = "127.0.0.1"


# ------------------------------------------------------------------ engine description


@dataclass
class LaunchPlan:
    """What an engine wants started: argv (first element an executable), env additions, model."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    model_path: str = ""
    served_model: str | None = None  # the name the server will list, when the engine lets us set it
    health_paths: tuple[str, ...] = ("/health", "/v1/models")
    info: dict[str, Any] = field(default_factory=dict)  # effective config known before start
    # a local Hugging Face tokenizer of the served model (a directory or tokenizer.json), when it is
    # not model_path itself (llama.cpp serves a .gguf; a preset's tokenizer lives in its directory)
    tokenizer: str | None = None

    def tokenizer_source(self) -> str | None:
        """Where the client loads the served model's tokenizer from (exact prompt lengths); None
        when there is no local one (a .gguf alone): the client asks the server or approximates."""
        if self.tokenizer is not None:
            return self.tokenizer or None
        return self.model_path or None


class Engine(ABC):
    """One engine: subclasses fill these in. No process handling here."""

    name: str = ""
    install_hint: str = ""
    accepts_ignore_eos: bool = False

    @abstractmethod
    def check_installed(self) -> None:
        """Raise EngineError naming the package to install when the engine is absent."""

    @abstractmethod
    def plan(
        self, model: str | None, device: str, engine_args: list[str], host: str, port: int, scratch: Path
    ) -> LaunchPlan:
        """The argv and environment that start this engine on ``host:port``."""

    def version(self) -> str | None:
        return None

    def warmup_body(self) -> dict[str, Any] | None:
        """A request to send once after start (engines with a slow first request), or None."""
        return None

    def effective_config(self, plan: LaunchPlan, log_text: str, base_url: str) -> dict[str, Any]:
        return dict(plan.info)

    def server_info_extra(self, plan: LaunchPlan, effective: dict[str, Any]) -> dict[str, Any]:
        """Fields for ServerInfo beyond the common ones (supports_ignore_eos, stream_batching …)."""
        return {}


# ------------------------------------------------------------------ helpers


def length_forcing_server_info(stream_interval: int = 1) -> dict[str, Any]:
    """ServerInfo fields of an engine that takes ``ignore_eos`` and serves Prometheus /metrics
    (vLLM, SGLang, llama.cpp): what their ``server_info_extra`` returns."""
    return {
        "metrics_endpoint": "/metrics",
        "extra_body": {"ignore_eos": True},
        "output_length_forced": True,
        "stream_batching": StreamBatching(stream_interval=stream_interval),
        "detected_by": ["launched"],
    }


def free_port(host: str = DEFAULT_HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def port_in_use(port: int, host: str = DEFAULT_HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    # progress bars write \r-separated updates: keep the last state of each line
    # (str.splitlines would split on \r as well)
    out = [ln.rstrip("\r").rsplit("\r", 1)[-1] for ln in data.split("\n")]
    while out and not out[-1]:
        out.pop()
    return "\n".join(out[-lines:])


HTTP_GET_MAX_BYTES = 32 << 20


def http_get(url: str, timeout_s: float = 2.0, api_key: str | None = None) -> tuple[int, bytes]:
    """``(status, body)`` of a GET (``core/origin.py``: another host is never followed); ``(0, b"")``
    when it failed."""
    req = urllib.request.Request(url, headers=authorization_header(api_key))
    try:
        with origin.urlopen(req, timeout=timeout_s) as r:  # noqa: S310 (loopback only)
            return r.status or 0, r.read(HTTP_GET_MAX_BYTES)
    except urllib.error.HTTPError as e:
        return e.code, e.read(HTTP_GET_MAX_BYTES) if e.fp else b""
    except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException, TargetError):
        return 0, b""


def _pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


# ------------------------------------------------------------------ live handles and cleanup

_LIVE: set["EngineHandle"] = set()
_LIVE_LOCK = threading.Lock()
_ATEXIT_REGISTERED = False
# the SIGTERM handler that _on_sigterm replaced, while _on_sigterm is installed (at most one entry)
_SIGTERM_BEFORE: list[Handler] = []


def _stop_all() -> None:
    with _LIVE_LOCK:
        handles = list(_LIVE)
    for h in handles:
        h.stop()


def _on_sigterm(signum: int, frame: FrameType | None) -> NoReturn:  # noqa: ARG001
    raise SystemExit(128 + signum)


def _install_cleanup_hooks() -> None:
    """Before an engine starts: stop every live engine at interpreter exit, and, while one runs,
    make SIGTERM unwind (``SystemExit``, so the handles' exits and ``atexit`` run) instead of ending
    the process on the spot, but only where nobody else (the run orchestrator, the caller) has
    installed a handler, and only from the main thread. ``_release_sigterm`` undoes the latter."""
    global _ATEXIT_REGISTERED
    with _LIVE_LOCK:
        if not _ATEXIT_REGISTERED:
            _ATEXIT_REGISTERED = True
            atexit.register(_stop_all)
        if (not _SIGTERM_BEFORE and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None)):
            _SIGTERM_BEFORE.append(signal.signal(signal.SIGTERM, _on_sigterm))


def _release_sigterm() -> None:
    """Once no engine is live: SIGTERM's handler is the one it was before the first started (the
    handler is the whole process's, and the caller goes on without an engine). Left as it is where
    someone replaced ``_on_sigterm`` meanwhile (theirs stays), or off the main thread (Python sets
    handlers there only: the next engine stopped on the main thread puts it back)."""
    with _LIVE_LOCK:
        if _LIVE or not _SIGTERM_BEFORE or threading.current_thread() is not threading.main_thread():
            return
        previous = _SIGTERM_BEFORE.pop()
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            restore_handler(signal.SIGTERM, previous)


# ------------------------------------------------------------------ the handle


class EngineHandle:
    """A running server. Use as a context manager; ``stop()`` is idempotent."""

    def __init__(self, engine: Engine, plan: LaunchPlan, proc: subprocess.Popen[bytes], host: str, port: int,
                 log_path: Path, log_file: BinaryIO, output: LinePump | None = None):
        self.engine = engine
        self.plan = plan
        self.proc = proc
        self.pid = proc.pid
        self.host = host
        self.port = port
        self.log_path = log_path
        self._log_file = log_file
        self._output = output  # the child's output into log_file (None: the child writes it itself)
        self.base_url = f"http://{host}:{port}/v1"
        self.root_url = f"http://{host}:{port}"
        self.model: str | None = plan.served_model
        self.server_info = ServerInfo(base_url=self.base_url, engine=engine.name, launched=True,
                                      launch_command=redact_argv(plan.argv))
        self.start_duration_s: float | None = None
        self.returncode: int | None = None
        self._stopped = False
        self._lock = threading.Lock()

    # -- lifecycle

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout_s: float) -> None:
        t0 = now_ns()
        deadline_ns = t0 + int(timeout_s * 1e9)
        delay = 0.2
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise EngineError(
                    f"{self.engine.name} server exited with code {rc} while starting (log: {self.log_path})",
                    log_tail=log_tail(self.log_path),
                )
            if all(http_get(self.root_url + p, timeout_s=3.0)[0] == 200 for p in self.plan.health_paths):
                if self.proc.poll() is None:
                    break
                continue  # died just now: reported above
            if now_ns() > deadline_ns:
                raise EngineError(
                    f"{self.engine.name} server did not become healthy within {timeout_s:.0f} s "
                    f"(log: {self.log_path}); raise the start timeout for large models",
                    log_tail=log_tail(self.log_path),
                )
            time.sleep(delay)
            delay = min(1.0, delay * 1.5)
        self.start_duration_s = (now_ns() - t0) / 1e9

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM the process group, wait ``grace_s``, then SIGKILL it. Returns the exit code."""
        with self._lock:
            if self._stopped:
                return self.returncode
            self._stopped = True
        try:
            if self.proc.poll() is None:
                _signal_group(self.pid, signal.SIGTERM)
                try:
                    self.proc.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    _signal_group(self.pid, signal.SIGKILL)
                    self.proc.wait(timeout=10)
            # children that outlived the leader (same group): take them down too
            _signal_group(self.pid, signal.SIGKILL)
            self.returncode = self.proc.returncode
        finally:
            if self._output is not None:
                self._output.close()  # what the child wrote before it ended, then no more
            try:
                self._log_file.close()
            except OSError:
                pass
            with _LIVE_LOCK:
                _LIVE.discard(self)
            _release_sigterm()
        return self.returncode

    def __enter__(self) -> "EngineHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EngineHandle(engine={self.engine.name!r}, pid={self.pid}, base_url={self.base_url!r})"


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # start_new_session=True: the group id is the child's pid
    except (ProcessLookupError, PermissionError):
        pass


def start(
    engine: Engine,
    model: str | None,
    device: str,
    engine_args: list[str],
    run_dir: Path,
    timeout_s: float,
    host: str = DEFAULT_HOST,
    port: int | None = None,
) -> EngineHandle:
    """Start ``engine`` and return a ready handle; on any failure leave no process behind.

    With an automatically chosen port, a start that loses the port to another process between
    the choice and the server's bind (the server exits with "address already in use") is retried
    on a new port, up to ``PORT_RETRIES`` times."""
    engine.check_installed()
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if port is not None:
        if port_in_use(port, host):
            raise EngineError(
                f"port {port} on {host} is already in use: pick another port or let wattbench choose one")
        return _start_once(engine, model, device, engine_args, run_dir, timeout_s, host, port)
    for attempt in range(PORT_RETRIES + 1):
        try:
            return _start_once(engine, model, device, engine_args, run_dir, timeout_s, host, free_port(host))
        except EngineError as e:
            lost_port = any(m in e.log_tail.lower() for m in ADDRESS_IN_USE) and not has_flag(engine_args, "--port")
            if not lost_port or attempt == PORT_RETRIES:
                raise
    raise AssertionError("unreachable")  # the loop returns or raises


PORT_RETRIES = 2
ADDRESS_IN_USE = ("address already in use", "errno 98")


def _start_once(engine: Engine, model: str | None, device: str, engine_args: list[str], run_dir: Path,
                timeout_s: float, host: str, port: int) -> EngineHandle:
    scratch = default_cache_dir() / "engine-scratch" / engine.name  # kept out of the run directory
    scratch.mkdir(parents=True, exist_ok=True)
    plan = engine.plan(model, device, list(engine_args), host, port, scratch)
    env = dict(os.environ)
    env.update(plan.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    log_path = run_dir / "server.log"
    log_file = open(log_path, "ab", buffering=0)
    log_file.write(("$ " + " ".join(redact_argv(plan.argv)) + "\n").encode())
    secrets = ProcessSecrets([*argv_secrets(plan.argv), *env_secrets(env)], environment=False)
    _install_cleanup_hooks()
    main_thread = threading.current_thread() is threading.main_thread()
    try:
        proc = subprocess.Popen(
            plan.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_pdeathsig if (main_thread and sys.platform.startswith("linux")) else None,
        )
    except FileNotFoundError as e:
        log_file.close()
        _release_sigterm()
        raise EngineError(f"{engine.name}: cannot run {plan.argv[0]!r} ({e.strerror}); {engine.install_hint}") from None
    assert proc.stdout is not None  # stdout=PIPE
    output = LinePump(proc.stdout, log_file, secrets.text, name=f"{engine.name}-server-log")
    handle = EngineHandle(engine, plan, proc, host, port, log_path, log_file, output)
    with _LIVE_LOCK:
        _LIVE.add(handle)
    try:
        handle.wait_ready(timeout_s)
        _fill_server_info(handle)
        _warm_up(handle, timeout_s)
    except BaseException:
        handle.stop(grace_s=5.0)
        raise
    return handle


def _warm_up(h: EngineHandle, timeout_s: float) -> None:
    """Send the engine's warm-up request so its one-off first-request cost stays out of a run."""
    body = h.engine.warmup_body()
    if body is None:
        return
    body = {"model": h.model, **body}
    req = urllib.request.Request(h.base_url + "/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    t0 = now_ns()
    try:
        with origin.urlopen(req, timeout=timeout_s) as r:  # noqa: S310 (loopback only)
            r.read()
    except urllib.error.HTTPError as e:
        raise EngineError(f"{h.engine.name} server answered HTTP {e.code} to its warm-up request "
                          f"(log: {h.log_path})", log_tail=log_tail(h.log_path)) from None
    except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException, TargetError) as e:
        raise EngineError(f"{h.engine.name} server failed its warm-up request: {e} (log: {h.log_path})",
                          log_tail=log_tail(h.log_path)) from None
    h.server_info.warmup_duration_s = (now_ns() - t0) / 1e9


def _fill_server_info(h: EngineHandle) -> None:
    status, body = http_get(h.base_url + "/models", timeout_s=10.0)
    models: list[str] = []
    max_len = None
    if status == 200:
        try:
            data = json.loads(body).get("data", [])
            models = [m.get("id") for m in data if m.get("id")]
            max_len = next((m.get("max_model_len") for m in data if m.get("max_model_len")), None)
        except (ValueError, AttributeError):
            pass
    if h.model is None and models:
        h.model = models[0]
    text = ""
    try:
        text = h.log_path.read_text("utf-8", "replace")
    except OSError:
        pass
    eff = h.engine.effective_config(h.plan, text, h.root_url)
    if max_len is not None:
        eff.setdefault("max_model_len", max_len)
    si = h.server_info
    si.version = h.engine.version()
    si.model = h.model
    si.models = models
    si.max_model_len = eff.get("max_model_len") if isinstance(eff.get("max_model_len"), int) else max_len
    si.effective_config = eff
    si.supports_ignore_eos = h.engine.accepts_ignore_eos
    for k, v in h.engine.server_info_extra(h.plan, eff).items():
        if k == "metrics_endpoint" and isinstance(v, str) and v.startswith("/"):
            v = h.root_url + v
        setattr(si, k, v)
    si.start_duration_s = h.start_duration_s
    si.pid = h.pid
    si.model_path = h.plan.model_path
    si.log_path = str(h.log_path)
