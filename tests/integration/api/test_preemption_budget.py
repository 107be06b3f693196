"""The preemption budget over HTTP (issue #16): a workload whose budget is exhausted is not chosen
as a victim by ``POST /scheduler/preempt``, ``GET /v1/explain`` says why, the metric counts it,
and the executor appends each preemption to the victim's history."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.clock import ManualClock
from app.config import parse_config
from app.model.eviction import PREEMPTED, EvictionRecord
from app.model.timestamps import format_time
from app.policy.workload import workload_of
from app.server import create_app
from app.wiring import Runway
from tests.asgi import asgi_client, started
from tests.builders import write_record
from tests.integration.api.test_extender import NOW, OLD, PREEMPTOR, YOUNG

CONFIG = {
    "queues": [
        {"name": "research", "preemptionBudget": {"maxPreemptions": 2, "window": "1h"}},
        {"name": "team-a", "parent": "research"},
        {"name": "team-b", "parent": "research"},
    ],
}
# YOUNG (node-0) was preempted twice in the last hour: its budget (2 per 1h) is exhausted.
EXHAUSTED = (NOW - 1800, NOW - 600)


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
                # node-0 first: with no rule it would win (least work lost: YOUNG ran 60 s)
                "node-0": {"Pods": [{"UID": "uid-young"}], "NumPDBViolations": 0},
                "node-1": {"Pods": [{"UID": "uid-old"}], "NumPDBViolations": 0},
            },
        }
    ).encode()


@pytest.fixture
async def app() -> AsyncIterator[FastAPI]:
    application = create_app(parse_config(CONFIG), clock=ManualClock(NOW))
    runtime: Runway = application.state.runway
    runtime.cache.replace_pods([PREEMPTOR, YOUNG, OLD])
    async with started(application):
        # the embedded default keeps records in memory, as the API server would hold them
        await write_record(
            runtime.records,
            workload_of(YOUNG),
            EvictionRecord(PREEMPTED, EXHAUSTED[-1], "uid-x", preemption_history=EXHAUSTED),
        )
        yield application


async def call(app: FastAPI, method: str, path: str, body: bytes | None = None) -> httpx.Response:
    async with asgi_client(app) as client:
        return await client.request(method, path, content=body)


def budget_victims(metrics_text: str) -> float:
    for line in metrics_text.splitlines():
        if line.startswith("runway_victims_total{") and 'decision="budget"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_exhausted_budget_is_not_a_victim_and_explain_says_why(app: FastAPI) -> None:
    runtime: Runway = app.state.runway
    before = budget_victims((await call(app, "GET", "/metrics")).text)

    explain = await call(app, "GET", "/v1/explain?preemptor=default/high-0&victim=default/young")
    assert explain.status_code == 200, explain.text
    body = explain.json()
    assert body["protected"] is True and body["eligible"] is False
    assert body["protectedBy"] == "budget"
    until = format_time(EXHAUSTED[0] + 3600)
    assert body["explanation"] == (
        "protected: preemption budget: preempted 2 times in the last 1h "
        f"(budget of queue research: 2 per 1h); protected until {until}"
    )
    assert body["budget"] == {
        "maxPreemptions": 2,
        "windowSeconds": 3600.0,
        "resolvedFrom": "research",
        "path": ["team-a", "research"],
        "preemptionsInWindow": 2,
        "protected": True,
        "protectedUntil": until,
    }

    resp = await call(app, "POST", "/scheduler/preempt", preempt_body())
    assert resp.status_code == 200
    decision = (await call(app, "GET", "/v1/preemptions/decisions")).json()["decisions"][0]
    assert decision["chosenNode"] == "node-1" and decision["victims"] == ["uid-old"]
    node0 = next(n for n in decision["nodes"] if n["node"] == "node-0")
    young = node0["pods"][0]
    assert node0["outcome"] == "dropped" and young["protectedBy"] == "budget"
    assert "budget of queue research: 2 per 1h" in young["reason"]
    assert decision["counts"]["budget"] == {"reclaim": 1}
    after = budget_victims((await call(app, "GET", "/metrics")).text)
    assert after == before + 1

    # the executor (takeover) preempted OLD: its history now holds this preemption
    await runtime.executor.drain(5)
    assert runtime.executor.recent()[0].result == "success"
    record = runtime.records.read(workload_of(OLD))
    assert record is not None and record.preemption_history == (NOW,)
    # YOUNG's history is untouched; once its oldest preemption leaves the window it is eligible
    young_record = runtime.records.read(workload_of(YOUNG))
    assert young_record is not None and young_record.preemption_history == EXHAUSTED
    clock = runtime.clock
    assert isinstance(clock, ManualClock)
    clock.advance(EXHAUSTED[0] + 3600 - NOW)
    later = await call(app, "GET", "/v1/explain?preemptor=default/high-0&victim=default/young")
    assert later.json()["eligible"] is True and later.json()["protectedBy"] is None
    assert "budget not exhausted" not in later.json()["explanation"]  # min-runtime text only
