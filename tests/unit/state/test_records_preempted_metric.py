"""A preempted workload counts once in ``runway_evicted_workloads_total{reason="Preempted"}``,
however many of its pods were victims; labelled by its queue, or ``other`` when undeclared."""

from __future__ import annotations

import msgspec
import pytest

from app import metrics
from app.clock import ManualClock
from app.config.requeue import RequeuingStrategyConfig
from app.model import Pod
from app.policy.queues import QueueTree
from tests.builders import cluster_cache, record_book
from tests.integration.kube_fake import make_pod


def gang(queue: str) -> list[Pod]:
    pods = []
    for i in range(3):
        obj = make_pod(
            f"low-{i}", namespace="team-a", labels={"runway.dev/queue": queue}, node="n1"
        )
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "low", "uid": "u", "controller": True}
        ]
        pods.append(msgspec.convert(obj, Pod))
    return pods


@pytest.mark.parametrize(("queue", "label"), [("team-a", "team-a"), ("typo", "other")])
async def test_a_gang_counts_once_per_preemptor(queue: str, label: str) -> None:
    saved = metrics._queue_names
    metrics.set_queue_names(["default", "team-a"])
    try:
        cache = cluster_cache()
        pods = gang(queue)
        cache.replace_pods(pods)
        book = record_book(
            cache, RequeuingStrategyConfig(), ManualClock(1000.0), queues=QueueTree()
        )
        counter = metrics.EVICTED_WORKLOADS.labels(label, "Preempted")
        before = counter._value.get()
        for pod in pods:
            await book.record_preemption(pod.uid, "uid-preemptor-1", 1000.0)
        assert counter._value.get() == before + 1
        await book.record_preemption(pods[0].uid, "uid-preemptor-2", 1001.0)
        assert counter._value.get() == before + 2
    finally:
        metrics.set_queue_names(saved)
