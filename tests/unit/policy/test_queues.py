"""The queue tree: KAI's hierarchy-path cases, lowest common ancestor, unknown queues."""

from __future__ import annotations

import itertools
from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config import parse_config
from app.policy.queues import QueueNode, QueueTree
from tests.builders import forests, queue_names, tree_of
from tests.reference import upstream_cases

PATH_CASES = upstream_cases("kai.queue.hierarchy_path")


@pytest.mark.parametrize("case", PATH_CASES, ids=[c["source"]["case"] for c in PATH_CASES])
def test_kai_hierarchy_path(case: dict[str, Any]) -> None:
    tree = tree_of(case["input"]["queues"])
    assert list(tree.hierarchy_path(case["input"]["queue"])) == case["expected"]["path"]


STANDARD = tree_of(PATH_CASES[0]["input"]["queues"])  # dev, prod, research and their teams


def test_parent_children_roots_and_leaves() -> None:
    assert STANDARD.parent("dev-team1") == "dev"
    assert STANDARD.parent("dev") is None
    assert STANDARD.children("dev") == ("dev-team1", "dev-team2")
    assert STANDARD.roots() == ("dev", "prod", "research")
    assert STANDARD.is_leaf("dev-team1") and not STANDARD.is_leaf("dev")
    assert STANDARD.path_to_root("prod-team2") == ("prod-team2", "prod")
    assert STANDARD.top_level("prod-team2") == "prod"
    assert len(STANDARD) == 8 and "research-project" in STANDARD


def test_lowest_common_ancestor() -> None:
    assert STANDARD.lowest_common_ancestor("dev-team1", "dev-team2") == "dev"
    assert STANDARD.lowest_common_ancestor("dev-team1", "dev-team1") == "dev-team1"
    assert STANDARD.lowest_common_ancestor("dev", "dev-team2") == "dev"
    assert STANDARD.lowest_common_ancestor("dev-team1", "prod-team2") is None


def test_unknown_queue_is_a_top_level_queue_with_no_settings() -> None:
    assert not STANDARD.is_known("ghost")
    assert STANDARD.node("ghost") == QueueNode("ghost")
    assert STANDARD.parent("ghost") is None
    assert STANDARD.path_to_root("ghost") == ("ghost",)
    assert STANDARD.lowest_common_ancestor("ghost", "dev") is None
    assert STANDARD.lowest_common_ancestor("ghost", "ghost") == "ghost"


def test_kai_empty_parent_is_top_level() -> None:
    tree = QueueTree.from_nodes([QueueNode("a", parent=""), QueueNode("b", parent="a")])
    assert tree.parent("a") is None and tree.roots() == ("a",)
    assert tree.hierarchy_path("b") == ("a", "b")


def test_duplicate_name_is_refused() -> None:
    with pytest.raises(ValueError, match="duplicate queue name 'a'"):
        QueueTree.from_nodes([QueueNode("a"), QueueNode("a")])


def test_a_hand_built_cycle_cannot_hang_a_walk() -> None:
    # The config refuses cycles; the tree still bounds its walks.
    tree = QueueTree.from_nodes([QueueNode("a", parent="b"), QueueNode("b", parent="a")])
    assert tree.path_to_root("a") == ("a", "b")
    assert tree.lowest_common_ancestor("a", "b") == "a"


def test_tree_is_immutable() -> None:
    with pytest.raises(FrozenInstanceError):
        STANDARD._nodes = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        STANDARD._nodes["x"] = QueueNode("x")  # type: ignore[index]


def test_from_config_keeps_settings_and_strategy() -> None:
    config = parse_config(
        {
            "queues": [
                {"name": "root", "reclaimMinRuntime": "10m"},
                {
                    "name": "leaf",
                    "parentQueue": "root",
                    "preemptMinRuntime": "0s",
                    "queueingStrategy": "StrictFIFO",
                },
            ]
        }
    )
    tree = QueueTree.from_config(config.queues)
    assert tree.node("root") == QueueNode("root", None, None, 600.0)
    assert tree.node("leaf") == QueueNode("leaf", "root", 0.0, None, "StrictFIFO")


def test_empty_tree() -> None:
    tree = QueueTree()
    assert len(tree) == 0 and tree.roots() == ()
    assert tree.path_to_root("default") == ("default",)


