"""What several commands share, declared once: the options more than one command takes, each one
``Annotated`` field type with its default and help (``SensorSpecs``, ``ApiKeyFile``, ``HistoryDb``,
``Pue``, ``Currency``, ``Boundary``, ``AsJson``, ``ServerApiKey``), the wording of their help, and
the rules of a name a user gives (``name_problem``: a tag or baseline; ``config_label_problem``: a
``--config-label``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr

from wattbench.config.flags import EVERY, MEASURE, RUN, TUNE, Domain, Flag

# One wording for the flags every command shares (the same flag for the same thing): the fields'
# help, and the other commands' options models (history, doctor, monitor …) use them too.
DB_HELP = "History database (default: $WATTBENCH_DB or the user data directory's history.sqlite3)."
API_KEY_HELP = ("API key, sent to the target only and never written to a file or shown. Given here it is visible to "
                "other users of this machine (ps, /proc/PID/cmdline): prefer --api-key-file PATH or the environment "
                "(WATTBENCH_API_KEY / OPENAI_API_KEY).")
REGISTER_HELP = "Add the run to the history store (default) or not."
SENSOR_HELP = "Sensor spec, repeatable (nvml, rapl, ipmi, const:node=700, …). Default: auto-detect."
API_KEY_ENV = ["WATTBENCH_API_KEY", "OPENAI_API_KEY"]  # where a key not given on the command line is read

# Options several commands share, declared once: the commands of one-command models (``sensors``,
# ``history list`` …) take ``run``'s ``--sensor``, ``--api-key-file`` and ``--db`` (such a model
# takes each field it declares, ``cli.options.command_options``).
SensorSpecs = Annotated[list[str], Field(default_factory=list), Flag(
    "--sensor", "-s", commands=(RUN, MEASURE, TUNE), help=SENSOR_HELP,
    help_in={"doctor": "A sensor spec to check (repeatable); default: autodetect."})]
API_KEY_FILE_HELP = "Read the API key from the first line of PATH (recommended: unlike --api-key, not visible in ps)."
ApiKeyFile = Annotated[str | None, Field(default=None), Flag(
    "--api-key-file", commands=(RUN, MEASURE), help=API_KEY_FILE_HELP, show_default=False, beside="api_key")]
HistoryDb = Annotated[str | None, Field(default=None), Flag("--db", commands=(RUN, MEASURE, TUNE), help=DB_HELP)]
# a run's facility figure and cost, and plan tco's, read the same two options (the default is
# written at each field, from these: mypy's pydantic plugin reads no default inside ``Annotated``)
DEFAULT_PUE, DEFAULT_CURRENCY = 1.0, "USD"
Pue = Annotated[float, Flag("--pue", commands=(RUN, MEASURE), domain=Domain(lo=1.0, lo_open=False), help=(
    "Power usage effectiveness: facility power / IT power (>= 1; it includes the cooling energy)."))]
Currency = Annotated[str, Flag("--currency", commands=(RUN, MEASURE), help="Currency label of every cost.")]
PLAN_BOUNDARY_HELP = ("Power boundary: accelerator, node or wall (default: the run's headline boundary among those, "
                      "the one rule of run, compare, tune and plan).")
Boundary = Annotated[str | None, Field(default=None), Flag(  # None = the headline boundary (results.headline)
    "--boundary", commands=(TUNE,), help=PLAN_BOUNDARY_HELP,
    help_in={TUNE: "Power boundary of the score (default: the headline boundary, as run and plan use).",
             "compare": "Power boundary for the ratios (default: the headline boundary every run has, never a part "
                        "such as the HBM rail).",
             "regress": "Power boundary for energy checks."})]


def name_problem(name: str, what: str) -> str | None:
    """Why ``name`` cannot be a tag or baseline name (one line), or None: non-empty, no whitespace, no '/'."""
    if not name or not name.strip() or any(ch.isspace() for ch in name) or "/" in name:
        return f"{what} {name!r} must be non-empty without spaces or '/'"
    return None


MAX_CONFIG_LABEL = 64  # characters


def config_label_problem(label: str | None) -> str | None:
    """One line naming what is wrong with a ``--config-label`` (None: fine, or none given): it is
    1..``MAX_CONFIG_LABEL`` printable characters, not only spaces, with no space at either end (it
    is shown in ``history list`` and compared as given)."""
    if label is None:
        return None
    if not label.strip():
        return "--config-label must not be empty: name what differs, e.g. --config-label bios-perf"
    if label != label.strip():
        return f"--config-label {label.strip()!r}: leave out the spaces around it"
    if not label.isprintable():
        return "--config-label holds a control character; give printable text, e.g. --config-label driver-580"
    if len(label) > MAX_CONFIG_LABEL:
        return f"--config-label is {len(label)} characters; give at most {MAX_CONFIG_LABEL}"
    return None


# The flags the one-command models share (``Flag`` with ``commands=EVERY``: the command whose model
# declares the field), each one ``Annotated`` type with its default inside (``Field(default=…)``).

JSON_HELP = "Print JSON."
AsJson = Annotated[bool, Field(default=False), Flag(
    "--json", commands=EVERY, help=JSON_HELP,
    help_in={"monitor": "Print the final summary as JSON.", "doctor": "Print the report as JSON.",
             "sensors": "Print the inventory as JSON.",
             "agree": "Print JSON (metrics, without per-prompt rows).",
             "report": "Print the written files and level headlines as JSON."})]

# the API key of monitor and doctor (the environment's when not given)
ServerApiKey = Annotated[SecretStr | None, Field(default=None), Flag(
    "--api-key", commands=EVERY, help=API_KEY_HELP, envvar=tuple(API_KEY_ENV))]
