"""``app.policy.selectors``: the label-selector match, Kubernetes' semantics, over plain labels."""

from __future__ import annotations

import pytest

from app.config.selectors import parse_selector
from app.policy.selectors import EVERYTHING, Requirement, Selector, from_config, matches

TEAM_A = {"team": "a", "tier": "gold"}
TEAM_B = {"team": "b"}
BARE: dict[str, str] = {}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("team=a", TEAM_A, True),
        ("team=a", TEAM_B, False),
        ("team=a", BARE, False),
        ("team!=a", TEAM_B, True),
        ("team!=a", BARE, True),  # NotIn holds when the key is absent
        ("team!=a", TEAM_A, False),
        ("team in (a,b)", TEAM_B, True),
        ("team notin (a,b)", TEAM_B, False),
        ("team notin (a,b)", BARE, True),
        ("team", TEAM_B, True),
        ("team", BARE, False),
        ("!team", BARE, True),
        ("!team", TEAM_A, False),
        ("team=a,tier in (gold,silver)", TEAM_A, True),  # every requirement must hold
        ("team=a,tier in (silver)", TEAM_A, False),
        ("team=a,!legacy", {**TEAM_A, "legacy": ""}, False),  # an empty value is still set
        ("team=", {"team": ""}, True),
        ("team=", BARE, False),
        ("a=1,a=2", {"a": "1"}, False),
    ],
)
def test_matches(selector: str, labels: dict[str, str], expected: bool) -> None:
    compiled = from_config(parse_selector(selector))
    assert compiled is not None
    assert matches(compiled, labels) is expected
    assert compiled.matches(labels) is expected


def test_the_empty_selector_matches_every_readable_set_of_labels() -> None:
    assert matches(EVERYTHING, BARE) and matches(EVERYTHING, TEAM_A)
    from_empty = from_config(parse_selector("team").model_copy(update={"match_expressions": []}))
    assert from_empty == EVERYTHING


def test_unreadable_labels_match_nothing() -> None:
    """None: a namespace whose labels runway would not keep (too many): refused, even by ``{}``
    and by a selector an empty set of labels would meet."""
    assert not matches(EVERYTHING, None)
    only_absent = from_config(parse_selector("!legacy"))
    assert only_absent is not None and matches(only_absent, BARE)
    assert not matches(only_absent, None)


def test_unset_stays_unset_and_the_text_is_kept_for_people() -> None:
    assert from_config(None) is None
    compiled = from_config(parse_selector("team=a, tier in (silver,gold)"))
    assert compiled == Selector(
        (
            Requirement("team", "In", frozenset({"a"})),
            Requirement("tier", "In", frozenset({"gold", "silver"})),
        ),
        "team=a,tier in (gold,silver)",
    )


def test_an_unknown_operator_never_matches() -> None:
    assert not Requirement("team", "Gt", frozenset({"1"})).holds({"team": "2"})
