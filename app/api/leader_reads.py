"""Every replica answers the same (DESIGN §7): the REST reads of what only the leader holds are
the leader's answers, whichever replica the Service chose.

Only the leader decides and executes preemptions, so its memory alone holds the preemption
tasks, the decision log and the gates its tasks hold (``LEADER_HELD``). A follower asks the
leader for such a read (``LeaderReads``, an ASGI middleware: ``app.kube.peers.LeaderReader``
GETs the same path and query from the leader's REST address on the Lease) with the caller's
credentials and nothing of its own, and relays the answer — a refusal included: the leader
authorises the caller exactly as it would directly. The follower checks the caller first as
well (``app.api.auth``'s middleware wraps this one), so its own answer is never more open than
the leader's. The request is marked (``FORWARDED_HEADER``) and never forwarded twice.

When the leader cannot be asked (no leader, unreachable, too slow, failed, an earlier release
that advertises no REST address), the follower answers from its own memory and says so. Every
answer of these routes says who answered: ``X-Runway-Served-By`` (``leader``, ``standalone``
without an election, or ``follower (<why>)``) and ``X-Runway-Replica`` (that replica's identity);
a relayed answer also carries ``X-Runway-Relayed-By`` (the follower's).

The other GET routes (``REPLICA_ANSWERS``) read what every replica watches alike (the cache and
the WorkloadRecords) or describe the replica itself; a test keeps every GET route in one of the
two tables.
"""

from __future__ import annotations

import re
from typing import Any, Final

from starlette.datastructures import Headers
from starlette.responses import Response

from app.api.context import ApiContext
from app.wire.forwarding import (
    FORWARDED_HEADER,
    RELAYED_BY_HEADER,
    REPLICA_HEADER,
    SERVED_BY_HEADER,
    LeaderReply,
)

_HOLDS = (
    "gate holds as the leader keeps them: a preemption task still running, a failed "
    "preemption's back-off, a claim a higher priority took"
)

LEADER_HELD: Final[dict[str, str]] = {
    "/v1/preemptions": "the preemption tasks (only the leader runs them)",
    "/v1/preemptions/decisions": "the decision log (only the leader decides)",
    "/v1/gate": "the preemptors the leader's tasks hold",
    "/v1/explain": "lastDecision, from the decision log",
    "/v1/workloads": _HOLDS,
    "/v1/workloads/{namespace}/{name}": _HOLDS,
}
"""GET route → what of the leader's memory it answers: a follower forwards these."""

REPLICA_ANSWERS: Final[dict[str, str]] = {
    "/v1/queues": "the cache and the WorkloadRecords, which every replica watches",
    "/v1/queues/{name}/pending": "the cache and the WorkloadRecords",
    "/v1/resolve": "the config alone",
    "/v1/config": "this replica's effective config",
    "/v1/release": "the scheduler release this replica detected",
    "/v1/cache/summary": "this replica's own cache, leadership and identity (to compare them)",
}
"""GET route → why any replica answers it itself."""


def _pattern(templates: dict[str, str]) -> re.Pattern[str]:
    parts = (re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(t)) for t in templates)
    return re.compile("|".join(f"(?:{p})" for p in parts))


_LEADER_HELD = _pattern(LEADER_HELD)


def leader_held(path: str) -> bool:
    """Whether ``GET path`` answers from what only the leader holds."""
    return _LEADER_HELD.fullmatch(path) is not None


def served_by(leadership: bool | None, why: str | None = None) -> str:
    """``X-Runway-Served-By`` of an answer this replica gives itself."""
    if leadership is None:
        return "standalone"
    return "leader" if leadership else f"follower ({why})"


class LeaderReads:
    """ASGI: a follower's GET of a ``LEADER_HELD`` route is the leader's answer (or its own,
    marked); every such answer says who gave it. The app's ``ApiContext`` is read per request
    (``app.state.context``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """ASGI entry point."""
        if scope["type"] != "http" or scope["method"] != "GET" or not leader_held(scope["path"]):
            await self.app(scope, receive, send)
            return
        ctx: ApiContext = scope["app"].state.context
        leadership = ctx.cluster.leadership
        identity = ctx.cluster.identity or ""
        why = None
        if leadership is False:
            headers = Headers(scope=scope)
            if FORWARDED_HEADER in headers:
                why = "forwarded to it"  # never forwarded twice
            elif ctx.reads is None:
                why = "no leader"
            else:
                answer = await ctx.reads.read(_target(scope), headers)
                if isinstance(answer, LeaderReply):
                    await _relay(answer, identity)(scope, receive, send)
                    return
                why = answer
        marks = [
            (SERVED_BY_HEADER.encode(), served_by(leadership, why).encode("latin-1", "replace")),
            (REPLICA_HEADER.encode(), identity.encode("latin-1", "replace")),
        ]

        async def marked(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *marks]}
            await send(message)

        await self.app(scope, receive, marked)


def document_served_by(doc: dict[str, Any]) -> dict[str, Any]:
    """Say in the OpenAPI document which answers carry ``X-Runway-Served-By`` and
    ``X-Runway-Replica`` (``LEADER_HELD``'s, every status)."""
    headers = {
        "X-Runway-Served-By": {
            "description": "Who answered: `leader`, `standalone` (no leader election) or "
            "`follower (<why>)` — a replica that is not the leader and could not ask it "
            "(`no leader`, `leader unreachable`, `leader failed`, `leader's REST address "
            "unknown`, `leader not verifiable`, `forwarded to it`) answered from its own "
            "memory. A follower relays the leader's answer with the leader's headers.",
            "schema": {"type": "string"},
        },
        "X-Runway-Replica": {
            "description": "The identity (in the leader election) of the replica that answered.",
            "schema": {"type": "string"},
        },
        "X-Runway-Relayed-By": {
            "description": "On a leader's answer a follower relayed: the follower's identity.",
            "schema": {"type": "string"},
        },
    }
    paths = doc.get("paths", {})
    for template in LEADER_HELD:
        operation = paths.get(template, {}).get("get")
        for response in (operation or {}).get("responses", {}).values():
            response.setdefault("headers", {}).update(headers)
    return doc


def _target(scope: Any) -> str:
    """The request's path and query as the caller sent them."""
    path: bytes = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope.get("query_string") or b""
    return (path + b"?" + query if query else path).decode("latin-1")


def _relay(answer: LeaderReply, identity: str) -> Response:
    headers = {k: v for k, v in answer.headers.items() if k != "content-type"}
    headers[RELAYED_BY_HEADER] = identity
    return Response(
        answer.body,
        status_code=answer.status,
        headers=headers,
        media_type=answer.headers.get("content-type"),
    )
