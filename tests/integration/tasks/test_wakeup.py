"""The requeue waker against a faked API server, with a manual clock: pods whose filter hold ends
(backoff over, reactivation through REST, preemptor bound, blockAdmission released) get the
``runway.dev/requeue-wake`` merge patch (UID precondition) — once, rate-limited, on the leader
only; failed patches are retried a few times; without a cluster the patch is a dry-run log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app import metrics
from app.clock import ManualClock
from app.model.eviction import PODS_READY_TIMEOUT, PREEMPTED, EvictionRecord
from app.model.timestamps import format_time
from app.policy.workload import workload_of
from app.server import create_app
from app.state.preemption import AwaitedPreemptors
from app.tasks.wakeup import WAKE_ANNOTATION, RequeueWaker, wake_stamp
from app.wire import decode_preemption_args
from app.wiring import Runway
from tests.asgi import asgi_client
from tests.builders import bind, job_obj, pod, pod_obj, pool_node, runway_config, write_record
from tests.integration.kube_fake import FakeApi, once
from tests.integration.kube_helpers import client, until

T0 = 1_800_000_000.0
TOKEN = "0123456789abcdef0123456789abcdef"
CONFIG: dict[str, Any] = {
    "auth": {"mode": "static", "staticTokens": [TOKEN]},
    "waitForPodsReady": {"enable": True, "timeout": "30s"},
}


class World:
    """A fake cluster (Job ``ml/train`` and its pods), runway's runtime and a waker."""

    def __init__(self, config: dict[str, Any] = CONFIG, *, kube: bool = True, **waker: Any) -> None:
        self.api = FakeApi()
        self.clock = ManualClock(T0)
        self.kube = client(self.api.transport) if kube else None
        self.app = create_app(runway_config(config), self.clock, kube=self.kube)
        self.runtime: Runway = self.app.state.runway
        self.leader = True
        self.waker = RequeueWaker(
            self.runtime.requeue,
            self.runtime.pods,
            self.clock,
            is_leader=lambda: self.leader,
            dry_run=self.kube is None,
            **({"tick": 60.0, "awaited": self.runtime.decider.awaited} | waker),
        )
        self.api.jobs["ml/train"] = job_obj("train", "ml")
        self.runtime.cache.upsert_node(pool_node("n1", "a"))

    def add_pod(self, name: str, **kw: Any) -> dict[str, Any]:
        obj = pod_obj(name, namespace="ml", **kw)
        obj["metadata"]["creationTimestamp"] = format_time(self.clock.now())
        self.api.pods[f"ml/{name}"] = obj
        return obj

    def job_pods(self, n: int = 2) -> None:
        for i in range(n):
            self.add_pod(f"train-{i}", job="train")
        self.sync()

    def bind(self, name: str, *, ready: bool = False) -> None:
        bind(self.api.pods[f"ml/{name}"], self.clock.now(), ready=ready)
        self.sync()

    def sync(self) -> None:
        """The pod reflector: the cache holds what the API server holds."""
        self.runtime.cache.replace_pods([pod(p) for p in self.api.pods.values()])

    def key(self, name: str = "train-0") -> Any:
        return workload_of(pod(self.api.pods[f"ml/{name}"]))

    async def write(self, record: EvictionRecord, name: str = "train-0") -> None:
        await write_record(self.runtime.records, self.key(name), record)

    def wakes(self) -> list[tuple[str, str]]:
        """(pod name, UID precondition) of every wake patch sent so far."""
        out = []
        for _, path, body in self.api.calls("PATCH", "/api/v1/namespaces/ml/pods/"):
            if not isinstance(body, dict):  # a JSONPatch: a scheduling gate's removal
                continue
            meta = body.get("metadata", {})
            if WAKE_ANNOTATION in meta.get("annotations", {}):
                out.append((path.rsplit("/", 1)[1], meta["uid"]))
        return out

    async def close(self) -> None:
        await self.waker.stop()
        self.api.stop.set()
        if self.runtime.record_store is not None:
            await self.runtime.record_store.stop()
        if self.kube is not None:
            await self.kube.aclose()

    async def run(self) -> float:
        """One waker pass; returns its next wait."""
        wait = await self.waker.run_once()
        self.sync()  # the patched pods come back through the watch
        return wait


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    yield w
    await w.close()


