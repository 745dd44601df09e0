"""Readers of other load generators' result files, for ``wattbench measure -- COMMAND``.

One module per tool format — ``vllm_bench`` (``vllm bench serve --save-result --save-detailed``),
``aiperf`` (``profile_export.jsonl``), ``guidellm`` (``benchmarks.json``), ``wattbench_run`` (a
wrapped ``wattbench run``'s run directory) — each turning the tool's
files into a ``base.ToolRun`` (per-request stamps on the tool's clock, token counts, the tool's own
figures, what is not read). ``base.place_on_run_clock`` puts the stamps on the run's clock;
``markers`` reads ``--window-from`` files. This package knows the files, not the meters: the run
(``run/measure.py``) accounts the levels as it accounts its own.

``registry`` says which tool a command line is, which server it names, what it must be given,
where its result files are and which reader reads them.
"""

