"""A command's secrets are registered for exactly the command's lifetime (``cli.main``'s holding
scope, ``core.secret_scope.scope``): masked while it probes and while it prints, no piece of them in its
output, and no longer registered once it has ended — a second command in the same process does not
inherit them."""

from __future__ import annotations

import pytest

from wattbench.cli.main import main
from wattbench.core import scrubber, secret_scope
from wattbench.doctor import server as doctor_server

KEY = "sk-CLIscope-key/7f3Q9zX2Lp"
SIG = "sig-CLIscope-q/9a+4b2M8"


def _pieces(secret: str) -> list[str]:
    return [secret[i:i + scrubber.GRAM] for i in range(len(secret) - scrubber.GRAM + 1)]


def test_a_command_registers_its_secrets_for_its_lifetime_only(monkeypatch, capsys):
    seen: list[tuple[bool, bool]] = []
    probe = doctor_server.probe_server

    def watched(target, api_key, burst):  # the doctor's probe, as it runs: what is registered then
        seen.append((secret_scope.registered().found_in(KEY), secret_scope.registered().found_in(SIG)))
        print(f"probing with {KEY} at ?sig={SIG}")  # a probe that printed them would show nothing of them
        return probe(target, api_key, burst)

    monkeypatch.setattr(doctor_server, "probe_server", watched)
    with pytest.raises(SystemExit):
        main(["doctor", "--no-env", "--target", f"http://127.0.0.1:9/v1?sig={SIG}", "--api-key", KEY,
              "--burst", "1", "--json"])
    out, err = capsys.readouterr()
    assert seen == [(True, True)]
    assert "probing with ***" in out
    for piece in _pieces(KEY) + _pieces(SIG):
        assert piece not in out and piece not in err
    # the command ended: nothing of it stays registered for what this process runs next
    assert not secret_scope.registered().found_in(KEY) and not secret_scope.registered().found_in(SIG)
    assert secret_scope._OPEN == []
