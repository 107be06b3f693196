"""REST for the requeue feature over ASGI, and the filter/prioritize wiring over real HTTP on the
embedded default (no cluster: records in memory, every cache rule has no data)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.clock import ManualClock
from app.config import parse_config
from app.model import Pod
from app.model.eviction import PODS_READY_TIMEOUT, PREEMPTED, EvictionRecord
from app.model.timestamps import format_time
from app.policy.workload import workload_of
from app.server import create_app
from app.wiring import Runway
from tests.asgi import asgi_client
from tests.builders import bind, pod, pod_obj, pool_node, write_record
from tests.feed import ArrivingFeed

T0 = 1_800_000_000.0
TOKEN = "0123456789abcdef0123456789abcdef"


def build(extra: dict[str, Any] | None = None) -> tuple[FastAPI, Runway, ManualClock]:
    clock = ManualClock(T0)
    config = {
        "auth": {"mode": "static", "staticTokens": [TOKEN]},
        "queues": [
            {"name": "research"},
            {"name": "strict", "parent": "research", "queueingStrategy": "StrictFIFO"},
        ],
        "waitForPodsReady": {"enable": True, "timeout": "60s", "blockAdmission": False},
        **(extra or {}),
    }
    app = create_app(parse_config(config), clock)
    return app, app.state.runway, clock


def add(runtime: Runway, obj: dict[str, Any]) -> Pod:
    added = pod(obj)
    runtime.cache.upsert_pod(added)
    return added


def strict_pair(runtime: Runway) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two pending workloads of the StrictFIFO queue, cached: ``first`` (older) is its head."""
    labels = {"runway.dev/queue": "strict"}
    first = pod_obj("first", labels={**labels, "runway.dev/workload": "first"})
    first["metadata"]["creationTimestamp"] = format_time(T0 - 100)
    second = pod_obj("second", labels={**labels, "runway.dev/workload": "second"})
    add(runtime, first)
    add(runtime, second)
    runtime.cache.pods_synced = True
    return first, second


@pytest.fixture
async def setup() -> AsyncIterator[tuple[httpx.AsyncClient, Runway, ManualClock]]:
    app, runtime, clock = build()
    async with asgi_client(app) as http:
        yield http, runtime, clock


async def test_workload_view(setup: tuple[httpx.AsyncClient, Runway, ManualClock]) -> None:
    http, runtime, _ = setup
    labels = {"runway.dev/queue": "strict"}
    for i in range(2):
        add(runtime, bind(pod_obj(f"train-{i}", job="train", labels=labels), T0 - 10))
    resp = await http.get("/v1/workloads/team/train")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["identity"] == "owner:Job" and body["queue"] == "strict"
    assert body["state"] == "admitted" and body["minAvailable"] == 2
    assert body["startTime"] == format_time(T0 - 10)
    assert body["podsReady"] is False and body["podsReadyClock"] == "WaitForStart"
    assert body["podsReadyDeadline"] == format_time(T0 + 50)
    assert body["protectedUntil"] == format_time(T0 - 10)  # no min-runtime configured: 0s
    assert body["evictionRecord"] is None and body["gate"] == []
    assert [p["name"] for p in body["pods"]] == ["train-0", "train-1"]


