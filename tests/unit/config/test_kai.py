"""KAI Queue objects as the queue tree: the file's validation and error lines, each naming the
object; unset inherits, ``0s`` stops inheritance; ``queueSource: kai`` excludes ``queues``."""

from __future__ import annotations

from typing import Any

import pytest

from app.config import ConfigError, parse_config
from app.config.kai import origin, queues_from_kai
from app.policy.queues import QueueTree


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "resourceVersion": "7"},
        "spec": {"resources": {"gpu": {"quota": 4}}, "priority": 100, **spec},
    }


def test_tree_durations_and_origins() -> None:
    objects = [
        queue("team-a", parentQueue="research", preemptMinRuntime="5m"),
        queue("research", reclaimMinRuntime="1h30m"),
        queue("team-b", parentQueue="research", reclaimMinRuntime="0s"),
    ]
    queues = queues_from_kai(objects)
    assert [q.name for q in queues] == ["research", "team-a", "team-b"]  # sorted by name
    tree = QueueTree.from_config(queues, origin=origin)
    assert tree.parent("team-a") == "research"
    assert tree.node("team-a").preempt_min_runtime_s == 300
    assert tree.node("team-a").reclaim_min_runtime_s is None  # unset: inherit
    assert tree.node("team-b").reclaim_min_runtime_s == 0  # 0s: stops inheritance
    assert tree.node("research").reclaim_min_runtime_s == 5400
    assert tree.node("team-a").origin == "Queue/team-a"
    assert tree.origin_of("research") == "Queue/research"
    assert tree.origin_of("default") == "file"


def test_empty_parent_is_top_level() -> None:
    tree = QueueTree.from_config(queues_from_kai([queue("a", parentQueue="")]), origin=origin)
    assert tree.roots() == ("a",)


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        (
            [queue("team-a", preemptMinRuntime="5 minutes")],
            "Queue/team-a: preemptMinRuntime: ",
        ),
        ([queue("team-a", preemptMinRuntime="-5s")], "Queue/team-a: preemptMinRuntime: "),
        (
            [queue("team-a", parentQueue="nope")],
            "Queue/team-a: spec.parentQueue: queue 'team-a': unknown parent queue 'nope'",
        ),
        (
            [queue("a", parentQueue="b"), queue("b", parentQueue="a")],
            "Queue/a: spec.parentQueue: queue 'a': parent cycle a -> b -> a",
        ),
    ],
)
def test_errors_name_the_object_and_field(objects: list[dict[str, Any]], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        queues_from_kai(objects)
    text = str(info.value)
    assert text.startswith("invalid Queue objects:\n")
    assert expected in text, text


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        queues_from_kai([queue("a", preemptMinRuntime="x"), queue("b", reclaimMinRuntime="y")])
    assert len(str(info.value).splitlines()) == 3


def test_kai_source_excludes_file_queues() -> None:
    with pytest.raises(ConfigError, match="queueSource"):
        parse_config({"queueSource": "kai", "queues": [{"name": "a"}]})
    assert parse_config({"queueSource": "auto", "queues": [{"name": "a"}]}).queue_source == "auto"
    assert parse_config({}).queue_source == "file"
    with pytest.raises(ConfigError, match="queueSource"):
        parse_config({"queueSource": "kueue"})


def test_adopt_swaps_the_tree_in_place() -> None:
    live = QueueTree.from_config(parse_config({"queues": [{"name": "old"}]}).queues)
    live.adopt(QueueTree.from_config(queues_from_kai([queue("new")]), origin=origin))
    assert [n.name for n in live] == ["new"]
    assert not live.is_known("old")


def annotated(name: str, **annotations: str) -> dict[str, Any]:
    obj = queue(name)
    obj["metadata"]["annotations"] = annotations
    return obj


def test_namespace_selector_annotation() -> None:
    """``runway.dev/namespace-selector`` in ``kubectl -l`` syntax, with the names annotation."""
    objects = [
        annotated(
            "team-a",
            **{
                "runway.dev/namespace-selector": "team=a, tier in (gold,silver), !legacy",
                "runway.dev/namespaces": "ops",
            },
        )
    ]
    (q,) = queues_from_kai(objects)
    assert str(q.namespace_selector) == "team=a,tier in (gold,silver),!legacy"
    tree = QueueTree.from_config([q], origin=origin)
    assert tree.allows("team-a", "ns-1", {"team": "a", "tier": "gold"})
    assert not tree.allows("team-a", "ns-1", {"team": "a", "tier": "gold", "legacy": "1"})
    assert tree.allows("team-a", "ops", {})  # the names still allow
    assert not tree.allows("team-a", "ns-2", {"team": "b"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            "team in ()",
            "Queue/team-a: metadata.annotations[runway.dev/namespace-selector]: 'in' needs at "
            "least one value (column 10) (got 'team in ()')",
        ),
        ("", "empty selector (it would match every namespace)"),
        ("team > 1", "operator '>' at column 6 is for node selectors"),
        ("Team_=a", "label key 'Team_': the name must be"),
        ("team=" + "x" * 300, "..."),  # the quoted value is shortened
    ],
)
def test_a_bad_selector_annotation_refuses_the_objects(value: str, expected: str) -> None:
    """As any bad value on a Queue object: the whole change is refused (the caller keeps the
    last good tree), every problem reported with the object's name."""
    objects = [
        annotated("team-a", **{"runway.dev/namespace-selector": value}),
        queue("team-b", preemptMinRuntime="5 minutes"),
    ]
    with pytest.raises(ConfigError) as info:
        queues_from_kai(objects)
    text = str(info.value)
    assert text.startswith("invalid Queue objects:\n")
    assert expected in text, text
    assert "Queue/team-b: preemptMinRuntime: " in text  # the other object's problem too
    assert max(len(line) for line in text.splitlines()) < 600


def test_a_bad_selector_and_a_bad_spec_on_one_object_are_both_reported() -> None:
    obj = annotated("team-a", **{"runway.dev/namespace-selector": "team in ("})
    obj["spec"]["preemptMinRuntime"] = "-5s"
    with pytest.raises(ConfigError) as info:
        queues_from_kai([obj])
    lines = str(info.value).splitlines()[1:]
    assert len(lines) == 2, lines
    assert "namespace-selector" in lines[0] and "preemptMinRuntime" in lines[1]
