"""The cluster cache: indexes, relist diffs, derived workload facts, subscribers."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.model import Pod
from app.model.node import Node
from app.policy.workload import WorkloadKey
from app.state.cache import CacheEvent
from tests.builders import cluster_cache, condition, raw_pod
from tests.builders import node as build_node
from tests.builders import pod as build_pod
from tests.feed import ArrivingFeed


def pod(
    name: str,
    *,
    uid: str | None = None,
    node: str | None = None,
    rv: str = "1",
    labels: dict[str, str] | None = None,
    job: str | None = None,
    bound_at: str | None = None,
    ready: bool = False,
    annotations: dict[str, str] | None = None,
) -> Pod:
    conditions = []
    if bound_at:
        conditions.append(condition("PodScheduled", True, bound_at))
    if ready:
        conditions.append(condition("Ready", True, bound_at))
    raw = raw_pod(
        name,
        namespace="ns",
        uid=uid or f"u-{name}",
        resource_version=rv,
        labels=labels,
        annotations=annotations,
        job=job,
        job_uid=f"job-{job}",
        node=node,
        phase="Running" if node else "Pending",
        conditions=conditions or None,
    )
    return build_pod(raw)


def node(name: str, **labels: str) -> Node:
    return build_node(name, labels=labels, allocatable={"cpu": "8"})


def test_indexes_follow_updates_and_deletes() -> None:
    cache = cluster_cache()
    cache.replace_pods(
        [
            pod("a", labels={"runway.dev/queue": "q1"}),
            pod("b", node="n1", labels={"kai.scheduler/queue": "q2"}),
            pod("c", node="n1"),
        ]
    )
    assert cache.synced is False and cache.pods_synced
    assert {p.key for p in cache.pods_on_node("n1")} == {"ns/b", "ns/c"}
    assert [p.key for p in cache.pending_pods()] == ["ns/a"]
    assert cache.queues() == ["default", "q1", "q2"]
    assert cache.bound_count() == 2
    # a gets bound and moves queue; c goes away
    cache.upsert_pod(pod("a", node="n2", rv="2", labels={"runway.dev/queue": "q3"}))
    cache.delete_pod(pod("c", node="n1"))
    assert cache.pending_pods() == []
    assert [p.key for p in cache.pods_on_node("n2")] == ["ns/a"]
    assert [p.key for p in cache.pods_on_node("n1")] == ["ns/b"]
    assert cache.queues() == ["q2", "q3"]
    assert cache.pod_by_key("ns", "c") is None and cache.pod("u-c") is None
    assert cache.pod_by_key("ns", "a") is not None


def test_recreated_pod_with_the_same_name_is_a_new_uid() -> None:
    cache = cluster_cache()
    cache.upsert_pod(pod("a", uid="old", node="n1"))
    cache.upsert_pod(pod("a", uid="new"))  # ADDED of the replacement before DELETED of the old
    cache.delete_pod(pod("a", uid="old", node="n1"))
    assert cache.pod_by_key("ns", "a").uid == "new"  # type: ignore[union-attr]
    assert len(cache) == 1 and cache.pods_on_node("n1") == []


def test_replace_emits_one_event_per_difference() -> None:
    cache = cluster_cache()
    events: list[CacheEvent[Any]] = []
    cache.replace_pods([pod("a"), pod("b"), pod("c")])
    unsubscribe = cache.subscribe(events.append)
    cache.replace_pods([pod("a"), pod("b", rv="5", node="n1"), pod("d")])
    assert sorted((e.type, (e.new or e.old).key) for e in events) == [
        ("ADDED", "ns/d"),
        ("DELETED", "ns/c"),
        ("MODIFIED", "ns/b"),
    ]
    modified = next(e for e in events if e.type == "MODIFIED")
    assert modified.old.spec.nodeName is None and modified.new.spec.nodeName == "n1"
    unsubscribe()
    cache.delete_pod(pod("a"))
    assert len(events) == 3


def test_a_relisted_pod_of_the_same_version_is_the_cached_object() -> None:
    """A resync's LIST hands back mostly what is cached: the pod store's ``prepare`` answers
    the cached pod itself for the same UID and resourceVersion (no second copy of 150,000
    pods until applied, no compaction again); a new version is compacted as it arrives."""
    cache = cluster_cache()
    store = cache.pod_store
    cache.replace_pods([store.prepare(pod("a")), store.prepare(pod("b"))], compacted=True)
    cached = cache.pod("u-a")
    assert store.prepare(pod("a")) is cached
    newer = store.prepare(pod("b", rv="7", node="n1"))
    assert newer is not cache.pod("u-b") and newer.spec.nodeName == "n1"
    events: list[CacheEvent[Any]] = []
    cache.subscribe(events.append)
    cache.replace_pods([store.prepare(pod("a")), newer], compacted=True)
    assert cache.pod("u-a") is cached
    assert [(e.type, e.new.key) for e in events] == [("MODIFIED", "ns/b")]


def test_a_failing_subscriber_does_not_break_the_cache() -> None:
    cache = cluster_cache()

    def boom(event: object) -> None:
        raise RuntimeError("subscriber bug")

    cache.subscribe(boom)
    cache.upsert_pod(pod("a"))
    assert len(cache) == 1


def test_workload_start_time_and_pods_ready_are_derived_and_refreshed() -> None:
    cache = cluster_cache()
    t1, t2 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"
    cache.upsert_pod(
        pod(
            "j-0",
            job="train",
            node="n1",
            bound_at=t1,
            ready=True,
            annotations={"runway.dev/min-available": "2"},
        )
    )
    cache.upsert_pod(pod("j-1", job="train"))
    key = WorkloadKey("ns", "train", "owner:Job")
    view = cache.workload(key)
    assert view is not None and not view.pods_ready
    assert view.min_available == 2 and view.bound == 1
    assert cache.workload(key) is view  # memoised
    cache.upsert_pod(pod("j-1", job="train", node="n2", bound_at=t2, rv="2", ready=True))
    view = cache.workload(key)
    assert view is not None and view.pods_ready
    assert cache.workload_key_of("u-j-1") == key
    assert cache.workload_of_pod(pod("j-0", job="train")) is view
    assert cache.workload(WorkloadKey("ns", "nope", "pod")) is None


def test_nodes() -> None:
    cache = cluster_cache()
    events: list[CacheEvent[Any]] = []
    cache.subscribe(events.append)
    cache.replace_nodes([node("n1", pool="a"), node("n2")])
    assert cache.nodes_synced and cache.node_count() == 2
    assert cache.node_labels("n1") == {"pool": "a"} and cache.node_labels("zz") == {}
    cache.replace_nodes([node("n1", pool="a")])
    cache.upsert_node(node("n1", pool="b"))
    assert [(e.type, (e.new or e.old).name) for e in events] == [
        ("ADDED", "n1"),
        ("ADDED", "n2"),
        ("DELETED", "n2"),
        ("MODIFIED", "n1"),
    ]
    assert cache.node("n1").allocatable == {"cpu": "8"}  # type: ignore[union-attr]


def test_a_status_only_change_keeps_the_indexes_and_reuses_the_unchanged_parts() -> None:
    cache = cluster_cache()
    queue = {"runway.dev/queue": "q1"}
    bound = pod("a", job="train", node="n1", bound_at="2027-01-01T00:00:00Z", labels=queue)
    cache.upsert_pod(bound)
    before = cache.pod("u-a")
    assert before is not None
    ready = pod(
        "a",
        job="train",
        node="n1",
        bound_at="2027-01-01T00:00:00Z",
        rv="2",
        ready=True,
        labels=queue,
    )
    cache.upsert_pod(ready)
    after = cache.pod("u-a")
    assert after == ready  # what was stored is the new version, equal to it
    assert after is not None and after.spec is before.spec  # not compacted again
    assert after.metadata.labels is before.metadata.labels
    assert [p.uid for p in cache.pods_on_node("n1")] == ["u-a"]
    key = WorkloadKey("ns", "train", "owner:Job")
    view = cache.workload(key)
    assert view is not None and view.pods_ready  # the workload view was refreshed
    # A label change does re-index: the pod moves to its new workload.
    cache.upsert_pod(pod("a", node="n1", rv="3", labels={"runway.dev/workload": "w"}))
    assert cache.workload(key) is None
    assert cache.workload(WorkloadKey("ns", "w", "label")) is not None


def test_an_older_version_never_replaces_a_newer_one() -> None:
    # Our own PATCH's answer (read after write) may arrive after the watch brought a newer
    # version; the cache keeps the newer one, or it would stay stale until the next change.
    cache = cluster_cache()
    cache.upsert_pod(pod("a", rv="10", node="n1"))
    cache.upsert_pod(pod("a", rv="12", node="n1", labels={"runway.dev/queue": "q9"}))
    cache.upsert_pod(pod("a", rv="11", node="n1"))
    kept = cache.pod("u-a")
    assert kept is not None and kept.metadata.resourceVersion == "12"
    assert kept.metadata.labels == {"runway.dev/queue": "q9"}
    cache.upsert_pod(pod("a", rv="not-a-number", node="n1"))  # opaque: taken as it comes
    kept = cache.pod("u-a")
    assert kept is not None and kept.metadata.resourceVersion == "not-a-number"


def test_an_update_of_unread_fields_only_moves_the_version() -> None:
    # A kubelet status update runway does not read (IPs, container statuses, managed fields):
    # decoded, it differs only in resourceVersion; nothing is re-indexed or told to anyone.
    cache = cluster_cache()
    events: list[CacheEvent[Any]] = []
    cache.upsert_pod(pod("a", job="train", node="n1", bound_at="2027-01-01T00:00:00Z"))
    cache.subscribe(events.append)
    before = cache.pod("u-a")
    assert before is not None
    cache.upsert_pod(pod("a", job="train", node="n1", bound_at="2027-01-01T00:00:00Z", rv="2"))
    after = cache.pod("u-a")
    assert after is not None and after.metadata.resourceVersion == "2"
    assert after.spec is before.spec and after.status is before.status
    assert events == []
    # The newer version counts: an older answer arriving later is still refused...
    cache.upsert_pod(pod("a", job="train", node="n1", bound_at="2027-01-01T00:00:00Z", rv="1"))
    assert cache.pod("u-a") is after
    # ...and a change of what runway reads is one event, as before.
    cache.upsert_pod(
        pod("a", job="train", node="n1", bound_at="2027-01-01T00:00:00Z", rv="3", ready=True)
    )
    assert [(e.type, e.new.metadata.resourceVersion if e.new else None) for e in events] == [
        ("MODIFIED", "3")
    ]


def test_a_verb_about_an_unknown_pod_hurries_the_watch() -> None:
    cache = cluster_cache()
    assert cache.expect("u-a") is None  # no watch wired (embedded default): nothing to do
    assert not cache.refresh()
    feed = ArrivingFeed(cache)
    cache.feed = feed
    cache.upsert_pod(pod("a"))
    found = cache.expect("u-a")
    assert found is not None and found.uid == "u-a"
    assert feed.calls == []
    feed.arriving = [pod("new")]  # the watch holds the pod's ADDED event
    found = cache.expect("u-new")  # what the hurry applied is what the verb gets
    assert feed.calls == ["hurry"] and found is not None and found.uid == "u-new"


def test_refresh_applies_what_has_arrived_and_says_whether_anything_did() -> None:
    cache = cluster_cache()
    feed = ArrivingFeed(cache)
    cache.feed = feed
    assert not cache.refresh()
    feed.arriving = [pod("later")]
    assert cache.refresh() and cache.pod("u-later") is not None
    assert feed.calls == ["catch_up", "catch_up"]


def test_a_resync_applies_in_steps_and_ends_as_a_replace() -> None:
    """The reflector lets the event loop run between steps (no long pause at 150,000 pods)."""
    stepped, whole = cluster_cache(), cluster_cache()
    old = [pod(f"old-{i}", node="n1") for i in range(5)]
    new = [pod(f"p-{i}", node="n1" if i % 2 else None) for i in range(7)]
    for cache in (stepped, whole):
        cache.replace_pods(old)
    steps = list(stepped.replace_pods_steps(new, step=3))
    whole.replace_pods(new)
    assert len(steps) == 5 // 3 + 7 // 3  # a yield after every 3 deletions, then upserts
    assert sorted(p.uid for p in stepped.pods()) == sorted(p.uid for p in whole.pods())
    assert [p.uid for p in stepped.pending_pods()] == [p.uid for p in whole.pending_pods()]
    assert stepped.pods_synced


NOMINATION_OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "nominate", "renominate", "bind", "requeue", "delete", "label"]),
        st.integers(0, 5),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(NOMINATION_OPS)
def test_pending_pods_by_queue_and_nomination_follow_every_change(
    ops: list[tuple[str, int]],
) -> None:
    """``pending_in_queue`` is ``pods_in_queue`` without the bound pods, in the same order, and
    ``nominated_to`` counts the pending pods nominated to a node, whatever happened to them."""
    cache = cluster_cache()
    state: dict[int, tuple[str | None, str | None, str]] = {}  # i -> (node, nominated, queue)
    rv = 0
    for op, i in ops:
        rv += 1
        old = state.get(i)
        if op == "delete":
            if old is not None:
                del state[i]
                gone = cache.pod(f"u-p{i}")
                assert gone is not None
                cache.delete_pod(gone)
            continue
        node, nominated, queue = old or (None, None, f"q{i % 2}")
        if op == "nominate":
            nominated = f"n{i % 2}"
        elif op == "renominate":
            nominated = None if nominated else "n0"
        elif op == "bind":
            node = "n1"
        elif op == "requeue":
            node = None
        elif op == "label":
            queue = "q0" if queue == "q1" else "q1"
        elif old is not None:
            continue  # add: already there
        state[i] = (node, nominated, queue)
        obj = raw_pod(
            f"p{i}",
            namespace="ns",
            uid=f"u-p{i}",
            resource_version=str(rv),
            labels={"runway.dev/queue": queue},
            node=node,
        )
        if nominated:
            obj["status"] = {"nominatedNodeName": nominated}
        cache.upsert_pod(build_pod(obj))
    for queue in ("q0", "q1"):
        assert cache.pending_in_queue(queue) == [
            p for p in cache.pods_in_queue(queue) if not p.spec.nodeName
        ]
    for node in ("n0", "n1"):
        assert cache.nominated_to(node) == sum(
            1 for p in cache.pending_pods() if p.status.nominatedNodeName == node
        )
