import json

import pytest

from wattbench.core.errors import UserError
from wattbench.workload.trace import TraceWorkload, parse_datetime_s
from wattbench.workload.tokenizer import ApproxTokenizer

MOONCAKE = [
    {"timestamp": 0, "input_length": 120, "output_length": 12, "hash_ids": [0, 1]},
    {"timestamp": 27, "input_length": 80, "output_length": 5, "hash_ids": [0, 2]},
    {"timestamp": 27, "input_length": 64, "output_length": 9, "hash_ids": [3]},
    {"timestamp": 1103, "input_length": 200, "output_length": 30, "hash_ids": [0, 1, 4]},
    {"timestamp": 2050, "input_length": 33, "output_length": 1, "hash_ids": [5]},
]


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_mooncake_ms_timestamps_and_lengths(tmp_path, bpe):
    p = write_jsonl(tmp_path / "mooncake.jsonl", MOONCAKE)
    w = TraceWorkload(p, bpe, seed=0)
    specs = list(w.specs())
    assert [s.arrival_s for s in specs] == pytest.approx([0.0, 0.027, 0.027, 1.103, 2.05], rel=1e-9)
    assert [s.input_tokens for s in specs] == [120, 80, 64, 200, 33]
    assert [s.max_tokens for s in specs] == [12, 5, 9, 30, 1]
    assert all(bpe.count(s.prompt) == s.input_tokens for s in specs)
    assert specs[3].tags["hash_ids"] == [0, 1, 4]
    assert w.describe()["replay_duration_s"] == pytest.approx(2.05)


def test_speedup_divides_time(tmp_path, bpe):
    p = write_jsonl(tmp_path / "m.jsonl", MOONCAKE)
    specs = list(TraceWorkload(p, bpe, speedup=4.0).specs())
    assert [s.arrival_s for s in specs] == pytest.approx([0.0, 0.00675, 0.00675, 0.27575, 0.5125], abs=1e-12)


def test_azure_csv_datetimes_keep_sub_microsecond_digits(tmp_path):
    p = tmp_path / "azure.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,109\n"
                 "2023-11-16 18:15:51.0000001,879,0\n"
                 "2023-11-16 18:16:02.0030000,1016,7\n")
    w = TraceWorkload(p, ApproxTokenizer())
    specs = list(w.specs())
    assert [s.arrival_s for s in specs] == pytest.approx([0.0, 4.314579, 15.32241], abs=1e-6)
    assert [s.input_tokens for s in specs] == [374, 396, 1016]
    assert w.describe()["skipped"] == {"zero_output_tokens": 1}
    assert parse_datetime_s("2023-11-16T18:15:46.5+01:00") == pytest.approx(
        parse_datetime_s("2023-11-16 17:15:46.5"), abs=1e-9)


def test_generic_rows_sessions_and_sorting(tmp_path):
    rows = [{"arrival_s": 1.5, "input_tokens": 10, "output_tokens": 3, "session_id": "a"},
            {"arrival_s": 0.5, "input_tokens": 11, "output_tokens": 4, "session_id": "b"},
            {"arrival_s": 2.0, "input_tokens": 12, "output_tokens": 5, "session_id": "a"}]
    w = TraceWorkload(write_jsonl(tmp_path / "t.jsonl", rows), ApproxTokenizer())
    specs = list(w.specs())
    assert [s.arrival_s for s in specs] == pytest.approx([0.0, 1.0, 1.5], rel=1e-9)
    assert [s.tags["trace_session_id"] for s in specs] == ["b", "a", "a"]
    assert all(s.session_id is None for s in specs)  # input lengths already hold the context
    assert w.describe()["rows_out_of_order"] == 1


def test_time_unit_for_generic_timestamp(tmp_path):
    rows = [{"timestamp": 10, "input_tokens": 5, "output_tokens": 2},
            {"timestamp": 12.5, "input_tokens": 5, "output_tokens": 2}]
    w = TraceWorkload(write_jsonl(tmp_path / "t.jsonl", rows), ApproxTokenizer(), time_unit="s")
    assert [s.arrival_s for s in w.specs()] == pytest.approx([0.0, 2.5], rel=1e-9)


