from wattbench.analysis.pareto import frontier_from_levels, is_dominated, pareto_frontier
from wattbench.core.schema import LevelResult


def test_frontier_points_and_order():
    pts = [("c1", 100, 10), ("c2", 180, 12), ("c4", 170, 15), ("c8", 300, 20), ("c16", 310, 45),
           ("c32", 290, 90), ("c64", 310, 50), ("bad", None, 5)]
    f = pareto_frontier(pts)
    assert [p.label for p in f] == ["c1", "c2", "c8", "c16"]
    for p in pts:
        if p[1] is None:
            continue
        on = p[0] in {q.label for q in f}
        assert on == (not is_dominated(p, [q for q in pts if q is not p and q[1] is not None]))


def test_ties():
    f = pareto_frontier([("a", 100, 10), ("b", 100, 10), ("c", 100, 12)])
    assert [p.label for p in f] == ["a"]


def test_from_levels():
    levels = []
    for c, eff, tpot, gp in [(1, 1000, 20, 900), (8, 3000, 25, 2900), (32, 3200, 60, 1000), (64, 3100, 80, None)]:
        lv = {"index": len(levels), "label": f"concurrency={c}", "energy": {"accelerator": {"boundary": "accelerator", "method": "counter",
                                                                                 "output_tokens_per_s_per_kw": eff}},
              "latency": {"tpot_ms": {"p99": tpot, "p50": tpot / 2}}}
        if gp is not None:
            lv["goodput"] = {"per_kw": {"accelerator": {"output_tokens_per_s_per_kw": gp}}}
        levels.append(LevelResult.model_validate(lv))
    d = frontier_from_levels(levels)
    assert [p["label"] for p in d["frontier"]] == ["concurrency=1", "concurrency=8", "concurrency=32"]
    assert d["latency"] == "tpot_ms.p99" and d["excluded"] == []
    g = frontier_from_levels(levels, efficiency="goodput_per_kw", latency="tpot_ms", stat="p50")
    assert [p["label"] for p in g["frontier"]] == ["concurrency=1", "concurrency=8"]
    assert g["excluded"] == ["concurrency=64"]
