"""The preemption budget's history on the workload's record, over a faked API server: appended in
the same preconditioned patch as the ``Preempted`` eviction record, once per preemption of a
gang, bounded by the victim queue's budget, a garbled value replaced."""

from __future__ import annotations

import json

import pytest

from app.config.queues import QueueConfig
from app.model.eviction import HISTORY_KEY
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


def job_history(api: FakeApi, name: str = "train") -> str | None:
    return api.jobs[f"team/{name}"]["metadata"]["annotations"].get(HISTORY_KEY)


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
        patches = api.calls("PATCH", "/apis/batch/v1/namespaces/team/jobs/train")
        # the history rides in the record's one preconditioned patch
        assert all(p[2]["metadata"]["resourceVersion"] for p in patches)
        assert patches[0][2]["metadata"]["annotations"][HISTORY_KEY] == format_time(T0)
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
    api.jobs["team/train"] = job_obj(
        "train",
        annotations={
            "runway.dev/eviction-reason": "Preempted",
            "runway.dev/eviction-time": format_time(T0 - 10),
            HISTORY_KEY: "not,a,history" * 1000,
        },
    )
    cache = cache_with(pod_obj("train-0", job="train", labels=QUEUE))
    store = with_budget(make_store(api, cache), n=3)
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


async def test_bare_pods_each_carry_the_history(api: FakeApi) -> None:
    labels = {**QUEUE, "runway.dev/workload": "gang"}
    pods = [pod_obj(f"g-{i}", labels=labels) for i in range(2)]
    for p in pods:
        api.pods[f"team/{p['metadata']['name']}"] = json.loads(json.dumps(p))
    cache = cache_with(*pods)
    store = with_budget(make_store(api, cache))
    store.default_budget = PreemptionBudget(9, 60)  # a queue's budget wins over the default
    try:
        await store.record_preemption("uid-g-0", "uid-big", T0)
        for name in ("g-0", "g-1"):
            annotations = api.pods[f"team/{name}"]["metadata"]["annotations"]
            assert annotations[HISTORY_KEY] == format_time(T0)
    finally:
        await close_store(store, api)
