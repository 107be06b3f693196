"""The leader removes runway's scheduling gate (DESIGN §5.8, issue #34) against a faked API
server, with a manual clock: gated pods stay gated while a hold lasts and lose the gate (a
JSONPatch with UID and place preconditions, never a wake touch) when it ends; a gang's pods go
together once all exist; workloads in queue order within the rate limit; a pod runway does not
manage loses the gate at once; followers never write; a pod without the gate is still touched."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app import metrics
from app.model.eviction import PODS_READY_TIMEOUT, EvictionRecord
from app.policy.schedgate import ADMITTING_S, GATE
from tests.integration.kube_fake import once
from tests.integration.tasks.test_wakeup import CONFIG, T0, World


def gate(obj: dict[str, Any], *others: str) -> dict[str, Any]:
    """``obj`` as the webhook leaves it: ``others`` then runway's gate."""
    obj["spec"]["schedulingGates"] = [{"name": g} for g in (*others, GATE)]
    return obj


def gates_of(w: World, name: str) -> list[str]:
    return [g["name"] for g in w.api.pods[f"ml/{name}"]["spec"].get("schedulingGates", [])]


def ungates(w: World) -> list[str]:
    """The pods whose gate was patched away, in order."""
    return [
        path.rsplit("/", 1)[1]
        for _, path, body in w.api.calls("PATCH", "/api/v1/namespaces/ml/pods/")
        if isinstance(body, list) and body[-1]["op"] == "remove"
    ]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    w = World()
    yield w
    await w.close()


async def test_gated_pods_in_backoff_keep_the_gate_until_requeue_at(world: World) -> None:
    w = world
    for i in range(2):
        gate(w.add_pod(f"train-{i}", job="train"), "example.com/other")
    w.sync()
    await w.write(
        EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0 - 5, count=1, requeue_at=T0 + 10)
    )
    removed = metrics.GATES_REMOVED.labels("removed")
    before = removed._value.get()
    await w.run()
    assert ungates(w) == [] and w.wakes() == []
    assert metrics.HELD_PODS.labels("schedulingGate")._value.get() == 2
    assert metrics.HELD_PODS.labels("filter")._value.get() == 0

    w.clock.advance(10.1)
    await w.run()
    assert sorted(ungates(w)) == ["train-0", "train-1"]
    assert w.wakes() == [], "a gated pod is never touched: the gate's removal moves it"
    assert gates_of(w, "train-0") == ["example.com/other"], "only runway's gate goes"
    body = w.api.calls("PATCH", "/api/v1/namespaces/ml/pods/train-0")[0][2]
    assert body[0] == {"op": "test", "path": "/metadata/uid", "value": "uid-train-0"}
    assert body[1] == {"op": "test", "path": "/spec/schedulingGates/1/name", "value": GATE}
    assert removed._value.get() == before + 2

    w.clock.advance(20)
    await w.run()
    assert len(ungates(w)) == 2, "removed once"


async def test_a_free_gated_pod_is_ungated_at_the_first_pass(world: World) -> None:
    w = world
    gate(w.add_pod("solo"))
    w.sync()
    await w.run()
    assert ungates(w) == ["solo"]
    assert gates_of(w, "solo") == []


async def test_a_gang_is_ungated_together_once_all_its_pods_exist(world: World) -> None:
    w = world
    gang = {"runway.dev/min-available": "3"}
    for i in range(2):
        gate(w.add_pod(f"train-{i}", job="train", annotations=gang))
    w.sync()
    await w.run()
    assert ungates(w) == [], "2 of 3: released alone they would wait bound for the third"
    assert "ml/train" in w.waker.waiting_gangs

    gate(w.add_pod("train-2", job="train", annotations=gang))
    w.sync()
    w.clock.advance(1)
    await w.run()
    assert sorted(ungates(w)) == ["train-0", "train-1", "train-2"]
    assert w.waker.waiting_gangs == {}


CONCURRENT = {"waitForPodsReady": {"enable": True, "timeout": "30s", "blockAdmission": False}}
"""waitForPodsReady without blockAdmission: workloads are admitted concurrently."""


async def test_workloads_are_ungated_whole_in_queue_order_within_the_rate_limit() -> None:
    w = World(CONCURRENT, rate=1.0, burst=2)
    try:
        w.api.jobs["ml/later"] = {**w.api.jobs["ml/train"]}
        w.api.jobs["ml/later"]["metadata"] = {
            **w.api.jobs["ml/train"]["metadata"],
            "name": "later",
            "uid": "uid-job-later",
        }
        for i in range(2):
            gate(w.add_pod(f"train-{i}", job="train"))
        w.clock.advance(1)
        for i in range(2):
            gate(w.add_pod(f"later-{i}", job="later"))
        w.sync()
        await w.run()
        assert sorted(ungates(w)) == ["train-0", "train-1"], "the head first, a burst of 2"
        w.clock.advance(1.0)
        await w.run()
        assert len(ungates(w)) == 2, "one token: never half a workload"
        w.clock.advance(1.0)
        await w.run()
        assert sorted(ungates(w)[2:]) == ["later-0", "later-1"]
    finally:
        await w.close()