async def test_backoff_end_wakes_the_held_pods_at_requeue_at(world: World) -> None:
    w = world
    w.job_pods()
    await w.write(
        EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0 - 5, count=1, requeue_at=T0 + 10)
    )
    wait = await w.run()
    assert w.wakes() == []
    assert set(w.waker.held) == {"uid-train-0", "uid-train-1"}
    assert {h.rule for h in w.waker.held.values()} == {"backoff"}
    assert wait == pytest.approx(10.05)  # the loop sleeps until the backoff ends

    w.clock.advance(9.9)
    await w.run()
    assert w.wakes() == [], "not before requeueAt"

    requeued = metrics.REQUEUED_WORKLOADS.labels("default")
    before = requeued._value.get()
    w.clock.advance(0.2)
    await w.run()
    assert sorted(w.wakes()) == [("train-0", "uid-train-0"), ("train-1", "uid-train-1")]
    assert requeued._value.get() == before + 1, "one workload requeued, not one per pod"
    stamp = w.api.pods["ml/train-0"]["metadata"]["annotations"][WAKE_ANNOTATION]
    assert stamp == wake_stamp(T0 + 10.1) and stamp.endswith("Z")
    assert w.waker.woken == 2 and w.waker.held == {}

    # woken once: later passes (the pods' own update events) do not touch them again
    w.clock.advance(5)
    await w.run()
    assert len(w.wakes()) == 2


