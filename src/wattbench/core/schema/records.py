"""One request as the client saw it: a line of ``requests.jsonl``, and the fast builder the load
generator uses for it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from wattbench.core.schema.base import _M


class RequestRecord(_M):
    """One request as the client saw it. Times are the run's monotonic clock in ns."""

    id: int
    level: int
    worker: int = 0
    warmup: bool = False
    session_id: str | None = None
    turn: int | None = None
    target: str | None = None  # base URL when several targets are driven
    scheduled_ns: int | None = None  # when the schedule wanted it sent (open loop)
    sent_ns: int
    first_token_ns: int | None = None  # first content chunk's bytes arrived
    last_token_ns: int | None = None  # last content chunk's bytes arrived
    end_ns: int | None = None  # stream closed / response complete
    chunk_ns: list[int] = Field(default_factory=list)  # arrival time of every content chunk
    input_tokens: int | None = None  # from usage
    output_tokens: int | None = None  # from usage
    requested_input_tokens: int | None = None
    requested_output_tokens: int | None = None
    token_source: str = "usage"  # usage | tokenizer | approx
    ok: bool = True
    error: str | None = None  # class: http_<status> | timeout | disconnect | bad_stream | bad_usage | stall | connect
    error_detail: str | None = None
    http_status: int | None = None
    output_text: str | None = None  # kept only when asked (agree, debugging)
    # who asked: from the dataset/trace row's ``tenant`` (or --tenant-field) and ``tags``
    tenant: str | None = None
    tags: list[str] = Field(default_factory=list)
    model: str | None = None  # the model it was sent to
    # energy per request (an estimate, accounting/request_energy.py): boundary -> J, and how
    energy_j: dict[str, float] = Field(default_factory=dict)
    energy_method: dict[str, str] = Field(default_factory=dict)
    carbon_g: dict[str, float] = Field(default_factory=dict)  # boundary -> gCO2e, with --carbon-intensity


class _AllFieldsSet(set[str]):
    """The fields-set every ``build_record`` record shares: all declared fields, never added to
    (pydantic adds a name on assignment; on a set shared by every record that would leak)."""

    def add(self, name: str) -> None:  # noqa: D102 - see the class doc
        pass


_RECORD_FIELDS = tuple(RequestRecord.model_fields.items())
# The default factories that take no argument, called directly: pydantic's ``get_default`` asks
# ``inspect.signature`` of the factory at every call (~20 us each, three per record: 6% of the
# client's event loop beside a CPU-bound server, py-spy on the 2-core machine, 2026-12-07).
_RECORD_FACTORIES = {name: f.default_factory for name, f in _RECORD_FIELDS
                     if f.default_factory is not None and not f.default_factory_takes_validated_data}
_RECORD_FIELDS_SET = _AllFieldsSet(RequestRecord.model_fields)


def build_record(**values: Any) -> RequestRecord:
    """A ``RequestRecord`` from trusted, typed values, without validation (as ``model_construct``)
    and at less than half its memory: the load generator builds one per request and a level holds
    them all (``benches/level_memory.py``: 5.2 KB → 2.2 KB per record with 16 chunk stamps).
    ``model_construct`` keeps, per record, its own fields-set (~0.8–2 KB) and the emptied keyword
    dict as the extras (~0.4 KB); here every record shares one all-fields set (nothing reads it
    but ``exclude_unset``) and the extras are a fresh dict. Unknown keys become extras, as there."""
    factories = _RECORD_FACTORIES
    d = {name: (values.pop(name) if name in values else
                factories[name]() if name in factories else f.get_default(call_default_factory=True))  # type: ignore[call-arg]
         for name, f in _RECORD_FIELDS}
    m = RequestRecord.__new__(RequestRecord)
    object.__setattr__(m, "__dict__", d)
    object.__setattr__(m, "__pydantic_fields_set__", _RECORD_FIELDS_SET)
    object.__setattr__(m, "__pydantic_extra__", dict(values))
    object.__setattr__(m, "__pydantic_private__", None)
    return m

