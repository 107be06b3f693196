"""The verbs' fast path (app.api.fastpath): in front of FastAPI's whole middleware stack for the
three verbs (same handler, same errors and metrics), everything else through the stack."""

from __future__ import annotations

import msgspec
from starlette.types import ASGIApp, Receive, Scope, Send

from app import metrics
from app.server import create_app
from tests.asgi import asgi_client


class Seen:
    """A middleware that notes every path it sees."""

    paths: list[str] = []

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            Seen.paths.append(scope["path"])
        await self.app(scope, receive, send)


def filter_body() -> bytes:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "uid-p"}, "spec": {}}
    return msgspec.json.encode({"Pod": pod, "Nodes": None, "NodeNames": ["n1", "n2"]})


async def test_the_verbs_skip_the_middleware_stack_and_the_rest_does_not() -> None:
    app = create_app()
    app.add_middleware(Seen)
    Seen.paths = []
    before = metrics.REGISTRY.get_sample_value(
        "runway_extender_requests_total", {"verb": "filter", "outcome": "ok"}
    )
    async with asgi_client(app) as http:
        ok = await http.post("/scheduler/filter", content=filter_body())
        bad = await http.post("/scheduler/filter", content=b"{not json")
        health = await http.get("/healthz")
        wrong_method = await http.get("/scheduler/filter")
    assert ok.status_code == 200 and ok.json()["NodeNames"] == ["n1", "n2"]
    assert bad.status_code == 400 and "filter" in bad.json()["error"]
    assert health.status_code == 200
    assert wrong_method.status_code == 405  # not a verb call: FastAPI answers
    assert Seen.paths == ["/healthz", "/scheduler/filter"]
    after = metrics.REGISTRY.get_sample_value(
        "runway_extender_requests_total", {"verb": "filter", "outcome": "ok"}
    )
    assert after == (before or 0) + 1
