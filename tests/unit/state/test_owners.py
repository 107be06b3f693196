"""state/owners: the DaemonSets runway has read (by UID), and ``is_queued`` against them and the
cache's Nodes (issue #36: an owner's kind counts only when runway has read the owner)."""

from __future__ import annotations

import msgspec

from app.model.daemonset import DaemonSet
from app.model.node import Node
from app.state.owners import DaemonSets, ReadOwners
from tests.builders import cluster_cache, raw_pod
from tests.builders import pod as build_pod


def ds(name: str, uid: str, namespace: str = "ns") -> DaemonSet:
    return msgspec.convert(
        {"metadata": {"name": name, "namespace": namespace, "uid": uid}}, DaemonSet
    )


def test_the_store_keeps_uids_and_says_when_they_change() -> None:
    changes: list[None] = []
    store = DaemonSets(on_change=lambda: changes.append(None))
    store.replace([ds("agent", "u1"), ds("agent", "u2", namespace="other")])
    assert store.uid("ns", "agent") == "u1" and store.uid("other", "agent") == "u2"
    assert len(changes) == 1
    store.upsert(ds("agent", "u1"))  # its status moved: nothing runway keeps
    assert len(changes) == 1
    store.upsert(ds("agent", "u3"))  # re-created under the same name
    assert store.uid("ns", "agent") == "u3" and len(changes) == 2
    store.delete(ds("agent", "u1"))  # the old one's deletion, late: the new one stays
    assert store.uid("ns", "agent") == "u3"
    store.delete(ds("agent", "u3"))
    assert store.uid("ns", "agent") is None and len(changes) == 3
    store.replace([])
    assert len(store) == 0


def test_read_owners_exempt_only_what_runway_has_read() -> None:
    cache = cluster_cache()
    cache.replace_nodes([msgspec.convert({"metadata": {"name": "n1", "uid": "node-uid"}}, Node)])
    daemonsets = DaemonSets()
    daemonsets.replace([ds("agent", "ds-uid")])
    owners = ReadOwners(cache, daemonsets)

    def owned(kind: str, api_version: str, name: str, uid: str, node: str | None = "n1") -> bool:
        raw = raw_pod("p", namespace="ns", uid="p", node=node)
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}
        ]
        return owners.is_queued([build_pod(raw)])

    assert not owned("DaemonSet", "apps/v1", "agent", "ds-uid")
    assert owned("DaemonSet", "rt.example/v1", "agent", "ds-uid")
    assert owned("DaemonSet", "apps/v1", "agent", "made-up")
    assert not owned("Node", "v1", "n1", "node-uid")
    assert owned("Node", "v1", "n1", "made-up")
    assert owned("Node", "v1", "n2", "node-uid")
    # without a DaemonSet store (the embedded default): no pod is a DaemonSet's
    assert ReadOwners(cache).is_queued([build_pod(raw_pod("p", namespace="ns", node="n1"))])
