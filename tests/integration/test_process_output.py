"""What a process wattbench starts writes is scrubbed and made safe inside that process.

Ground truth: ``tests/fakes/loud_requests.py`` makes the process that sends a request write a
target's secret — raw, URL-, JSON-, HTML- and base64-encoded, and 8-character pieces in two letter
cases — through every channel a process has (``print``, ``sys.stderr``, ``os.write`` on 1 and 2,
``logging``, ``warnings``, a dying thread, a raising ``__del__``, an asyncio callback), and then fail
with it. Here that process is a spawned load worker (``--workers 2``): a driver script runs the level
in a subprocess under a memory limit, never knowing the secret itself (it reaches the workers in
their target's query string, ``TargetSpec.query``), so whatever was scrubbed was scrubbed by the
workers. Every channel's line reaches the driver's stdout or stderr — masked — and no form or
piece of the secret does. the Ray actors': ``test_ray_cluster.py``; a launched engine's (``server.log``):
``tests/unit/engines/test_engines_launcher.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


from tests.fakes.hostile_server import ESCAPES, base64_cores, encodings
from tests.fakes.loud_requests import CHANNELS, MARK
from tests.fakes.reliability_procs import MEMORY_LIMIT, child_env
from tests.fakes.stream_server_proc import stream_server
from wattbench.core.process_output import LINE_MAX_BYTES, OutputLines

ROOT = Path(__file__).resolve().parents[2]
SECRET = "wK3sEcReT/q+9vAlUe7zP"  # '/' and '+': its URL, JSON and base64 forms all differ from the raw one


def loud_texts(secret: str) -> list[str]:
    """The secret as a hostile process would write it: every encoding (written in the test fakes,
    not taken from wattbench's scrubber), and pieces of 8 and 9 characters, as given and upper-cased."""
    forms = [v for k, v in encodings(secret).items() if not k.startswith("b64 in blob")]
    return forms + [secret[2:10], secret[5:14], secret[3:11].upper(), ESCAPES]


def needles(secret: str) -> list[bytes]:
    """What must never show: every encoding, every base64 core, every 8-character piece."""
    forms = [v for k, v in encodings(secret).items() if not k.startswith("b64 in blob")] + base64_cores(secret)
    pieces = [secret[i:i + 8] for i in range(len(secret) - 7)]
    return sorted({f.encode() for f in forms + pieces + [p.lower() for p in pieces] + [p.upper() for p in pieces]})


def leaks(blobs: dict[str, bytes], secret: str) -> list[str]:
    found = []
    for where, data in blobs.items():
        low = data.lower()
        found += [f"{n!r} in {where}" for n in needles(secret) if n in data or n.lower() in low]
    return found


DRIVER = r"""
import json, sys
from tests.fakes.loud_requests import LoudRequests
from wattbench.core.errors import WattbenchError
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.load.level import run_level

given = json.loads(sys.stdin.read())
target = TargetSpec(base_url=given["base"] + "/v1", model="fake-model", query="api-version=2024-06-01&key=" + given["secret"])
spec = LevelSpec(index=0, mode="concurrency", value=2, num_requests=8, workers=2)
try:
    out = run_level(spec, target, LoudRequests(given["texts"], at=3))
    print("LEVEL ENDED", len(out.records))
except WattbenchError as e:
    print("LEVEL FAILED:", e)
"""


def _limited() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def test_spawned_workers_scrub_what_they_print_and_raise(tmp_path):
    with stream_server("--ttft-ms", "5", "--itl-ms", "1") as (base, _):
        p = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps({"base": base, "secret": SECRET,
                                                                           "texts": loud_texts(SECRET)}).encode(),
                           capture_output=True, env=child_env(PYTHONWARNINGS="always"), cwd=str(tmp_path),
                           timeout=120, preexec_fn=_limited)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    assert p.returncode == 0, err[-3000:]
    # the worker that got request 3 failed with it: the level failed, the error said so, masked
    assert "LEVEL FAILED:" in out and f"{MARK} raise ***" in out, (out[-2000:], err[-2000:])
    # every channel's line reached the terminal the workers share with the run — masked
    both = out + err
    said = {c for c in CHANNELS if f"{MARK} {c} ***" in both}
    assert said == set(CHANNELS), (set(CHANNELS) - said, both[-4000:])
    # and nothing of the secret did, in any form, nor a piece of it; nor a raw control sequence
    assert not leaks({"stdout": p.stdout, "stderr": p.stderr}, SECRET)
    assert "\x1b" not in both and "\x9b" not in both and "\u202e" not in both


def test_output_lines_are_whole_scrubbed_safe_and_bounded():
    """``OutputLines``: a secret written in two writes is masked whole; a line is released only
    whole; a line past the cap is kept to the cap (scrubbed first: a secret across the cap leaves no
    piece), marked cut, and its rest dropped; control sequences go where the output is no terminal."""
    from wattbench.core.scrubber import Scrubber

    lines = OutputLines(Scrubber([SECRET]).text, tty=False)
    assert lines.feed(f"half {SECRET[:6]}".encode()) == b""  # no line yet
    assert lines.feed(f"{SECRET[6:]} done\x1b]0;title\x07\n".encode()) == b"half *** done\n"
    long = b"x" * (LINE_MAX_BYTES - 4) + SECRET.encode() + b"y" * 100
    got = lines.feed(long) + lines.feed(b"tail of it\nnext\n")
    assert got.startswith(b"x" * (LINE_MAX_BYTES - 4) + b"***") and got.endswith(b"line cut at 64 KiB]\nnext\n")
    assert SECRET[:4].encode() not in got and b"tail of it" not in got and len(got) < LINE_MAX_BYTES + 100
    # a secret that the cap cuts through, written across two reads: what is kept holds fewer than 8 of it
    lines = OutputLines(Scrubber([SECRET]).text, tty=False)
    got = lines.feed(b"z" * (LINE_MAX_BYTES - 5) + SECRET[:7].encode()) + lines.feed(SECRET[7:].encode() + b"\n")
    assert got == b"z" * (LINE_MAX_BYTES - 5) + SECRET[:5].encode() + b" [wattbench: line cut at 64 KiB]\n"
    assert lines.feed(b"no newline " + SECRET.encode()) == b"" and lines.end() == b"no newline ***"
