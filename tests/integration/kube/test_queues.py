"""Queues from KAI Queue objects against a fake API server (discovery, LIST, WATCH): the tree is
built from the objects, rebuilt on every change, an invalid change keeps the last good tree
(and says why), ``auto`` without the kind keeps the file's tree; ``GET /v1/queues`` says where
each value comes from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app import metrics
from app.config import parse_config
from app.server import create_app
from app.wiring import Runway
from tests.integration.kube_fake import FakeApiServer
from tests.integration.kube_helpers import client, until

DISCOVERY = {
    "kind": "APIResourceList",
    "groupVersion": "scheduling.run.ai/v2",
    "resources": [
        {"name": "queues", "kind": "Queue", "namespaced": False},
        {"name": "queues/status", "kind": "Queue", "namespaced": False},
    ],
}


def kai_queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"resources": {}, **spec},
    }


class World:
    def __init__(self, config: dict[str, Any], *, served: bool = True) -> None:
        self.fake = FakeApiServer(
            objects={"pods": {}, "nodes": {}, "queues": {}},
            history={"pods": [], "nodes": [], "queues": []},
        )
        router = self.fake.router
        if served:
            router.get(path="/apis/scheduling.run.ai/v2").mock(
                return_value=httpx.Response(200, json=DISCOVERY)
            )
            router.get(path="/apis/scheduling.run.ai/v2/queues").mock(
                side_effect=self.fake._handle("queues")
            )
        else:
            router.get(path="/apis/scheduling.run.ai/v2").mock(
                return_value=httpx.Response(
                    404, json={"kind": "Status", "code": 404, "reason": "NotFound"}
                )
            )
        self.kube = client(self.fake.transport)
        base = {
            "kubernetes": {"leaderElection": {"enable": False}, "startupRecordsTimeout": "5s"},
            "minRuntime": {"defaultPreemptMinRuntime": "1m"},
        }
        self.app = create_app(parse_config(base | config), kube=self.kube)
        self.runway: Runway = self.app.state.runway
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://runway"
        )

    async def queues(self) -> dict[str, Any]:
        resp = await self.http.get("/v1/queues")
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        return body

    def names(self) -> list[str]:
        return sorted(n.name for n in self.runway.queues)


@pytest.fixture
async def world(request: pytest.FixtureRequest) -> AsyncIterator[World]:
    config, served = getattr(request, "param", ({"queueSource": "kai"}, True))
    w = World(config, served=served)
    w.fake.add("queues", kai_queue("research", reclaimMinRuntime="10m"))
    w.fake.add("queues", kai_queue("team-a", parentQueue="research", preemptMinRuntime="5m"))
    await w.runway.start()
    yield w
    await w.runway.stop()
    await w.http.aclose()
    await w.kube.aclose()


async def test_tree_from_queue_objects_and_where_values_come_from(world: World) -> None:
    w = world
    assert w.names() == ["research", "team-a"]  # listed before start() returned
    body = await w.queues()
    assert body["queueSource"] == "kai"
    assert body["queueSourceError"] is None
    by_name = {q["name"]: q for q in body["queues"]}
    team_a = by_name["team-a"]
    assert team_a["parent"] == "research"
    assert team_a["source"] == "Queue/team-a"
    assert team_a["effectivePreemptMinRuntimeSeconds"] == 300
    assert team_a["effectivePreemptSource"] == "Queue/team-a"
    assert team_a["effectiveReclaimMinRuntimeSeconds"] == 600
    assert team_a["effectiveReclaimFrom"] == "research"
    assert team_a["effectiveReclaimSource"] == "Queue/research"
    research = by_name["research"]
    assert research["effectivePreemptFrom"] == "default"
    assert research["effectivePreemptSource"] == "file"  # the file's minRuntime default


async def test_changes_rebuild_the_tree(world: World) -> None:
    w = world
    w.fake.add("queues", kai_queue("team-b", parentQueue="research", reclaimMinRuntime="0s"))
    await until(lambda: "team-b" in w.names(), what="team-b added through the watch")
    w.fake.add("queues", kai_queue("team-a", parentQueue="research", preemptMinRuntime="7m"))
    await until(
        lambda: w.runway.queues.node("team-a").preempt_min_runtime_s == 420, what="team-a edited"
    )
    w.fake.delete("queues", "team-b")
    await until(lambda: "team-b" not in w.names(), what="team-b deleted")
    assert metrics.queue_label("team-a") == "team-a"


async def test_invalid_change_keeps_the_last_good_tree(world: World) -> None:
    w = world
    invalid = metrics.QUEUE_TREE_UPDATES.labels("invalid")
    before = invalid._value.get()
    w.fake.add("queues", kai_queue("team-a", parentQueue="research", preemptMinRuntime="5"))
    await until(lambda: invalid._value.get() > before, what="the invalid change seen")
    assert w.runway.queues.node("team-a").preempt_min_runtime_s == 300  # the last good tree
    body = await w.queues()
    assert "Queue/team-a: preemptMinRuntime: " in body["queueSourceError"]
    # Fixed: applied, the error clears.
    w.fake.add("queues", kai_queue("team-a", parentQueue="research", preemptMinRuntime="5s"))
    await until(
        lambda: w.runway.queues.node("team-a").preempt_min_runtime_s == 5, what="the fix applied"
    )
    assert (await w.queues())["queueSourceError"] is None


async def test_runways_annotations_arrive_through_the_watch_and_only_they_are_kept(
    world: World,
) -> None:
    """``runway.dev/namespaces`` and ``runway.dev/namespace-selector`` on a Queue object reach
    the tree (the watched object keeps them); kubectl's last-applied copy is not kept."""
    w = world
    named = kai_queue("team-a", parentQueue="research")
    named["metadata"]["annotations"] = {
        "runway.dev/namespaces": "ns-b, ns-c",
        "runway.dev/namespace-selector": "team=a",
        "kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 10_000 + "}",
    }
    w.fake.add("queues", named)
    await until(
        lambda: w.runway.queues.node("team-a").namespaces == ("ns-b", "ns-c"),
        what="the annotations applied",
    )
    selector = w.runway.queues.node("team-a").namespace_selector
    assert selector is not None and selector.text == "team=a"
    source = w.runway.queue_source
    assert source is not None
    assert source.store.objects["team-a"].metadata.annotations == {
        "runway.dev/namespaces": "ns-b, ns-c",
        "runway.dev/namespace-selector": "team=a",
    }


async def test_an_unknown_parent_is_refused_too(world: World) -> None:
    w = world
    w.fake.add("queues", kai_queue("orphan", parentQueue="nowhere"))
    await until(lambda: w.runway.queue_error is not None, what="the refusal")
    assert "Queue/orphan: spec.parentQueue" in (w.runway.queue_error or "")
    assert "orphan" not in w.names()


@pytest.mark.parametrize(
    "world", [({"queueSource": "auto", "queues": [{"name": "from-file"}]}, False)], indirect=True
)
async def test_auto_without_the_kind_keeps_the_file(world: World) -> None:
    w = world
    assert w.names() == ["from-file"]
    body = await w.queues()
    assert body["queueSource"] == "file"
    assert body["queues"][0]["source"] == "file"


@pytest.mark.parametrize(
    "world", [({"queueSource": "auto", "queues": [{"name": "from-file"}]}, True)], indirect=True
)
async def test_auto_with_the_kind_reads_the_cluster(world: World) -> None:
    assert world.names() == ["research", "team-a"]
    assert (await world.queues())["queueSource"] == "kai"
