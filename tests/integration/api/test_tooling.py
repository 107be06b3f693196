"""GET /v1/resolve and /v1/queues: the same answers as the policy, errors as 400s, in OpenAPI."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.config import RunwayConfig, parse_config
from app.server import create_app
from tests.asgi import asgi_client

CONFIG: dict[str, Any] = {
    "queues": [
        {"name": "A"},
        {"name": "B", "parentQueue": "A", "reclaimMinRuntime": "10m", "preemptMinRuntime": "10m"},
        {"name": "C", "parent": "B"},
        {"name": "D", "parent": "B", "reclaimMinRuntime": "60s"},
        {"name": "leaf1", "parent": "C", "reclaimMinRuntime": "0s", "preemptMinRuntime": "5m"},
        {
            "name": "leaf2",
            "parent": "C",
            "reclaimMinRuntime": "3m",
            "queueingStrategy": "StrictFIFO",
        },
        {"name": "leaf3", "parent": "D"},
    ],
    "minRuntime": {
        "defaultPreemptMinRuntime": "30s",
        "defaultReclaimMinRuntime": "45s",
        "pools": {"big": {"reclaimMinRuntime": "1h", "reclaimResolveMethod": "queue"}},
    },
}


@pytest.fixture
def config() -> RunwayConfig:
    return parse_config(CONFIG)


@pytest.fixture
async def client(config: RunwayConfig) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(config)) as c:
        yield c


async def resolve(client: httpx.AsyncClient, **params: str) -> httpx.Response:
    return await client.get("/v1/resolve", params=params)


@pytest.mark.parametrize(
    ("preemptor", "victim", "body"),
    [
        (
            "leaf1",
            "leaf3",
            {"action": "reclaim", "minRuntimeSeconds": 60.0, "resolvedFrom": "D", "path": ["D"]},
        ),
        (
            "leaf1",
            "leaf2",
            {
                "action": "reclaim",
                "minRuntimeSeconds": 180.0,
                "resolvedFrom": "leaf2",
                "path": ["leaf2"],
            },
        ),
        (
            "leaf3",
            "leaf1",
            {
                "action": "reclaim",
                "minRuntimeSeconds": 600.0,
                "resolvedFrom": "B",
                "path": ["C", "B"],
            },
        ),
        (
            "leaf1",
            "leaf1",
            {
                "action": "preempt",
                "minRuntimeSeconds": 300.0,
                "resolvedFrom": "leaf1",
                "path": ["leaf1"],
            },
        ),
        (
            "leaf2",
            "leaf2",
            {
                "action": "preempt",
                "minRuntimeSeconds": 600.0,
                "resolvedFrom": "B",
                "path": ["leaf2", "C", "B"],
            },
        ),
        (
            "leaf3",
            "A",
            {
                "action": "reclaim",
                "minRuntimeSeconds": 45.0,
                "resolvedFrom": "default",
                "path": ["A"],
            },
        ),
        (
            "ghost",
            "ghost",
            {
                "action": "preempt",
                "minRuntimeSeconds": 30.0,
                "resolvedFrom": "default",
                "path": ["ghost"],
            },
        ),
    ],
)
async def test_resolve(
    client: httpx.AsyncClient, preemptor: str, victim: str, body: dict[str, Any]
) -> None:
    resp = await resolve(client, preemptorQueue=preemptor, victimQueue=victim)
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert answer.pop("victimBudget")["resolvedFrom"] == "default"
    assert answer == body


async def test_pool_overrides(client: httpx.AsyncClient) -> None:
    # Pool "big": queue method (leaf1's own 0 s instead of lca's 600 s), default 1 h.
    resp = await resolve(client, preemptorQueue="leaf3", victimQueue="leaf1", pool="big")
    assert resp.json()["minRuntimeSeconds"] == 0.0
    resp = await resolve(client, preemptorQueue="x", victimQueue="y", pool="big")
    assert resp.json()["minRuntimeSeconds"] == 3600.0
    # A pool without overrides gets the global defaults.
    resp = await resolve(client, preemptorQueue="x", victimQueue="y", pool="small")
    assert resp.json()["minRuntimeSeconds"] == 45.0


@pytest.mark.parametrize(
    ("params", "missing"),
    [
        ({"victimQueue": "leaf1"}, "preemptorQueue"),
        ({"preemptorQueue": "leaf1"}, "victimQueue"),
        ({}, "preemptorQueue"),
        ({"preemptorQueue": "", "victimQueue": "leaf1"}, "preemptorQueue"),
        ({"preemptorQueue": "a", "victimQueue": "b", "pool": ""}, "pool"),
    ],
)
async def test_missing_or_empty_parameter_is_a_400(
    client: httpx.AsyncClient, params: dict[str, str], missing: str
) -> None:
    resp = await client.get("/v1/resolve", params=params)
    assert resp.status_code == 400
    assert missing in resp.json()["error"]


async def test_queues_lists_own_and_effective_settings(client: httpx.AsyncClient) -> None:
    resp = await client.get("/v1/queues")
    assert resp.status_code == 200
    body = resp.json()
    assert body["pool"] is None and body["reclaimResolveMethod"] == "lca"
    assert body["defaultReclaimMinRuntimeSeconds"] == 45.0
    by_name = {q["name"]: q for q in body["queues"]}
    assert list(by_name) == ["A", "B", "C", "D", "leaf1", "leaf2", "leaf3"]
    leaf2 = by_name["leaf2"]
    assert leaf2["path"] == ["A", "B", "C", "leaf2"] and leaf2["parent"] == "C"
    assert leaf2["queueingStrategy"] == "StrictFIFO"
    assert leaf2["preemptMinRuntimeSeconds"] is None
    assert (leaf2["effectivePreemptMinRuntimeSeconds"], leaf2["effectivePreemptFrom"]) == (
        600.0,
        "B",
    )
    assert (leaf2["effectiveReclaimMinRuntimeSeconds"], leaf2["effectiveReclaimFrom"]) == (
        180.0,
        "leaf2",
    )
    a = by_name["A"]
    assert a["parent"] is None and a["children"] == ["B"]
    assert (a["effectivePreemptMinRuntimeSeconds"], a["effectivePreemptFrom"]) == (30.0, "default")


async def test_queues_with_a_pool(client: httpx.AsyncClient) -> None:
    body = (await client.get("/v1/queues", params={"pool": "big"})).json()
    assert body["pool"] == "big" and body["reclaimResolveMethod"] == "queue"
    a = next(q for q in body["queues"] if q["name"] == "A")
    assert a["effectiveReclaimMinRuntimeSeconds"] == 3600.0


async def test_embedded_default_has_no_queues(asgi: Callable[[FastAPI], httpx.AsyncClient]) -> None:
    async with asgi(create_app()) as c:
        assert (await c.get("/v1/queues")).json()["queues"] == []
        resp = await c.get("/v1/resolve", params={"preemptorQueue": "a", "victimQueue": "b"})
        answer = resp.json()
        assert answer.pop("victimBudget")["maxPreemptions"] == 0
        assert answer == {
            "action": "reclaim",
            "minRuntimeSeconds": 0.0,
            "resolvedFrom": "default",
            "path": ["b"],
        }


def test_documented_in_openapi() -> None:
    doc = create_app().openapi()
    op = doc["paths"]["/v1/resolve"]["get"]
    params = {p["name"]: p for p in op["parameters"]}
    assert params["preemptorQueue"]["required"] and params["victimQueue"]["required"]
    assert not params["pool"]["required"]
    assert "400" in op["responses"]
    ref = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/ResolveResponse")
    props = doc["components"]["schemas"]["ResolveResponse"]["properties"]
    assert set(props) == {"action", "minRuntimeSeconds", "resolvedFrom", "path", "victimBudget"}
    assert "/v1/queues" in doc["paths"]


async def test_budget_resolved_per_queue_in_resolve_and_queues() -> None:
    data = {
        **CONFIG,
        "queues": [
            {**q, "preemptionBudget": {"maxPreemptions": 3, "window": "1h"}}
            if q["name"] == "B"
            else {**q, "preemptionBudget": {"maxPreemptions": 0}}
            if q["name"] == "leaf2"
            else q
            for q in CONFIG["queues"]
        ],
        "minRuntime": {
            **CONFIG["minRuntime"],
            "defaultPreemptionBudget": {"maxPreemptions": 5, "window": "2h"},
        },
    }
    async with asgi_client(create_app(parse_config(data))) as c:
        resp = await c.get("/v1/resolve", params={"preemptorQueue": "A", "victimQueue": "leaf3"})
        assert resp.json()["victimBudget"] == {
            "maxPreemptions": 3,
            "windowSeconds": 3600.0,
            "resolvedFrom": "B",
            "path": ["leaf3", "D", "B"],
            "source": "file",
        }
        body = (await c.get("/v1/queues")).json()
    assert body["defaultPreemptionBudget"]["maxPreemptions"] == 5
    budgets = {q["name"]: q["preemptionBudget"] for q in body["queues"]}
    assert (budgets["leaf1"]["maxPreemptions"], budgets["leaf1"]["resolvedFrom"]) == (3, "B")
    assert (budgets["leaf2"]["maxPreemptions"], budgets["leaf2"]["resolvedFrom"]) == (0, "leaf2")
    assert (budgets["A"]["maxPreemptions"], budgets["A"]["resolvedFrom"]) == (5, "default")
    assert budgets["A"]["windowSeconds"] == 7200.0