@given(st.data(), forests())
def test_paths_start_at_the_queue_and_end_at_a_root(data: st.DataObject, tree: QueueTree) -> None:
    name = data.draw(queue_names(tree))
    up = tree.path_to_root(name)
    assert up[0] == name
    assert tree.parent(up[-1]) is None
    for child, parent in itertools.pairwise(up):
        assert tree.parent(child) == parent
    assert tree.hierarchy_path(name) == up[::-1]
    assert len(set(up)) == len(up)


@given(st.data(), forests())
def test_lca_is_the_deepest_shared_ancestor(data: st.DataObject, tree: QueueTree) -> None:
    a, b = data.draw(queue_names(tree)), data.draw(queue_names(tree))
    lca = tree.lowest_common_ancestor(a, b)
    assert lca == tree.lowest_common_ancestor(b, a)
    up_a, up_b = tree.path_to_root(a), tree.path_to_root(b)
    if lca is None:
        assert up_a[-1] != up_b[-1]
        return
    assert lca in up_a and lca in up_b
    # Nothing below the LCA is shared.
    assert not set(up_a[: up_a.index(lca)]) & set(up_b)


# --- which namespaces may use a queue: names, patterns, label selectors -------------------------

TEAM_A = {"team": "a", "kubernetes.io/metadata.name": "ns-a"}
TEAM_B = {"team": "b"}


def selector_tree() -> QueueTree:
    return QueueTree.from_config(
        parse_config(
            {
                "queues": [
                    {"name": "org", "namespaceSelector": {"matchLabels": {"team": "a"}}},
                    {"name": "org-leaf", "parent": "org"},
                    # names and a selector on one queue: either allows
                    {
                        "name": "mixed",
                        "parent": "org",
                        "namespaces": ["guest-*"],
                        "namespaceSelector": {
                            "matchExpressions": [{"key": "team", "operator": "In", "values": ["b"]}]
                        },
                    },
                    # a child's names alone replace the parent's selector
                    {"name": "names-only", "parent": "org", "namespaces": ["ops"]},
                    {"name": "open", "namespaceSelector": {}},
                    {"name": "free"},
                    {
                        "name": "not-legacy",
                        "namespaceSelector": {
                            "matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]
                        },
                    },
                ]
            }
        ).queues
    )


@pytest.mark.parametrize(
    ("queue", "namespace", "labels", "allowed"),
    [
        ("org", "ns-a", TEAM_A, True),
        ("org", "ns-b", TEAM_B, False),
        ("org", "ns-x", {}, False),  # no labels (not seen): the selector needs team=a
        ("org-leaf", "ns-a", TEAM_A, True),  # inherited from the parent
        ("org-leaf", "ns-b", TEAM_B, False),
        ("mixed", "ns-b", TEAM_B, True),  # its own selector
        ("mixed", "guest-1", {}, True),  # its own names
        ("mixed", "ns-a", TEAM_A, False),  # the parent's selector no longer applies
        ("names-only", "ops", {}, True),
        ("names-only", "ns-a", TEAM_A, False),  # nearest rule: names only, no selector
        ("open", "anything", {}, True),  # {} matches every namespace
        ("open", "anything", None, False),  # ...whose labels runway could read
        ("free", "ns-b", None, True),  # no rule on the way up: every namespace
        ("undeclared", "ns-b", TEAM_B, True),
        ("not-legacy", "ns-x", {}, True),
        ("not-legacy", "ns-x", {"legacy": "yes"}, False),
    ],
)
def test_allows_by_names_or_labels_the_nearest_rule_decides(
    queue: str, namespace: str, labels: dict[str, str] | None, allowed: bool
) -> None:
    assert selector_tree().allows(queue, namespace, labels) is allowed


def test_which_queue_holds_the_rule_and_whether_labels_matter() -> None:
    tree = selector_tree()
    rule = tree.namespace_rule_of("org-leaf")
    assert rule is not None and rule.name == "org"
    assert rule.namespace_selector is not None and rule.namespace_selector.text == "team=a"
    assert tree.namespace_rule_of("free") is None
    assert tree.uses_selectors()
    assert not QueueTree.from_config(
        parse_config({"queues": [{"name": "a", "namespaces": ["x"]}]}).queues
    ).uses_selectors()
