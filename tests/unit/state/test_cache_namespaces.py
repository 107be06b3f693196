"""The cache's namespace labels: a queue's ``namespaceSelector`` reads them, so a namespace whose
labels change has its pods' queues indexed again — a pod its namespace may no longer use its
queue moves to ``default`` (counted as denied), one that may now moves back — and the requeue
memos hear of it. Labels beyond the bound are not kept: no selector matches that namespace."""

from __future__ import annotations

from typing import Any

import msgspec

from app import metrics
from app.config import parse_config
from app.model import Pod
from app.model.namespace import Namespace
from app.policy.queues import QueueTree
from app.policy.selectors import MAX_LABELS
from app.policy.workload import DEFAULT_QUEUE
from tests.builders import cluster_cache, raw_pod
from tests.builders import pod as build_pod


def pod(name: str, namespace: str, queue: str, *, node: str | None = None) -> Pod:
    return build_pod(
        raw_pod(
            name,
            namespace=namespace,
            uid=f"u-{namespace}-{name}",
            resource_version="1",
            labels={"runway.dev/queue": queue},
            node=node,
            phase="Running" if node else "Pending",
        )
    )


def namespace(name: str, rv: str, **labels: str) -> Namespace:
    return msgspec.convert(
        {"metadata": {"name": name, "resourceVersion": rv, "labels": labels}}, Namespace
    )


def tree(queues: list[dict[str, Any]]) -> QueueTree:
    return QueueTree.from_config(parse_config({"queues": queues}).queues)


SELECTOR_TREE = [
    {"name": "org-a", "namespaceSelector": {"matchLabels": {"team": "a"}}},
    {"name": "qa", "parent": "org-a"},
    {"name": "open"},
]


class Cache:
    def __init__(self, queues: list[dict[str, Any]] = SELECTOR_TREE) -> None:
        self.cache = cluster_cache(tree(queues), compact=False)
        self.moves = 0
        self.cache.queue_listeners.append(self.moved)

    def moved(self) -> None:
        self.moves += 1

    def queue(self, queue: str) -> set[str]:
        return {p.key for p in self.cache.pods_in_queue(queue)}


def denied(queue: str) -> float:
    value: float = metrics.QUEUE_DENIED.labels(metrics.queue_label(queue))._value.get()
    return value


def test_relabelling_a_namespace_moves_its_pods_between_the_queue_and_default() -> None:
    c = Cache()
    c.cache.replace_namespaces([namespace("ns-1", "1", team="b"), namespace("ns-2", "1", team="a")])
    c.cache.replace_pods(
        [
            pod("p", "ns-1", "qa"),
            pod("bound", "ns-1", "qa", node="n1"),
            pod("free", "ns-1", "open"),
            pod("other", "ns-2", "qa"),
        ]
    )
    assert c.queue("qa") == {"ns-2/other"}
    assert c.queue(DEFAULT_QUEUE) == {"ns-1/p", "ns-1/bound"}
    assert c.cache.queue_of_pod(c.cache.pod_by_key("ns-1", "p")) == DEFAULT_QUEUE  # type: ignore[arg-type]
    moves = c.moves
    # ns-1 gets team=a: its pods may use qa now
    c.cache.upsert_namespace(namespace("ns-1", "2", team="a"))
    assert c.queue("qa") == {"ns-1/p", "ns-1/bound", "ns-2/other"}
    assert DEFAULT_QUEUE not in c.cache.queues()
    assert c.queue("open") == {"ns-1/free"}
    assert c.moves == moves + 1  # one notice for the whole namespace
    # and loses it again: denied, counted once per pod moved
    before = denied("qa")
    c.cache.upsert_namespace(namespace("ns-1", "3", team="b", extra="x"))
    assert c.queue("qa") == {"ns-2/other"}
    assert c.queue(DEFAULT_QUEUE) == {"ns-1/p", "ns-1/bound"}
    assert denied("qa") == before + 2
    assert c.moves == moves + 2


def test_a_change_that_moves_nobody_is_quiet() -> None:
    c = Cache()
    c.cache.replace_pods([pod("p", "ns-1", "qa")])
    c.cache.upsert_namespace(namespace("ns-1", "1", team="b"))
    assert c.moves == 0  # unseen (no labels) to team=b: denied before and after
    c.cache.upsert_namespace(namespace("ns-1", "2", team="b"))  # same labels, new version
    c.cache.upsert_namespace(namespace("ns-1", "3", team="b", other="y"))
    assert c.moves == 0
    assert c.queue(DEFAULT_QUEUE) == {"ns-1/p"}


