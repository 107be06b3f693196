"""The life recorder over a faked API server: a workload's facts (created, admitted, started)
written on its Job by the leader, read back through the owner cache without I/O, kept through pod
replacement and a restart, reset by a full eviction; records of the previous version migrated."""

from __future__ import annotations

from typing import Any

import msgspec

from app.model import Pod
from app.model.lifecycle import ADMITTED_KEY, CREATED_KEY, STARTED_KEY
from app.model.timestamps import format_time
from app.policy.workload import WorkloadKey, workload_of
from app.state.cache import ClusterCache
from app.state.records import RecordBook
from app.tasks.lifecycle import LifeRecorder
from tests.builders import job_obj, pod_obj
from tests.integration.kube_fake import RECORD, FakeApi, cache_with, close_store, make_store
from tests.integration.kube_helpers import until

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
        ann = api.jobs["team/train"]["metadata"]["annotations"]
        # created is the Job's creationTimestamp, read fresh by the writer
        assert ann[CREATED_KEY] == format_time(JOB_CREATED)
        assert ann[ADMITTED_KEY] == format_time(T0) and ann[STARTED_KEY] == format_time(T0 + 5)
        assert facts(store, key) == (JOB_CREATED, T0, T0 + 5)
        view = cache.workload(key)
        assert view is not None and store.life(view).source("started") == "persisted"
        # one pod replaced, the replacement pending: nothing moves, nothing is written
        cache.delete_pod(msgspec.convert(bound("train-1", T0 + 5), Pod))
        upsert(cache, pending("train-2", T0 + 100))
        writes = len(api.calls("PATCH"))
        await recorder.run_once()
        assert facts(store, key) == (JOB_CREATED, T0, T0 + 5)
        assert len(api.calls("PATCH")) == writes
    finally:
        await close_store(store, api)
    # a restart (or a new leader): a fresh process reads the facts back from the Job
    cache = cache_with(bound("train-0", T0), pending("train-2", T0 + 100))
    store = make_store(api, cache)
    try:
        store.watch_owners()
        await until(lambda: store.persisted_life(key).started is not None, what="Job facts")
        assert facts(store, key) == (JOB_CREATED, T0, T0 + 5)
        # a full eviction: no member left bound; admitted and started reset, created stays
        cache.delete_pod(msgspec.convert(bound("train-0", T0), Pod))
        upsert(cache, pending("train-3", T0 + 200))
        assert facts(store, key) == (JOB_CREATED, None, None)
        await LifeRecorder(cache, store).run_once()
        ann = api.jobs["team/train"]["metadata"]["annotations"]
        assert ADMITTED_KEY not in ann and STARTED_KEY not in ann
        assert ann[CREATED_KEY] == format_time(JOB_CREATED)
        # the re-created pods bind: a new admission
        upsert(cache, bound("train-2", T0 + 300, created=T0 + 100))
        assert facts(store, key) == (JOB_CREATED, T0 + 300, None)
    finally:
        await close_store(store, api)


async def test_a_record_of_the_previous_version_is_migrated() -> None:
    api = FakeApi()
    # A Job evicted by a runway that did not persist the facts: its record only.
    old = {k: v for k, v in RECORD.to_annotations().items() if v is not None}
    api.jobs["team/train"] = job(old)
    cache = cache_with(bound("train-0", T0 + 10), bound("train-1", T0 + 20))
    store = make_store(api, cache)
    key = workload_of(cache.pod_by_key("team", "train-0"))  # type: ignore[arg-type]
    try:
        store.watch_owners()
        await until(lambda: store.read(key) is not None, what="the old record")
        await LifeRecorder(cache, store).run_once()  # the first pass sweeps every workload
        ann = api.jobs["team/train"]["metadata"]["annotations"]
        assert ann[CREATED_KEY] == format_time(JOB_CREATED)
        assert ann[STARTED_KEY] == format_time(T0 + 20)
        assert store.read(key) == RECORD  # the record itself is untouched
    finally:
        await close_store(store, api)
