"""Shared pieces of the hostile-input suite: an embedded runway with a filled cache, over ASGI."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pytest

from app.clock import ManualClock
from app.model import Pod
from app.model.node import Node
from app.model.timestamps import format_time
from app.server import create_app
from app.wiring import Runway
from tests.builders import runway_config

T0 = 1_800_000_000.0
TOKEN = "0123456789abcdef0123456789abcdef"


def pod_obj(
    name: str,
    *,
    node: str | None = None,
    job: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    priority: int = 0,
    rv: str = "1",
) -> dict[str, Any]:
    """A pod as the API server returns it; bound to ``node`` (Running, Ready) when given."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "team",
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "creationTimestamp": format_time(T0 - 600),
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if job:
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": f"uid-job-{job}"}
    if owner:
        meta["ownerReferences"] = [{**owner, "controller": True}]
    obj: dict[str, Any] = {
        "metadata": meta,
        "spec": {"priority": priority, "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }
    if node:
        t = format_time(T0 - 300)
        obj["spec"]["nodeName"] = node
        obj["status"] = {
            "phase": "Running",
            "startTime": t,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
                {"type": "Ready", "status": "False", "lastTransitionTime": t},
            ],
        }
    return obj


@dataclass
class Embedded:
    http: httpx.AsyncClient
    runway: Runway
    clock: ManualClock

    def add(self, obj: dict[str, Any]) -> Pod:
        pod = msgspec.convert(obj, Pod)
        self.runway.cache.upsert_pod(pod)
        return pod

    async def verb(self, verb: str, body: Any) -> httpx.Response:
        content = body if isinstance(body, bytes) else msgspec.json.encode(body)
        return await self.http.post(f"/scheduler/{verb}", content=content)

    async def passes(self) -> None:
        """One pass of every background loop that reads the cache (none may raise)."""
        await self.runway.evictor.run_once()
        self.runway.evictor.update_gauges(self.clock.now())
        await self.runway.gatekeeper.run_once()
        await self.runway.waker.run_once()


def build_embedded() -> tuple[Runway, ManualClock, Any]:
    clock = ManualClock(T0)
    config = runway_config(
        {
            "auth": {"mode": "static", "staticTokens": [TOKEN]},
            "queues": [{"name": "research"}],
            "waitForPodsReady": {"enable": True, "timeout": "60s"},
            "preemption": {"async": True},
        }
    )
    app = create_app(config, clock)
    runway: Runway = app.state.runway
    runway.cache.replace_nodes([msgspec.convert({"metadata": {"name": "n1"}}, Node)])
    runway.cache.replace_pods([])
    return runway, clock, app


@pytest.fixture
async def embedded() -> AsyncIterator[Embedded]:
    runway, clock, app = build_embedded()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://runway") as http:
        yield Embedded(http, runway, clock)


def preempt_body(preemptor: dict[str, Any], victims: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "Pod": preemptor,
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0}
            for node, uids in victims.items()
        },
    }


def filter_body(pod: dict[str, Any], nodes: list[str] | None = None) -> dict[str, Any]:
    return {"Pod": pod, "NodeNames": nodes or ["n1"]}
