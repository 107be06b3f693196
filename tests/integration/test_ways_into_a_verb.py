"""The three ways into an extender verb answer byte for byte alike (issue #38 item 6).

One handler (``app.api.extender.answer_verb``) behind three doors, each kept for what it buys
(docs/ARCHITECTURE.md, "Ways into a verb"):

- **direct**: the HTTP protocol answers a plain ``POST <prefix>/<verb>`` itself
  (``app.connections.DirectVerbs``) — kube-scheduler's every call;
- **fast path**: ``RunwayApp.__call__`` before FastAPI's stack — what the protocol declines
  (a query string, HTTP/1.0, ``Expect: 100-continue``, a follower's forwarded ``preempt``);
- **route**: the FastAPI route — the verbs in the OpenAPI document, and the answer when the app
  is mounted inside another ASGI app (whose ``__call__`` is not runway's).

Each door gets its own fresh app on the same manual clock, so no state of one call leaks into
the next; every golden payload and every error (a bad body, one over the cap) must come back
with the same status, content type and bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from app.clock import ManualClock
from app.config import RunwayConfig
from app.connections import bounded_protocol
from app.server import create_app
from tests.reference import wire_cases
from tests.served import serve_in_thread

CONFIG = RunwayConfig()
CAP = CONFIG.server.max_body_bytes
NOW = 1_800_000_000.0


def route_only(app: FastAPI) -> Callable[[Scope, Receive, Send], Any]:
    """``app`` entered through FastAPI's own ``__call__``: routing and middleware, no
    ``RunwayApp`` fast path (as when mounted inside another ASGI app)."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        await FastAPI.__call__(app, scope, receive, send)

    return asgi


@contextmanager
def served(door: str) -> Iterator[str]:
    """A fresh runway behind ``door``; yields the URL that reaches the verbs through it."""
    app = create_app(CONFIG, ManualClock(NOW))
    if door == "direct":
        with serve_in_thread(app, http=bounded_protocol(CONFIG.server, app.direct_verbs())) as url:
            yield url
    elif door == "fast path":  # the protocol sends a query string through ASGI
        with serve_in_thread(app) as url:
            yield url
    else:
        with serve_in_thread(route_only(app)) as url:
            yield url


def answer(door: str, verb: str, body: bytes) -> tuple[int, str, bytes]:
    """Status, content type and body of one call through ``door`` on a fresh app."""
    query = "?door=asgi" if door == "fast path" else ""
    with served(door) as url, httpx.Client(timeout=10) as http:
        r = http.post(
            f"{url}/scheduler/{verb}{query}",
            content=body,
            headers={"content-type": "application/json"},
        )
    return r.status_code, r.headers.get("content-type", ""), r.content


DOORS = ("direct", "fast path", "route")
CALLS = [
    pytest.param(c["verb"], json.dumps(c["request"]).encode(), id=c["name"]) for c in wire_cases()
] + [
    pytest.param("filter", b"{not json", id="bad-json"),
    pytest.param("prioritize", b'{"Pod": 3}', id="bad-shape"),
    pytest.param("preempt", b"[]", id="bad-top-level"),
    pytest.param("filter", b" " * (CAP + 1), id="over-the-cap"),
]


@pytest.mark.parametrize(("verb", "body"), CALLS)
def test_every_way_in_answers_alike(verb: str, body: bytes) -> None:
    answers = {door: answer(door, verb, body) for door in DOORS}
    direct = answers["direct"]
    assert direct[0] in (200, 400, 413)
    assert direct[1].startswith("application/json")
    for door, got in answers.items():
        assert got == direct, f"{door} differs from direct for {verb}"
