"""The extender verbs' fast path: kube-scheduler calls them on every scheduling cycle, so they
skip FastAPI's routing, dependency solving and exception middleware.

A raw ASGI middleware in front of the app answers ``POST <urlPrefix>/{filter,prioritize,preempt}``
with the very handler the routes use (``extender.serve_verb``: same body cap, error mapping,
metrics and logs); every other request goes on to FastAPI, which keeps the REST API and the
OpenAPI document (the verb routes stay registered there, and answer if this path is bypassed).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.extender import VERBS, serve_verb


class VerbFastPath:
    """ASGI middleware: the three verbs straight to their handler."""

    def __init__(self, app: ASGIApp, prefix: str) -> None:
        self.app = app
        self.verbs = {f"{prefix}/{verb}": verb for verb in VERBS}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            verb = self.verbs.get(scope["path"])
            if verb is not None:
                response = await serve_verb(Request(scope, receive), verb)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
