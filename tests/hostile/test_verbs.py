"""Issue 14 rows 4 and 11: hostile bytes on the extender verbs are a 400 (never a 500), and a
client that drops mid-body is counted as ``disconnected``, not as an error."""

from __future__ import annotations

from typing import Any

import pytest

from app import metrics
from tests.hostile.conftest import Embedded, build_embedded

HOSTILE_BODIES = [
    b'{"Pod":' * 5000,
    b'{"Pod":{"metadata":' + b'{"a":' * 5000 + b"}}",
    b'{"Pod":{"unknown":' + b"[" * 100_000 + b"]" * 100_000 + b'},"NodeNames":[]}',
    b'{"Pod":{"metadata":{"name":"\xff"}},"NodeNames":["n1"]}',
    b'{"Pod":{},"Nodes":{"items":[{"metadata":{"name":"\xff"}}]}}',
    b'{"Pod":{},"Nodes":{"items":[{"metadata":' + b"[" * 50_000 + b"}]}}",
    b'{"Pod":{"metadata":{"uid":"b"}},"NodeNameToMetaVictims":{"\xff":{"Pods":[]}}}',
    b"\xff\xfe\x00{",
    b'{"Pod":{"spec":{"priority":1' + b"0" * 5000 + b"}}}",
]


def outcome(verb: str, name: str) -> float:
    labels = {"verb": verb, "outcome": name}
    return metrics.REGISTRY.get_sample_value("runway_extender_requests_total", labels) or 0.0


@pytest.mark.parametrize("verb", ["filter", "prioritize", "preempt"])
@pytest.mark.parametrize("body", HOSTILE_BODIES, ids=lambda b: repr(b[:16]))
async def test_row4_undecodable_bodies_are_400(embedded: Embedded, verb: str, body: bytes) -> None:
    resp = await embedded.verb(verb, body)
    if verb in ("filter", "prioritize") and b'"Nodes"' in body and resp.status_code == 200:
        # filter echoes the offered NodeList items unparsed (zero-copy), and prioritize without
        # a preference answers [] without reading them: a name never decoded cannot hurt either,
        # and kube-scheduler gets back the bytes it sent or no score at all.
        assert verb == "filter" or resp.content == b"[]"
        return
    assert resp.status_code == 400, resp.text
    assert resp.json()["error"]


async def _call(app: Any, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    queue = list(chunks)

    async def receive() -> dict[str, Any]:
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/scheduler/filter",
        "raw_path": b"/scheduler/filter",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8888),
    }
    await app(scope, receive, send)
    return sent


async def test_row11_client_disconnect_is_its_own_outcome() -> None:
    _, _, app = build_embedded()
    errors, gone = outcome("filter", "error"), outcome("filter", "disconnected")
    await _call(
        app,
        [
            {"type": "http.request", "body": b'{"Pod": {', "more_body": True},
            {"type": "http.disconnect"},
        ],
    )
    assert outcome("filter", "disconnected") == gone + 1
    assert outcome("filter", "error") == errors
