"""The schema of an output-agreement run (``agreement.json``), written by ``wattbench agree``.

An agreement run sits in the history beside energy runs (kind ``agree``) so that an energy gain
from a quantized or changed deployment is read next to how often its answers still match.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from wattbench.core.errors import UserError
from wattbench.results.rundir import load_model, write_json_atomic

AGREEMENT_SCHEMA_VERSION = 1
AGREEMENT_FILE = "agreement.json"


class _M(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class AgreeTarget(_M):
    base_url: str
    model: str
    api: Literal["completions", "chat"] = "completions"
    token_source: str | None = None  # server_logprobs | none
    server: dict[str, Any] = Field(default_factory=dict)


class SideOutput(_M):
    """One target's answer to one prompt."""

    text: str | None = None
    tokens: list[str] | None = None  # from the server (logprobs), when it returned them
    output_tokens: int | None = None  # from usage
    finish_reason: str | None = None
    error: str | None = None
    latency_ms: float | None = None
    json_valid: bool | None = None  # only for prompts with a schema or required fields
    missing_fields: list[str] = Field(default_factory=list)
    structured_valid: bool | None = None


class PromptAgreement(_M):
    id: str
    exact_match: bool | None = None  # None when either side failed
    token_agreement: float | None = None  # position-wise matching tokens / longer length
    first_divergence: int | None = None  # token index of the first difference; None if identical
    length_a: int | None = None
    length_b: int | None = None
    a: SideOutput
    b: SideOutput


class DivergenceStats(_M):
    diverged: int = 0
    min: int | None = None
    p50: float | None = None
    p90: float | None = None
    mean: float | None = None
    max: int | None = None
    histogram: dict[str, int] = Field(default_factory=dict)  # bucket of token positions -> prompts


class AgreementMetrics(_M):
    prompts: int
    compared: int  # both sides answered
    failed_a: int = 0
    failed_b: int = 0
    exact_match_rate: float | None = None
    token_agreement: float | None = None  # matching positions / sum of longer lengths (micro average)
    token_basis: Literal["server_tokens", "whitespace"] = "whitespace"
    first_divergence: DivergenceStats = Field(default_factory=DivergenceStats)
    structured_prompts: int = 0
    structured_valid_rate_a: float | None = None
    structured_valid_rate_b: float | None = None
    json_valid_rate_a: float | None = None
    json_valid_rate_b: float | None = None


class Agreement(_M):
    schema_version: int = AGREEMENT_SCHEMA_VERSION
    kind: Literal["agree"] = "agree"
    wattbench_version: str
    run_id: str
    created_at: str
    duration_s: float | None = None
    targets: list[AgreeTarget]
    settings: dict[str, Any] = Field(default_factory=dict)
    metrics: AgreementMetrics
    prompts: list[PromptAgreement] = Field(default_factory=list)


def write_agreement(run_dir: str | os.PathLike[str], agreement: Agreement) -> Path:
    """Write ``agreement.json`` into ``run_dir`` atomically."""
    return write_json_atomic(Path(run_dir) / AGREEMENT_FILE, agreement)


def load_agreement(path_or_dir: str | os.PathLike[str]) -> Agreement:
    """Read an agreement run (its directory or its agreement.json); UserError names a bad file."""
    p = Path(path_or_dir)
    if not p.exists():
        raise UserError(f"{p}: no such agreement directory or file")
    if p.is_dir():
        p = p / AGREEMENT_FILE
    return load_model(p, Agreement, "agreement", AGREEMENT_SCHEMA_VERSION)