async def test_reactivation_through_rest_wakes_the_pods_at_once(world: World) -> None:
    w = world
    w.job_pods()
    await w.write(
        EvictionRecord(
            reason=PODS_READY_TIMEOUT,
            time=T0 - 5,
            count=2,
            deactivated=True,
            message="RequeuingLimitExceeded",
        )
    )
    assert await w.run() == 60.0  # deactivated: no end in sight, only an event ends it
    assert w.wakes() == []
    generation = w.runtime.requeue.index.generation

    async with asgi_client(w.app) as http:
        resp = await http.post(
            "/v1/workloads/ml/train:activate", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert resp.status_code == 200, resp.text
    assert w.runtime.requeue.index.generation > generation  # the listener hears record changes
    await w.run()
    assert sorted(n for n, _ in w.wakes()) == ["train-0", "train-1"]


async def test_preemptor_bound_wakes_its_victims_not_itself(world: World) -> None:
    w = world
    w.add_pod("boss", uid="uid-boss")
    w.job_pods()
    await w.write(EvictionRecord(reason=PREEMPTED, time=T0 - 1, preemptor_uid="uid-boss"))
    await w.run()
    assert {u: h.rule for u, h in w.waker.held.items()} == {
        "uid-train-0": "anti-flapping",
        "uid-train-1": "anti-flapping",
    }
    w.bind("boss", ready=True)
    await w.run()
    assert sorted(w.wakes()) == [("train-0", "uid-train-0"), ("train-1", "uid-train-1")]


@pytest.mark.parametrize("pass_between", [True, False])
async def test_a_nominated_preemptor_is_woken_when_its_victims_are_gone_not_terminating(
    world: World, pass_between: bool
) -> None:
    """runway's gate opens when the victims are terminating; kube-scheduler still counts them
    then, and moves the preemptor to its backoff queue when they go: the waker touches the
    preemptor when the last victim is gone (1.20 ``PriorityQueue.Update``: to the active queue),
    whether or not a pass saw them terminating."""
    w = world
    for name in ("victim-0", "victim-1"):
        victim = w.add_pod(name, node="n1")
        victim["spec"]["priority"] = 100
        victim["metadata"]["deletionTimestamp"] = format_time(T0)
    boss = w.add_pod("boss")
    boss["spec"]["priority"] = 1000
    boss["status"]["nominatedNodeName"] = "n1"
    w.sync()
    if pass_between:
        await w.run()
        assert w.wakes() == []

    del w.api.pods["ml/victim-0"]  # the kubelet let one go: the other still holds its room
    w.sync()
    await w.run()
    assert w.wakes() == []

    del w.api.pods["ml/victim-1"]
    w.sync()
    w.clock.advance(0.5)
    await w.run()
    assert w.wakes() == [("boss", "uid-boss")]

    w.clock.advance(5)  # woken once
    await w.run()
    assert len(w.wakes()) == 1


async def test_a_follower_does_not_wake_nominated_pods(world: World) -> None:
    w = world
    w.leader = False
    victim = w.add_pod("victim", node="n1")
    victim["metadata"]["deletionTimestamp"] = format_time(T0)
    boss = w.add_pod("boss")
    boss["spec"]["priority"] = 1000
    boss["status"]["nominatedNodeName"] = "n1"
    w.sync()
    del w.api.pods["ml/victim"]
    w.sync()
    await w.run()
    assert w.wakes() == []


async def test_block_admission_release_wakes_the_waiting_workload() -> None:
    config = {"waitForPodsReady": {"enable": True, "timeout": "30s", "blockAdmission": True}}
    w = World(config)
    try:
        w.add_pod("first", labels={"runway.dev/workload": "first"})
        w.add_pod("second", labels={"runway.dev/workload": "second"})
        w.sync()
        w.bind("first")  # admitted, not Ready: blocks the others
        await w.run()
        assert {u: h.rule for u, h in w.waker.held.items()} == {"uid-second": "block-admission"}
        assert w.waker.held["uid-second"].until == pytest.approx(T0 + 30)
        w.bind("first", ready=True)
        await w.run()
        assert w.wakes() == [("second", "uid-second")]
    finally:
        await w.close()


async def test_strict_fifo_head_moving_on_wakes_the_next_workload() -> None:
    config = {"queues": [{"name": "fifo", "queueingStrategy": "StrictFIFO"}]}
    w = World(config)
    try:
        for name in ("older", "newer"):
            w.add_pod(name, labels={"runway.dev/workload": name, "runway.dev/queue": "fifo"})
            w.clock.advance(1)
        w.sync()
        await w.run()
        assert {u: h.rule for u, h in w.waker.held.items()} == {"uid-newer": "strict-fifo"}
        w.bind("older", ready=True)  # the head is admitted: the next one is the head now
        await w.run()
        assert w.wakes() == [("newer", "uid-newer")]
    finally:
        await w.close()


async def test_touches_are_rate_limited_and_leader_only() -> None:
    w = World(rate=1.0, burst=2)
    try:
        w.job_pods(5)
        await w.write(
            EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0, count=1, requeue_at=T0 + 1)
        )
        w.leader = False
        await w.run()
        assert w.waker.held == {} and w.wakes() == []  # followers keep no state

        w.leader = True
        await w.run()
        assert len(w.waker.held) == 5
        w.clock.advance(1.1)
        wait = await w.run()
        assert len(w.wakes()) == 2, "a burst of 2"
        assert wait == pytest.approx(1.0)  # then one a second
        w.clock.advance(1.0)
        await w.run()
        assert len(w.wakes()) == 3

        # leadership lost: the touches still due are dropped, nothing is patched
        w.leader = False
        w.clock.advance(10)
        await w.run()
        assert len(w.wakes()) == 3 and len(w.waker.schedule) == 0
    finally:
        await w.close()


