"""The life recorder over a faked API server: a workload's facts (created, admitted, started)
written on its Job by the leader, read back through the owner cache without I/O, kept through pod
replacement and a restart, reset by a full eviction; records of the previous version migrated."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from app.kube.workloadrecords import KubeRecordStore
from app.model import Pod
from app.model.job import Job
from app.model.timestamps import format_time
from app.policy.workload import WorkloadKey, workload_of
from app.state.cache import ClusterCache
from app.state.jobs import JobSizes
from app.state.records import RecordBook
from app.tasks.lifecycle import LifeRecorder
from tests.builders import job_obj, pod_obj
from tests.integration.kube_fake import FakeApi, cache_with, close_store, make_store

T0 = 1_800_000_000.0
JOB_CREATED = T0 - 3600


def bound(name: str, at: float, *, created: float = T0 - 60) -> dict[str, Any]:
    obj = pod_obj(name, job="train", node="n1")
    obj["metadata"]["creationTimestamp"] = format_time(created)
    obj["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": format_time(at)}
        ],
    }
    return obj


def pending(name: str, created: float) -> dict[str, Any]:
    obj = pod_obj(name, job="train")
    obj["metadata"]["creationTimestamp"] = format_time(created)
    return obj


def job(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    obj = job_obj("train", annotations=annotations)
    obj["metadata"]["creationTimestamp"] = format_time(JOB_CREATED)
    return obj


def facts(store: RecordBook, key: WorkloadKey) -> tuple[float | None, ...]:
    view = store.cache.workload(key)
    assert view is not None
    life = store.life(view).life
    return (life.created, life.admitted, life.started)


def life_of(api: FakeApi) -> dict[str, Any]:
    record = api.record("team", "job.train")
    assert record is not None
    life: dict[str, Any] = record["status"]["life"]
    return life


def upsert(cache: ClusterCache, obj: dict[str, Any]) -> None:
    cache.upsert_pod(msgspec.convert(obj, Pod))


async def test_facts_persisted_kept_through_replacement_and_restart() -> None:
    api = FakeApi()
    api.jobs["team/train"] = job()
    cache = cache_with(bound("train-0", T0), bound("train-1", T0 + 5))
    store = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    recorder = LifeRecorder(cache, store)
    try:
        # derived before anything is written (created: the earliest pod, for now)
        assert facts(store, key) == (T0 - 60, T0, T0 + 5)
        await recorder.run_once()
        life = life_of(api)
        # created is the earliest pod's creation at first sight (runway never reads the Job)
        assert life["created"] == format_time(T0 - 60)
        assert life["admitted"] == format_time(T0) and life["started"] == format_time(T0 + 5)
        assert facts(store, key) == (T0 - 60, T0, T0 + 5)
        assert not api.calls("GET", "/apis/batch") and not api.calls("PATCH", "/apis/batch")
        view = cache.workload(key)
        assert view is not None and store.life(view).source("started") == "persisted"
        # one pod replaced, the replacement pending: nothing moves, nothing is written
        cache.delete_pod(msgspec.convert(bound("train-1", T0 + 5), Pod))
        upsert(cache, pending("train-2", T0 + 100))
        writes = len(api.calls("PUT"))
        await recorder.run_once()
        assert facts(store, key) == (T0 - 60, T0, T0 + 5)
        assert len(api.calls("PUT")) == writes
    finally:
        await close_store(store, api)
    # a restart (or a new leader): a fresh process lists the facts back from the record
    api.stop.clear()
    cache = cache_with(bound("train-0", T0), pending("train-2", T0 + 100))
    store = make_store(api, cache)
    try:
        assert isinstance(store.store, KubeRecordStore)
        await store.store.reflector.list_once()
        assert facts(store, key) == (T0 - 60, T0, T0 + 5)
        # a full eviction: no member left bound; admitted and started reset, created stays
        cache.delete_pod(msgspec.convert(bound("train-0", T0), Pod))
        upsert(cache, pending("train-3", T0 + 200))
        assert facts(store, key) == (T0 - 60, None, None)
        await LifeRecorder(cache, store).run_once()
        life = life_of(api)
        assert "admitted" not in life and "started" not in life
        assert life["created"] == format_time(T0 - 60)
        # the re-created pods bind: a new admission
        upsert(cache, bound("train-2", T0 + 300, created=T0 + 100))
        assert facts(store, key) == (T0 - 60, T0 + 300, None)
    finally:
        await close_store(store, api)


def the_job(*, uid: str = "uid-job-train") -> Job:
    obj = job()
    obj["metadata"]["uid"] = uid
    return msgspec.convert(obj, Job)


async def test_created_is_persisted_at_first_sight_and_a_recreated_pending_pod_never_moves_it() -> (
    None
):
    """Issue #37: a Job's only pod, pending (never admitted), deleted and re-created by its
    controller keeps its workload's place: created is written at first sight, not at a bind."""
    api = FakeApi()
    cache = cache_with(pending("train-0", T0 + 10))
    store = make_store(api, cache)  # Jobs not readable: the earliest pod
    key = WorkloadKey("team", "train", "owner:Job")
    recorder = LifeRecorder(cache, store)
    try:
        await recorder.run_once()
        assert life_of(api) == {"created": format_time(T0 + 10), "size": 1}
        cache.delete_pod(msgspec.convert(pending("train-0", T0 + 10), Pod))
        upsert(cache, pending("train-0b", T0 + 50))
        writes = len(api.calls("PUT"))
        await recorder.run_once()
        assert facts(store, key) == (T0 + 10, None, None)
        assert len(api.calls("PUT")) == writes
    finally:
        await close_store(store, api)


@pytest.mark.parametrize(
    ("job_uid", "created"),
    [
        # the pods' controller is the Job runway read: its creationTimestamp (the API server's)
        ("uid-job-train", JOB_CREATED),
        # a Job of that name but another UID (re-created, or an ownerReference a tenant wrote
        # naming it): not this workload's owner, its time is not trusted
        ("uid-job-other", T0 + 10),
    ],
)
async def test_created_is_the_owners_creation_only_from_the_job_runway_read(
    job_uid: str, created: float
) -> None:
    api = FakeApi()
    jobs = JobSizes()
    cache = cache_with(pending("train-0", T0 + 10))
    store = make_store(api, cache, jobs=jobs)
    key = WorkloadKey("team", "train", "owner:Job")
    recorder = LifeRecorder(cache, store)
    try:
        # the pods seen before the Job (two watches): the earliest pod, for now
        await recorder.run_once()
        assert life_of(api)["created"] == format_time(T0 + 10)
        # the Job arrives: its creation is earlier (it made the pods) and moves created once
        jobs.upsert(the_job(uid=job_uid))
        recorder.workload_changed(key)  # wiring: the Job store's on_change
        await recorder.run_once()
        assert life_of(api)["created"] == format_time(created)
        assert facts(store, key)[0] == created
    finally:
        await close_store(store, api)
