import json

import numpy as np
import pytest

from wattbench.core.errors import UserError
from wattbench.workload.dataset import DatasetWorkload
from wattbench.workload.tokenizer import ApproxTokenizer


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_jsonl_prompt_and_messages(tmp_path, bpe):
    p = write(tmp_path, "d.jsonl", "\n".join([
        json.dumps({"prompt": "the river and the tree", "output_tokens": 12}),
        "# a comment",
        "",
        json.dumps({"messages": [{"role": "user", "content": "hello world"}], "max_tokens": 7}),
        json.dumps({"prompt": "summarize the book", "completion": "a short story about water"}),
        json.dumps({"prompt": "no output length here"}),
    ]) + "\n")
    w = DatasetWorkload(p, bpe, seed=0, output_tokens="33")
    specs = list(w.specs())
    assert len(specs) == 4
    by_line = {s.tags["line"]: s for s in specs}
    assert by_line[1].max_tokens == 12 and by_line[1].input_tokens == bpe.count("the river and the tree")
    assert by_line[4].messages[0]["content"] == "hello world" and by_line[4].max_tokens == 7
    assert by_line[5].max_tokens == bpe.count("a short story about water")
    assert by_line[5].tags["output_from"] == "reference"
    assert by_line[6].max_tokens == 33 and by_line[6].tags["output_from"] == "distribution"
    d = w.describe()
    assert d["rows_read"] == 4 and d["format"] == "jsonl" and len(d["sha256"]) == 64


@pytest.mark.parametrize("row,reason", [
    ('{"prompt": 5}', "'prompt' must be a string"),
    ('{"text": "x"}', "needs 'prompt'"),
    ('{"prompt": "a", "max_tokens": 0}', "'max_tokens' must be an integer >= 1"),
    ('{"prompt": "a", "output_tokens": "ten"}', "'output_tokens' must be an integer"),
    ('{"messages": [{"role": "user"}]}', "messages[0]"),
    ('{"prompt": "a", ', "invalid JSON"),
    ('[1, 2]', "expected a JSON object"),
])
def test_bad_jsonl_row_names_file_and_line(tmp_path, bpe, row, reason):
    p = write(tmp_path, "bad.jsonl", '{"prompt": "fine row"}\n\n' + row + "\n")
    with pytest.raises(UserError) as e:
        DatasetWorkload(p, bpe)
    assert f"{p}:3:" in str(e.value)
    assert reason in str(e.value)


def sharegpt(n_good=6):
    convs = []
    for i in range(n_good):
        convs.append({"id": str(i), "conversations": [
            {"from": "human", "value": "tell me about the river " * (i + 1)},
            {"from": "gpt", "value": "the water runs " * (2 * i + 1)},
            {"from": "human", "value": "and then?"}, {"from": "gpt", "value": "more"}]})
    convs.insert(2, {"id": "x", "conversations": [{"from": "gpt", "value": "alone"}]})
    return convs


def test_sharegpt_first_human_turn_and_reply_length(tmp_path, bpe):
    p = write(tmp_path, "sg.json", json.dumps(sharegpt(), indent=1))
    w = DatasetWorkload(p, bpe, seed=1)
    specs = list(w.specs())
    assert len(specs) == 6
    assert w.describe()["skipped"] == {"no_human_gpt_pair": 1}
    for s in specs:
        k = s.prompt.count("river")
        assert s.max_tokens == bpe.count("the water runs " * (2 * k - 1))
        assert s.input_tokens == bpe.count(s.prompt)


def test_sharegpt_bad_entry_line(tmp_path, bpe):
    data = sharegpt(3)
    data[3]["conversations"][1] = {"from": "gpt", "value": None}
    text = json.dumps(data, indent=1)
    p = write(tmp_path, "sg.json", text)
    with pytest.raises(UserError) as e:
        DatasetWorkload(p, bpe)
    # the fourth entry starts at the line holding its opening brace
    lines = text.splitlines()
    entry_lines = [i + 1 for i, ln in enumerate(lines) if ln == " {"]
    assert f"{p}:{entry_lines[3]}:" in str(e.value)
    assert "conversations[1]" in str(e.value)


def test_filters_and_seeded_sampling(tmp_path):
    rows = [json.dumps({"prompt": "word " * n, "max_tokens": n}) for n in range(1, 201)]
    p = write(tmp_path, "d.jsonl", "\n".join(rows))
    ts = ApproxTokenizer()
    w = DatasetWorkload(p, ts, seed=3, min_input_tokens=20, max_input_tokens=100, max_output_tokens=60)
    ins = np.array([s.input_tokens for s in w.specs()])
    outs = np.array([s.max_tokens for s in w.specs()])
    assert ins.min() >= 20 and ins.max() <= 100 and outs.max() <= 60
    assert w.describe()["filtered_out"] == 200 - len(ins)
    a = [s.prompt for s in DatasetWorkload(p, ts, seed=3, limit=10).specs()]
    b = [s.prompt for s in DatasetWorkload(p, ts, seed=3, limit=10).specs()]
    c = [s.prompt for s in DatasetWorkload(p, ts, seed=4, limit=10).specs()]
    assert a == b and a != c and len(set(a)) == 10
    # cycling past the end repeats in the same order
    w2 = DatasetWorkload(p, ts, seed=3, limit=10)
    more = [s.prompt for s in w2.specs(25)]
    assert more[:10] == more[10:20] == a


def test_everything_filtered_is_an_error(tmp_path):
    p = write(tmp_path, "d.jsonl", '{"prompt": "a b c"}\n')
    with pytest.raises(UserError, match="no rows left after filtering"):
        DatasetWorkload(p, ApproxTokenizer(), min_input_tokens=1000)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        DatasetWorkload(tmp_path / "nope.jsonl", ApproxTokenizer())
