"""What scrubbing costs the writers: ``Scrubber.json_text`` over a large result-like JSON document (the
way ``result.json`` and every JSON file are written), ``Scrubber.text`` over the same text (the way
``report.html``'s run parts are), and ``found_in`` + ``json_text`` line by line (the way
``requests.jsonl`` is written), with no secret, with five registered secrets and a clean text, and
with those secrets and 300 echoes of a key's first 27 characters. Best of three, MB/s of UTF-8.

Run from the repository root (the argument: requests in the document, default 30,000 ≈ 17 MB)::

    PYTHONPATH=src python benches/scrub_throughput.py 30000
"""
import json
import random
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent / "src")]
from wattbench.core.scrubber import Scrubber  # noqa: E402  (after the path line above)

KEY = "sk-AUDITkeyQ7w3Zp9Lm2Xc8VbN4tR6yU1"
SECRETS = [KEY, "wbuser:pw-SECRET/url+7c1e", "hdr-SECRET-gw/4e+tok", "Bearer " + KEY, "sig-SECRET-q/9a+"]
WORDS = ["the", "token", "energy", "joules", "level", "trial", "steady", "window", "http", "ok"]


def record(i: int, rng: random.Random) -> dict:
    return {"request_id": f"r{i}", "t_send_ns": rng.randrange(10**15), "ttft_ms": rng.random() * 100,
            "chunk_ns": [rng.randrange(10**15) for _ in range(16)],
            "output_text": " ".join(rng.choice(WORDS) for _ in range(40)) + ' "q" \\ \u00e9 &amp; 50%',
            "error": None, "error_detail": None, "usage": {"prompt_tokens": 256, "completion_tokens": 128}}


def best(f, n: int = 3) -> tuple[float, object]:
    times, out = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30_000
    rng = random.Random(1)
    recs = [record(i, rng) for i in range(n)]
    doc = json.dumps({"levels": [{"requests": recs}]}, indent=2, ensure_ascii=False)
    echo = doc.replace('"r1', '"r1 Incorrect API key provided: ' + KEY[:27] + "…", 300)
    lines = [json.dumps(r, ensure_ascii=False) for r in recs]
    mb = len(doc.encode()) / 1e6
    lines_mb = sum(len(x.encode()) + 1 for x in lines) / 1e6
    empty, five = Scrubber(), Scrubber(SECRETS)
    t0 = time.perf_counter()
    Scrubber(SECRETS)
    out: dict = {"doc_mb": round(mb, 2), "lines_mb": round(lines_mb, 2), "requests": n,
                 "build_ms": round(1e3 * (time.perf_counter() - t0), 2), "cases": []}

    def lines_pass(s: Scrubber) -> list[str]:
        return [s.json_text(x) if s.found_in(x) else x for x in lines]

    for name, s, text in [("no secret", empty, doc), ("5 secrets, clean", five, doc),
                          ("5 secrets, 300 prefix echoes", five, echo)]:
        dt_json, scrubbed = best(lambda: s.json_text(text))
        dt_text, _ = best(lambda: s.text(text))
        dt_lines, _ = best(lambda: lines_pass(s))
        out["cases"].append({"case": name, "json_text_mb_s": round(mb / dt_json, 1),
                             "text_mb_s": round(mb / dt_text, 1), "lines_mb_s": round(lines_mb / dt_lines, 1),
                             "left_27_char_prefix": KEY[:27] in str(scrubbed)})
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
