"""The serving release checklist, judged from what can be seen from outside the server, plus
what the operator declares in a checklist file (``--checklist FILE``, YAML or JSON).

Items: request logging (request id, model version, token counts, latency), telemetry collected
(power, temperature, memory, utilization — verifiable only through an exporter the operator names
with ``--exporter URL``), a rollback path (declared only), rate limiting and queueing.

A declared answer is shown as declared: wattbench cannot see a log pipeline or a runbook.

Checklist file (every section optional)::

    rollback:
      previous: "vllm 0.31.2, model rev 3f2a1c"     # what you roll back to
      procedure: "helm rollback llm-serving 1"       # command or runbook link
      tested: 2026-11-02                             # last rehearsal (YYYY-MM-DD)
    logging: {request_id: true, model_version: true, tokens: true, latency: true, where: "loki"}
    telemetry: {power: true, temperature: true, memory: true, utilization: true, where: "dcgm-exporter"}
    rate_limiting: {limit: "50 req/s per key", queue: "max_num_seqs 256, gateway queue 1000", where: "envoy"}
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
import http.client
import urllib.error

from wattbench.core.severity import CheckStatus
from wattbench.doctor.check import Check
from wattbench.doctor.server import CONCURRENCY_KEYS, REQUEST_ID_HEADERS, ServerProbe, effective_config, engine_values
from wattbench.core.errors import UserError
from wattbench.core import origin
from wattbench.core.errors import TargetError
from wattbench.server.metrics import MAX_EXPOSITION_BYTES, parse_exposition

G = "checklist"

# A checklist file as parsed: section name -> that section's keys and the YAML/JSON values the user
# wrote (load_checklist checks the names; rollback.tested is made a date there).
Section = dict[str, Any]
Checklist = dict[str, Section]
# Sample names of the Prometheus exposition at a URL, or (None, why): fetch_exporter's shape.
Fetch = Callable[[str], tuple[list[str] | None, str | None]]
ROLLBACK_MAX_AGE_DAYS = 90
SECTIONS = {
    "rollback": {"previous", "procedure", "tested"},
    "logging": {"request_id", "model_version", "tokens", "latency", "where"},
    "telemetry": {"power", "temperature", "memory", "utilization", "where"},
    "rate_limiting": {"limit", "queue", "where"},
}
# exporter metric names (regex on sample names) per telemetry quantity: DCGM exporter, node exporter,
# and a few common others (IPMI exporter, nvidia_gpu_exporter)
TELEMETRY_PATTERNS: dict[str, str] = {
    "power": r"^(DCGM_FI_DEV_POWER_USAGE|DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION|node_hwmon_power_|node_rapl_|"
             r"ipmi_power_|ipmi_dcmi_power|nvidia_smi_power_draw|nvidia_gpu_power)",
    "temperature": r"^(DCGM_FI_DEV_GPU_TEMP|DCGM_FI_DEV_MEMORY_TEMP|node_hwmon_temp_celsius|"
                   r"node_thermal_zone_temp|ipmi_temperature_|nvidia_smi_temperature_gpu|nvidia_gpu_temperature)",
    "memory": r"^(DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_FREE|node_memory_MemAvailable_bytes|node_memory_MemTotal_bytes|"
              r"nvidia_smi_memory_used|nvidia_gpu_memory_used)",
    "utilization": r"^(DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_GR_ENGINE_ACTIVE|node_cpu_seconds_total|"
                   r"nvidia_smi_utilization_gpu|nvidia_gpu_duty_cycle)",
}
LATENCY_PATTERN = r"(e2e_request_latency|time_to_first_token|request_latency|request_duration|inter_token_latency|" \
                  r"time_per_output_token)"


def load_checklist(path: str | Path) -> Checklist:
    """Read and validate a checklist file; UserError naming what is wrong."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--checklist {p}: no such file; write one as shown in docs/operations.md")
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(f"--checklist {p}: not valid JSON ({e.msg} at line {e.lineno})") from None
    else:
        try:
            import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs (types-PyYAML is not a dependency)
        except ImportError:
            raise UserError(f"--checklist {p}: YAML needs PyYAML (`pip install pyyaml`), or write it as .json") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise UserError(f"--checklist {p}: not valid YAML ({str(e).splitlines()[0]})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UserError(f"--checklist {p}: the top level must be a mapping of sections ({', '.join(SECTIONS)})")
    for k, v in data.items():
        if k not in SECTIONS:
            raise UserError(f"--checklist {p}: unknown section {k!r}; known: {', '.join(SECTIONS)}")
        if not isinstance(v, dict):
            raise UserError(f"--checklist {p}: section {k!r} must be a mapping")
        extra = sorted(set(v) - SECTIONS[k])
        if extra:
            raise UserError(f"--checklist {p}: {k}.{extra[0]} is not a known key; known: {', '.join(sorted(SECTIONS[k]))}")
    if "rollback" in data and "tested" in data["rollback"]:
        t = data["rollback"]["tested"]
        if isinstance(t, str):
            try:
                data["rollback"]["tested"] = _dt.date.fromisoformat(t)
            except ValueError:
                raise UserError(f"--checklist {p}: rollback.tested {t!r} is not a date (YYYY-MM-DD)") from None
        elif isinstance(t, _dt.datetime):
            data["rollback"]["tested"] = t.date()
        elif not isinstance(t, _dt.date):
            raise UserError(f"--checklist {p}: rollback.tested must be a date (YYYY-MM-DD)")
    return data


def exporter_quantities(sample_names: list[str]) -> dict[str, list[str]]:
    """Which telemetry quantities an exporter's metric names cover (quantity -> matching names)."""
    out: dict[str, list[str]] = {}
    for q, pat in TELEMETRY_PATTERNS.items():
        rx = re.compile(pat)
        hits = sorted({n for n in sample_names if rx.search(n)})
        if hits:
            out[q] = hits[:5]
    return out


def fetch_exporter(url: str, timeout_s: float = 5.0) -> tuple[list[str] | None, str | None]:
    """Sample names of a Prometheus exposition at ``url``; (None, why) when unreadable."""
    try:
        with origin.urlopen(url, timeout=timeout_s) as r:  # noqa: S310 - operator-given URL
            text = r.read(MAX_EXPOSITION_BYTES).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException, TargetError, ValueError) as e:
        return None, f"{getattr(e, 'reason', e)}"
    try:
        return list(parse_exposition(text)), None
    except ValueError as e:
        return None, f"unparsable exposition ({e})"


