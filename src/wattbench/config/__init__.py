"""Run configuration: what the CLI validates its flags into and what the library runs.

Secrets (API keys, BMC passwords) are never fields here: they are read from the environment or
passed as ``SecretStr`` and excluded from every dump written to disk.

Every option of ``run``, ``measure`` and ``tune`` is declared once, on the configuration field it
sets: the field's type is annotated with a ``Flag`` (``Annotated[float, Flag("--idle", help=...)]``)
naming the option, its short alias, its help, the commands that take it and the numbers it takes
(``Flag.domain``). The field's default is the option's default. ``cli/options.py`` generates each
command's typer options from these fields, and the tables the command line is checked against
(``FLAG_DOMAINS``, ``COMMAND_FLAG_DOMAINS``, ``EMPTY_TEXT_OK``) are generated from them
(``tables.py``); the models check their own numbers against the same ``Flag.domain`` (a notebook
gets the CLI's rule). A field without a ``Flag`` is not an option.

Each other command's options are one model (``PlanTcoOptions`` for ``plan tco``), its fields in the
order the command's ``--help`` lists them, each field's ``Flag`` with ``commands=EVERY`` (the command
whose model it is). A flag several commands take (``--db``, ``--json``, ``--boundary``) is one
``Annotated`` type, with its default inside (``Field(default=…)``), declared once (``shared.py``).

One module each, read ``flags.py`` first: ``flags`` (``Flag``, ``Domain``, ``FlaggedConfig``, the
command names), ``shared`` (the options several commands share, the rules of a name), ``run``
(``RunConfig``), ``run_commands`` (``MeasureConfig``, ``TuneConfig``, ``AbConfig``: the commands that
hold a ``RunConfig``), ``plan``, ``history`` and ``commands`` (every other command's options model),
``tables`` (the tables generated from every model's flags). Names are imported from the module that
defines them (``from wattbench.config.run import RunConfig``).
"""
