"""``build_record``: the load generator's compact record builder is ``model_construct`` to every reader."""

import pytest
from wattbench.core.schema import RequestRecord, build_record


def _values(i: int) -> dict:
    return dict(id=i, level=1, worker=2, sent_ns=1_000 + i, first_token_ns=1_500 + i, last_token_ns=9_000 + i,
                end_ns=9_100 + i, chunk_ns=[1_500 + i, 5_000 + i, 9_000 + i], input_tokens=7, output_tokens=3,
                http_status=200, tags=["a"], model="m")


def test_same_record_as_model_construct():
    a, b = build_record(**_values(4)), RequestRecord.model_construct(**_values(4))
    assert a.model_dump() == b.model_dump()
    assert a.model_dump_json() == b.model_dump_json()
    assert a == b
    assert (a.ok, a.warmup, a.token_source, a.energy_j) == (True, False, "usage", {})  # defaults filled


def test_records_share_nothing_a_reader_writes():
    a, b = build_record(**_values(0)), build_record(**_values(1))
    a.energy_j["gpu"] = 2.5  # request_energy fills these in place
    a.trial = 3  # the runner's extra field on trials > 1
    assert b.energy_j == {} and "trial" not in b.model_dump()
    assert a.model_dump()["trial"] == 3 and a.model_dump()["energy_j"] == pytest.approx({"gpu": 2.5}, rel=1e-9)
    assert "trial" not in RequestRecord.model_fields


def test_unknown_keys_become_extras_as_with_model_construct():
    v = _values(0) | {"trial": 1}
    assert build_record(**v).model_dump() == RequestRecord.model_construct(**dict(v)).model_dump()
    assert RequestRecord.model_validate(build_record(**_values(0)).model_dump()).sent_ns == 1_000