def checklist_checks(pr: ServerProbe | None, declared: Checklist | None = None, exporters: list[str] | None = None,
                     today: _dt.date | None = None, fetch: Fetch = fetch_exporter) -> list[Check]:
    declared = declared or {}
    return [
        _logging(pr, declared.get("logging")),
        _telemetry(exporters or [], declared.get("telemetry"), fetch),
        _rollback(declared, today or _dt.date.today()),
        _rate(pr, declared.get("rate_limiting")),
    ]


def _declared_text(d: Section) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())


def _logging(pr: ServerProbe | None, declared: Section | None) -> Check:
    cid = "checklist.request_logging"
    have: dict[str, str] = {}
    missing: dict[str, str] = {}
    if pr is not None and pr.reachable and pr.stream.status == 200:
        hdr = next((h for h in REQUEST_ID_HEADERS if h in pr.stream.headers), None)
        if hdr:
            have["request_id"] = f"response header {hdr}"
        else:
            missing["request_id"] = "no request-id response header (vLLM: --enable-request-id-headers; or add one at the gateway)"
        if pr.stream.model:
            have["model_version"] = f"responses name the model ({pr.stream.model})"
        else:
            missing["model_version"] = "responses carry no model field"
        if pr.stream.usage:
            have["tokens"] = "responses carry usage (token counts)"
        else:
            missing["tokens"] = "responses carry no usage; log token counts at the server"
        lat = [n for n in pr.metrics if re.search(LATENCY_PATTERN, n) and n.endswith("_bucket")]
        if lat:
            have["latency"] = f"/metrics has latency histograms ({lat[0].removesuffix('_bucket')} …)"
        else:
            missing["latency"] = "/metrics has no request latency histogram; log per-request latency"
        tok = {k for k in engine_values(pr) if k in ("prompt_tokens", "generation_tokens")}
        if tok:
            have["token_counters"] = "/metrics counts tokens"
    elif declared is None:
        return Check(cid, G, "skip", "not verifiable without --target (and logs are never visible from outside)",
                     "give --target, and declare the log fields in --checklist FILE")
    decl = {k for k, v in (declared or {}).items() if k != "where" and v is True}
    still = {k: v for k, v in missing.items() if k not in decl}
    seen = "; ".join(have.values()) or "nothing seen from outside"
    note = " (what the server's own logs contain cannot be verified from outside)"
    data = {"seen": have, "missing": missing, "declared": declared or {}}
    if still:
        return Check(cid, G, "warn", f"seen: {seen}; missing: " + "; ".join(still.values()) + note,
                     "make each request's log line carry request id, model and version, input and output tokens "
                     "and latency; declare it in --checklist once done", data)
    extra = f"; declared: {_declared_text(declared)}" if declared else ""
    return Check(cid, G, "pass", f"seen: {seen}{extra}{note}", data=data)


