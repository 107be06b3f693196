"""The preemption budget's history on the workload's WorkloadRecord, over a faked API server:
written in the same preconditioned status update as the ``Preempted`` eviction record, once per
preemption of a gang, bounded by the victim queue's budget; a garbled value (written by someone
with access to the record) reads as no history and is replaced."""

from __future__ import annotations

import json

import pytest

from app.config.queues import QueueConfig
from app.kube.workloadrecords import KubeRecordStore
from app.model.timestamps import format_time
from app.policy.budget import PreemptionBudget
from app.policy.queues import QueueTree
from app.policy.workload import workload_of
from app.state.records import RecordBook
from tests.builders import job_obj, pod_obj
from tests.integration.kube_fake import FakeApi, cache_with, close_store, make_store

T0 = 1_800_000_000.0
QUEUE = {"runway.dev/queue": "team-a"}


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


def with_budget(store: RecordBook, n: int = 2) -> RecordBook:
    store.queues.adopt(
        QueueTree.from_config(
            [
                QueueConfig(name="team-a", preemption_budget={"maxPreemptions": n, "window": "1h"}),
            ]
        )
    )
    return store


def job_history(api: FakeApi, name: str = "job.train") -> str | None:
    record = api.record("team", name)
    assert record is not None
    history = record.get("status", {}).get("eviction", {}).get("preemptionHistory")
    return ",".join(history) if history else None


async def test_history_appended_once_per_preemption_and_bounded(api: FakeApi) -> None:
    api.jobs["team/train"] = job_obj("train")
    cache = cache_with(
        pod_obj("train-0", job="train", labels=QUEUE), pod_obj("train-1", job="train", labels=QUEUE)
    )
    store = with_budget(make_store(api, cache))
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        # one preemption of the gang: the executor records each victim pod, one time appended
        for uid in ("uid-train-0", "uid-train-1"):
            await store.record_preemption(uid, "uid-big-1", T0)
        assert job_history(api) == format_time(T0)
        updates = api.calls("PUT", "/apis/runway.dev/v1alpha1/namespaces/team/workloadrecords/")
        # the history rides in the record's one preconditioned status update
        assert all(u[2]["metadata"]["resourceVersion"] for u in updates)
        assert updates[0][2]["status"]["eviction"]["preemptionHistory"] == [format_time(T0)]
        assert not api.calls("PATCH", "/apis/batch")  # the Job is never written
        await store.record_preemption("uid-train-0", "uid-big-2", T0 + 60)
        await store.record_preemption("uid-train-0", "uid-big-3", T0 + 120)
        # budget of 2: the last two kept, oldest first; read back without I/O
        expected = (T0 + 60, T0 + 120)
        assert job_history(api) == ",".join(format_time(t) for t in expected)
        record = store.read(key)
        assert record is not None and record.preemption_history == expected
    finally:
        await close_store(store, api)


async def test_garbled_history_is_replaced(api: FakeApi) -> None:
    api.jobs["team/train"] = job_obj("train")
    api.records["team/job.train"] = {
        "apiVersion": "runway.dev/v1alpha1",
        "kind": "WorkloadRecord",
        "metadata": {"name": "job.train", "namespace": "team", "uid": "r", "resourceVersion": "5"},
        "spec": {"workload": {"name": "train", "source": "owner:Job"}, "active": True},
        "status": {
            "eviction": {
                "reason": "Preempted",
                "time": format_time(T0 - 10),
                "preemptionHistory": ["not", "a", "history"] * 100,
            }
        },
    }
    cache = cache_with(pod_obj("train-0", job="train", labels=QUEUE))
    store = with_budget(make_store(api, cache), n=3)
    assert isinstance(store.store, KubeRecordStore)
    await store.store.reflector.list_once()
    try:
        await store.record_preemption("uid-train-0", "uid-big", T0)
        assert job_history(api) == format_time(T0)
    finally:
        await close_store(store, api)


async def test_no_budget_keeps_no_history(api: FakeApi) -> None:
    api.jobs["team/train"] = job_obj("train")
    cache = cache_with(pod_obj("train-0", job="train", labels=QUEUE))
    store = make_store(api, cache)  # no queue sets a budget, no default
    try:
        written = await store.record_preemption("uid-train-0", "uid-big", T0)
        assert written is not None and written.preemption_history == ()
        assert job_history(api) is None
    finally:
        await close_store(store, api)


async def test_a_label_gang_keeps_one_history_on_its_record(api: FakeApi) -> None:
    labels = {**QUEUE, "runway.dev/workload": "gang"}
    pods = [pod_obj(f"g-{i}", labels=labels) for i in range(2)]
    for p in pods:
        api.pods[f"team/{p['metadata']['name']}"] = json.loads(json.dumps(p))
    cache = cache_with(*pods)
    store = with_budget(make_store(api, cache))
    store.default_budget = PreemptionBudget(9, 60)  # a queue's budget wins over the default
    try:
        await store.record_preemption("uid-g-0", "uid-big", T0)
        await store.record_preemption("uid-g-1", "uid-big", T0)
        assert job_history(api, "wl.gang") == format_time(T0)
        assert not api.calls("PATCH", "/api/v1")  # the pods are never written
    finally:
        await close_store(store, api)
