"""The namespace reflector against a fake API server: runway lists and watches Namespaces only
while some queue has a ``namespaceSelector`` (from the file, or from a KAI Queue object adopted
later), and a relabelled namespace moves its pods between the queue and ``default`` without a
restart; ``/readyz`` counts the namespace watch while it runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.config import parse_config
from app.policy.workload import DEFAULT_QUEUE
from app.server import create_app
from app.wiring import Runway
from tests.integration.kube.test_queues import DISCOVERY, kai_queue
from tests.integration.kube_fake import FakeApiServer, make_node, make_pod
from tests.integration.kube_helpers import client, until

KINDS = ("pods", "nodes", "namespaces", "workloadrecords", "queues")
SELECTOR = {"name": "qa", "namespaceSelector": {"matchLabels": {"team": "a"}}}


def make_namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


class World:
    def __init__(self, config: dict[str, Any]) -> None:
        self.fake = FakeApiServer(objects={k: {} for k in KINDS}, history={k: [] for k in KINDS})
        router = self.fake.router
        router.get(path="/api/v1/namespaces").mock(side_effect=self.fake._handle("namespaces"))
        router.get(path="/apis/runway.dev/v1alpha1/workloadrecords").mock(
            side_effect=self.fake._handle("workloadrecords")
        )
        router.get(path="/apis/scheduling.run.ai/v2").mock(
            return_value=httpx.Response(200, json=DISCOVERY)
        )
        router.get(path="/apis/scheduling.run.ai/v2/queues").mock(
            side_effect=self.fake._handle("queues")
        )
        self.kube = client(self.fake.transport)
        base = {"kubernetes": {"leaderElection": {"enable": False}, "startupRecordsTimeout": "5s"}}
        self.app = create_app(parse_config(base | config), kube=self.kube)
        self.runway: Runway = self.app.state.runway
        self.fake.add("nodes", make_node("n1"))
        self.fake.add("namespaces", make_namespace("ns-a", team="a"))
        self.fake.add("namespaces", make_namespace("ns-b", team="b"))
        for ns in ("ns-a", "ns-b"):
            self.fake.add("pods", make_pod("p", namespace=ns, labels={"runway.dev/queue": "qa"}))

    def in_queue(self, queue: str) -> set[str]:
        return {p.key for p in self.runway.cache.pods_in_queue(queue)}

    def namespace_lists(self) -> list[dict[str, str]]:
        return [q for q in self.fake.lists if q["kind"] == "namespaces"]


@pytest.fixture
async def world(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    w = World(request.param)
    await w.runway.start()
    yield w
    await w.runway.stop()
    await w.kube.aclose()


@pytest.mark.parametrize("world", [{"queues": [SELECTOR]}], indirect=True)
async def test_a_relabelled_namespace_moves_its_pods_without_a_restart(world: World) -> None:
    w = world
    sync = w.runway.sync
    assert sync is not None and sync.watching_namespaces
    # start() waited for the namespaces: the pods are already where the labels put them
    await until(lambda: len(w.runway.cache) == 2, what="pods listed")
    assert w.in_queue("qa") == {"ns-a/p"}
    assert w.in_queue(DEFAULT_QUEUE) == {"ns-b/p"}
    assert w.runway.ready
    facts = w.runway.requeue.index.facts
    w.fake.add("namespaces", make_namespace("ns-b", team="a"))
    await until(lambda: w.in_queue("qa") == {"ns-a/p", "ns-b/p"}, what="ns-b's pod moved to qa")
    assert w.runway.requeue.index.facts > facts  # the requeue memos were dropped
    w.fake.add("namespaces", make_namespace("ns-a"))  # the label removed
    await until(lambda: w.in_queue(DEFAULT_QUEUE) == {"ns-a/p"}, what="ns-a's pod denied")
    # a watch cut (410) relists: still right, nothing lost
    w.fake.gone_now()
    w.fake.add("namespaces", make_namespace("ns-a", team="a"))
    await until(lambda: w.in_queue("qa") == {"ns-a/p", "ns-b/p"}, what="after the relist")


@pytest.mark.parametrize(
    "world", [{"queues": [{"name": "qa", "namespaces": ["ns-a"]}]}], indirect=True
)
async def test_no_selector_no_namespace_watch(world: World) -> None:
    """A deployment without selectors never asks for namespaces (it needs no RBAC for them)."""
    w = world
    await until(lambda: len(w.runway.cache) == 2, what="pods listed")
    assert w.runway.sync is not None and not w.runway.sync.watching_namespaces
    assert w.namespace_lists() == []
    assert w.in_queue("qa") == {"ns-a/p"}


@pytest.mark.parametrize("world", [{"queueSource": "kai"}], indirect=True)
async def test_a_kai_queue_that_gains_a_selector_starts_the_watch(world: World) -> None:
    w = world
    w.fake.add("queues", kai_queue("qa"))
    await until(lambda: "qa" in w.runway.queues, what="the Queue object adopted")
    await until(lambda: len(w.runway.cache) == 2, what="pods listed")
    assert w.runway.sync is not None and not w.runway.sync.watching_namespaces
    assert w.in_queue("qa") == {"ns-a/p", "ns-b/p"}
    selector = kai_queue("qa")
    selector["metadata"]["annotations"] = {"runway.dev/namespace-selector": "team in (a)"}
    w.fake.add("queues", selector)
    await until(lambda: w.runway.sync.watching_namespaces, what="the namespace watch started")  # type: ignore[union-attr]
    await until(lambda: w.in_queue("qa") == {"ns-a/p"}, what="ns-b's pod denied")
    assert w.in_queue(DEFAULT_QUEUE) == {"ns-b/p"}
    assert len(w.namespace_lists()) == 1


@pytest.mark.parametrize("world", [{"queues": [SELECTOR]}], indirect=True)
async def test_readyz_fails_when_namespaces_cannot_be_watched(world: World) -> None:
    """No RBAC for namespaces (a selector added to an old install): the watch fails, and the
    replica says so through /readyz rather than denying pods quietly forever."""
    w = world
    sync = w.runway.sync
    assert sync is not None and sync.namespaces is not None
    assert w.runway.ready
    sync.namespaces.failing_since = 0.0  # failing since the monotonic clock's origin
    assert not w.runway.ready
