"""The PodsReady evictor against a faked API server, with a manual clock: timeout → eviction
(record on the Job, DisruptionTarget, UID-precondition delete) → filter holds for the backoff →
second eviction with a doubled backoff → deactivation at the limit (pods still deleted, filter
holds) → ``POST ...:activate`` (authenticated) resets → filter passes. The test plays the
kubelet (binds), the reflector (cache = API state) and the Job controller (re-creates pods)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app import metrics
from app.api.extender import handle_filter
from app.clock import ManualClock
from app.kube.events import KubeEventRecorder
from app.model.timestamps import format_time
from app.policy.backoff import no_jitter
from app.server import create_app
from app.tasks.podsready import PodsReadyEvictor
from app.wiring import Runway
from tests.asgi import asgi_client
from tests.builders import bind, job_obj, pod, pod_obj, pool_node, runway_config
from tests.integration.kube_fake import FakeApi
from tests.integration.kube_helpers import client, until

T0 = 1_800_000_000.0
TOKEN = "0123456789abcdef0123456789abcdef"
CONFIG = {
    "auth": {"mode": "static", "staticTokens": [TOKEN]},
    "waitForPodsReady": {
        "enable": True,
        "timeout": "30s",
        "requeuingStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 10},
    },
}


class World:
    """The fake cluster, runway's runtime and app, and the test's controllers."""

    def __init__(self) -> None:
        self.api = FakeApi()
        self.clock = ManualClock(T0)
        self.kube = client(self.api.transport)
        self.app = create_app(runway_config(CONFIG), self.clock, kube=self.kube)
        self.runtime: Runway = self.app.state.runway
        self.evictor = self.make_evictor(tick=0.05)
        self.generation = 0
        self.api.jobs["ml/train"] = job_obj("train", "ml")
        self.runtime.cache.upsert_node(pool_node("n1", "a"))

    def make_evictor(self, **options: Any) -> PodsReadyEvictor:
        rt = self.runtime
        return PodsReadyEvictor(
            rt.requeue,
            rt.records,
            rt.pods,
            rt.clock,
            rt.config.wait_for_pods_ready,
            pool_label=rt.config.min_runtime.pool_label,
            jitter=no_jitter,
            events=rt.events,
            **options,
        )

    def create_pods(self) -> None:
        """The Job controller: two pending pods (new UIDs each generation)."""
        self.generation += 1
        for i in range(2):
            obj = pod_obj(
                f"train-{i}", namespace="ml", job="train", uid=f"uid-{self.generation}-{i}"
            )
            obj["metadata"]["creationTimestamp"] = format_time(self.clock.now())
            self.api.pods[f"ml/train-{i}"] = obj
        self.sync()

    def bind(self) -> None:
        """kube-scheduler + kubelet: bound now, running, never Ready."""
        for obj in self.api.pods.values():
            bind(obj, self.clock.now())
        self.sync()

    def sync(self) -> None:
        """The pod reflector: the cache holds what the API server holds."""
        self.runtime.cache.replace_pods([pod(p) for p in self.api.pods.values()])

    def filter(self) -> dict[str, Any]:
        obj = self.api.pods.get("ml/train-0") or pod_obj("train-0", namespace="ml", job="train")
        body = json.dumps({"Pod": obj, "Nodes": None, "NodeNames": ["n1", "n2"]}).encode()
        result: dict[str, Any] = json.loads(handle_filter(self.runtime.api_context(), body))
        return result

    async def evict_due(self) -> None:
        """One evictor pass, and wait for its eviction tasks."""
        await self.evictor.tick_once()
        await until(lambda: self.evictor.pending_tasks() == 0, what="evictions")
        self.sync()

    def record(self) -> Any:
        key = self.runtime.cache.workload_keys()[0] if self.runtime.cache.workload_keys() else None
        assert key is not None
        return self.runtime.records.read(key)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    assert isinstance(w.runtime.events, KubeEventRecorder)
    w.runtime.events.start()
    yield w
    await w.runtime.events.stop()
    await w.evictor.stop()
    w.api.stop.set()
    assert w.runtime.record_store is not None
    await w.runtime.record_store.stop()
    await w.kube.aclose()


async def test_timeout_backoff_second_eviction_deactivation_and_activation(world: World) -> None:
    w = world
    counters = {
        "timeout": metrics.EVICTED_WORKLOADS.labels("default", "PodsReadyTimeout"),
        "deactivated": metrics.EVICTED_WORKLOADS.labels("default", "Deactivated"),
        "reactivated": metrics.REACTIVATED_WORKLOADS.labels("default", "true"),
    }
    before = {k: c._value.get() for k, c in counters.items()}
    w.create_pods()
    assert w.filter()["NodeNames"] == ["n1", "n2"]
    w.bind()
    w.clock.advance(29)
    await w.evict_due()
    assert not w.api.calls("DELETE"), "not due before the timeout"

    # first eviction at admission + 30 s
    w.clock.advance(2)
    await w.evict_due()
    record = w.api.record("ml", "job.train")
    assert record is not None
    eviction = record["status"]["eviction"]
    assert eviction["reason"] == "PodsReadyTimeout"
    assert eviction["count"] == 1
    assert eviction["failedPools"] == ["a"]
    assert "annotations" not in w.api.jobs["ml/train"]["metadata"] or not any(
        k.startswith("runway.dev/") for k in w.api.jobs["ml/train"]["metadata"]["annotations"]
    )
    deletes = w.api.calls("DELETE")
    assert sorted(d[2]["preconditions"]["uid"] for d in deletes) == ["uid-1-0", "uid-1-1"]
    marks = w.api.calls("PATCH", "/api/v1/namespaces/ml/pods/")
    assert all(m[1].endswith("/status") for m in marks) and len(marks) == 2
    cond = marks[0][2]["status"]["conditions"][0]
    assert (cond["type"], cond["reason"]) == ("DisruptionTarget", "PodsReadyTimeout")
    assert "waitForPodsReady.timeout" in cond["message"]
    assert w.api.pods == {}

    # the Job re-creates its pods: held for the backoff (10 s), then let through
    w.create_pods()
    held = w.filter()
    assert held["NodeNames"] == []
    assert "requeue backoff" in held["FailedAndUnresolvableNodes"]["n1"]
    rec = w.record()
    assert rec.count == 1 and rec.requeue_at == T0 + 31 + 10
    w.clock.advance(10)
    assert w.filter()["NodeNames"] == ["n1", "n2"]

    # admitted again, times out again: count 2, backoff doubled
    w.bind()
    w.clock.advance(31)
    await w.evict_due()
    w.create_pods()
    rec = w.record()
    assert rec.count == 2 and rec.requeue_at == w.clock.now() + 20
    assert not rec.deactivated

    # third timeout: the limit (2) is exceeded → deactivated; pods still deleted, then held
    w.clock.advance(20)
    w.bind()
    w.clock.advance(31)
    deletes_before = len(w.api.calls("DELETE"))
    await w.evict_due()
    assert len(w.api.calls("DELETE")) == deletes_before + 2
    w.create_pods()
    rec = w.record()
    assert rec.deactivated and rec.count == 2
    w.clock.advance(3600)
    held = w.filter()
    assert held["NodeNames"] == []
    assert "deactivated" in held["FailedAndUnresolvableNodes"]["n2"]
    assert "RequeuingLimitExceeded" in held["FailedAndUnresolvableNodes"]["n2"]

    # reactivation needs a token, then resets count and backoff
    async with asgi_client(w.app) as http:
        url = "/v1/workloads/ml/train:activate"
        assert (await http.post(url)).status_code == 401
        resp = await http.post(url, headers={"Authorization": f"Bearer {TOKEN}"})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["evictionRecord"]["count"] == 0
        assert body["evictionRecord"]["deactivated"] is False
        assert body["state"] == "pending"
    assert w.filter()["NodeNames"] == ["n1", "n2"]

    # Events on the pods and the Job: two timeouts, the deactivation, the reactivation
    assert isinstance(w.runtime.events, KubeEventRecorder)
    assert await w.runtime.events.flush(5.0)
    events = [b for _, _, b in w.api.calls("POST", "/api/v1/namespaces/ml/events")]
    seen = sorted((e["involvedObject"]["kind"], e["reason"], e["count"]) for e in events)
    assert seen == [
        ("Job", "Deactivated", 1),
        *[("Job", "PodsReadyTimeout", 1)] * 2,
        ("Job", "Reactivated", 1),
        *[("Pod", "Deactivated", 1)] * 2,
        *[("Pod", "PodsReadyTimeout", 1)] * 4,
        *[("Pod", "Reactivated", 1)] * 2,
    ]
    after = {k: c._value.get() - before[k] for k, c in counters.items()}
    assert after == {"timeout": 2, "deactivated": 1, "reactivated": 1}
    # Each eviction's message differs (its backoff), so each is a new Event (no count PATCH).
    assert not w.api.calls("PATCH", "/api/v1/namespaces/ml/events")
    assert all(
        e["type"] == ("Normal" if e["reason"] == "Reactivated" else "Warning") for e in events
    )
    reactivated = next(e for e in events if e["reason"] == "Reactivated")
    assert "deactivation cleared" in reactivated["message"]


async def test_a_half_done_eviction_is_finished_without_counting_twice(world: World) -> None:
    w = world
    w.create_pods()
    w.bind()
    w.clock.advance(31)
    # the first attempt records, then the delete of one pod fails for good (403)
    forbidden = {"kind": "Status", "code": 403, "reason": "Forbidden"}
    w.api.fault(httpx.Response(403, json=forbidden), method="DELETE")
    await w.evict_due()
    assert w.record().count == 1
    assert len(w.api.pods) == 2
    w.api.fault()
    w.clock.advance(1)
    await w.evict_due()
    assert w.api.pods == {}
    w.create_pods()
    assert w.record().count == 1, "the same admission must not be counted twice"


async def test_a_timeout_deletes_only_the_active_pods(world: World) -> None:
    """Issue #37: a Job with one Succeeded and two never-ready pods times out. Kueue suspends the
    Job, whose controller deletes only the active pods: the Succeeded pod (its logs, its
    completion) and a Failed one stay; the eviction is recorded the same (count 1)."""
    w = world
    w.create_pods()
    obj = pod_obj("train-2", namespace="ml", job="train", uid="uid-1-2")
    obj["metadata"]["creationTimestamp"] = format_time(w.clock.now())
    w.api.pods["ml/train-2"] = obj
    w.bind()
    done = w.api.pods["ml/train-0"]
    done["status"]["phase"] = "Succeeded"
    w.api.pods["ml/train-9"] = bind(
        pod_obj("train-9", namespace="ml", job="train", uid="uid-1-9"), w.clock.now()
    )
    w.api.pods["ml/train-9"]["status"]["phase"] = "Failed"
    w.sync()
    w.clock.advance(31)
    await w.evict_due()
    record = w.api.record("ml", "job.train")
    assert record is not None and record["status"]["eviction"]["count"] == 1
    deletes = w.api.calls("DELETE")
    assert sorted(d[2]["preconditions"]["uid"] for d in deletes) == ["uid-1-1", "uid-1-2"]
    marked = sorted(
        m[1].rsplit("/", 2)[-2] for m in w.api.calls("PATCH", "/api/v1/namespaces/ml/pods/")
    )
    assert marked == ["train-1", "train-2"]
    assert sorted(w.api.pods) == ["ml/train-0", "ml/train-9"]


async def test_only_the_leader_evicts(world: World) -> None:
    w = world
    follower = w.make_evictor(is_leader=lambda: False)
    w.create_pods()
    w.bind()
    w.clock.advance(60)
    await follower.tick_once()
    assert not w.api.calls("DELETE") and follower.pending_tasks() == 0


async def test_the_loop_runs_and_stops_cleanly(world: World) -> None:
    w = world
    w.create_pods()
    w.bind()
    w.clock.advance(31)
    w.evictor.start()
    await until(lambda: w.api.pods == {}, what="the loop to evict")
    await w.evictor.stop()
    assert w.evictor.pending_tasks() == 0


async def test_a_pass_looks_again_only_at_workloads_that_changed(world: World) -> None:
    """Pending and PodsReady workloads are settled: a pass with nothing changed asks no life
    facts; a new view (a pod changed) is looked at again, and the timeout still fires."""
    w = world
    w.create_pods()
    asked: list[str] = []
    life = w.runtime.requeue.life

    def counting(view: Any) -> Any:
        asked.append(str(view.key))
        return life(view)

    w.runtime.requeue.life = counting  # type: ignore[method-assign]
    await w.evictor.tick_once()
    assert asked == ["ml/train"]
    asked.clear()
    await w.evictor.tick_once()
    assert asked == []  # pending, unchanged
    w.bind()
    await w.evictor.tick_once()
    assert asked == ["ml/train"]  # a new view: admitted now, starting
    w.clock.advance(31)
    await w.evict_due()
    assert w.api.calls("DELETE")


async def test_the_gauges_are_counted_when_prometheus_scrapes(world: World) -> None:
    w = world
    w.create_pods()
    labels = {"queue": "default"}
    w.evictor.start()
    try:
        metrics.PENDING_WORKLOADS.labels("default").set(0)
        assert b"runway_pending_workloads" in metrics.exposition()
        assert metrics.REGISTRY.get_sample_value("runway_pending_workloads", labels) == 1
    finally:
        await w.evictor.stop()
    metrics.PENDING_WORKLOADS.labels("default").set(0)
    metrics.exposition()  # the hook is gone with the loop
    assert metrics.REGISTRY.get_sample_value("runway_pending_workloads", labels) == 0


async def test_the_scrape_counts_in_a_pass_that_lets_the_verbs_run(world: World) -> None:
    """``/metrics`` runs the scrape hooks' passes with ``in_slices``: the count over every
    workload (41,729 in bench.scale: ~200 ms) yields as it goes, and counts what one go does."""
    w = world
    w.create_pods()
    w.evictor.start()
    try:
        passes = metrics.scrape_passes()
        assert len(passes) == 1
        steps = sum(1 for _ in passes[0])
        assert steps >= 1  # yields between workloads (every 64, and before the first)
        sliced = metrics.REGISTRY.get_sample_value("runway_pending_workloads", {"queue": "default"})
        metrics.PENDING_WORKLOADS.labels("default").set(0)
        metrics.exposition()
        whole = metrics.REGISTRY.get_sample_value("runway_pending_workloads", {"queue": "default"})
        assert sliced == whole == 1
    finally:
        await w.evictor.stop()


async def test_a_workload_whose_record_cannot_be_written_is_evicted_and_held_all_the_same(
    world: World,
) -> None:
    """Issue #36: the record write refused (422: an older CRD; 403: the namespace's quota) must
    not exempt the workload from PodsReady — its pods are deleted, its backoff holds (from
    memory), and the refused write is not retried on every pass."""
    w = world
    w.api.record_refusal = (422, "Invalid")
    failed = metrics.RECORD_WRITE_FAILURES.labels("invalid")
    before = failed._value.get()
    w.create_pods()
    w.bind()
    w.clock.advance(31)
    await w.evict_due()
    assert w.api.pods == {}, "evicted although its record could not be written"
    assert w.api.record("ml", "job.train") is None
    assert failed._value.get() == before + 1
    w.create_pods()
    held = w.filter()
    assert held["NodeNames"] == []
    assert "requeue backoff" in held["FailedAndUnresolvableNodes"]["n1"]
    writes = len(w.api.calls("POST", "/apis/runway.dev"))
    for _ in range(5):  # passes and pod changes within the write's backoff: no new attempt
        w.sync()
        await w.evict_due()
    assert len(w.api.calls("POST", "/apis/runway.dev")) == writes