@pytest.mark.parametrize("bad,reason", [
    ({"timestamp": 5, "input_length": -3, "output_length": 2}, "negative"),
    ({"timestamp": 5, "input_length": "many", "output_length": 2}, "must be a token count"),
    ({"timestamp": 5, "input_length": 2.5, "output_length": 2}, "whole token count"),
    ({"timestamp": "yesterday", "input_length": 3, "output_length": 2}, "neither a number nor a date-time"),
    ({"input_length": 3, "output_length": 2}, "no timestamp field"),
    ({"timestamp": 5, "output_length": 2}, "no input-length field"),
    ({"timestamp": 5, "input_length": 3}, "no output-length field"),
])
def test_bad_jsonl_rows_name_file_and_line(tmp_path, bad, reason):
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(MOONCAKE[0]) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(UserError) as e:
        TraceWorkload(p, ApproxTokenizer())
    assert f"{p}:3:" in str(e.value) and reason in str(e.value)


def test_bad_csv_row_line(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n"
                 "2023-11-16 18:15:47.00,abc,44\n")
    with pytest.raises(UserError, match=rf"{p}:3: 'ContextTokens' must be a token count"):
        TraceWorkload(p, ApproxTokenizer())
    p.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374\n")
    with pytest.raises(UserError, match=rf"{p}:2: fewer fields"):
        TraceWorkload(p, ApproxTokenizer())


def test_bad_speedup(tmp_path):
    p = write_jsonl(tmp_path / "m.jsonl", MOONCAKE)
    with pytest.raises(UserError, match="speedup"):
        TraceWorkload(p, ApproxTokenizer(), speedup=0)


def test_replay_offsets_and_gaps_are_the_traces_exactly(tmp_path):
    # What the replay is told to do, exactly: offsets from the first row, in seconds, and the
    # same gaps compressed by --speedup. How closely a sender on this host keeps those deadlines
    # depends on the host's load, not on this code: benches/trace_replay_timing.py measures it.
    stamps_ms = (0, 3, 3, 17, 60, 61, 140, 141.5, 230, 400)
    rows = [{"timestamp": ms, "input_length": 8, "output_length": 2} for ms in stamps_ms]
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    w = TraceWorkload(path, ApproxTokenizer())
    offsets = [s.arrival_s for s in w.specs()]
    assert offsets == [ms / 1000 for ms in stamps_ms]
    assert [w.arrival_s(i) for i in range(len(rows))] == offsets
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    assert gaps == pytest.approx([(b - a) / 1000 for a, b in zip(stamps_ms, stamps_ms[1:])], abs=1e-12)
    assert 0.0 in gaps  # two rows at the same instant stay together
    fast = [s.arrival_s for s in TraceWorkload(path, ApproxTokenizer(), speedup=4).specs()]
    assert fast == pytest.approx([o / 4 for o in offsets], abs=1e-12)


def test_mooncake_hash_ids_become_shared_prefix_blocks(tmp_path, bpe):
    rows = [{"timestamp": 0, "input_length": 150, "output_length": 3, "hash_ids": [7, 8, 9]},
            {"timestamp": 10, "input_length": 130, "output_length": 3, "hash_ids": [7, 8, 11]},
            {"timestamp": 20, "input_length": 90, "output_length": 3, "hash_ids": [7, 12]},
            {"timestamp": 30, "input_length": 120, "output_length": 3, "hash_ids": [13, 14, 15]}]
    w = TraceWorkload(write_jsonl(tmp_path / "m.jsonl", rows), bpe, prefix_blocks=50)
    specs = list(w.specs())
    assert [bpe.count(s.prompt) for s in specs] == [150, 130, 90, 120]
    ids = [bpe.encode(s.prompt) for s in specs]

    def common(a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    assert common(ids[0], ids[1]) >= 95  # blocks 7 and 8 shared (2 x 50 tokens, joins may merge)
    assert 45 <= common(ids[0], ids[2]) < 95  # only block 7
    assert common(ids[0], ids[3]) < 5  # nothing shared
    plain = list(TraceWorkload(write_jsonl(tmp_path / "m.jsonl", rows), bpe).specs())
    assert common(bpe.encode(plain[0].prompt), bpe.encode(plain[1].prompt)) < 5
