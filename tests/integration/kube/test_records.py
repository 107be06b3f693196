"""Eviction records over a faked API server (httpx.MockTransport): owners found by discovery,
merge patches with UID/resourceVersion preconditions, conflict re-read, bare pods, read back
through the owner reflector after a restart, dry-run without a cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.clock import ManualClock
from app.config.requeue import RequeuingStrategyConfig
from app.model.eviction import PODS_READY_TIMEOUT, PREEMPTED, EvictionRecord
from app.policy.queues import QueueTree
from app.policy.workload import workload_of
from app.state.records import RecordBook
from tests.builders import job_obj, pod_obj
from tests.integration.kube_fake import RECORD, FakeApi, cache_with, close_store, make_store
from tests.integration.kube_helpers import until

T0 = 1_800_000_000.0


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


async def test_record_written_on_the_job_and_read_back_without_io(api: FakeApi) -> None:
    api.jobs["team/train"] = job_obj("train")
    cache = cache_with(pod_obj("train-0", job="train"), pod_obj("train-1", job="train"))
    store = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        assert await store.write(key, RECORD) == RECORD
        patch = api.calls("PATCH", "/apis/batch/v1/namespaces/team/jobs/train")
        assert len(patch) == 1
        meta = patch[0][2]["metadata"]
        # preconditions: the Job we read (UID and version), annotations with null for unset keys
        assert meta["uid"] == "uid-job-train" and meta["resourceVersion"] == "10"
        assert meta["annotations"]["runway.dev/eviction-count"] == "1"
        assert meta["annotations"]["runway.dev/eviction-preemptor-uid"] is None
        assert api.jobs["team/train"]["metadata"]["annotations"]["other.io/x"] == "y"
        # read is synchronous and comes from the owner cache (read after write)
        before = len(api.requests)
        assert store.read(key) == RECORD
        assert len(api.requests) == before
        # the pods were not annotated
        assert not api.calls("PATCH", "/api/v1")
    finally:
        await close_store(store, api)


async def test_discovery_is_asked_once_per_group_version(api: FakeApi) -> None:
    api.jobs["team/a"] = job_obj("a")
    api.jobs["team/b"] = job_obj("b")
    cache = cache_with(pod_obj("a-0", job="a"), pod_obj("b-0", job="b"))
    store = make_store(api, cache)
    try:
        for name in ("a-0", "b-0", "a-0"):
            key = workload_of(cache.pod_by_key("team", name))  # type: ignore[arg-type]
            await store.write(key, RECORD)
        await store.owners.wait_synced(5)  # type: ignore[union-attr]
        assert sum(1 for r in api.requests if r[1] == "/apis/batch/v1") == 1
    finally:
        await close_store(store, api)


async def test_conflict_rereads_and_applies_the_change_to_the_fresh_record(api: FakeApi) -> None:
    api.jobs["team/train"] = job_obj("train")
    cache = cache_with(pod_obj("train-0", job="train"))
    store = make_store(api, cache)
    assert cache.pod_by_key("team", "train-0") is not None

    def someone_else_writes(obj: dict[str, Any]) -> None:
        # another replica recorded a PodsReadyTimeout eviction in between
        obj["metadata"]["annotations"].update(
            {k: v for k, v in RECORD.to_annotations().items() if v is not None}
        )
        obj["metadata"]["resourceVersion"] = "11"

    api.conflicts = 1
    api.between_conflicts = someone_else_writes
    try:
        written = await store.record_preemption("uid-train-0", "uid-big", T0 + 5)
        assert written is not None
        assert written.reason == PREEMPTED and written.preemptor_uid == "uid-big"
        # built on the fresh record: the readiness history survives
        assert written.count == 1 and written.requeue_at == T0 + 60
        patches = api.calls("PATCH", "/apis/batch/v1")
        assert [p[2]["metadata"]["resourceVersion"] for p in patches] == ["10", "11"]
        assert len(api.calls("GET", "/apis/batch/v1/namespaces/team/jobs/train")) == 2
    finally:
        await close_store(store, api)


async def test_a_recreated_owner_is_not_written(api: FakeApi) -> None:
    job = job_obj("train")
    job["metadata"]["uid"] = "uid-new-job"
    api.jobs["team/train"] = job
    cache = cache_with(pod_obj("train-0", job="train"))
    store = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        assert await store.write(key, RECORD) is None
        assert not api.calls("PATCH")
    finally:
        await close_store(store, api)


async def test_bare_pods_each_carry_the_record(api: FakeApi) -> None:
    labels = {"runway.dev/workload": "gang"}
    pods = [pod_obj(f"g-{i}", labels=labels) for i in range(3)]
    for p in pods[:2]:  # g-2 was deleted meanwhile: its 404 is skipped
        api.pods[f"team/{p['metadata']['name']}"] = json.loads(json.dumps(p))
    cache = cache_with(*pods)
    store = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "g-0"))  # type: ignore[arg-type]
    try:
        assert await store.write(key, RECORD) == RECORD
        patched = api.calls("PATCH", "/api/v1/namespaces/team/pods/")
        assert [p[1].rsplit("/", 1)[1] for p in patched] == ["g-0", "g-1", "g-2"]
        assert all(p[2]["metadata"]["uid"] == f"uid-{p[1].rsplit('/', 1)[1]}" for p in patched)
        assert not api.calls("GET", "/apis")  # no owner, no discovery
        # read after write from the pod cache; a re-created pod (new uid) is left alone
        assert store.read(key) == RECORD
        api.pods["team/g-0"]["metadata"]["uid"] = "uid-other"
        await store.write(key, RECORD)
        assert api.pods["team/g-0"]["metadata"]["annotations"]["runway.dev/eviction-count"] == "1"
    finally:
        await close_store(store, api)


async def test_records_survive_a_restart_through_the_owner_reflector(api: FakeApi) -> None:
    annotations = {k: v for k, v in RECORD.to_annotations().items() if v is not None}
    api.jobs["team/train"] = job_obj("train", annotations=annotations)
    api.jobs["team/plain"] = job_obj("plain")
    cache = cache_with(pod_obj("train-0", job="train"), pod_obj("plain-0", job="plain"))
    store = make_store(api, cache)  # a fresh process: nothing in memory
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        assert store.read(key) is None  # first read starts the Job reflector
        await until(lambda: store.read(key) is not None, what="record from the Job list")
        assert store.read(key) == RECORD
        # only owners with runway annotations are kept, and only those annotations
        assert store.owners is not None
        kept = store.owners._kinds[("batch/v1", "Job")].store.entries
        assert list(kept) == ["team/train"]
        assert all(k.startswith("runway.dev/") for k in kept["team/train"].annotations)
        assert store.owners.kinds() == {"Job batch/v1": "synced"}
    finally:
        await close_store(store, api)


async def test_activate_resets_count_and_backoff(api: FakeApi) -> None:
    api.jobs["team/train"] = job_obj("train")
    cache = cache_with(pod_obj("train-0", job="train"))
    store = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await store.write(key, EvictionRecord(PODS_READY_TIMEOUT, T0, count=3, deactivated=True))
        after = await store.activate(key)
        assert after is not None and after.count == 0 and not after.deactivated
        assert store.read(key) == after
        ann = api.jobs["team/train"]["metadata"]["annotations"]
        assert "runway.dev/eviction-deactivated" not in ann
        assert ann["runway.dev/eviction-count"] == "0"
    finally:
        await close_store(store, api)


async def test_without_a_cluster_records_are_dry_run_and_kept_in_memory() -> None:
    cache = cache_with(pod_obj("solo"))
    store = RecordBook(cache, RequeuingStrategyConfig(), ManualClock(T0), queues=QueueTree())
    key = workload_of(cache.pod_by_key("team", "solo"))  # type: ignore[arg-type]
    assert store.read(key) is None
    assert await store.write(key, RECORD) == RECORD
    assert store.read(key) == RECORD
    preempted = await store.record_preemption("uid-solo", "uid-p", T0 + 1)
    assert preempted is not None and preempted.count == 1 and preempted.preemptor_uid == "uid-p"
    assert await store.record_preemption("uid-unknown", "uid-p", T0 + 1) is None