async def test_gone_pods_are_skipped_and_failed_patches_retried(world: World) -> None:
    w = world
    w.job_pods(3)
    await w.write(EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0, count=1, requeue_at=T0 + 1))
    await w.run()
    # train-0 was deleted (the cache has not heard yet); train-1 re-created under a new UID
    del w.api.pods["ml/train-0"]
    w.api.pods["ml/train-1"]["metadata"]["uid"] = "uid-new"
    refusal = once(httpx.Response(403, json={"kind": "Status", "code": 403}))
    refused = w.api.fault(refusal, method="PATCH", path="/api/v1/namespaces/ml/pods/train-2")
    w.clock.advance(1.1)
    before = metrics.REQUEUE_WAKEUPS.labels("gone")._value.get()
    await w.waker.run_once()
    assert metrics.REQUEUE_WAKEUPS.labels("gone")._value.get() == before + 2
    assert w.waker.woken == 0 and len(w.waker.schedule) == 1  # train-2: retried later
    w.clock.advance(1.0)
    await w.waker.run_once()
    assert w.waker.woken == 1 and refused.call_count == 1
    assert w.api.pods["ml/train-2"]["metadata"]["annotations"][WAKE_ANNOTATION]
    assert WAKE_ANNOTATION not in w.api.pods["ml/train-1"]["metadata"]["annotations"]


async def test_without_a_cluster_the_touch_is_a_dry_run() -> None:
    w = World(kube=False)
    try:
        w.job_pods()
        await w.write(
            EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0, count=1, requeue_at=T0 + 1)
        )
        await w.run()
        before = metrics.REQUEUE_WAKEUPS.labels("dry_run")._value.get()
        w.clock.advance(2)
        await w.run()
        assert w.waker.woken == 2
        assert metrics.REQUEUE_WAKEUPS.labels("dry_run")._value.get() == before + 2
        assert w.api.requests == []
    finally:
        await w.close()


async def test_the_loop_wakes_on_time_and_stops_cleanly() -> None:
    w = World(tick=0.02, debounce=0.0)
    try:
        w.job_pods()
        await w.write(
            EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0, count=1, requeue_at=T0 + 5)
        )
        w.waker.start()
        await until(lambda: len(w.waker.held) == 2, what="holds learned")
        w.clock.advance(6)
        await until(lambda: w.waker.woken == 2, what="pods woken by the loop")
        task = w.waker._task
        assert task is not None
        await w.waker.stop()
        assert task.done() and w.waker._task is None
        assert w.runtime.requeue.index.listeners == []
        await asyncio.sleep(0)
    finally:
        await w.close()


async def test_a_preemptor_refused_as_unknown_is_woken_when_it_arrives() -> None:
    """kube-scheduler asked to preempt for a pod whose ADDED event had not reached runway: the
    call is refused (runway acts only on pods its cache confirms) and kube-scheduler parks the pod
    as unschedulable; when the pod reaches the cache the waker touches it, once."""
    w = World()
    try:
        victim = w.add_pod("victim", node="n1")
        victim["spec"]["priority"] = 100
        w.job_pods(1)  # another pod arrives: nothing refused about it, nothing to wake
        boss = pod_obj("boss", namespace="ml")
        boss["spec"]["priority"] = 1000
        body = {"Pod": boss, "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uid-victim"}]}}}
        outcome = w.runtime.decider.decide(decode_preemption_args(json.dumps(body).encode()))
        assert outcome.refusal is not None and outcome.refusal.reason == "preemptor-unknown"
        await w.run()
        assert w.wakes() == []

        w.api.pods["ml/boss"] = boss  # its ADDED event arrives
        w.sync()
        w.clock.advance(0.5)
        await w.run()
        assert w.wakes() == [("boss", "uid-boss")]
        w.sync()  # the touch comes back as an update: no second wake
        w.clock.advance(5)
        await w.run()
        assert len(w.wakes()) == 1
    finally:
        await w.close()


