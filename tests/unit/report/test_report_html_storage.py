"""The HTML report is written whole or not at all: a write that fails (a full disk; here a file
size limit stands in for it) leaves neither a half report nor a temporary file, and says so in one
line with the bad-environment exit code."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys

from tests.fakes.report_runs import write_run


def _file_limit(nbytes: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    return apply


def test_a_report_that_cannot_be_written_leaves_no_temporary_file(tmp_path):
    run = tmp_path / "run"
    write_run(run, concurrencies=(1,), level_s=2.0)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "report.html").write_text("the report from before\n")
    p = subprocess.run([sys.executable, "-m", "wattbench", "report", str(run), "--html", str(out_dir / "report.html")],
                       capture_output=True, text=True, timeout=300, preexec_fn=_file_limit(100_000))
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "report.html" in lines[0] and "Traceback" not in p.stderr
    assert sorted(f.name for f in out_dir.iterdir()) == ["report.html"]  # no .tmp left beside it
    assert (out_dir / "report.html").read_text() == "the report from before\n"  # the old one unchanged
