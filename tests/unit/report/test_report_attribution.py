"""report/attribution.py: the prefill/decode split is shown as stored, an unreliable one as such."""

from tests.fakes.results_factory import make_level, make_result
from wattbench.accounting.attribution import fit_prefill_decode
from wattbench.report.attribution import prefill_decode_lines
from wattbench.core.schema import PrefillDecode


def test_unreliable_split_is_shown_with_reasons_never_bare_numbers():
    r = make_result("r", levels=[make_level(0)])
    P = [float(x) for x in range(0, 100, 10)]
    D = [50.0, 40.0, 60.0, 55.0, 45.0, 52.0, 48.0, 58.0, 42.0, 50.0]
    E = [10.0 + (7 if i % 2 else -7) for i in range(10)]  # energy unrelated to the counts
    fit = fit_prefill_decode(E, P, D, fit_idle=False)
    assert fit["status"] == "unreliable"
    r.prefill_decode = PrefillDecode(**{"regression": {**fit, "boundary": "accelerator"},
                                 "isolating_pair": {"error": "the concurrency=8 decode-heavy level has no energy "
                                                             "to split (no completed request in the window)"}})
    lines = prefill_decode_lines(r)
    assert lines[0].startswith("prefill/decode split (accelerator): unreliable: ")
    assert "intervals)" not in lines[0]  # not the figures line
    assert "; ".join(fit["reasons"]) in lines[0]
    assert lines[1] == ("isolating pair: not solved: the concurrency=8 decode-heavy level has no energy to split "
                        "(no completed request in the window)")


def test_reliable_split_shows_its_figures():
    r = make_result("r", levels=[make_level(0)])
    P = [float((i * 37) % 100) for i in range(20)]
    D = [float(20 + (i * 13) % 50) for i in range(20)]
    E = [0.01 * p + 0.3 * d for p, d in zip(P, D)]
    fit = fit_prefill_decode(E, P, D, fit_idle=False)
    r.prefill_decode = PrefillDecode(**{"regression": {**fit, "boundary": "node", "token_source": "client timing"}})
    (line,) = prefill_decode_lines(r)
    assert line.startswith("prefill/decode split (node, client timing): 0.010 J per prefill token, 0.30 J per decode")