async def test_a_gated_pod_runway_does_not_manage_loses_the_gate_at_once() -> None:
    w = World({**CONFIG, "scope": {"manageWithoutQueue": False}})
    try:
        gate(w.add_pod("stray", job="train"))
        w.sync()
        await w.write(
            EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0 - 5, count=1, requeue_at=T0 + 60),
            name="stray",
        )
        await w.run()
        assert ungates(w) == ["stray"], "runway's gate never strands a pod"
    finally:
        await w.close()


async def test_followers_never_ungate_and_ungated_pods_are_still_touched(world: World) -> None:
    w = world
    gate(w.add_pod("train-0", job="train"))
    w.add_pod("train-1", job="train")  # created while the webhook was down: no gate
    w.sync()
    await w.write(EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0, count=1, requeue_at=T0 + 1))
    w.leader = False
    w.clock.advance(2)
    await w.run()
    assert ungates(w) == [] and w.wakes() == []

    w.leader = True
    w.clock.advance(0.1)
    await w.run()
    assert ungates(w) == ["train-0"]
    w.leader = True
    await w.write(EvictionRecord(reason=PODS_READY_TIMEOUT, time=T0, count=2, requeue_at=T0 + 5))
    await w.run()
    assert metrics.HELD_PODS.labels("filter")._value.get() >= 1
    w.clock.advance(5)
    await w.run()
    assert ("train-1", "uid-train-1") in w.wakes(), "the filter's hold: woken by a touch"


async def test_a_failed_removal_is_tried_again(world: World) -> None:
    w = world
    gate(w.add_pod("solo"))
    w.sync()
    w.api.fault(once(httpx.Response(403, json={"kind": "Status", "code": 403})), method="PATCH")
    errors = metrics.GATES_REMOVED.labels("error")
    before = errors._value.get()
    await w.run()
    assert gates_of(w, "solo") == [GATE] and errors._value.get() == before + 1
    w.clock.advance(0.5)
    await w.run()
    assert gates_of(w, "solo") == [GATE], "backed off"
    w.clock.advance(0.6)
    await w.run()
    assert gates_of(w, "solo") == []


BLOCK = {"waitForPodsReady": {"enable": True, "timeout": "30s", "blockAdmission": True}}


def solo(w: World, name: str, **labels: str) -> None:
    """A gated one-pod workload ``name`` created now, then a second later on the clock."""
    gate(w.add_pod(name, labels={"runway.dev/workload": name, **labels}))
    w.clock.advance(1)


async def test_block_admission_ungates_one_workload_and_the_next_when_it_is_ready() -> None:
    """Both free at the pass's start: ungating the first admits it, so the second keeps its
    gate (not ungated to be held by the filter: Unschedulable, autoscaler demand) through the
    first's bind until it is PodsReady."""
    w = World(BLOCK)
    try:
        solo(w, "first")
        solo(w, "second")
        w.sync()
        await w.run()
        assert ungates(w) == ["first"]
        assert gates_of(w, "second") == [GATE]
        held = w.waker.held_back["ml/second"]
        assert held.rule == "block-admission"
        assert "admitted workload ml/first is not PodsReady" in held.reason
        w.clock.advance(1)
        await w.run()
        assert ungates(w) == ["first"], "the first has not bound yet: it is still admitted"
        w.bind("first")  # bound, not Ready: the filter's own facts block the second now
        w.clock.advance(20)
        await w.run()
        assert ungates(w) == ["first"] and w.waker._admitting == {}
        assert {u: h.rule for u, h in w.waker.held.items()} == {"uid-second": "block-admission"}
        w.bind("first", ready=True)
        await w.run()
        assert ungates(w) == ["first", "second"]
        assert w.wakes() == [], "a gated pod is never touched"
    finally:
        await w.close()


async def test_an_ungated_workload_that_never_binds_stops_blocking_after_a_while() -> None:
    """The filter counts a workload as admitted only from its bind: one that does not fit
    blocks the next only ``ADMITTING_S``, and the pass is due then."""
    w = World(BLOCK)
    try:
        solo(w, "first")
        solo(w, "second")
        w.sync()
        await w.run()
        assert ungates(w) == ["first"]
        w.clock.advance(ADMITTING_S - 1)
        wait = await w.run()
        assert ungates(w) == ["first"] and wait <= 1.0 + 0.1
        w.clock.advance(1.1)
        await w.run()
        assert ungates(w) == ["first", "second"]
    finally:
        await w.close()


async def test_strict_fifo_ungates_only_each_queues_head() -> None:
    config = {
        **CONCURRENT,
        "queues": [
            {"name": "fifo", "queueingStrategy": "StrictFIFO"},
            {"name": "other", "queueingStrategy": "StrictFIFO"},
        ],
    }
    w = World(config)
    try:
        for name, queue in (("a", "fifo"), ("b", "fifo"), ("x", "other"), ("y", "other")):
            solo(w, name, **{"runway.dev/queue": queue})
        w.sync()
        await w.run()
        assert sorted(ungates(w)) == ["a", "x"], "one head per queue"
        w.clock.advance(1)
        await w.run()
        assert sorted(ungates(w)) == ["a", "x"], "ungated, not bound: still the heads"
        w.bind("a")
        await w.run()
        assert sorted(ungates(w)) == ["a", "b", "x"]
    finally:
        await w.close()
