"""Reports of run directories: terminal (rich), HTML (self-contained, interactive), CSV, Markdown.

Reports never compute figures: every number shown comes from ``result.json``. The only shaping
done here is for plots (thinning long series, sorting values for ECDFs); the per-bucket tokens/s
and in-flight series come from ``wattbench.metrics.timeline``.
"""
