"""The cache indexes what runway manages (``policy.scope``, DESIGN §2.0): an unmanaged pod holds
room on its node but is in no workload and no queue, so nothing runway keeps about workloads —
records, holds, PodsReady — sees it; a namespace relabelled in or out of
``scope.namespaceSelector`` moves its pods in or out live; the filter passes an unmanaged pod."""

from __future__ import annotations

from typing import Any

import msgspec

from app.clock import ManualClock
from app.config import parse_config
from app.model import Pod
from app.model.namespace import Namespace
from app.policy.queues import QueueTree
from app.policy.scope import Scope
from app.policy.workload import workload_of
from app.state.cache import ClusterCache
from tests.builders import cluster_cache, raw_pod, record_book
from tests.builders import pod as build_pod


def a_pod(
    name: str,
    namespace: str = "team-a",
    *,
    queue: str | None = "batch",
    node: str | None = None,
    scheduler: str = "runway-scheduler",
) -> Pod:
    obj = raw_pod(
        name,
        namespace=namespace,
        uid=f"u-{namespace}-{name}",
        resource_version="1",
        labels={"runway.dev/queue": queue} if queue else None,
        node=node,
        job=f"job-{name}",
    )
    obj["spec"]["schedulerName"] = scheduler
    return build_pod(obj)


def scope(**raw: Any) -> Scope:
    config = parse_config({"scope": raw, "preemption": {"schedulerNames": ["runway-scheduler"]}})
    return Scope.from_config(
        config.scope, config.preemption.scheduler_names, ["kube-system"], "runway-system"
    )


def namespace(name: str, rv: str, **labels: str) -> Namespace:
    return msgspec.convert(
        {"metadata": {"name": name, "resourceVersion": rv, "labels": labels}}, Namespace
    )


def cache_of(the_scope: Scope, *pods: Pod) -> ClusterCache:
    cache = cluster_cache(QueueTree.from_config([]), compact=False, scope=the_scope)
    for p in pods:
        cache.upsert_pod(p)
    return cache


def test_an_unmanaged_pod_holds_room_but_is_in_no_workload_or_queue() -> None:
    managed = a_pod("m", node="n1")
    stray = a_pod("s", queue=None, node="n1")
    other = a_pod("d", scheduler="default-scheduler", node="n1")
    system = a_pod("k", namespace="kube-system", node="n1")
    cache = cache_of(scope(), managed, stray, other, system)
    assert {p.metadata.name for p in cache.pods_on_node("n1")} == {"m", "s", "d", "k"}
    assert cache.workload_keys() == [workload_of(managed)]
    assert cache.queues() == ["batch"]
    assert cache.unmanaged_count() == 3
    assert "names no queue" in cache.unmanaged_reason(stray)
    assert "default-scheduler" in cache.workload_unmanaged(workload_of(other))
    assert cache.workload_unmanaged(workload_of(managed)) == ""
    assert cache.workload(workload_of(stray)) is None
    # a pod leaving takes its unmanaged entry with it
    cache.delete_pod(stray)
    assert cache.unmanaged_count() == 2 and cache.workload_unmanaged(workload_of(stray)) == ""


def test_a_label_change_moves_a_pod_in_and_out_of_scope() -> None:
    stray = a_pod("s", queue=None)
    cache = cache_of(scope(), stray)
    assert cache.workload_keys() == []
    labelled = msgspec.structs.replace(
        a_pod("s"), metadata=msgspec.structs.replace(a_pod("s").metadata, resourceVersion="2")
    )
    cache.upsert_pod(labelled)
    assert cache.workload_keys() == [workload_of(labelled)] and cache.unmanaged_count() == 0


def test_a_namespace_relabelled_out_of_the_selector_takes_its_pods_out_live() -> None:
    the_scope = scope(namespaceSelector={"matchLabels": {"runway": "on"}})
    cache = cache_of(the_scope)
    moves: list[int] = []
    cache.queue_listeners.append(lambda: moves.append(1))
    cache.replace_namespaces([namespace("team-a", "1", runway="on")])
    p = a_pod("p")
    cache.upsert_pod(p)
    assert cache.workload_keys() == [workload_of(p)]
    cache.upsert_namespace(namespace("team-a", "2", runway="off"))
    assert cache.workload_keys() == [] and "namespaceSelector" in cache.unmanaged_reason(p)
    assert moves
    cache.upsert_namespace(namespace("team-a", "3", runway="on"))
    assert cache.workload_keys() == [workload_of(p)]


def test_a_mapped_namespace_puts_unlabelled_pods_in_its_queue() -> None:
    cache = cache_of(scope(namespaceQueues={"team-*": "research"}), a_pod("p", queue=None))
    assert cache.queues() == ["research"]


async def test_no_record_is_ever_written_for_an_unmanaged_workload() -> None:
    stray = a_pod("s", queue=None, node="n1")
    managed = a_pod("m", node="n1")
    cache = cache_of(scope(), stray, managed)
    config = parse_config({}).wait_for_pods_ready.requeuing_strategy
    book = record_book(cache, config, ManualClock(1000.0), queues=QueueTree.from_config([]))
    assert await book.deactivate(workload_of(stray)) is False
    assert book.store.get("team-a", book.name_of(workload_of(stray))) is None
    assert await book.record_preemption(stray.metadata.uid, "u-preemptor", 1000.0) is None
    assert book.store.get("team-a", book.name_of(workload_of(stray))) is None
    assert await book.deactivate(workload_of(managed)) is True