def test_new_pods_are_indexed_with_their_namespace_labels() -> None:
    c = Cache()
    c.cache.upsert_namespace(namespace("ns-1", "1", team="a"))
    before = denied("qa")
    c.cache.upsert_pod(pod("p", "ns-1", "qa"))
    c.cache.upsert_pod(pod("q", "ns-unseen", "qa"))  # a namespace not (yet) seen: no labels
    assert c.queue("qa") == {"ns-1/p"}
    assert c.queue(DEFAULT_QUEUE) == {"ns-unseen/q"}
    assert denied("qa") == before + 1


def test_a_relist_requeues_only_the_namespaces_that_changed_and_forgets_the_gone() -> None:
    c = Cache()
    c.cache.replace_namespaces([namespace("ns-1", "1", team="a"), namespace("ns-2", "1", team="a")])
    c.cache.replace_pods([pod("p", "ns-1", "qa"), pod("q", "ns-2", "qa")])
    assert c.queue("qa") == {"ns-1/p", "ns-2/q"}
    assert c.cache.namespaces_synced
    c.cache.replace_namespaces([namespace("ns-1", "1", team="a")])  # ns-2 gone: no labels
    assert c.queue("qa") == {"ns-1/p"}
    assert c.cache.namespace_labels("ns-2") == {}
    c.cache.replace_namespaces([namespace("ns-1", "5", team="a"), namespace("ns-2", "6", team="a")])
    assert c.queue("qa") == {"ns-1/p", "ns-2/q"}
    c.cache.delete_namespace(namespace("ns-1", "7"))
    assert c.queue("qa") == {"ns-2/q"}


def test_without_a_selector_the_labels_never_requeue() -> None:
    c = Cache([{"name": "qa", "namespaces": ["ns-1"]}])
    c.cache.replace_pods([pod("p", "ns-1", "qa"), pod("q", "ns-2", "qa")])
    c.cache.upsert_namespace(namespace("ns-2", "1", team="a"))
    assert c.moves == 0
    assert c.queue("qa") == {"ns-1/p"}


def test_a_tree_change_reindexes_with_the_labels() -> None:
    c = Cache([{"name": "qa"}])
    c.cache.upsert_namespace(namespace("ns-1", "1", team="b"))
    c.cache.replace_pods([pod("p", "ns-1", "qa")])
    assert c.queue("qa") == {"ns-1/p"}
    assert c.cache.queue_tree is not None
    c.cache.queue_tree.adopt(
        tree([{"name": "qa", "namespaceSelector": {"matchLabels": {"team": "a"}}}])
    )
    c.cache.reindex_queues()
    assert c.queue(DEFAULT_QUEUE) == {"ns-1/p"}
    c.cache.upsert_namespace(namespace("ns-1", "2", team="a"))
    assert c.queue("qa") == {"ns-1/p"}


def test_too_many_labels_match_no_selector_and_are_reported_once_per_version() -> None:
    c = Cache([{"name": "open", "namespaceSelector": {}}])
    invalid = metrics.INVALID_OBJECTS.labels("namespace-labels")
    before = invalid._value.get()
    many = {f"k{i}": "v" for i in range(MAX_LABELS + 1)}
    c.cache.upsert_namespace(namespace("ns-1", "1", **many))
    c.cache.upsert_namespace(namespace("ns-1", "1", **many))  # the same version again
    c.cache.replace_pods([pod("p", "ns-1", "open"), pod("q", "ns-2", "open")])
    assert c.cache.namespace_labels("ns-1") is None
    assert c.queue(DEFAULT_QUEUE) == {"ns-1/p"}  # not even {} matches it
    assert c.queue("open") == {"ns-2/q"}
    assert invalid._value.get() == before + 1
    c.cache.upsert_namespace(namespace("ns-1", "2", **{**many, "k0": "w"}))
    assert invalid._value.get() == before + 2
    # trimmed to the bound: readable again, the pod moves back
    c.cache.upsert_namespace(namespace("ns-1", "3", **dict(list(many.items())[:MAX_LABELS])))
    assert c.queue("open") == {"ns-1/p", "ns-2/q"}
    # longer than the API server allows: not kept either
    c.cache.upsert_namespace(namespace("ns-1", "4", k="v" * 64))
    assert c.cache.namespace_labels("ns-1") is None
