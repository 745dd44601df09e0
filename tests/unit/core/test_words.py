"""``WordEnum`` reads as its word on every Python: the result files, the history DB and every
sentence that formats a severity or a finding kind hold ``warn``, never ``Severity.WARN``."""

from __future__ import annotations

import json

from wattbench.core.schema.kinds import FindingKind
from wattbench.core.severity import Severity
from wattbench.core.words import WordEnum


class Colour(WordEnum):
    RED = "red"


def test_a_member_prints_formats_and_compares_as_its_word():
    assert str(Colour.RED) == "red"
    assert f"{Colour.RED}" == "red"
    assert f"{Colour.RED:>5}|" == "  red|"
    assert "%s" % Colour.RED == "red"
    assert Colour.RED == "red" and Colour("red") is Colour.RED
    assert {"red": 1}[Colour.RED] == 1
    assert json.dumps({"c": Colour.RED}) == '{"c": "red"}'


def test_the_project_enums_are_words():
    assert f"{Severity.WARN}" == "warn" and str(Severity.INVALID) == "invalid"
    kind = next(iter(FindingKind))
    assert str(kind) == kind.value and f"{kind}" == kind.value
