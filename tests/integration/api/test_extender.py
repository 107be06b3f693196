"""The preempt verb end to end in-process: min-runtime from the cache, one node, the decision
log, explain, the async executor and the gate (the API server is the dry-run stand-in here)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import msgspec
import pytest
from fastapi import FastAPI

from app.clock import ManualClock
from app.config import parse_config
from app.model import Pod
from app.model.timestamps import format_time
from app.server import create_app
from app.wiring import Runway
from tests.asgi import asgi_client, started
from tests.builders import condition, raw_pod
from tests.builders import pod as build_pod

NOW = 1_800_000_000.0
CONFIG = {
    "queues": [
        {"name": "research"},
        {"name": "team-a", "parent": "research", "reclaimMinRuntime": "10m"},
        {"name": "team-b", "parent": "research"},
    ],
}


def pod(
    name: str,
    uid: str,
    *,
    queue: str,
    node: str | None,
    priority: int,
    started_ago: float | None = None,
    workload: str | None = None,
) -> Pod:
    labels = {"runway.dev/queue": queue, "runway.dev/workload": workload or name}
    scheduled = None
    if started_ago is not None:
        scheduled = [condition("PodScheduled", True, format_time(NOW - started_ago))]
    raw = raw_pod(
        name,
        uid=uid,
        labels=labels,
        node=node,
        priority=priority,
        containers=[{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        phase="Running" if node else "Pending",
        conditions=scheduled,
    )
    return build_pod(raw)


PREEMPTOR = pod("high-0", "uid-p", queue="team-b", node=None, priority=1000)
YOUNG = pod("young", "uid-young", queue="team-a", node="node-0", priority=100, started_ago=60)
OLD = pod("old", "uid-old", queue="team-a", node="node-1", priority=100, started_ago=3600)


def preempt_body() -> bytes:
    return json.dumps(
        {
            "Pod": {
                "metadata": {
                    "name": "high-0",
                    "namespace": "default",
                    "uid": "uid-p",
                    "labels": {"runway.dev/queue": "team-b"},
                },
                "spec": {"priority": 1000},
            },
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {
                "node-0": {"Pods": [{"UID": "uid-young"}], "NumPDBViolations": 0},
                "node-1": {"Pods": [{"UID": "uid-old"}], "NumPDBViolations": 0},
            },
        }
    ).encode()


@pytest.fixture
async def app(request: pytest.FixtureRequest) -> AsyncIterator[FastAPI]:
    extra = getattr(request, "param", {})
    application = create_app(parse_config({**CONFIG, **extra}), clock=ManualClock(NOW))
    runtime: Runway = application.state.runway
    runtime.cache.replace_pods([PREEMPTOR, YOUNG, OLD])
    async with started(application):
        yield application


async def call(app: FastAPI, method: str, path: str, body: bytes | None = None) -> httpx.Response:
    async with asgi_client(app) as client:
        return await client.request(method, path, content=body)


@pytest.mark.parametrize("app", [{"preemption": {"async": False}}], indirect=True)
async def test_protected_victim_drops_its_node_and_the_other_node_wins(app: FastAPI) -> None:
    # Scheduler executes: the reply names the chosen node and its victims.
    resp = await call(app, "POST", "/scheduler/preempt", preempt_body())
    assert resp.status_code == 200
    assert resp.json() == {
        "NodeNameToMetaVictims": {"node-1": {"Pods": [{"UID": "uid-old"}], "NumPDBViolations": 0}}
    }

    decisions = (await call(app, "GET", "/v1/preemptions/decisions")).json()["decisions"]
    latest = decisions[0]
    assert latest["chosenNode"] == "node-1"
    node0 = next(n for n in latest["nodes"] if n["node"] == "node-0")
    assert node0["outcome"] == "dropped"
    young = next(p for p in node0["pods"] if p["uid"] == "uid-young")
    assert young["protected"] and young["action"] == "reclaim"
    assert young["minRuntimeSeconds"] == 600 and young["rule"] == "team-a"


async def test_explain_answers_from_the_live_state(app: FastAPI) -> None:
    resp = await call(app, "GET", "/v1/explain?preemptor=default/high-0&victim=default/young")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["protected"] is True and body["eligible"] is False
    assert body["action"] == "reclaim" and body["resolvedFrom"] == "team-a"
    assert body["protectedUntil"] == format_time(NOW - 60 + 600)
    assert "protected" in body["explanation"]
    old = await call(app, "GET", "/v1/explain?preemptor=default/high-0&victim=default/old")
    assert old.json()["eligible"] is True
    assert old.json()["lastDecision"] is None  # no preempt call yet
    await call(app, "POST", "/scheduler/preempt", preempt_body())
    young = await call(app, "GET", "/v1/explain?preemptor=default/high-0&victim=default/young")
    last = young.json()["lastDecision"]
    assert last["outcome"] == "dropped" and last["protected"] is True


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("preemptor=default/high-0&victim=default/nope", 404),
        ("preemptor=high-0&victim=default/old", 400),
        ("victim=default/old", 400),
    ],
)
async def test_explain_errors_say_what_is_wrong(app: FastAPI, query: str, status: int) -> None:
    resp = await call(app, "GET", f"/v1/explain?{query}")
    assert resp.status_code == status
    assert resp.json()


async def test_async_preemption_holds_the_gate_until_victims_are_gone(app: FastAPI) -> None:
    runtime: Runway = app.state.runway
    first = await call(app, "POST", "/scheduler/preempt", preempt_body())
    # Takeover: kube-scheduler is told nothing to do; runway executes the preemption.
    assert first.status_code == 200 and first.json() == {"NodeNameToMetaVictims": {}}
    # In the gate: a second preempt is vetoed, and /v1/gate lists the preemptor.
    again = await call(app, "POST", "/scheduler/preempt", preempt_body())
    assert again.json() == {"NodeNameToMetaVictims": {}}
    gate = (await call(app, "GET", "/v1/gate")).json()
    assert [g["preemptor"] for g in gate] == ["default/high-0"]
    assert gate[0]["node"] == "node-1" and gate[0]["victims"] == ["default/old"]
    await runtime.executor.drain(5)
    recent = (await call(app, "GET", "/v1/preemptions")).json()["recent"]
    assert recent[0]["result"] == "success" and recent[0]["node"] == "node-1"
    # The victim is still in the cache: the gate holds; once it is gone, it opens.
    runtime.gatekeeper.sweep()
    assert len(runtime.gate) == 1
    runtime.cache.delete_pod(OLD)
    assert runtime.gate.held(PREEMPTOR, NOW) is None  # a read sees it open at once
    assert runtime.gatekeeper.sweep() == 1 and len(runtime.gate) == 0  # the keeper releases it


@pytest.mark.parametrize("app", [{"preemption": {"async": False}}], indirect=True)
async def test_scheduler_executes_mode_returns_the_victims_and_deletes_nothing(
    app: FastAPI,
) -> None:
    runtime: Runway = app.state.runway
    resp = await call(app, "POST", "/scheduler/preempt", preempt_body())
    assert resp.json()["NodeNameToMetaVictims"]["node-1"]["Pods"] == [{"UID": "uid-old"}]
    assert runtime.gate.get("uid-p") is not None  # held in the gate all the same
    await runtime.executor.drain(5)
    record = runtime.executor.recent()[0]
    assert record.result == "success"
    assert record.steps == [
        "gate mirrored",
        "1 eviction records written, 0 off-node gang siblings deleted",
    ]


async def test_embedded_default_never_caps_a_declared_min_available() -> None:
    # No cache: the payload's 2 victims are all runway sees of a workload declaring 5 pods.
    # Scheduler executes, so the reply itself shows the decision (takeover answers {} anyway).
    config = parse_config({**CONFIG, "preemption": {"async": False}})
    application = create_app(config, clock=ManualClock(NOW))
    victims = []
    for i in range(2):
        raw = msgspec.to_builtins(
            pod(
                f"el-{i}",
                f"uid-el-{i}",
                queue="team-a",
                node="node-0",
                priority=100,
                started_ago=60,
                workload="elastic",
            )
        )
        raw["metadata"]["annotations"] = {"runway.dev/min-available": "5"}
        victims.append(raw)
    body = json.loads(preempt_body())
    body["NodeNameToMetaVictims"] = None
    body["NodeNameToVictims"] = {"node-0": {"Pods": victims, "NumPDBViolations": 0}}
    async with application.router.lifespan_context(application):
        resp = await call(application, "POST", "/scheduler/preempt", json.dumps(body).encode())
    assert resp.status_code == 200
    assert resp.json() == {"NodeNameToMetaVictims": {}}  # protected: neither is evicted
