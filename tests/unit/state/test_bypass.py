"""Noticing kube-scheduler skipping runway (``state.bypass``, the operator issue): binds of
managed pods are counted by whether this replica filtered them, and a replica whose filter is
silent while they bind says so once per quiet period, with the likely causes."""

from __future__ import annotations

from typing import Any

import structlog

from app import metrics
from app.clock import ManualClock
from app.config import parse_config
from app.model import Pod
from app.policy.queues import QueueTree
from app.policy.scope import Scope
from app.state.bypass import BindWatch
from app.state.cache import ClusterCache
from tests.builders import cluster_cache, raw_pod
from tests.builders import pod as build_pod


def a_pod(name: str, *, node: str | None = None, queue: str | None = "batch", rv: str = "1") -> Pod:
    obj: dict[str, Any] = raw_pod(
        name,
        namespace="team-a",
        resource_version=rv,
        labels={"runway.dev/queue": queue} if queue else None,
        node=node,
    )
    obj["spec"]["schedulerName"] = "runway-scheduler"
    return build_pod(obj)


def count(filtered: str) -> float:
    return float(metrics.BINDINGS.labels(filtered)._value.get())


def world() -> tuple[ClusterCache, BindWatch, ManualClock]:
    config = parse_config({"preemption": {"schedulerNames": ["runway-scheduler"]}})
    scope = Scope.from_config(config.scope, config.preemption.scheduler_names)
    cache = cluster_cache(QueueTree.from_config([]), compact=False, scope=scope)
    clock = ManualClock(1000.0)
    return cache, BindWatch(cache, clock, quiet=300.0), clock


def test_binds_are_counted_by_whether_this_replica_filtered_the_pod() -> None:
    cache, watch, _ = world()
    yes, no = count("yes"), count("no")
    for name in ("a", "b", "stray"):
        cache.upsert_pod(a_pod(name, queue=None if name == "stray" else "batch"))
    watch.filtered("uid-a")
    for name in ("a", "b", "stray"):
        cache.upsert_pod(a_pod(name, node="n1", rv="2", queue=None if name == "stray" else "batch"))
    assert (count("yes") - yes, count("no") - no) == (1, 1)  # the stray pod is not runway's


def test_a_silent_filter_while_managed_pods_bind_is_logged_once_per_quiet_period() -> None:
    cache, _watch, clock = world()
    for i in range(3):
        cache.upsert_pod(a_pod(f"p{i}"))
    with structlog.testing.capture_logs() as logs:
        cache.upsert_pod(a_pod("p0", node="n1", rv="2"))  # just started: not yet quiet
        clock.advance(301)
        cache.upsert_pod(a_pod("p1", node="n1", rv="2"))
        clock.advance(10)
        cache.upsert_pod(a_pod("p2", node="n1", rv="2"))
    warned = [e for e in logs if "has not called this replica's filter" in e["event"]]
    assert len(warned) == 1 and "x509" in warned[0]["likely_causes"], logs
    assert warned[0]["unfiltered_binds"] == 2


def test_a_replica_that_is_called_never_warns() -> None:
    cache, watch, clock = world()
    cache.upsert_pod(a_pod("p"))
    clock.advance(400)
    watch.filtered("uid-other")  # kube-scheduler calls this replica, about another pod
    with structlog.testing.capture_logs() as logs:
        cache.upsert_pod(a_pod("p", node="n1", rv="2"))
    assert not [e for e in logs if "filter" in e["event"]]
