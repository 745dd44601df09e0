"""``wattbench monitor``: passive production efficiency of a running server.

``Monitor`` scrapes the server's token counters (``/metrics``) every ``interval_s`` and reads the
power sensors continuously (the sampler thread, writing into a bounded log), and turns both into
live tokens/s, J/token and tokens per kWh per boundary over sliding windows and cumulatively, with
idle vs loaded segmentation (``tracker.EfficiencyTracker``). It serves Prometheus metrics
(``exporter``), appends a JSONL history (``history``), and never dies from one bad scrape or
sensor read: failures are counted, the last error kept, and the source retried with capped
exponential backoff (``sources``). Memory stays flat however long it runs.

The package exports nothing; ``service.Monitor`` is the loop. Library use::

    from wattbench.monitor.service import Monitor

    with Monitor("http://127.0.0.1:8000", ["nvml"], listen="127.0.0.1:9464") as m:
        summary = m.run(duration_s=3600)
"""