def test_awaited_preemptors_are_bounded_and_short_lived() -> None:
    book = AwaitedPreemptors(limit=2, ttl=10.0)
    for i, uid in enumerate(("a", "b", "c")):
        book.add(uid, T0 + i)
    assert len(book) == 2 and not book.take("a", T0 + 3)  # the oldest was forgotten
    assert book.take("b", T0 + 3) and not book.take("b", T0 + 3)  # taken once
    assert not book.take("c", T0 + 2 + 10.5)  # refused too long ago
    assert len(book) == 0


async def test_a_preemptor_whose_failed_preemption_backed_off_is_woken_once(world: World) -> None:
    """The gate keeper releases a failed preemption's gate after its back-off
    (``GateKeeper.on_retry``, wired to ``wake_retry``): the pending preemptor is touched once;
    a bound one, a gone one, or any on a follower, is not."""
    w = world
    assert w.runtime.gatekeeper.on_retry == w.runtime.waker.wake_retry  # wired in app.wiring
    boss = w.add_pod("boss")
    boss["spec"]["priority"] = 1000
    w.add_pod("bound", node="n1")
    w.sync()
    assert not w.waker.wake_retry("uid-bound")
    assert not w.waker.wake_retry("uid-nobody")
    w.leader = False
    assert not w.waker.wake_retry("uid-boss")
    w.leader = True
    assert w.waker.wake_retry("uid-boss")
    await w.run()
    assert w.wakes() == [("boss", "uid-boss")]
    w.clock.advance(5)
    await w.run()
    assert len(w.wakes()) == 1


async def filter_call(w: World, name: str) -> bool:
    """kube-scheduler's filter call for pod ``name`` on node n1: whether n1 passed."""
    body = {"Pod": w.api.pods[f"ml/{name}"], "NodeNames": ["n1"]}
    async with asgi_client(w.app) as http:
        resp = await http.post("/scheduler/filter", json=body)
        assert resp.status_code == 200, resp.text
    return "n1" in (resp.json().get("NodeNames") or [])


@pytest.mark.parametrize("leader", [True, False], ids=["leader", "follower"])
async def test_a_hold_that_begins_and_ends_between_two_passes_is_woken(leader: bool) -> None:
    """The issue on current Kubernetes: blockAdmission refused b while a was not yet Ready, a
    was Ready ~0.3 s later — before the waker's next pass looked — and b waited for
    kube-scheduler's flush (30 to 90 s; 5 min from 1.27). The refusal itself tells the waker, on
    whichever replica kube-scheduler called."""
    config = {"waitForPodsReady": {"enable": True, "timeout": "30s", "blockAdmission": True}}
    w = World(config)
    w.leader = leader
    try:
        w.add_pod("a", labels={"runway.dev/workload": "a"})
        w.add_pod("b", labels={"runway.dev/workload": "b"})
        w.sync()
        await w.run()  # a pass: both free
        assert w.waker.held == {}
        w.bind("a")  # admitted, not Ready: blocks b
        assert not await filter_call(w, "b")
        w.clock.advance(0.3)
        w.bind("a", ready=True)  # before any pass saw b held
        await w.run()
        assert w.wakes() == [("b", "uid-b")]
        await w.run()
        assert w.wakes() == [("b", "uid-b")], "woken once"
    finally:
        await w.close()


async def test_a_follower_wakes_what_it_refused_only_when_the_hold_ends() -> None:
    w = World()
    w.leader = False
    try:
        w.job_pods()
        await w.write(
            EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0 - 5, count=1, requeue_at=T0 + 10)
        )
        assert not await filter_call(w, "train-0")
        wait = await w.run()
        assert w.wakes() == [] and wait == pytest.approx(10.05)
        w.clock.advance(10.1)
        await w.run()
        # only the pod this replica refused: train-1 was never asked here (the leader's pass)
        assert w.wakes() == [("train-0", "uid-train-0")]
    finally:
        await w.close()
