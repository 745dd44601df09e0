"""The configuration key: which earlier levels measured "the same thing", so the history store can
keep the spread seen across repeated runs of it (docs/compare.md "Noise").

A level's configuration is, as a canonical JSON object hashed to a 16-hex key:

- ``machine``: the GPUs (count × name) and the CPU model — a machine *type*: two identical
  servers share a key, and their spread then includes machine-to-machine differences;
- ``engine``: the server's engine and its version;
- ``model``: the served model (a launched preset by its preset name, a launched local directory by
  its last path component, a target's model by the name it serves);
- ``engine_flags``: for an engine wattbench launched, its effective configuration (the flags it
  started with, wattbench's tuned defaults included, host/port/paths left out); empty for a
  ``--target`` server, whose flags wattbench did not set;
- ``server``: the server's identity (``ServerInfo.identity``, ``server/identity``): the target
  (``scheme://host:port[/path]`` — two servers on two ports are two configurations — or the engine
  wattbench launched), the replicas, and the effective configuration the server exposes (vLLM's info
  gauges, SGLang's arguments, llama.cpp's ``/props``, TGI's ``/info``, the served model's
  ``/v1/models`` entry), so a server restarted with other flags it exposes is another configuration.
  A result written before identities were recorded has ``"server": "identity unknown"``: its levels
  never share a key with a newer run's;
- ``label``: the run's ``--config-label`` (what wattbench cannot see), None without one;
- ``workload``: the request shape (workload kind and name, length distributions, token source,
  shared prefix, API), never the seed (another seed is the same shape);
- ``load``: the level's mode and target (``level_key``), the arrival process of an open loop and its
  in-flight cap;
- ``boundary``: the boundary the figure is read at (the level's headline boundary).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from wattbench.results.headline import headline_boundary, level_key
from wattbench.core.schema import FigureKey, LevelResult, Result

_VOLATILE = ("host", "port", "pid", "path", "log", "url", "dir", "engine_args")


def _machine(result: Result) -> dict[str, Any]:
    names = [g.name for g in result.environment.gpus if g.name]
    gpus = {n: names.count(n) for n in sorted(set(names))}
    return {"gpus": gpus, "cpu": (result.environment.cpu_model or "").strip() or None}


def _model(result: Result) -> str | None:
    s = result.server
    eff = s.effective_config or {}
    if s.launched and eff.get("preset"):
        return str(eff["preset"])
    m = result.served_model
    if s.launched and m and ("/" in m or os.sep in m):
        return os.path.basename(str(m).rstrip("/"))
    return m


def _flags(result: Result) -> dict[str, Any]:
    if not result.server.launched:
        return {}
    eff = result.server.effective_config or {}
    return {k: v for k, v in sorted(eff.items())
            if not any(x in k.lower() for x in _VOLATILE) and isinstance(v, (str, int, float, bool, type(None)))}


def _workload(result: Result) -> dict[str, Any]:
    w = result.workload.model_dump(mode="json") if result.workload is not None else {}
    out = {k: v for k, v in sorted(w.items())
           if k not in ("seed", "tokenizer", "prompt_salt") and not (isinstance(v, str) and ("/" in v or os.sep in v))}
    out["api"] = result.config.api or "completions"
    return out


IDENTITY_UNKNOWN = "identity unknown"


def _server(result: Result) -> dict[str, Any] | str:
    ident = result.server.identity
    if ident is None:
        return IDENTITY_UNKNOWN
    return {"target": ident.target, "launched": ident.launched, "replicas": sorted(ident.replicas),
            "exposed": {src: dict(sorted(v.items())) for src, v in sorted(ident.exposed.items())}}


def run_configuration(result: Result) -> dict[str, Any]:
    """What every level of a run shares (the module docstring but the load and the boundary)."""
    return {
        "machine": _machine(result),
        "engine": {"name": result.server.engine, "version": result.server.version},
        "model": _model(result),
        "engine_flags": _flags(result),
        "server": _server(result),
        "label": result.config_label,
        "workload": _workload(result),
    }


def configuration(result: Result, level: LevelResult) -> dict[str, Any]:
    """The configuration a level measured (module docstring), as a JSON-able dict."""
    mode, value = level_key(level)
    load: dict[str, Any] = {"mode": mode, "value": value}
    if mode == "rate":
        load["arrival"] = level.load.arrival or result.config.arrival
        load["max_in_flight"] = level.load.max_in_flight
    return {**run_configuration(result), "load": load, "boundary": headline_boundary(level)}


def run_key(result: Result) -> str:
    """The key of what a run's levels share (``run_configuration``): equal for two runs of one
    configuration whatever their loads; ``history list`` shows its first 8 characters."""
    return configuration_key(run_configuration(result))


def target_text(result: Result) -> str:
    """Where a run's load went, for people: ``127.0.0.1:8000`` (``scheme://`` and ``:port`` as
    given by the identity; https kept), ``vllm:tiny (launched)``, or ``identity unknown`` for a
    result written before identities were recorded."""
    ident = result.server.identity
    if ident is None:
        return IDENTITY_UNKNOWN
    if ident.launched:
        return f"{ident.launched}:{_model(result) or '?'} (launched)"
    if not ident.target:
        return "no server"  # `measure` around a command whose server wattbench could not probe
    t = ident.target.removeprefix("http://")
    return t + (f" +{len(ident.replicas)}" if ident.replicas else "")


def configuration_key(config: dict[str, Any]) -> str:
    """16 hex characters of the SHA-256 of the configuration's canonical JSON."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe(config: dict[str, Any]) -> str:
    """One line: ``H200 · vllm 0.11.0 · tiny · 10.0.0.5:8000 · label bios-a · c=64 @ accelerator``
    (``identity unknown`` in place of the target for a result written before identities were
    recorded; ``launched vllm`` for an engine wattbench started)."""
    gpus = config.get("machine", {}).get("gpus") or {}
    machine = ", ".join(f"{n}x {g}" if n > 1 else g for g, n in gpus.items()) or (config.get("machine", {}).get("cpu")
                                                                                 or "?")
    eng = config.get("engine", {})
    load = config.get("load", {})
    lv = (f"c={load.get('value'):g}" if load.get("mode") == "concurrency" and load.get("value") is not None
          else f"r={load.get('value'):g}/s" if load.get("mode") == "rate" and load.get("value") is not None
          else str(load.get("mode")))
    w = config.get("workload", {})
    server = config.get("server")
    where = (IDENTITY_UNKNOWN if server == IDENTITY_UNKNOWN else
             (server.get("target") or "").removeprefix("http://") or (f"launched {server.get('launched')}"
                                                                        if server.get("launched") else "")
             if isinstance(server, dict) else "")
    label = f"label {config['label']}" if config.get("label") else ""

    def spec(d: Any) -> Any:  # a length: its spec text, or the bare value older results recorded
        return d.get("spec") if isinstance(d, dict) else d
    shape = " in / ".join(str(spec(w.get(k))) for k in ("input_tokens", "output_tokens") if w.get(k) is not None)
    shape = f"{shape} out" if " in / " in shape else shape
    parts = [machine, f"{eng.get('name') or '?'} {eng.get('version') or ''}".strip(), str(config.get("model")),
             where, label, shape or w.get("name") or "", lv]
    return " · ".join(p for p in parts if p) + (f" @ {config.get('boundary')}" if config.get("boundary") else "")


def level_figure(level: LevelResult) -> tuple[FigureKey, float | None]:
    """The figure whose noise the history keeps and the history check compares: tokens/s per kW at
    the level's headline boundary (the trial mean when the level has trials), or output tokens/s
    when it measured no energy."""
    b = headline_boundary(level)
    e = level.energy.get(b) if b else None
    value: float | None
    if e is not None and e.output_tokens_per_s_per_kw is not None:
        key, value = FigureKey("output_tokens_per_s_per_kw", b), e.output_tokens_per_s_per_kw
    else:
        key, value = FigureKey("output_tokens_per_s"), (level.throughput.output_tokens_per_s or None)
    if level.trials is not None:
        f = key.lookup(level.trials.figures)
        if f is not None and f.mean is not None:
            value = f.mean
    return key, value
