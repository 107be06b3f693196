"""The extender verbs' fast path: kube-scheduler calls them on every scheduling cycle, so they
skip FastAPI's middleware stack, routing, dependency solving and exception handling.

A raw ASGI app in front of that stack (``install``: the outermost layer FastAPI calls, before
its error, telemetry and body-limit middlewares and runway's auth middleware) answers
``POST <urlPrefix>/{filter,prioritize,preempt}`` with the very handler the routes use
(``extender.serve_verb``: same body cap, error mapping — it catches every exception itself —
metrics and logs); every other request goes on to the stack, which keeps the REST API and the
OpenAPI document (the verb routes stay registered there, and answer if this path is bypassed).
The verbs are unauthenticated by protocol (kube-scheduler sends no credentials), so no guard
is skipped: ``preempt`` never acts on a request's word (``policy.crosscheck``).
"""

from __future__ import annotations

from fastapi import FastAPI
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


def install(app: FastAPI, prefix: str) -> None:
    """Put the verbs' fast path in front of ``app``'s whole middleware stack (built lazily by
    Starlette on the first request, after every middleware was added)."""
    build = app.build_middleware_stack

    def stack() -> ASGIApp:
        return VerbFastPath(build(), prefix)

    app.build_middleware_stack = stack  # type: ignore[method-assign]
