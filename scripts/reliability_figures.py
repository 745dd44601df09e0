"""The reliability figures of docs/reliability.md: what the suite tries, per area, and how much of it holds.

    PYTHONPATH=src:. python scripts/reliability_figures.py            # count the cases (pytest --collect-only)
    PYTHONPATH=src:. python scripts/reliability_figures.py --run      # and run them: passed / failed / skipped
    PYTHONPATH=src:. python scripts/reliability_figures.py --run --area "crafted result.json"

An area is a list of test files or test ids (``AREAS``); its figure is the number of pytest cases
(parametrized cases counted one by one) they collect, and with ``--run`` how many pass. A case
is one input or behaviour tried against the real code and checked for the documented outcome (one
line and exit 2 for bad input, the finding and the records kept for a hostile server, no secret in
any byte for a secret path, what was measured kept for a fault). A test that loops over several
inputs inside counts once here; docs/reliability.md says where that is. ``--run`` runs real
servers and processes (the hostile-server matrix alone takes minutes): run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

AREAS: dict[str, list[str]] = {
    "bad input (one line, exit 2)": [
        "tests/e2e/test_cli_numeric_inputs.py",
        "tests/e2e/test_run_bad_inputs.py",
        "tests/e2e/test_measure_cli.py::test_bad_input_is_one_line_and_writes_nothing",
        "tests/e2e/test_measure_hostile.py::test_a_directory_as_the_command_is_one_line",
        "tests/unit/tune/test_tune_cli.py",
        "tests/unit/tune/test_tune_space_hostile.py",
    ],
    "hostile-server behaviours": [
        "tests/integration/test_hostile_server.py",
        "tests/integration/test_hostile_probes.py",
    ],
    "measure: tool result files and markers": [
        "tests/unit/results/test_results_tools_hostile.py",
        "tests/e2e/test_measure_hostile.py::test_a_malformed_tool_file_is_one_line_and_keeps_the_lifetime_level",
    ],
    "measure: the command's processes and output": [
        "tests/e2e/test_measure_hostile.py::test_stopping_measure_stops_the_commands_whole_process_group",
        "tests/e2e/test_measure_hostile.py::test_a_detached_grandchild_holding_the_output_does_not_hold_the_end",
        "tests/e2e/test_measure_hostile.py::test_output_without_newlines_is_cut_and_the_log_stays_small",
        "tests/e2e/test_measure_hostile.py::test_the_log_stops_at_its_cap_and_says_so",
        "tests/e2e/test_measure_hostile.py::test_the_stop_reaches_a_grandchild_that_ignores_sigint_and_sigterm",
        "tests/e2e/test_measure_cli.py::test_sigterm_stops_the_command_by_pid_and_keeps_its_energy",
    ],
    "crafted result.json": [
        "tests/unit/results/test_results_crafted_files.py",
        "tests/unit/reliability/test_reliability_safety.py::test_result_files_are_data_not_code",
    ],
    "secret paths": [
        "tests/integration/test_secrets.py",
        "tests/integration/test_secrets_everywhere.py",
        "tests/integration/test_secret_pieces.py",
        "tests/unit/server/test_server_redact.py",
        "tests/integration/test_hostile_redirect_credentials.py",
        "tests/unit/server/test_server_origin.py",
        "tests/e2e/test_api_key_file.py",
        "tests/integration/test_terminal_escapes.py",
        "tests/unit/reliability/test_terminal_text.py",
        "tests/e2e/test_run_dir_links.py",
        "tests/unit/report/test_safe_text.py",
    ],
    "faults": [
        "tests/integration/test_fault_matrix.py",
        "tests/integration/test_crash_recovery.py",
        "tests/e2e/test_run_sigterm.py",
    ],
}

_SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|error|errors|deselected|xfailed|xpassed)")


def _existing(targets: list[str]) -> list[str]:
    return [t for t in targets if (ROOT / t.split("::")[0]).exists()]


def collect(targets: list[str]) -> list[str]:
    """The pytest ids the targets collect (slow tests included)."""
    if not targets:
        return []
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          *targets], cwd=ROOT, capture_output=True, text=True)
    return [ln for ln in out.stdout.splitlines() if "::" in ln and not ln.startswith(("=", " "))]


def run(targets: list[str]) -> dict[str, int]:
    if not targets:
        return {}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *targets], cwd=ROOT,
                         capture_output=True, text=True)
    tail = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    return {k: int(n) for n, k in _SUMMARY.findall(tail)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", action="store_true", help="run the cases, not only count them")
    p.add_argument("--area", action="append", help="only this area (repeatable)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows = []
    for area, targets in AREAS.items():
        if a.area and area not in a.area:
            continue
        present = _existing(targets)
        ids = collect(present)
        row = {"area": area, "cases": len(ids), "files": sorted({t.split("::")[0] for t in present}),
               "missing": sorted(set(targets) - set(present))}
        if a.run:
            row["result"] = run(present)
        rows.append(row)
        if not a.json:
            res = row.get("result")
            done = "" if res is None else "  " + ", ".join(f"{n} {k}" for k, n in res.items())
            print(f"{area:45s} {row['cases']:>5d} cases{done}", flush=True)
    if a.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
