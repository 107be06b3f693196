"""GET /v1/workloads and the paging of every /v1 list endpoint, over ASGI on the embedded
default (pods put in the cache by the test)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.clock import ManualClock
from app.config import parse_config
from app.model.gate import GateEntry, PodRef
from app.model.timestamps import format_time
from app.server import create_app
from app.wiring import Runway
from tests.asgi import asgi_client
from tests.builders import queued_pod

T0 = 1_800_000_000.0
CONFIG = {
    "queues": [
        {"name": "research", "preemptMinRuntime": "10m"},
        {"name": "strict", "parent": "research", "queueingStrategy": "StrictFIFO"},
        {"name": "open", "parent": "research"},
    ],
}


@pytest.fixture
async def setup() -> AsyncIterator[tuple[httpx.AsyncClient, Runway]]:
    app = create_app(parse_config(CONFIG), ManualClock(T0))
    runway: Runway = app.state.runway
    async with asgi_client(app) as http:
        yield http, runway


def add(runway: Runway, name: str, queue: str, *, ns: str = "team", **kw: float) -> None:
    runway.cache.upsert_pod(queued_pod(name, queue, namespace=ns, **kw))
    runway.cache.pods_synced = True


async def pages(http: httpx.AsyncClient, path: str, field: str, limit: int) -> list[Any]:
    """Every item of a paged list, following `continue`."""
    items: list[Any] = []
    token = None
    for _ in range(100):
        params: dict[str, Any] = {"limit": limit}
        if token is not None:
            params["continue"] = token
        resp = await http.get(path, params=params)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert len(body[field]) <= limit
        items += body[field]
        token = body["continue"]
        if token is None:
            return items
    raise AssertionError("paging did not end")


async def test_workloads_say_where_each_waits_and_why(
    setup: tuple[httpx.AsyncClient, Runway],
) -> None:
    http, runway = setup
    add(runway, "first", "strict", created=T0 - 100)
    add(runway, "second", "strict", created=T0 - 50)
    add(runway, "free", "open", created=T0 - 10)
    add(runway, "running", "open", bound=T0 - 60)
    resp = await http.get("/v1/workloads")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["continue"] is None
    got = {w["name"]: w for w in body["items"]}
    assert [w["name"] for w in body["items"]] == ["free", "running", "first", "second"]
    assert got["first"]["position"] == 1 and got["first"]["state"] == "pending"
    assert got["first"]["rule"] == "" and "kube-scheduler" in got["first"]["reason"]
    assert got["second"]["position"] == 2 and got["second"]["rule"] == "strict-fifo"
    assert "team/first" in got["second"]["reason"]
    assert got["running"]["state"] == "admitted" and got["running"]["position"] is None
    # research's 10m preempt min-runtime, counted from the bind.
    assert got["running"]["protectedUntil"] == format_time(T0 - 60 + 600)
    assert got["running"]["reason"] == "" and got["running"]["protectedUntil"]


async def test_workloads_filter_by_namespace_queue_and_state(
    setup: tuple[httpx.AsyncClient, Runway],
) -> None:
    http, runway = setup
    add(runway, "a", "strict")
    add(runway, "b", "open", ns="other")
    add(runway, "c", "open", bound=T0)

    async def names(**params: str) -> list[str]:
        resp = await http.get("/v1/workloads", params=params)
        assert resp.status_code == 200, resp.text
        return sorted(w["name"] for w in resp.json()["items"])

    assert await names(namespace="other") == ["b"]
    assert await names(queue="open") == ["b", "c"]
    assert await names(state="admitted") == ["c"]
    bad = await http.get("/v1/workloads", params={"state": "sleeping"})
    assert bad.status_code == 400 and "state" in bad.json()["error"]


async def test_workloads_page_in_the_listed_order(setup: tuple[httpx.AsyncClient, Runway]) -> None:
    http, runway = setup
    for i in range(7):
        add(runway, f"w{i}", "strict" if i % 2 else "open", created=T0 - 100 + i)
    add(runway, "up", "open", bound=T0)
    whole = (await http.get("/v1/workloads")).json()["items"]
    assert len(whole) == 8
    for limit in (1, 3, 8):
        assert await pages(http, "/v1/workloads", "items", limit) == whole


async def test_pending_pages_and_a_new_workload_does_not_repeat_one(
    setup: tuple[httpx.AsyncClient, Runway],
) -> None:
    http, runway = setup
    for i in range(5):
        add(runway, f"w{i}", "open", created=T0 - 100 + i)
    first = (await http.get("/v1/queues/open/pending", params={"limit": 2})).json()
    assert [e["workload"] for e in first["pending"]] == ["team/w0", "team/w1"]
    add(runway, "older", "open", created=T0 - 1000)  # goes to the head, before the token
    rest = (
        await http.get(
            "/v1/queues/open/pending", params={"limit": 10, "continue": first["continue"]}
        )
    ).json()
    assert [e["workload"] for e in rest["pending"]] == ["team/w2", "team/w3", "team/w4"]
    assert rest["continue"] is None
    # Positions stay absolute: w2 is now third behind the new head and w0, w1.
    assert [e["position"] for e in rest["pending"]] == [4, 5, 6]


async def test_cache_detail_pages_pods_then_nodes(setup: tuple[httpx.AsyncClient, Runway]) -> None:
    http, runway = setup
    for i in range(3):
        add(runway, f"p{i}", "open")
    whole = (await http.get("/v1/cache/summary", params={"detail": "true"})).json()
    one = (await http.get("/v1/cache/summary", params={"detail": "true", "limit": 2})).json()
    assert [p["name"] for p in one["podItems"]] == ["p0", "p1"] and one["continue"]
    two = (
        await http.get(
            "/v1/cache/summary", params={"detail": "true", "limit": 2, "continue": one["continue"]}
        )
    ).json()
    assert [p["name"] for p in two["podItems"]] == ["p2"] and two["continue"] is None
    assert whole["pods"] == one["pods"] == 3  # the counts are never paged


async def test_gate_pages_with_a_header(setup: tuple[httpx.AsyncClient, Runway]) -> None:
    http, runway = setup
    for i in range(3):
        ref = PodRef(f"uid-{i}", "team", f"pre-{i}")
        runway.gate.hold(GateEntry(ref, "node-1", (), since=T0 - 10 + i, deadline=T0 + 60))
    first = await http.get("/v1/gate", params={"limit": 2})
    assert [g["preemptor"] for g in first.json()] == ["team/pre-0", "team/pre-1"]
    token = first.headers["Runway-Continue"]
    last = await http.get("/v1/gate", params={"limit": 2, "continue": token})
    assert [g["preemptor"] for g in last.json()] == ["team/pre-2"]
    assert "Runway-Continue" not in last.headers


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/v1/workloads", {"continue": "garbage"}),
        ("/v1/gate", {"limit": 0}),
        ("/v1/queues/open/pending", {"limit": 100_000}),
        ("/v1/preemptions", {"continue": ""}),
        ("/v1/preemptions/decisions", {"continue": "e30"}),
    ],
)
async def test_bad_paging_parameters_are_400s_that_say_so(
    setup: tuple[httpx.AsyncClient, Runway], path: str, params: dict[str, Any]
) -> None:
    http, _ = setup
    resp = await http.get(path, params=params)
    assert resp.status_code == 400, resp.text
    assert any(w in resp.json()["error"] for w in ("continue", "limit"))


async def test_a_token_of_another_list_is_refused(setup: tuple[httpx.AsyncClient, Runway]) -> None:
    http, runway = setup
    for i in range(3):
        add(runway, f"p{i}", "open")
    token = (await http.get("/v1/workloads", params={"limit": 1})).json()["continue"]
    resp = await http.get("/v1/queues/open/pending", params={"continue": token})
    assert resp.status_code == 400 and "another list" in resp.json()["error"]


@pytest.mark.parametrize("path", ["/v1/workloads?limit=50", "/v1/queues"])
async def test_a_list_over_thousands_of_workloads_lets_the_verbs_run_meanwhile(
    setup: tuple[httpx.AsyncClient, Runway], path: str
) -> None:
    """A list walks every workload (41,729 in bench.scale: ~200 ms): it gives the loop turns
    (``supervise.in_slices``) instead of holding kube-scheduler's verbs for all of it."""
    http, runway = setup
    for i in range(3000):
        add(runway, f"w{i:04}", "open" if i % 2 else "strict", created=T0 - i)
    beats = 0
    done = False

    async def verb_waiting() -> None:
        nonlocal beats
        while not done:
            await asyncio.sleep(0)
            beats += 1

    other = asyncio.get_running_loop().create_task(verb_waiting())
    await asyncio.sleep(0)
    before = beats
    resp = await http.get(path)
    during = beats - before
    done = True
    await other
    assert resp.status_code == 200, resp.text
    # A call that holds the loop gives none (/healthz, or this list walked in one go: 0); a
    # walk of 3,000 workloads in slices of 2 ms gives several (4-6 here, more when slower).
    assert during >= 2, during
