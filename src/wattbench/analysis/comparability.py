"""Are two runs comparable? The reasons a ratio between them would mislead.

Each :class:`Incomparability` has a category:

- ``setup``: model, dtype/precision, engine and engine version — what a platform or upgrade
  comparison changes on purpose (``regress`` reports these but does not refuse on them);
- ``workload``: workload, API, requested and achieved lengths, load levels, arrival, SLO;
- ``measurement``: how energy was obtained at the compared boundary (counter vs power integral vs
  declared/estimate).

``compare`` refuses on any of them unless forced; ``regress`` refuses on workload and
measurement ones unless forced. A boundary missing from a run is never forced: the ratio would be
between different things.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from wattbench.results.headline import describe_key, level_key
from wattbench.core.schema import LevelResult, Result, model_precision

Category = Literal["setup", "workload", "measurement"]

# achieved mean output (or input) tokens per request may differ by this much (relative)
LENGTH_TOLERANCE = 0.10


class Incomparability(BaseModel):
    field: str
    category: Category
    baseline: Any = None
    candidate: Any = None
    level: str | None = None
    reason: str

    def line(self) -> str:
        where = f" at {self.level}" if self.level else ""
        return f"{self.reason}{where}"


def precision_of(r: Result) -> str | None:
    """dtype and quantization (``bfloat16/awq``), each from where the run states it
    (``core.schema.model_precision``: the one rule); None when it states neither."""
    return model_precision(r.server.effective_config, r.config).text()


def _mean_len(lv: LevelResult, which: str) -> float | None:
    n = lv.requests.completed
    if not n:
        return None
    thr = lv.throughput
    m = thr.measured_request_tokens  # the completed requests' own tokens (per-request mean)
    if m is not None:
        tokens = m.output if which == "output" else m.input
    else:
        tokens = thr.output_tokens if which == "output" else thr.input_tokens
    return tokens / n if tokens else None


def _differ(field: str, category: Category, a: Any, b: Any, what: str) -> Incomparability | None:
    if a is None or b is None or a == b:
        return None
    return Incomparability(field=field, category=category, baseline=a, candidate=b,
                           reason=f"{what} differs: {a} vs {b}")


def check_runs(a: Result, b: Result) -> list[Incomparability]:
    """Run-wide checks (model, precision, engine, workload, API, lengths, SLO)."""
    out = [
        _differ("model", "setup", a.served_model, b.served_model, "model"),
        _differ("precision", "setup", precision_of(a), precision_of(b), "dtype/precision"),
        _differ("engine", "setup", a.server.engine, b.server.engine, "engine"),
        _differ("engine_version", "setup", a.server.version, b.server.version, "engine version"),
        _differ("workload", "workload", a.config.workload, b.config.workload, "workload"),
        _differ("api", "workload", a.config.api, b.config.api, "API"),
        _differ("input_tokens", "workload", a.config.input_tokens, b.config.input_tokens, "requested input length"),
        _differ("output_tokens", "workload", a.config.output_tokens, b.config.output_tokens,
                "requested output length"),
    ]
    slo_a, slo_b = a.config.slo, b.config.slo
    if slo_a != slo_b:
        out.append(Incomparability(field="slo", category="workload", baseline=slo_a, candidate=slo_b,
                                   reason=f"SLO differs: {slo_a} vs {slo_b}"))
    return [x for x in out if x is not None]


def check_levels(a: LevelResult, b: LevelResult, boundary: str | None) -> list[Incomparability]:
    """Checks on one matched pair of levels at the compared boundary (None: no boundary is compared,
    so no sensor check, only the workload's)."""
    out: list[Incomparability] = []
    ka, kb = level_key(a), level_key(b)
    if ka != kb:
        out.append(Incomparability(field="load_level", category="workload", baseline=describe_key(ka),
                                   candidate=describe_key(kb), level=b.label,
                                   reason=f"concurrency/rate differs: {describe_key(ka)} vs {describe_key(kb)}"))
    if a.load.mode == "rate" and b.load.mode == "rate" and a.load.arrival and b.load.arrival \
            and a.load.arrival != b.load.arrival:
        out.append(Incomparability(field="arrival", category="workload", baseline=a.load.arrival,
                                   candidate=b.load.arrival, level=b.label,
                                   reason=f"arrival process differs: {a.load.arrival} vs {b.load.arrival}"))
    for which in ("output", "input"):
        la, lb = _mean_len(a, which), _mean_len(b, which)
        if la and lb and abs(lb / la - 1) > LENGTH_TOLERANCE:
            out.append(Incomparability(
                field=f"achieved_{which}_length", category="workload", baseline=round(la, 1),
                candidate=round(lb, 1), level=b.label,
                reason=(f"achieved mean {which} length differs by more than {LENGTH_TOLERANCE:.0%}: "
                        f"{la:.1f} vs {lb:.1f} tokens per request")))
    ea, eb = (a.energy.get(boundary), b.energy.get(boundary)) if boundary is not None else (None, None)
    if ea is not None and eb is not None:
        ma, mb = f"{ea.method}/{ea.label}", f"{eb.method}/{eb.label}"
        if ma != mb:
            out.append(Incomparability(field="sensor_method", category="measurement", baseline=ma, candidate=mb,
                                       level=b.label,
                                       reason=f"sensor method at {boundary} differs: {ma} vs {mb}"))
    return out


def refusal_message(problems: list[Incomparability], what: str = "runs") -> str:
    """The one line ``compare`` and ``regress`` refuse incomparable runs with: every reason once, and
    how to compare anyway."""
    reasons = "; ".join(dict.fromkeys(p.line() for p in problems))
    return f"the {what} are not comparable: {reasons} (pass --force to compare anyway; each is flagged)"
