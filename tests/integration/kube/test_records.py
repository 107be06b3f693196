"""Workload records over a faked API server (httpx.MockTransport): a WorkloadRecord created with
the workload's controllers as owners, its status written through the status subresource with a
resourceVersion precondition, a conflict re-read, read back without I/O and after a restart
(LIST), deactivation on ``spec.active``, nothing ever written to Jobs or pods, in memory without
a cluster."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.clock import ManualClock
from app.config.requeue import RequeuingStrategyConfig
from app.kube.workloadrecords import KubeRecordStore
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.model.lifecycle import Life
from app.policy.queues import QueueTree
from app.policy.workload import workload_of
from app.state.records import MemoryRecords, RecordBook
from tests.builders import job_obj, pod_obj, record_book
from tests.integration.kube_fake import RECORD, FakeApi, cache_with, close_store, make_store

T0 = 1_800_000_000.0
RECORDS = "/apis/runway.dev/v1alpha1/namespaces/team/workloadrecords"


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


def kube_store(book: RecordBook) -> KubeRecordStore:
    assert isinstance(book.store, KubeRecordStore)
    return book.store


async def test_record_created_owned_by_the_job_and_read_back_without_io(api: FakeApi) -> None:
    api.jobs["team/train"] = job_obj("train")
    cache = cache_with(pod_obj("train-0", job="train"), pod_obj("train-1", job="train"))
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        assert await book.write(key, RECORD) == RECORD
        (create,) = api.calls("POST", RECORDS)
        meta = create[2]["metadata"]
        assert meta["name"] == "job.train"
        # garbage-collected with the Job, whatever its kind; runway never reads the Job
        assert meta["ownerReferences"] == [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-job-train"}
        ]
        assert create[2]["spec"] == {
            "workload": {"name": "train", "source": "owner:Job"},
            "active": True,
        }
        (update,) = api.calls("PUT", f"{RECORDS}/job.train/status")
        assert update[2]["metadata"]["resourceVersion"]  # a precondition
        status = api.records["team/job.train"]["status"]
        assert (
            status["eviction"]["count"] == 1 and status["eviction"]["reason"] == "PodsReadyTimeout"
        )
        kinds = {c["type"]: c["status"] for c in status["conditions"]}
        assert kinds["Evicted"] == "True" and kinds["Deactivated"] == "False"
        before = len(api.requests)
        assert book.read(key) == RECORD  # synchronous, from the store
        assert len(api.requests) == before
        assert not api.calls("PATCH") and not api.calls("GET", "/apis/batch")
        # API writes for this eviction: the create and one status update (the record's first
        # write); the next eviction is one status update alone.
        await book.write(key, replace(RECORD, count=2))
        assert len(api.calls("PUT")) == 2 and len(api.calls("POST", RECORDS)) == 1
    finally:
        await close_store(book, api)


async def test_a_conflict_rereads_the_record_and_computes_again(api: FakeApi) -> None:
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await book.write(key, RECORD)

        def someone_else_wrote(obj: dict[str, Any]) -> None:
            obj["status"]["eviction"]["count"] = 5
            obj["metadata"]["resourceVersion"] = "999"

        api.conflicts, api.between_conflicts = 1, someone_else_wrote
        written = await book.update(key, lambda r: replace(r, count=r.count + 1) if r else None)
        assert written is not None and written.count == 6  # computed on what was re-read
        assert api.calls("GET", f"{RECORDS}/job.train")  # the re-read
    finally:
        await close_store(book, api)


async def test_records_are_listed_back_after_a_restart(api: FakeApi) -> None:
    cache = cache_with(pod_obj("train-0", job="train"), pod_obj("solo"))
    book = make_store(api, cache)
    job = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    solo = workload_of(cache.pod_by_key("team", "solo"))  # type: ignore[arg-type]
    await book.write(job, RECORD)
    await book.write(solo, replace(RECORD, count=2))
    await close_store(book, api)
    assert "ownerReferences" not in api.records["team/pod.solo"]["metadata"]  # a bare pod
    api.stop.clear()
    again = make_store(api, cache)
    try:
        assert again.read(job) is None
        await kube_store(again).reflector.list_once()
        assert again.read(job) == RECORD
        assert again.read(solo) == replace(RECORD, count=2)
    finally:
        await close_store(again, api)


async def test_deactivation_is_spec_active_and_activation_resets_the_count(api: FakeApi) -> None:
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await book.write(key, replace(RECORD, count=4, deactivated=True, message="limit"))
        assert api.records["team/job.train"]["spec"]["active"] is False
        record = book.read(key)
        assert record is not None and record.deactivated
        # A person reactivates with kubectl: spec.active true, status untouched.
        api.records["team/job.train"]["spec"]["active"] = True
        api.rv += 1
        api.records["team/job.train"]["metadata"]["resourceVersion"] = str(api.rv)
        await kube_store(book).refresh("team", "job.train")
        record = book.read(key)
        assert record is not None and not record.deactivated and record.count == 0
        assert record.requeue_at is None
        # runway's own :deactivate / :activate
        assert await book.deactivate(key)
        assert book.read(key).deactivated  # type: ignore[union-attr]
        await book.activate(key)
        assert api.records["team/job.train"]["spec"]["active"] is True
    finally:
        await close_store(book, api)


async def test_a_record_with_values_runway_cannot_use_reads_as_none(api: FakeApi) -> None:
    api.records["team/job.train"] = {
        "apiVersion": "runway.dev/v1alpha1",
        "kind": "WorkloadRecord",
        "metadata": {"name": "job.train", "namespace": "team", "uid": "r", "resourceVersion": "5"},
        "spec": {"workload": {"name": "train", "source": "owner:Job"}},
        "status": {
            "eviction": {"reason": "Nope", "time": "9999-12-31T23:59:59-23:59", "count": -4},
            "life": {"started": "not a time", "size": 0},
            "preemptions": [{"preemptorUID": "x", "node": "", "deadline": "1e12"}],
        },
    }
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await kube_store(book).reflector.list_once()
        state = book.state(key)
        assert state.eviction is None and state.life.started is None and state.preemptions == ()
        assert book.read(key) is None
    finally:
        await close_store(book, api)


async def test_without_a_cluster_records_stay_in_memory() -> None:
    cache = cache_with(pod_obj("train-0", job="train"))
    book = record_book(cache, RequeuingStrategyConfig(), ManualClock(T0), queues=QueueTree())
    assert isinstance(book.store, MemoryRecords) and book.writer is None
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    record = EvictionRecord(PODS_READY_TIMEOUT, T0, count=1)
    assert await book.write(key, record) == record
    assert book.read(key) == record


async def test_unowned_records_of_long_gone_workloads_are_deleted(api: FakeApi) -> None:
    cache = cache_with(pod_obj("solo"), pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    solo = workload_of(cache.pod_by_key("team", "solo"))  # type: ignore[arg-type]
    job = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    done = replace(RECORD, requeue_at=None)
    try:
        await book.write(solo, done)
        await book.write(job, done)
        assert await book.sweep_unowned(T0, 3600) == 0  # pods still there
        cache.replace_pods([])
        assert await book.sweep_unowned(T0, 3600) == 0  # gone since now
        assert await book.sweep_unowned(T0 + 3599, 3600) == 0
        assert await book.sweep_unowned(T0 + 3600, 3600) == 1
        assert "team/pod.solo" not in api.records  # deleted, with its UID as precondition
        (delete,) = api.calls("DELETE", RECORDS)
        assert delete[1].endswith("/pod.solo")
        assert delete[2]["preconditions"]["uid"] == "uid-wlr-team/pod.solo"
        assert "team/job.train" in api.records  # owned: the garbage collector's business
        assert book.read(solo) is None
    finally:
        await close_store(book, api)


async def test_deactivating_by_hand_then_activating_makes_up_no_eviction(api: FakeApi) -> None:
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await book.write_life(key, Life(created=T0 - 100))
        assert await book.deactivate(key)
        held = book.read(key)
        assert held is not None and held.deactivated and held.time == T0 - 100  # no 1970
        assert await book.activate(key) is None
        assert book.read(key) is None  # active again, and never evicted
        assert "eviction" not in api.records["team/job.train"]["status"]
    finally:
        await close_store(book, api)


async def test_the_record_says_until_when_min_runtime_protects_the_workload(api: FakeApi) -> None:
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    book.protection = lambda key, started: started + 600
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await book.write_life(key, Life(created=T0 - 100, admitted=T0, started=T0 + 5))
        status = api.records["team/job.train"]["status"]
        assert status["protection"] == {"preemptUntil": "2027-01-15T08:10:05Z"}
        assert book.state(key).protected_until == T0 + 605
    finally:
        await close_store(book, api)
