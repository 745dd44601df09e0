"""The run's targets: given URLs (replicas with ``--targets``), or an engine the run launches →
checked ``TargetSpec``s, the ``ServerInfo`` of the first, and the tokenizer to count prompts with."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from wattbench.config.run import RunConfig
from wattbench.engines import registry as engines
from wattbench.engines.registry import launch
from wattbench.engines.base import Engine
from wattbench.core.target import TargetSpec
from wattbench.core.schema import ServerInfo
from wattbench.run.events import Phase
from wattbench.run.session import RunSession
from wattbench.server.detect import detect_server, kept_models, merge_launched, reuses_connections
from wattbench.server.identity.build import identity_change
from wattbench.server.identity.common import target_of
from wattbench.server.openai import check_load_endpoint, check_model_answers, check_target, normalize_base_url
from wattbench.core.origin import target_query
from wattbench.core.redact import body_secrets, combine_credentials, secret_values, url_secrets
from wattbench.core.errors import TargetStopped, UserError
from wattbench.core.schema import EngineStart, NoiseInfo


@dataclass
class Targets:
    """The targets the load goes to (the first is the one the run describes), its server, and the
    tokenizer that counts prompt lengths (``None``: the server's ``/tokenize`` or approximate)."""

    specs: list[TargetSpec]
    server: ServerInfo
    tokenizer_path: str | None


def api_key(config: RunConfig) -> str | None:
    if config.api_key is not None:
        return config.api_key.get_secret_value()
    return os.environ.get("WATTBENCH_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


def run_secrets(config: RunConfig) -> list[str]:
    """Every secret the run's configuration holds: the API key, credentials and query values in
    ``--target`` and ``--targets`` URLs, the values of credential-bearing and ``--secret-header``
    headers, the credential fields of ``--extra-body`` (``core/redact.py``). The run registers
    them so nothing it writes or prints holds them."""
    out = secret_values(api_key(config), config.headers, config.secret_headers) + body_secrets(config.extra_body)
    for u in [config.target, *config.targets]:
        out += url_secrets(u)
    return out


def target_count(config: RunConfig) -> int:
    """How many targets the run's load is dealt over: the distinct base URLs of ``--target``
    (normalized as ``resolve_targets`` does: ``http://h:8000`` and ``http://h:8000/v1/`` are one),
    or the one engine the run launches. Read from the configuration alone, before any request."""
    urls = {normalize_base_url(combine_credentials(u, None)[0]) for u in [config.target, *config.targets] if u}
    return max(1, len(urls))


def _first_target(session: RunSession, run_dir: Path, engine: Engine | None = None
                  ) -> tuple[str, str | None, ServerInfo | None, str | None, str | None]:
    """The first target's URL and key; with no ``--target`` an engine launched (``engine``, else
    ``--engine``'s; stopped by the session's stack): its server info, the launch plan's model name
    and tokenizer."""
    cfg = session.config
    key = api_key(cfg)
    if cfg.target:
        # credentials in the URL become an Authorization header; the URL kept and written has none
        url, key = combine_credentials(cfg.target, key)
        return normalize_base_url(url), key, None, None, cfg.tokenizer
    # an engine that is not installed is one line with nothing written: checked before the progress
    # line says it starts (and before launch() creates run_dir for its server.log)
    if engine is None:
        engine = engines.get_engine(cfg.engine)  # looked up when called (tests script the engine)
    engine.check_installed()
    session.emit(Phase("engine", f"starting the {cfg.engine} engine"))
    handle = session.stack.enter_context(launch(engine=engine, model=cfg.engine_model, device=cfg.device,
                                                engine_args=cfg.engine_args, run_dir=run_dir))
    session.engine = handle  # --restart-engine replaces it (restart_engine)
    tokenizer = cfg.tokenizer if cfg.tokenizer is not None else handle.plan.tokenizer_source()  # exact lengths
    return normalize_base_url(handle.base_url), key, handle.server_info, handle.model, tokenizer


def _spec(cfg: RunConfig, url: str, model: str, key: str | None, server: ServerInfo) -> TargetSpec:
    # force output lengths only on servers that accept the fields (strict servers reject them)
    # the query its URL was given with (normalize_base_url registered it for the origin): the target's
    # own, so that a spawned load worker or a Ray load actor sends it too
    t = TargetSpec(base_url=url, model=model, api=cfg.api, api_key=key, request_timeout_s=cfg.request_timeout_s,
                   stall_timeout_s=cfg.stall_timeout_s, keep_output_text=cfg.keep_output_text,
                   extra_body=dict(server.extra_body), send_min_tokens=bool(server.supports_ignore_eos),
                   query=target_query(url))
    t.keepalive = reuses_connections(server.engine)
    return t


def resolve_targets(session: RunSession, run_dir: Path, engine: Engine | None = None) -> Targets:
    """Check every target (the model answers, the server is detected) before anything is written.
    ``engine``: the engine to launch when no ``--target`` is given (None: ``--engine``'s)."""
    cfg = session.config
    base_url, key, launched_info, launched_model, tokenizer = _first_target(session, run_dir, engine)
    redirects: list[str] = []  # same-host redirects followed (another host is refused: core/origin.py)
    model, models = asyncio.run(check_target(base_url, key, cfg.model, launched_model=launched_model,
                                             redirects=redirects))
    if launched_model is not None and model not in models:
        asyncio.run(check_model_answers(base_url, key, model, cfg.api))  # a real request, not the listing
    server = asyncio.run(detect_server(base_url, key, redirects=redirects, model=model))
    extra_keys: dict[str, str | None] = {}
    for u in cfg.targets:
        clean, k = combine_credentials(u, api_key(cfg))
        extra_keys.setdefault(normalize_base_url(clean), k)
    extra_urls = [u for u in extra_keys if u != base_url]
    extra_servers = []
    for u in extra_urls:  # replicas (or a load balancer's backends): same model, checked each
        asyncio.run(check_target(u, extra_keys[u], model, redirects=redirects))
        extra_servers.append(asyncio.run(detect_server(u, extra_keys[u])))
    if launched_info is not None:
        server = merge_launched(launched_info, server)
    server.base_url = base_url
    server.model = model
    server.models = kept_models(models, model)
    if server.identity is not None:  # what the run measured: this model, these replicas
        server.identity.model = model
        server.identity.replicas = sorted({t for t in (target_of(u) for u in extra_urls) if t})
    specs = [_spec(cfg, base_url, model, key, server)] + [
        _spec(cfg, u, model, extra_keys[u], si) for u, si in zip(extra_urls, extra_servers)]
    server.output_length_forced = bool(specs[0].extra_body)
    for t in specs:  # the user's request fields (--extra-body, --temperature, --top-p) and --header
        t.extra_body.update(cfg.request_fields())
        t.headers = dict(cfg.headers)
        t.secret_headers = tuple(cfg.secret_headers)
        # the endpoint the load posts to, with the load's headers: a redirect to another host stops
        # the run here (one line naming both), before anything is measured
        asyncio.run(check_load_endpoint(t, redirects))
    server.redirects = list(dict.fromkeys(redirects))
    return Targets(specs=specs, server=server, tokenizer_path=tokenizer)


def restart_engine(session: RunSession, specs: list[TargetSpec], before_trial: int) -> None:
    """``--restart-engine``: stop the launched engine and start a fresh one (same plan, a new port),
    pointing the run's target at it; every start is recorded in ``Result.noise.engine_starts``.

    The fresh engine is identified again (``server.detect``, as the run's first was): one that serves
    another model id or exposes another configuration (``identity_change``) would pool two
    configurations in one level's trials, so the run stops before measuring on it (``TargetStopped``,
    one line saying what changed; every trial measured on the run's configuration is kept), and the
    start records the change (``EngineStart.identity_change``)."""
    cfg, old, result = session.config, session.engine, session.result
    if old is None:
        raise UserError("--restart-engine restarts an engine wattbench started; this run has none")
    assert result is not None and session.run_dir is not None  # restarted between trials: the run has begun
    noise = result.noise = result.noise or NoiseInfo()
    if not noise.engine_starts:
        noise.engine_starts.append(EngineStart(index=0, base_url=old.base_url, pid=old.pid,
                                               start_duration_s=old.start_duration_s))
    session.emit(Phase("engine", f"restarting the {cfg.engine} engine before trial {before_trial + 1}"))
    old_url = normalize_base_url(old.base_url)
    old.stop()
    new = session.stack.enter_context(launch(engine=cfg.engine, model=cfg.engine_model, device=cfg.device,
                                             engine_args=cfg.engine_args, run_dir=session.run_dir))
    session.engine = new
    for t in specs:
        if t.base_url == old_url:
            t.base_url = normalize_base_url(new.base_url)
    start = EngineStart(index=len(noise.engine_starts), base_url=new.base_url, pid=new.pid,
                        start_duration_s=new.start_duration_s, before_trial=before_trial)
    noise.engine_starts.append(start)
    first = specs[0]
    detected = asyncio.run(detect_server(first.base_url, first.api_key, model=first.model))
    after = merge_launched(new.server_info, detected).identity
    if after is not None:
        after.model = first.model if first.model in detected.models else detected.model
    change = identity_change(result.server.identity, after)
    if change is not None:
        start.identity_change = change
        done = sum(lv.trials.n if lv.trials is not None else 1 for lv in result.levels)
        raise TargetStopped(f"the {cfg.engine} engine restarted before trial {before_trial + 1} serves another "
                            f"configuration ({change}): its trials would pool two configurations; the run stopped "
                            f"before measuring on it, the {done} trial(s) measured are kept")
