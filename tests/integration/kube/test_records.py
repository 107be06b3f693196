"""Workload records over a faked API server (a respx router): a WorkloadRecord created with
the workload's controllers as owners, its status written through the status subresource with a
resourceVersion precondition, a conflict re-read, read back without I/O and after a restart
(LIST), deactivation on ``spec.active``, nothing ever written to Jobs or pods, in memory without
a cluster."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from app import metrics
from app.clock import ManualClock
from app.config.requeue import RequeuingStrategyConfig
from app.kube.workloadrecords import KubeRecordStore
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.model.gate import seal
from app.model.lifecycle import Life
from app.model.record import RecordWriteFailed
from app.policy.queues import QueueTree
from app.policy.workload import workload_of
from app.state.records import MemoryRecords, RecordBook
from tests.builders import job_obj, pod_obj, record_book, update_record, write_life, write_record
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
        assert await write_record(book, key, RECORD) == RECORD
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
        await write_record(book, key, replace(RECORD, count=2))
        assert len(api.calls("PUT")) == 2 and len(api.calls("POST", RECORDS)) == 1
    finally:
        await close_store(book, api)


async def test_a_conflict_rereads_the_record_and_computes_again(api: FakeApi) -> None:
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await write_record(book, key, RECORD)

        def someone_else_wrote(obj: dict[str, Any]) -> None:
            obj["status"]["eviction"]["count"] = 5
            obj["metadata"]["resourceVersion"] = "999"

        api.conflicts, api.between_conflicts = 1, someone_else_wrote
        written = await update_record(
            book, key, lambda r: replace(r, count=r.count + 1) if r else None
        )
        assert written is not None and written.count == 6  # computed on what was re-read
        assert api.calls("GET", f"{RECORDS}/job.train")  # the re-read
    finally:
        await close_store(book, api)


async def test_records_are_listed_back_after_a_restart(api: FakeApi) -> None:
    cache = cache_with(pod_obj("train-0", job="train"), pod_obj("solo"))
    book = make_store(api, cache)
    job = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    solo = workload_of(cache.pod_by_key("team", "solo"))  # type: ignore[arg-type]
    await write_record(book, job, RECORD)
    await write_record(book, solo, replace(RECORD, count=2))
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
        await write_record(book, key, replace(RECORD, count=4, deactivated=True, message="limit"))
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
    assert await write_record(book, key, record) == record
    assert book.read(key) == record


async def test_records_of_long_gone_workloads_are_deleted_owned_or_not(api: FakeApi) -> None:
    """Issue #36: an owner of a made-up API (rt.example/v1) is never resolved by the garbage
    collector, so the leader deletes any record whose workload has had no pod for the
    retention and that holds nothing; one that still holds (a backoff pending) stays."""
    fake = pod_obj("fake-0")
    fake["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "rt.example/v1",
            "kind": "Job",
            "name": "ghost",
            "uid": "g",
            "controller": True,
        }
    ]
    cache = cache_with(pod_obj("solo"), pod_obj("train-0", job="train"), fake, pod_obj("held"))
    book = make_store(api, cache)
    solo, job, ghost, held = (
        workload_of(cache.pod_by_key("team", n))  # type: ignore[arg-type]
        for n in ("solo", "train-0", "fake-0", "held")
    )
    done = replace(RECORD, requeue_at=None)
    try:
        for key in (solo, job, ghost):
            await write_record(book, key, done)
        await write_record(book, held, replace(RECORD, requeue_at=T0 + 7200))
        assert api.records["team/job.ghost"]["metadata"]["ownerReferences"][0]["uid"] == "g"
        assert await book.sweep_gone(T0, 3600) == 0  # pods still there
        cache.replace_pods([])
        assert await book.sweep_gone(T0, 3600) == 0  # gone since now
        assert await book.sweep_gone(T0 + 3599, 3600) == 0
        assert await book.sweep_gone(T0 + 3600, 3600) == 3
        assert set(api.records) == {"team/pod.held"}  # its backoff is pending
        delete = next(d for d in api.calls("DELETE", RECORDS) if d[1].endswith("/pod.solo"))
        assert delete[2]["preconditions"]["uid"] == "uid-wlr-team/pod.solo"
        assert book.read(solo) is None
    finally:
        await close_store(book, api)


async def test_deactivating_by_hand_then_activating_makes_up_no_eviction(api: FakeApi) -> None:
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await write_life(book, key, Life(created=T0 - 100))
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
        await write_life(book, key, Life(created=T0 - 100, admitted=T0, started=T0 + 5))
        status = api.records["team/job.train"]["status"]
        assert status["protection"] == {"preemptUntil": "2027-01-15T08:10:05Z"}
        assert book.state(key).protected_until == T0 + 605
    finally:
        await close_store(book, api)


# --- issue #36 item 1: a record name never fails; a record that cannot be written gains nothing


def failures(reason: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "runway_record_write_failures_total", {"reason": reason}
    )
    return value or 0.0


async def test_an_owner_no_object_can_have_is_no_owner_and_every_write_fits_the_schema(
    api: FakeApi,
) -> None:
    """A 300-character owner name (the API server accepts it on a pod, the record's schema
    allows 253): the pod is a workload of its own, its record is written and owned by nobody."""
    owner = {"apiVersion": "rt.example/v1", "kind": "Job", "name": "x" * 300, "uid": "u"}
    obj = pod_obj("long-0")
    obj["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
    cache = cache_with(obj)
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "long-0"))  # type: ignore[arg-type]
    assert (key.name, key.source) == ("long-0", "pod")
    try:
        assert await write_record(book, key, RECORD) == RECORD
        (create,) = api.calls("POST", RECORDS)
        assert "ownerReferences" not in create[2]["metadata"]
        assert api.records["team/pod.long-0"]["status"]["eviction"]["count"] == 1
    finally:
        await close_store(book, api)


@pytest.mark.parametrize(
    ("code", "reason", "counted"),
    [
        (422, "Invalid", "invalid"),  # an older CRD with tighter bounds
        (403, "Forbidden", "forbidden"),  # the namespace's ResourceQuota on workloadrecords
        (503, "ServiceUnavailable", "unavailable"),
    ],
)
async def test_a_record_that_cannot_be_written_is_kept_in_memory_and_backed_off(
    api: FakeApi, code: int, reason: str, counted: str
) -> None:
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    clock = book.clock
    assert isinstance(clock, ManualClock)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    api.record_refusal = (code, reason)
    before = failures(counted)
    try:
        # The eviction holds all the same (read back from memory): the workload gains nothing.
        assert await write_record(book, key, RECORD) == RECORD
        assert book.read(key) == RECORD
        assert failures(counted) == before + 1
        assert book.unwritten() == [("team", "job.train", book.state(key))]
        tried = len(api.requests)
        # Within the backoff (1 s) no write is attempted, however often the state changes.
        for count in (2, 3, 4):
            await write_record(book, key, replace(RECORD, count=count))
        assert len(api.requests) == tried
        assert book.read(key) == replace(RECORD, count=4)
        assert failures(counted) == before + 1
        # After it, one attempt; failing again doubles the wait (2 s).
        clock.advance(1.0)
        await write_life(book, key, Life(created=T0 - 100))
        assert len(api.requests) > tried
        assert failures(counted) == before + 2
        tried = len(api.requests)
        clock.advance(1.5)
        await write_life(book, key, Life(created=T0 - 90))
        assert len(api.requests) == tried
        # The API server takes it again: the state kept in memory is what gets written.
        api.record_refusal = None
        clock.advance(1.0)
        await write_life(book, key, Life(created=T0 - 100))
        status = api.records["team/job.train"]["status"]
        assert status["eviction"]["count"] == 4
        assert book.unwritten() == []
        assert book.read(key) == replace(RECORD, count=4)
    finally:
        await close_store(book, api)


async def test_a_record_of_another_identity_is_never_read_or_written_as_this_ones(
    api: FakeApi,
) -> None:
    """``owner:JOB`` and ``owner:Job`` named ``train`` share the name ``job.train``: the record
    says whose it is (``spec.workload``)."""
    api.records["team/job.train"] = {
        "apiVersion": "runway.dev/v1alpha1",
        "kind": "WorkloadRecord",
        "metadata": {"name": "job.train", "namespace": "team", "uid": "r", "resourceVersion": "5"},
        "spec": {"workload": {"name": "train", "source": "owner:JOB"}, "active": False},
        "status": {"life": {"created": "2000-01-01T00:00:00Z"}},
    }
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    before = failures("foreign")
    try:
        await kube_store(book).reflector.list_once()
        assert book.state(key).life.created is None and book.read(key) is None
        assert await write_record(book, key, RECORD) == RECORD  # kept in memory: not written there
        assert failures("foreign") == before + 1
        assert api.records["team/job.train"]["spec"]["workload"]["source"] == "owner:JOB"
        assert "eviction" not in api.records["team/job.train"]["status"]
    finally:
        await close_store(book, api)


async def test_a_persons_activation_is_told_when_the_record_cannot_be_written(
    api: FakeApi,
) -> None:
    cache = cache_with(pod_obj("train-0", job="train"))
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await write_record(book, key, replace(RECORD, deactivated=True))
        api.record_refusal = (403, "Forbidden")
        with pytest.raises(RecordWriteFailed) as failed:
            await book.change(key, lambda s: replace(s, active=True), durable=True)
        assert failed.value.reason == "forbidden"
        assert book.read(key).deactivated  # type: ignore[union-attr]
        assert book.unwritten() == []
    finally:
        await close_store(book, api)


# --- issue #36 item 7: a record names only its own namespace's pods -------------------------


async def test_a_victims_record_names_a_preemptor_of_another_namespace_only_sealed(
    api: FakeApi,
) -> None:
    victim = pod_obj("train-0", job="train")
    stranger = pod_obj("big", namespace="tenant-b", uid="uid-big")
    neighbour = pod_obj("mine", uid="uid-mine")
    cache = cache_with(victim, stranger, neighbour)
    book = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        await book.record_preemption("uid-train-0", "uid-big", T0)
        status = api.records["team/job.train"]["status"]
        assert status["eviction"]["preemptorUID"] == seal("uid-big")
        assert "uid-big" not in json.dumps(api.records["team/job.train"])
        # runway finds it again (anti-flapping: the victim waits for its pending preemptor)
        record = book.read(key)
        assert record is not None and book.unseal(record.preemptor_uid) == "uid-big"
        # a preemptor of the victim's own namespace is named as it is
        await book.record_preemption("uid-train-0", "uid-mine", T0 + 10)
        assert api.records["team/job.train"]["status"]["eviction"]["preemptorUID"] == "uid-mine"
        assert book.unseal("uid-mine") == "uid-mine"
        assert book.unseal(seal("never-seen")) is None
    finally:
        await close_store(book, api)


async def test_no_record_is_created_in_a_namespace_holding_the_cap(api: FakeApi) -> None:
    """Issue #36 item 8: ``kubernetes.recordsPerNamespace``; the workload's state is kept in
    memory (it gains nothing), other namespaces are not affected."""
    pods = [pod_obj(f"w{i}") for i in range(3)] + [pod_obj("x", namespace="other")]
    cache = cache_with(*pods)
    book = make_store(api, cache)
    kube_store(book).records_per_namespace = 2
    keys = sorted(workload_of(p) for p in cache.pods())
    before = failures("capped")
    try:
        for key in keys:
            assert await write_record(book, key, RECORD) == RECORD
            assert book.read(key) == RECORD
        assert sorted(api.records) == ["other/pod.x", "team/pod.w0", "team/pod.w1"]
        assert failures("capped") == before + 1
        # a record going makes room again
        await kube_store(book).remove(
            "team", "pod.w0", api.records["team/pod.w0"]["metadata"]["uid"]
        )
        book.clock.advance(1.0)  # type: ignore[attr-defined]
        w2 = next(k for k in keys if k.name == "w2")
        await write_record(book, w2, replace(RECORD, count=2))
        assert api.records["team/pod.w2"]["status"]["eviction"]["count"] == 2
    finally:
        await close_store(book, api)
