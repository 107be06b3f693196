"""Label selectors in the config: the ``LabelSelector`` object (a queue's ``namespaceSelector``)
and the ``kubectl -l`` string (a KAI Queue's ``runway.dev/namespace-selector``), both strict,
with errors that name the field (or the column) and the value."""

from __future__ import annotations

from typing import Any

import pytest

from app.config import ConfigError, parse_config
from app.config.selectors import parse_selector


@pytest.mark.parametrize(
    ("text", "requirements", "canonical"),
    [
        ("team=a", [("team", "In", ["a"])], "team=a"),
        ("team==a", [("team", "In", ["a"])], "team=a"),
        ("team!=a", [("team", "NotIn", ["a"])], "team!=a"),
        ("team", [("team", "Exists", [])], "team"),
        ("!legacy", [("legacy", "DoesNotExist", [])], "!legacy"),
        ("team=", [("team", "In", [""])], "team="),  # the empty value, as Kubernetes reads it
        (
            "tier in (gold,silver)",
            [("tier", "In", ["gold", "silver"])],
            "tier in (gold,silver)",
        ),
        ("tier notin (x)", [("tier", "NotIn", ["x"])], "tier!=x"),
        (
            " team = a , tier in ( gold , silver ) , ! legacy ",
            [
                ("team", "In", ["a"]),
                ("tier", "In", ["gold", "silver"]),
                ("legacy", "DoesNotExist", []),
            ],
            "team=a,tier in (gold,silver),!legacy",
        ),
        (
            "example.com/team=a,kubernetes.io/metadata.name in (ns-1,ns_2.x)",
            [
                ("example.com/team", "In", ["a"]),
                ("kubernetes.io/metadata.name", "In", ["ns-1", "ns_2.x"]),
            ],
            "example.com/team=a,kubernetes.io/metadata.name in (ns-1,ns_2.x)",
        ),
        ("a=1,a=2", [("a", "In", ["1"]), ("a", "In", ["2"])], "a=1,a=2"),  # ANDed: no match
    ],
)
def test_the_string_form(
    text: str, requirements: list[tuple[str, str, list[str]]], canonical: str
) -> None:
    selector = parse_selector(text)
    assert [(r.key, r.operator, r.values) for r in selector.match_expressions] == requirements
    assert str(selector) == canonical
    assert parse_selector(canonical) == selector  # the canonical form reads back the same


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty selector (it would match every namespace)"),
        ("   ", "empty selector"),
        ("team in ()", "'in' needs at least one value (column 10)"),
        ("team in (a", "unexpected end of selector at column 11"),
        ("team in a", "expected '(' after 'in' at column 9, found 'a'"),
        ("team in (a b)", "expected ',' or ')' at column 12, found 'b'"),
        ("team in (a,,b)", "expected a value at column 12, found ','"),
        ("team > 3", "operator '>' at column 6 is for node selectors, not label selectors"),
        ("team < 3", "operator '<' at column 6 is for node selectors"),
        ("team=a b", "expected ',' at column 8, found 'b'"),
        ("team=a,", "unexpected end of selector at column 8"),
        (",team=a", "expected a label key at column 1, found ','"),
        ("!", "unexpected end of selector at column 2"),
        ("!=a", "expected a label key at column 1, found '!='"),
        ("!team=a", "expected ',' at column 6, found '='"),
        ("team=(a)", "expected a value at column 6, found '('"),
        ("team a", "expected an operator (=, ==, !=, in, notin) after key 'team' at column 6"),
        ("Team A=x", "expected an operator"),
        ("team_=a", "label key 'team_': the name must be 1-63 characters"),
        ("Example.com/team=a", "label key 'Example.com/team': the prefix must be a DNS subdomain"),
        ("/team=a", "label key '/team' has an empty prefix before '/'"),
        ("example.com/=a", "label key 'example.com/': the name must be"),
        ("team=a/b", "label value 'a/b': at most 63 characters"),
        ("team=" + "x" * 64, "label value 'xxxx"),
        ("t" * 64 + "=a", "the name must be 1-63 characters"),
    ],
)
def test_bad_strings_say_what_and_where(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_selector(text)
    assert message in str(info.value)


def test_a_long_offending_value_is_shortened_in_the_message() -> None:
    with pytest.raises(ValueError) as info:
        parse_selector("team=" + "x" * 5000)
    assert len(str(info.value)) < 300


def queue_with(selector: Any) -> dict[str, Any]:
    return {"queues": [{"name": "q", "namespaceSelector": selector}]}


@pytest.mark.parametrize(
    ("selector", "canonical"),
    [
        ({}, ""),  # matches every namespace
        ({"matchLabels": {"team": "a"}}, "team=a"),
        (
            {
                "matchLabels": {"team": "a"},
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
                    {"key": "legacy", "operator": "DoesNotExist"},
                    {"key": "env", "operator": "NotIn", "values": ["dev"]},
                    {"key": "owner", "operator": "Exists", "values": []},
                ],
            },
            "team=a,tier in (gold,silver),!legacy,env!=dev,owner",
        ),
    ],
)
def test_the_object_form(selector: dict[str, Any], canonical: str) -> None:
    queue = parse_config(queue_with(selector)).queues[0]
    assert queue.namespace_selector is not None
    assert str(queue.namespace_selector) == canonical


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (
            {"matchLabels": {"Team A": "x"}},
            "queues[0].namespaceSelector.matchLabels: label key 'Team A': the name must be",
        ),
        (
            {"matchLabels": {"team": "a b"}},
            "queues[0].namespaceSelector.matchLabels: label value 'a b': at most 63 characters",
        ),
        (
            {"matchExpressions": [{"key": "t", "operator": "Equals", "values": ["a"]}]},
            "queues[0].namespaceSelector.matchExpressions[0].operator: Input should be 'In', "
            "'NotIn', 'Exists' or 'DoesNotExist' (got 'Equals')",
        ),
        (
            {"matchExpressions": [{"key": "t", "operator": "In"}]},
            "queues[0].namespaceSelector.matchExpressions[0]: operator 'In' (key 't') needs at "
            "least one value",
        ),
        (
            {"matchExpressions": [{"key": "t", "operator": "Exists", "values": ["a"]}]},
            "queues[0].namespaceSelector.matchExpressions[0]: operator 'Exists' (key 't') takes "
            "no values, got ['a']",
        ),
        (
            {"matchExpressions": [{"key": "t/", "operator": "Exists"}]},
            "queues[0].namespaceSelector.matchExpressions[0].key: label key 't/': the name "
            "must be 1-63 characters",
        ),
        (
            {"matchExpressions": [{"key": "t", "operator": "In", "values": ["a/b"]}]},
            "queues[0].namespaceSelector.matchExpressions[0].values: label value 'a/b'",
        ),
        ({"matchLabel": {}}, "queues[0].namespaceSelector.matchLabel: unknown field; did you mean"),
        (
            "team=a",
            "queues[0].namespaceSelector: a LabelSelector object, e.g. {matchLabels: {team: a}}",
        ),
        ("team=a", "(got 'team=a')"),
    ],
)
def test_bad_objects_name_the_field_and_the_value(selector: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(queue_with(selector), "runway.yaml")
    assert f"runway.yaml: {expected}" in str(info.value) or expected in str(info.value)
    assert "runway.yaml: queues[0].namespaceSelector" in str(info.value)
