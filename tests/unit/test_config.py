"""RunConfig validation (src/wattbench/config/run.py): every bad value is refused with a message naming
the flag, before anything runs; the levels, request fields and the public (secret-free) form."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from wattbench.config.run import RunConfig


@pytest.mark.parametrize("kw,msg", [
    ({"concurrency": [4, 0]}, "--concurrency must be >= 1, got 0"),
    ({"rate": [2.0, -1.0]}, "--rate must be > 0 requests/s, got -1"),
    ({"rate": [math.nan]}, "--rate must be a finite number > 0 requests/s, got nan"),
    ({"pue": 0.9}, "--pue must be >= 1, got 0.9"),
    ({"pue": math.nan}, "--pue must be a finite number"),
    ({"pue": math.inf}, "--pue must be a finite number"),
    ({"request_timeout_s": 0}, "--request-timeout must be > 0 and <= 31622400 seconds, got 0"),
    ({"request_timeout_s": math.inf}, "--request-timeout must be a finite number"),
    ({"stall_timeout_s": -5}, "--stall-timeout must be > 0 and <= 31622400 seconds, got -5"),
    ({"temperature": -0.1}, "--temperature must be >= 0"),
    ({"top_p": 1.5}, "--top-p must be > 0 and <= 1, got 1.5"),
    ({"top_p": 0.0}, "--top-p must be > 0 and <= 1, got 0"),
    ({"trials": 0}, "--trials must be >= 1, got 0"),
    ({"arrival": "weibull"}, "arrival"),
    ({"workers": 0}, "--workers must be >= 1, got 0"),
    ({"ray_actors": 0}, "--ray-actors must be >= 1"),
    ({"max_concurrency": 0}, "--max-concurrency must be >= 1"),
    ({"warmup_requests": -1}, "--warmup must be >= 0, got -1"),
    ({"sample_interval_s": 0}, "--sample-interval must be > 0"),
    ({"sample_interval_s": math.nan}, "--sample-interval must be a finite number > 0"),
    ({"speedup": -2}, "--speedup must be > 0"),
    ({"idle_s": -1}, "--idle must be >= 0 and <= 31622400 seconds, got -1"),
    ({"idle_s": 1e300}, "--idle must be >= 0 and <= 31622400 seconds, got 1e[+]300"),
    ({"idle_after_s": math.nan}, "--idle-after must be a finite number >= 0"),
    ({"idle_after_s": math.inf}, "--idle-after must be a finite number >= 0"),
    ({"seed": -1}, "--seed must be >= 0 and <= 4294967295, got -1"),
    ({"seed": 2**32}, "--seed must be >= 0 and <= 4294967295"),
    ({"cooldown_s": -0.5}, "--cooldown must be >= 0"),
    ({"price_per_kwh": -0.1}, "--price-per-kwh must be >= 0"),
    ({"warmup_s": -1}, "--warmup must be >= 0"),
    ({"concurrency": [1], "rate": [2.0]}, "give --concurrency or --rate, not both"),
    ({"num_requests": 0}, "--num-requests must be >= 1"),
    ({"duration_s": 0}, "--duration must be > 0 and <= 31622400 seconds, got 0"),
    ({"duration_s": math.inf}, "--duration must be a finite number"),
    ({"rate": [math.inf]}, "--rate inf sends every request at once"),
    ({"no_such_option": 1}, "no_such_option"),  # extra="forbid": a typo is not silently ignored
])
def test_bad_values_are_refused_naming_the_flag(kw, msg):
    with pytest.raises(ValidationError, match=msg):
        RunConfig(**kw)


@pytest.mark.parametrize("kw", [
    {"warmup_requests": 0}, {"idle_s": 0}, {"top_p": 1.0}, {"temperature": 0.0}, {"pue": 1.0},
    {"rate": [math.inf], "num_requests": 10}, {"arrival": "gamma:2"}, {"arrival": "constant"},
])
def test_edge_values_are_accepted(kw):
    """Each value on the edge of its allowed range is kept as given (not refused, not clamped)."""
    c = RunConfig(**kw)
    for name, value in kw.items():
        assert getattr(c, name) == value, (name, getattr(c, name))


def test_levels_in_run_order():
    assert RunConfig().levels() == [("concurrency", 1), ("concurrency", 8)]  # embedded engine: two levels
    assert RunConfig(target="http://h:8000").levels() == [("concurrency", 1)]
    assert RunConfig(targets=["http://a:1", "http://b:1"]).levels() == [("concurrency", 1)]
    assert RunConfig(concurrency=[16, 2]).levels() == [("concurrency", 16), ("concurrency", 2)]
    assert RunConfig(rate=[0.5, 4.0]).levels() == [("rate", 0.5), ("rate", 4.0)]


def test_request_fields_sampling_flags_win_over_extra_body():
    c = RunConfig(extra_body={"temperature": 0.7, "ignore_eos": True}, temperature=0.2)
    assert c.request_fields() == pytest.approx({"temperature": 0.2, "ignore_eos": True}, rel=1e-9)
    c = RunConfig(extra_body={"top_p": 0.5}, top_p=0.9)
    assert c.request_fields() == pytest.approx({"top_p": 0.9}, rel=1e-9)
    assert RunConfig().request_fields() == {}
    assert c.extra_body == pytest.approx({"top_p": 0.5}, rel=1e-9)  # the config itself is not changed


def test_public_dict_carries_no_secret():
    c = RunConfig(target="http://user:s3cretpw@h:8000/v1", targets=["http://u2:pw2pw2@b:1"],
                  api_key="sk-verysecret", headers={"Authorization": "Bearer tok-123456", "X-Team": "blue"})
    d = c.public_dict()
    text = repr(d)
    for secret in ("s3cretpw", "pw2pw2", "sk-verysecret", "tok-123456"):
        assert secret not in text
    assert "api_key" not in d
    assert d["target"] == "http://***@h:8000/v1" and d["targets"] == ["http://***@b:1"]
    assert d["headers"]["X-Team"] == "blue" and d["headers"]["Authorization"] != "Bearer tok-123456"
    assert c.api_key.get_secret_value() == "sk-verysecret"  # still usable in memory


# ---------------------------------------------------------------- wattbench ab: the two sides


def test_ab_sides_parse_into_a_url_or_an_engine_launch():
    from wattbench.config.run import RunConfig
    from wattbench.config.run_commands import AbConfig, AbSide

    assert AbSide.parse("http://h:8000", "A").url == "http://h:8000"
    e = AbSide.parse("engine:--cb-max-batch-tokens 8192 --cb-use-cuda-graph", "A")
    assert e.launched and e.engine_args == ("--cb-max-batch-tokens", "8192", "--cb-use-cuda-graph") and not e.own_defaults
    d = AbSide.parse("engine-defaults", "B")
    assert d.launched and d.engine_args == () and d.own_defaults
    cfg = AbConfig(side_a="http://h:1", side_b="engine:--x 1", run=RunConfig(model="tiny", engine_args=["--y"],
                                                                             out="/tmp/o", concurrency=[2]))
    a, b = cfg.side_config("A"), cfg.side_config("B")
    assert (a.target, a.model, a.out, a.trials, a.history_check) == ("http://h:1", "tiny", "/tmp/o/A", 4, False)
    assert (b.target, b.engine_model, b.engine_args, b.out) == (None, "tiny", ["--y", "--x", "1"], "/tmp/o/B")
    assert AbConfig(side_a="http://h:1", side_b="http://h:2", precision_pct=2, max_pairs=10).side_config("A").trials == 10


@pytest.mark.parametrize("a,b,words", [
    ("http://h:1/v1", "http://h:1", "the same server"),
    ("ftp-less-text", "http://h:1", "neither a URL"),
    ("  ", "http://h:1", "side A is empty"),
    ("engine:--a 'unclosed", "http://h:1", "do not parse"),
])
def test_ab_sides_refused_in_one_line(a, b, words):
    from wattbench.config.run_commands import AbConfig
    from wattbench.core.errors import UserError

    with pytest.raises((UserError, ValidationError), match=words):
        AbConfig(side_a=a, side_b=b)