def _telemetry(exporters: list[str], declared: Section | None, fetch: Fetch) -> Check:
    cid = "checklist.telemetry"
    need = ("power", "temperature", "memory", "utilization")
    if not exporters:
        if declared:
            miss = [q for q in need if declared.get(q) is not True]
            st: CheckStatus = "warn" if miss else "pass"
            return Check(cid, G, st, f"declared (not verified): {_declared_text(declared)}"
                         + (f"; not declared: {', '.join(miss)}" if miss else ""),
                         "collect the missing quantities (DCGM exporter for GPUs, node exporter for the host)"
                         if miss else "", {"declared": declared})
        return Check(cid, G, "skip", "not verifiable: no exporter given",
                     "pass --exporter URL of your DCGM exporter and/or node exporter, or declare it in --checklist")
    covered: dict[str, list[str]] = {}
    errors = []
    for url in exporters:
        names, err = fetch(url)
        if names is None:
            errors.append(f"{url}: {err}")
            continue
        for q, hits in exporter_quantities(names).items():
            covered.setdefault(q, []).extend(hits)
    data = {"covered": covered, "errors": errors}
    if errors and not covered:
        return Check(cid, G, "fail", "exporter unreachable: " + "; ".join(errors),
                     "check the exporter URL and that it runs", data)
    miss = [q for q in need if q not in covered]
    if miss:
        return Check(cid, G, "warn", f"exporters collect {', '.join(sorted(covered)) or 'none of the four'}; "
                     f"missing {', '.join(miss)}" + (f"; errors: {'; '.join(errors)}" if errors else ""),
                     "add a DCGM exporter (GPU power, temperature, memory, utilization) and node exporter (host)",
                     data)
    return Check(cid, G, "pass", "exporters collect power, temperature, memory and utilization", data=data)


def _rollback(declared: Checklist, today: _dt.date) -> Check:
    cid = "checklist.rollback"
    if not declared:
        return Check(cid, G, "skip", "a rollback path cannot be verified from outside",
                     "declare it in --checklist FILE (rollback: previous, procedure, tested)")
    rb = declared.get("rollback")
    if not rb:
        return Check(cid, G, "warn", "the checklist declares no rollback path",
                     "write down what you roll back to and how (rollback.previous, rollback.procedure)")
    miss = [k for k in ("previous", "procedure") if not rb.get(k)]
    if miss:
        return Check(cid, G, "warn", f"rollback declared without {' and '.join(miss)}",
                     "name the version to roll back to and the command or runbook", {"declared": _jsonable(rb)})
    tested = rb.get("tested")
    base = f"declared (not verified): back to {rb['previous']} via {rb['procedure']}"
    if tested is None:
        return Check(cid, G, "warn", base + "; never rehearsed", "rehearse the rollback and record rollback.tested",
                     {"declared": _jsonable(rb)})
    age = (today - tested).days
    if age > ROLLBACK_MAX_AGE_DAYS:
        return Check(cid, G, "warn", base + f"; last rehearsed {tested.isoformat()} ({age} days ago)",
                     f"rehearse it again (older than {ROLLBACK_MAX_AGE_DAYS} days)", {"declared": _jsonable(rb)})
    return Check(cid, G, "pass", base + f"; rehearsed {tested.isoformat()}", data={"declared": _jsonable(rb)})


def _jsonable(d: Section) -> Section:
    return {k: (v.isoformat() if isinstance(v, _dt.date) else v) for k, v in d.items()}


def _rate(pr: ServerProbe | None, declared: Section | None) -> Check:
    cid = "checklist.rate_limiting"
    limiter = queue = None
    if pr is not None and pr.reachable:
        n429 = sum(1 for s in pr.burst_statuses if s == 429)
        if n429:
            limiter = f"HTTP 429 on {n429} of {len(pr.burst_statuses)} burst requests"
        elif pr.rate_limit_headers:
            limiter = "rate-limit headers " + ", ".join(sorted(pr.rate_limit_headers)[:3])
        eff = effective_config(pr)
        bound = next((f"{k}={eff[k]}" for k in CONCURRENCY_KEYS if k in eff), None)
        waiting = "waiting" in engine_values(pr)
        if bound or waiting:
            queue = ", ".join(x for x in (bound, "/metrics exposes the waiting queue" if waiting else None) if x)
    if declared:
        limiter = limiter or (f"declared: {declared['limit']}" if declared.get("limit") else None)
        queue = queue or (f"declared: {declared['queue']}" if declared.get("queue") else None)
    data = {"limiter": limiter, "queue": queue}
    if pr is None and not declared:
        return Check(cid, G, "skip", "not verifiable without --target", "give --target or declare it in --checklist")
    if limiter and queue:
        return Check(cid, G, "pass", f"rate limiting: {limiter}; queueing: {queue}", data=data)
    miss = []
    if not limiter:
        miss.append("no rate limiter seen in front of the server (the burst of server.rate_limit got no 429 "
                    "and no rate-limit headers)" if pr is not None and pr.burst_statuses else
                    "no rate limiter seen (no rate-limit headers)")
    if not queue:
        miss.append("no queue bound or queue metric visible")
    seen = "; ".join(x for x in (limiter, queue) if x)
    return Check(cid, G, "warn", "; ".join(miss) + (f"; seen: {seen}" if seen else ""),
                 "put a rate limiter in front of the server (per-key limits at the gateway) and bound the batch "
                 "and queue (vLLM --max-num-seqs, SGLang --max-running-requests); declare them in --checklist", data)