async def test_unknown_names_are_404_with_a_message(
    setup: tuple[httpx.AsyncClient, Runway, ManualClock],
) -> None:
    http, _, _ = setup
    resp = await http.get("/v1/workloads/team/nope")
    assert resp.status_code == 404 and "no workload team/nope" in resp.json()["error"]
    resp = await http.get("/v1/queues/nope/pending")
    assert resp.status_code == 404 and "no queue 'nope'" in resp.json()["error"]
    resp = await http.post(
        "/v1/workloads/team/nope:activate", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert resp.status_code == 404


async def test_pending_order_and_queue_counts(
    setup: tuple[httpx.AsyncClient, Runway, ManualClock],
) -> None:
    http, runtime, _ = setup
    labels = {"runway.dev/queue": "strict"}

    def pending(name: str, created: float, priority: int = 0) -> Pod:
        obj = pod_obj(name, labels={**labels, "runway.dev/workload": name})
        obj["metadata"]["creationTimestamp"] = format_time(created)
        obj["spec"]["priority"] = priority
        return add(runtime, obj)

    pending("old", T0 - 300)
    pending("new", T0 - 100)
    pending("high", T0 - 10, priority=100)
    victim = pending("victim", T0 - 50)
    store = runtime.records
    # "old" is in backoff (keeps its place, not admissible); "victim" was evicted at T0-5 by a
    # PodsReadyTimeout: ordered by its eviction time (Eviction strategy), i.e. behind "new"
    await write_record(
        store, workload_of(victim), EvictionRecord(PODS_READY_TIMEOUT, T0 - 5, count=1)
    )
    old = runtime.cache.pod_by_key("team", "old")
    assert old is not None
    await write_record(
        store,
        workload_of(old),
        EvictionRecord(PODS_READY_TIMEOUT, T0 - 400, count=1, requeue_at=T0 + 60),
    )
    resp = await http.get("/v1/queues/strict/pending")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [e["workload"] for e in body["pending"]] == [
        "team/high",
        "team/old",
        "team/new",
        "team/victim",
    ]
    assert body["queueingStrategy"] == "StrictFIFO"
    assert body["head"] == "team/high"
    assert body["pending"][1]["admissible"] is False
    assert body["pending"][0]["key"][0] == -100

    resp = await http.get("/v1/queues")
    counts = {q["name"]: q["counts"] for q in resp.json()["queues"]}
    assert counts["strict"] == {"pending": 3, "admitted": 0, "backoff": 1, "deactivated": 0}
    assert counts["research"] == {"pending": 0, "admitted": 0, "backoff": 0, "deactivated": 0}


async def test_filter_applies_strict_fifo_and_anti_flapping(
    setup: tuple[httpx.AsyncClient, Runway, ManualClock],
) -> None:
    http, runtime, clock = setup
    first, second = strict_pair(runtime)

    async def filter_(pod: dict[str, Any]) -> dict[str, Any]:
        body = {"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2"]}
        resp = await http.post("/scheduler/filter", json=body)
        assert resp.status_code == 200
        result: dict[str, Any] = resp.json()
        return result

    assert (await filter_(first))["NodeNames"] == ["n1", "n2"]
    held = await filter_(second)
    assert held["NodeNames"] == []
    assert "StrictFIFO" in held["FailedAndUnresolvableNodes"]["n1"]

    # anti-flapping: "first" was preempted by a pod that is still pending
    add(runtime, pod_obj("big", namespace="other", uid="uid-big"))
    store = runtime.records
    await store.record_preemption("uid-first", "uid-big", T0)
    held = await filter_(first)
    assert "still pending" in held["FailedAndUnresolvableNodes"]["n2"]
    clock.advance(61)  # requeueStrategy.antiFlappingTimeout defaults to 60s
    assert (await filter_(first))["NodeNames"] == ["n1", "n2"]


async def test_a_filter_rejection_is_checked_against_the_events_that_have_arrived(
    setup: tuple[httpx.AsyncClient, Runway, ManualClock],
) -> None:
    """Under load the pod watch applies events in batches: the StrictFIFO head's bind may sit
    on the socket when the next pod's filter comes. A rejection is asked again after what has
    arrived is applied; an admission is not (nothing is read for it)."""
    http, runtime, _ = setup
    first, second = strict_pair(runtime)
    feed = ArrivingFeed(runtime.cache)
    runtime.cache.feed = feed

    async def filter_(obj: dict[str, Any]) -> dict[str, Any]:
        body = {"Pod": obj, "Nodes": None, "NodeNames": ["n1", "n2"]}
        result: dict[str, Any] = (await http.post("/scheduler/filter", json=body)).json()
        return result

    assert (await filter_(first))["NodeNames"] == ["n1", "n2"]
    assert feed.calls == []
    held = await filter_(second)  # nothing has arrived: the rejection stands
    assert held["NodeNames"] == [] and feed.calls == ["catch_up"]
    feed.arriving = [pod(bind(first, T0, node="n1"))]  # the head's bind, not yet applied
    assert (await filter_(second))["NodeNames"] == ["n1", "n2"]
    assert feed.calls == ["catch_up", "catch_up"] and runtime.cache.pod("uid-first") is not None


async def test_prioritize_scores_failed_pools_low_from_the_record() -> None:
    app, runtime, _ = build()
    for name, pool in (("n1", "a"), ("n2", "b")):
        runtime.cache.upsert_node(pool_node(name, pool))
    solo = pod_obj("solo")
    key = workload_of(pod(solo))
    await write_record(
        runtime.records, key, EvictionRecord(PODS_READY_TIMEOUT, T0, count=1, failed_pools=("a",))
    )
    async with asgi_client(app) as http:
        body = {"Pod": solo, "Nodes": None, "NodeNames": ["n1", "n2"]}
        resp = await http.post("/scheduler/prioritize", json=body)
    assert resp.json() == [{"Host": "n1", "Score": 0}, {"Host": "n2", "Score": 10}]


async def test_embedded_default_filter_works_from_the_payload_alone() -> None:
    app, runtime, _ = build()
    lonely = pod_obj("lonely", labels={"runway.dev/queue": "strict"})
    async with asgi_client(app) as http:
        body = json.dumps({"Pod": lonely, "Nodes": None, "NodeNames": ["n1"]})
        resp = await http.post(
            "/scheduler/filter", content=body, headers={"Content-Type": "application/json"}
        )
        assert resp.json()["NodeNames"] == ["n1"]
        # a record written in memory (dry-run) is honoured by the next filter
        key = workload_of(pod(lonely))
        await write_record(
            runtime.records, key, EvictionRecord(PREEMPTED, T0, deactivated=True, message="stop")
        )
        resp = await http.post(
            "/scheduler/filter", content=body, headers={"Content-Type": "application/json"}
        )
        assert resp.json()["NodeNames"] == []
        assert "deactivated (stop)" in resp.json()["FailedAndUnresolvableNodes"]["n1"]
