"""The words wattbench's reports use, each said plainly in one or two sentences: the one home of
their definitions. ``wattbench report --glossary`` prints them (``glossary_lines``), the run
summary's last line points there, and ``docs/glossary.md`` is ``glossary_markdown()`` written out
(a test keeps the two the same). The full rules live in docs/accounting.md and docs/compare.md;
these are the plain words for a first reading."""

from __future__ import annotations

import textwrap

# (term, definition): in the order a summary shows them, latency first
GLOSSARY: tuple[tuple[str, str], ...] = (
    ("TTFT", "Time to first token: from sending a request to receiving its first output token. It is "
             "what a user waits before text starts to appear."),
    ("TPOT", "Time per output token: one request's time after its first token, divided by its output "
             "tokens after the first. The SLO's tpot_p99 is the 99th percentile of it over requests."),
    ("ITL", "Inter-token latency: the gap between two consecutive output tokens of a stream, over "
            "every gap of every request. Its mean is close to TPOT's; its tail shows stalls a "
            "per-request average hides."),
    ("E2E", "End-to-end latency: from sending a request to receiving its last token (AIPerf's request "
            "latency, vllm bench serve's E2EL)."),
    ("mean, p50, p99", "The average, the median and the value ninety-nine requests in a hundred stay "
                       "under. A p99 from fewer than a hundred requests is their maximum, and a note says so."),
    ("req/s", "Requests completed per second of the level's measured window."),
    ("window", "The span of a level whose requests and energy the figures count, in seconds; warm-up "
               "and drain are left out."),
    ("asked, sent", "An open loop (--rate) asks for a rate of arrivals; sent is the rate the client "
                    "actually sent. Sent well below asked means the client, not the server, set the pace."),
    ("in flight", "A closed loop (--concurrency) keeps N requests open; in flight is the mean it "
                  "achieved. Far below N means the server or client could not keep them open."),
    ("out tok/s", "Output tokens the server produced per second inside the window."),
    ("per kW", "A rate divided by the average power in kilowatts at a boundary: output tok/s per kW "
               "is tokens per second for each kilowatt drawn, the figure wattbench answers with."),
    ("J/tok, J/total", "Joules per output token: energy in the window divided by the output tokens it "
                       "produced. J/total is joules per total token: divided by input plus output tokens, "
                       "as InferenceX reports it."),
    ("goodput", "The output tokens per second of the requests that met every SLO; goodput per kW is "
                "that rate per kilowatt."),
    ("SLO", "Service-level objective: the latency limits given with --slo, such as a TTFT p99 in ms. "
            "met SLO is the share of requests within every limit."),
    ("boundary", "Where the power was metered: accelerator (the GPU board), accelerator_memory (its "
                 "HBM rail), cpu, host, node (the whole server), cluster, wall or facility. A figure "
                 "is only as wide as its boundary."),
    ("measured", "Energy read from a meter at that boundary during the window."),
    ("declared meter", "A power you stated instead of measured (a const: sensor, a spec sheet), with the "
                       "uncertainty you gave it; its figures read declared and carry that ±."),
    ("estimate", "Energy inferred from something else (CPU utilization times an assumed wattage), with "
                 "a wide stated uncertainty. An estimate is never read as a measurement."),
    ("verdict", "valid, estimate, warn or invalid for each level and the run: warn and invalid name the "
                "finding that biases which figure; every note says what to do."),
    ("steady window", "The part of the window after the warm-up transient, where throughput and power "
                      "no longer trend. compare and regress can judge it alone (--window steady)."),
    ("within noise", "Two figures differ by less than the measured run-to-run scatter can tell apart."),
    ("beyond noise", "Two figures differ by more than the scatter allows: a real difference."),
    ("inconclusive", "The scatter is unknown, rests on fewer than two degrees of freedom, or is too wide "
                     "to decide; in regress, also a check whose interval reaches past its limit (as when the noise is "
                     "wider than the limit): neither pass nor fail. The line says why and how many more trials "
                     "or runs would settle it."),
    ("drift", "A figure that moves steadily across a level's trials (a warming GPU, a filling cache). "
              "A drifting series is inconclusive, never within noise."),
    ("primed", "Before the first level, wattbench sends a priming load it does not measure, so caches "
               "and clocks are warm."),
    ("preconditioned", "With --precondition: after the priming, the same load sent again until the GPU's "
                       "temperature and the server's output tok/s stop moving over the last minute (the tok/s "
                       "alone without a temperature), or --precondition-max ends it; not measured. Not settled: "
                       "the first levels may still drift."),
    ("history check", "The first level measured again at the end: a change beyond noise means the "
                      "server's state moved during the run."),
    ("bound", "The ± within which a change counts as noise, from the measured scatter."),
    ("client saturated", "The load generator itself was short of CPU (its event loop ran late), so "
                         "its timings or its load are biased; the note names which figures."),
    ("client loop lag", "How late a short timer fired in the client's event loop: the clock error "
                        "its latency stamps may carry."),
)


def glossary_lines(width: int = 80) -> list[str]:
    """The glossary as plain text lines for a terminal ``width`` wide: each term, then its
    definition folded under it, indented."""
    out: list[str] = []
    for term, text in GLOSSARY:
        out.append(term)
        out += textwrap.wrap(text, width=max(20, width), initial_indent="    ", subsequent_indent="    ")
    return out


def glossary_markdown() -> str:
    """``docs/glossary.md``: the same definitions as a Markdown list."""
    head = ("# Glossary\n\nThe words wattbench's reports use, each in a sentence or two; "
            "`wattbench report --glossary` prints the same list. The full rules are in "
            "[accounting.md](accounting.md) and [compare.md](compare.md).\n\n")
    return head + "".join(f"- **{term}**: {text}\n" for term, text in GLOSSARY)


GLOSSARY_POINTER = "what each term means: wattbench report --glossary"
