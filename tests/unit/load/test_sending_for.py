"""``load.client.sending_for``: a process that sends a target's requests for another (a spawned load
worker, a Ray load actor) takes the target's query string and secrets from the ``TargetSpec`` alone."""

from __future__ import annotations

from wattbench.core import origin, scrubber, secret_scope
from wattbench.core.target import TargetSpec
from wattbench.load.client import sending_for

SIG = "SIG-q/9a+Zt81secret"
QUERY = "api-version=2024-06-01&sig=SIG-q%2F9a%2BZt81secret"


def test_a_sending_process_adopts_the_targets_query_and_its_secrets(monkeypatch):
    monkeypatch.setattr(secret_scope, "_REGISTERED", scrubber.Scrubber())  # a fresh process: nothing registered
    origin.forget_queries()
    t = TargetSpec(base_url="http://h:1/openai/v1", model="m", query=QUERY)
    plain = TargetSpec(base_url="http://other:2/v1", model="m")
    # the query's values but the harmless ones are the target's secrets (its client scrubs them), raw and decoded
    assert {SIG, "SIG-q%2F9a%2BZt81secret"} <= set(t.secrets()) and "2024-06-01" not in t.secrets()
    assert "Zt81" not in repr(t) and plain.secrets() == []
    with sending_for([t, plain]):
        # every request to the target's origin carries the query (any path: a same-origin hop too) …
        assert origin.with_query("http://h:1/openai/v1/completions") == f"http://h:1/openai/v1/completions?{QUERY}"
        assert origin.with_query("http://h:1/moved") == f"http://h:1/moved?{QUERY}"
        # … and no request to another origin does
        assert origin.with_query("http://other:2/v1/completions") == "http://other:2/v1/completions"
        assert origin.with_query("http://h:3/v1/completions") == "http://h:3/v1/completions"
        # what this process writes or prints meanwhile is scrubbed of it, decoded or not, whole or a piece
        assert secret_scope.scrub(f"refused {QUERY} ({SIG[2:12]})") == "refused api-version=2024-06-01&sig=*** (***)"
        assert origin.target_query("http://h:1/x") == QUERY and origin.target_query("http://other:2/x") == ""
    # registered and sent while the block ran, only then: a Ray load actor's next run, or this
    # process's next level, keeps nothing of it
    assert not secret_scope.registered().found_in(SIG)
    assert origin.target_query("http://h:1/x") == "" and origin.held_queries() == 0
    assert origin.with_query("http://h:1/openai/v1/completions") == "http://h:1/openai/v1/completions"
