"""Reflectors against a fake API server: paginated LIST, WATCH, 410 → relist, resume after a cut."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app import metrics
from app.kube.reflector import Reflector
from app.kube.resources import NODES, PODS
from app.kube.retry import Backoff
from app.model import Pod
from app.model.node import Node
from app.state.cache import CacheEvent
from tests.builders import cluster_cache
from tests.integration.kube_fake import FakeApiServer, make_node, make_pod
from tests.integration.kube_helpers import client, until


class Harness:
    def __init__(self, fake: FakeApiServer) -> None:
        self.fake = fake
        self.cache = cluster_cache()
        self.events: list[CacheEvent[Any]] = []
        self.cache.subscribe(self.events.append)
        self.client = client(fake.transport)
        self.pods: Reflector[Pod] = Reflector(
            self.client,
            PODS,
            Pod,
            self.cache.pod_store,
            page_size=2,
            backoff=Backoff(base=0.01, cap=0.05),
        )
        self.nodes: Reflector[Node] = Reflector(
            self.client,
            NODES,
            Node,
            self.cache.node_store,
            page_size=2,
            backoff=Backoff(base=0.01, cap=0.05),
        )

    def cached(self) -> dict[str, tuple[str, str | None]]:
        return {p.key: (p.metadata.resourceVersion, p.spec.nodeName) for p in self.cache.pods()}

    def truth(self) -> dict[str, tuple[str, str | None]]:
        return {
            k: (o["metadata"]["resourceVersion"], o["spec"].get("nodeName"))
            for k, o in self.fake.objects["pods"].items()
        }

    async def converged(self, what: str) -> None:
        await until(lambda: self.cached() == self.truth(), what=what)


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    fake = FakeApiServer()
    for i in range(5):
        fake.add("pods", make_pod(f"p{i}", labels={"runway.dev/queue": "research"}))
    for i in range(3):
        fake.add("nodes", make_node(f"n{i}", {"pool": "a"}))
    h = Harness(fake)
    tasks = [asyncio.create_task(h.pods.run()), asyncio.create_task(h.nodes.run())]
    yield h
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await t
    await h.client.aclose()


def _counter(metric: Any, *labels: str) -> float:
    value: float = metric.labels(*labels)._value.get()
    return value


async def test_paginated_list_then_watch(harness: Harness) -> None:
    await asyncio.wait_for(harness.pods.synced.wait(), 5)
    await asyncio.wait_for(harness.nodes.synced.wait(), 5)
    pod_lists = [q for q in harness.fake.lists if q["kind"] == "pods"]
    assert [q.get("continue") for q in pod_lists] == [None, "2", "4"]
    assert all(q["limit"] == "2" for q in pod_lists)
    assert len(harness.cache) == 5 and harness.cache.node_count() == 3
    assert harness.cache.node_labels("n1") == {"pool": "a"}
    assert harness.cache.node("n1").allocatable["cpu"] == "4"  # type: ignore[union-attr]

    harness.fake.add("pods", make_pod("p9"))
    harness.fake.add("pods", make_pod("p1", node="n1"))
    harness.fake.delete("pods", "default/p0")
    await harness.converged("watch events applied")
    assert [p.key for p in harness.cache.pods_on_node("n1")] == ["default/p1"]
    watches = [w for w in harness.fake.watches if w["kind"] == "pods"]
    assert watches[0]["resourceVersion"] == "108"  # the LIST's version: 100 + 5 pods + 3 nodes
    assert watches[0]["allowWatchBookmarks"] == "true"


async def test_410_mid_watch_relists_without_lost_or_duplicated_state(harness: Harness) -> None:
    await asyncio.wait_for(harness.pods.synced.wait(), 5)
    relists = _counter(metrics.WATCH_RELISTS, "pods")
    fake = harness.fake
    harness.events.clear()
    # While the watch is "away", etcd compacts and the world changes unseen.
    fake.compact()
    fake.silently("pods", "delete", "default/p1")
    fake.silently("pods", "upsert", make_pod("p2", node="n2"))
    fake.silently("pods", "upsert", make_pod("new", labels={"runway.dev/queue": "ops"}))
    fake.gone_now()
    await harness.converged("relist after 410")
    assert _counter(metrics.WATCH_RELISTS, "pods") == relists + 1
    changes = sorted((e.type, (e.new or e.old).key) for e in harness.events if e.kind == "pod")
    # Exactly one event per real difference: nothing lost, nothing duplicated.
    assert changes == [
        ("ADDED", "default/new"),
        ("DELETED", "default/p1"),
        ("MODIFIED", "default/p2"),
    ]
    assert harness.cache.pods_in_queue("ops")[0].key == "default/new"
    assert harness.cache.pod_by_key("default", "p1") is None
    # And the watch carries on from the relist's version.
    fake.add("pods", make_pod("after"))
    await harness.converged("watch after relist")


async def test_stream_cut_resumes_from_last_resource_version(harness: Harness) -> None:
    await asyncio.wait_for(harness.pods.synced.wait(), 5)
    fake = harness.fake
    fake.add("pods", make_pod("x1"))
    fake.add("pods", make_pod("x2"))
    await harness.converged("events before the cut")
    last_rv = harness.pods.resource_version
    lists_before = len([q for q in fake.lists if q["kind"] == "pods"])
    watches_before = len([w for w in fake.watches if w["kind"] == "pods"])
    fake.cut_streams()
    await until(
        lambda: len([w for w in fake.watches if w["kind"] == "pods"]) > watches_before,
        what="a new watch",
    )
    resumed = [w for w in fake.watches if w["kind"] == "pods"][watches_before]
    assert resumed["resourceVersion"] == last_rv
    fake.add("pods", make_pod("x3"))
    await harness.converged("events after the cut")
    # Resumed, not relisted.
    assert len([q for q in fake.lists if q["kind"] == "pods"]) == lists_before


async def test_watch_from_compacted_version_relists() -> None:
    fake = FakeApiServer()
    fake.add("pods", make_pod("a"))
    h = Harness(fake)
    await h.pods.list_once()
    fake.add("pods", make_pod("b"))
    fake.compact()
    with pytest.raises(Exception, match="410"):
        await h.pods.watch_once(h.pods.resource_version)
    await h.client.aclose()


async def test_expired_continue_token_restarts_the_list() -> None:
    fake = FakeApiServer()
    for i in range(5):
        fake.add("pods", make_pod(f"p{i}"))
    h = Harness(fake)
    # First page fine, second page 410 (token expired), then a full list again.
    original = fake._list
    calls = {"n": 0}

    def flaky(kind: str, params: dict[str, str]) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            fake.list_errors.append(410)
        return original(kind, params)

    fake._list = flaky  # type: ignore[method-assign]
    await h.pods.list_once()
    assert len(h.cache) == 5
    assert [q.get("continue") for q in fake.lists] == [None, "2", None, "2", "4"]
    await h.client.aclose()


async def test_readyz_is_false_until_pods_and_nodes_are_listed() -> None:
    import httpx
    import uvicorn

    from app.config import parse_config
    from app.server import create_app
    from tests.runway_process import free_port

    fake = FakeApiServer()
    fake.add("pods", make_pod("a", node="n1"))
    fake.add("nodes", make_node("n1"))
    fake.list_errors = [503] * 10_000  # the API server is not answering yet
    config = parse_config(
        {"kubernetes": {"leaderElection": {"enable": False}, "startupRecordsTimeout": "3s"}}
    )
    app = create_app(config, kube=client(fake.transport, retry_total=0))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve())
    try:
        # The lifespan waits (bounded, 3 s here) for the pod list before it serves: see
        # load_records and kubernetes.startupRecordsTimeout.
        await until(lambda: server.started, within=15, what="uvicorn started")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await http.get("/readyz")).status_code == 503
            assert (await http.get("/v1/cache/summary")).json()["synced"] is False
            fake.list_errors.clear()
            ready = {"code": 0}

            async def poll_ready() -> None:
                while ready["code"] != 200:
                    ready["code"] = (await http.get("/readyz")).status_code

            await asyncio.wait_for(poll_ready(), 10)
            summary = (await http.get("/v1/cache/summary?detail=true")).json()
            assert summary["synced"] and summary["pods"] == 1 and summary["nodes"] == 1
            assert summary["podItems"][0]["nodeName"] == "n1"
            assert summary["leader"] is None
    finally:
        server.should_exit = True
        await serving
