"""The bottom layer: the vocabulary every other folder shares and nothing in wattbench lies under.

The monotonic clock (``clock``), the errors (``errors``), SIGTERM as Ctrl-C (``interrupt``), the result
schema every layer passes (``schema/``), run ids (``ids``), a level's records as a spool
(``recordset``), the contracts between the orchestrator and the load generator (``load_types``,
``target``), the secrets scrubber (``redact``), the one redirect rule every HTTP client follows
(``origin``), how a number is written for people (``numbers``) and untrusted text made safe for a
terminal (``safe_text``). Modules here import only each other and the standard library or
third-party packages.
"""
