"""Eviction records over a faked API server (httpx.MockTransport): owners found by discovery,
merge patches with UID/resourceVersion preconditions, conflict re-read, bare pods, read back
through the owner reflector after a restart, dry-run without a cluster."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec
import pytest

from app.clock import ManualClock
from app.config.requeue import RequeuingStrategyConfig
from app.kube.owners import Discovery, OwnerWatcher
from app.kube.pods import KubePodWriter
from app.kube.records import KubeRecordWriter
from app.model import Pod
from app.model.eviction import PODS_READY_TIMEOUT, PREEMPTED, EvictionRecord
from app.policy.backoff import no_jitter
from app.policy.workload import workload_of
from app.state.cache import ClusterCache
from app.state.records import RecordBook
from tests.integration.kube_helpers import client, until

T0 = 1_800_000_000.0
BATCH = {
    "kind": "APIResourceList",
    "groupVersion": "batch/v1",
    "resources": [
        {"name": "jobs", "kind": "Job", "namespaced": True},
        {"name": "jobs/status", "kind": "Job", "namespaced": True},
    ],
}


def pod_obj(
    name: str,
    *,
    namespace: str = "team",
    job: str | None = None,
    node: str | None = None,
    uid: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod as the API server returns it (owned by Job ``job`` when given)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "resourceVersion": "1",
        "creationTimestamp": "2027-01-15T08:00:00Z",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if job:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job,
                "uid": f"uid-job-{job}",
                "controller": True,
            }
        ]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": "Pending"}}


def job_obj(
    name: str, namespace: str = "team", annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Job with a big spec runway must not keep."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-job-{name}",
            "resourceVersion": "10",
            "annotations": {"other.io/x": "y", **(annotations or {})},
        },
        "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }


class _Hang(httpx.AsyncByteStream):
    """A watch that stays open and sends nothing until the test ends."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await self.stop.wait()
        yield b""

    async def aclose(self) -> None:
        return None


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = v


@dataclass
class FakeApi:
    """Jobs and pods with discovery, GET, merge/strategic PATCH (with preconditions), DELETE,
    and a LIST + hanging WATCH of jobs. ``conflicts`` PATCHes of owners answer 409 first."""

    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    rv: int = 100
    conflicts: int = 0
    between_conflicts: Any = None
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def calls(self, method: str, prefix: str = "") -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] == method and r[1].startswith(prefix)]

    def _status(self, code: int, reason: str, message: str) -> httpx.Response:
        return httpx.Response(
            code, json={"kind": "Status", "code": code, "reason": reason, "message": message}
        )

    async def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, path, body))
        if path == "/apis/batch/v1":
            return httpx.Response(200, json=BATCH)
        parts = path.strip("/").split("/")
        if "events" in parts:  # Events: accepted, kept only in ``requests``
            return httpx.Response(201 if request.method == "POST" else 200, json=body)
        if path.startswith("/apis/batch/v1/") and parts[-1] == "jobs":
            if request.url.params.get("watch") == "true":
                return httpx.Response(200, stream=_Hang(self.stop))
            items = list(self.jobs.values())
            return httpx.Response(
                200, json={"metadata": {"resourceVersion": str(self.rv)}, "items": items}
            )
        store, kind = (self.jobs, "jobs") if "jobs" in parts else (self.pods, "pods")
        i = parts.index(kind)
        key = f"{parts[i - 1]}/{parts[i + 1]}"
        obj = store.get(key)
        if obj is None:
            return self._status(404, "NotFound", f"{kind} {key} not found")
        if request.method == "GET":
            return httpx.Response(200, json=obj)
        if request.method == "DELETE":
            pre = (body or {}).get("preconditions", {})
            if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
                return self._status(409, "Conflict", "Precondition failed: UID")
            del store[key]
            return httpx.Response(200, json=obj)
        assert request.method == "PATCH"
        meta = (body or {}).get("metadata", {})
        if kind == "jobs" and self.conflicts > 0:
            self.conflicts -= 1
            if self.between_conflicts:
                self.between_conflicts(obj)
            return self._status(409, "Conflict", "the object has been modified")
        if meta.get("uid") and meta["uid"] != obj["metadata"]["uid"]:
            return self._status(409, "Conflict", "Precondition failed: UID")
        if (
            meta.get("resourceVersion")
            and meta["resourceVersion"] != obj["metadata"]["resourceVersion"]
        ):
            return self._status(409, "Conflict", "the object has been modified")
        patch = json.loads(json.dumps(body))
        patch.get("metadata", {}).pop("uid", None)
        patch.get("metadata", {}).pop("resourceVersion", None)
        if parts[-1] == "status":  # strategic: conditions merged by type
            conds = obj.setdefault("status", {}).setdefault("conditions", [])
            for c in patch["status"]["conditions"]:
                conds[:] = [x for x in conds if x["type"] != c["type"]] + [c]
        else:
            _merge(obj, patch)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return httpx.Response(200, json=obj)


def cache_with(*pods: dict[str, Any]) -> ClusterCache:
    cache = ClusterCache()
    cache.replace_pods([msgspec.convert(p, Pod) for p in pods])
    return cache


def make_store(
    api: FakeApi, cache: ClusterCache, cfg: RequeuingStrategyConfig | None = None
) -> RecordBook:
    kube = client(api.transport)
    owners = OwnerWatcher(kube, Discovery(kube))
    return RecordBook(
        cache,
        cfg or RequeuingStrategyConfig(backoff_limit_count=3),
        ManualClock(T0),
        owners=owners,
        writer=KubeRecordWriter(kube, KubePodWriter(kube), owners=owners),
        jitter=no_jitter,
    )


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


async def _close(store: RecordBook, api: FakeApi) -> None:
    api.stop.set()
    assert isinstance(store.owners, OwnerWatcher)
    await store.owners.stop()
    assert isinstance(store.writer, KubeRecordWriter)
    await store.writer.client.aclose()


RECORD = EvictionRecord(PODS_READY_TIMEOUT, T0, count=1, requeue_at=T0 + 60, first_eviction_time=T0)


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
        await _close(store, api)


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
        await _close(store, api)


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
        await _close(store, api)


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
        await _close(store, api)


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
        await _close(store, api)


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
        await _close(store, api)


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
        await _close(store, api)


async def test_without_a_cluster_records_are_dry_run_and_kept_in_memory() -> None:
    cache = cache_with(pod_obj("solo"))
    store = RecordBook(cache, RequeuingStrategyConfig(), ManualClock(T0))
    key = workload_of(cache.pod_by_key("team", "solo"))  # type: ignore[arg-type]
    assert store.read(key) is None
    assert await store.write(key, RECORD) == RECORD
    assert store.read(key) == RECORD
    preempted = await store.record_preemption("uid-solo", "uid-p", T0 + 1)
    assert preempted is not None and preempted.count == 1 and preempted.preemptor_uid == "uid-p"
    assert await store.record_preemption("uid-unknown", "uid-p", T0 + 1) is None
