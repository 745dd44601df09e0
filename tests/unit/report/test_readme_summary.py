"""README.md's example summary is what ``wattbench report`` prints today, at 80 columns, of the
committed run it comes from (``docs/validation-data/cpu2-readme-example-output/``): a layout
change that is not carried into the README fails here, and so does a README edited by hand.

To refresh the block after an intended change: ``python tests/unit/report/test_readme_summary.py``
prints it."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

from rich.console import Console

from wattbench.core.schema import Result
from wattbench.report.terminal import run_summary

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "docs" / "validation-data" / "cpu2-readme-example-output" / "readme_example_run.tgz"
LEAD = "prints of that run directory today"


def rendered(width: int = 80) -> str:
    with tarfile.open(RUN) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith("result.json"))
        text = tf.extractfile(member).read().decode()  # type: ignore[union-attr]
    result = Result.model_validate_json(text)
    c = Console(file=io.StringIO(), width=width, color_system=None, record=True)
    c.print(run_summary(result, "readme_ex"))
    return "\n".join(x.rstrip() for x in c.export_text().splitlines())


def readme_block() -> str:
    text = (ROOT / "README.md").read_text()
    after = text[text.index(LEAD):]
    start = after.index("<!-- example -->\n```\n") + len("<!-- example -->\n```\n")
    return after[start:after.index("```", start)].rstrip("\n")


def test_the_readme_summary_is_what_report_prints_of_its_committed_run():
    got = rendered(80)
    assert readme_block() == got, "README.md's example summary differs from `wattbench report` of its run:\n" + got
    assert max(len(x) for x in got.splitlines()) <= 80


if __name__ == "__main__":
    sys.stdout.write(rendered(80) + "\n")
