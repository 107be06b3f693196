"""The extender verbs' fast path: kube-scheduler calls them on every scheduling cycle, so they
skip FastAPI's middleware stack, routing, dependency solving and exception handling.

``RunwayApp.__call__`` — what uvicorn calls, before FastAPI's own ``__call__`` and its error,
telemetry and body-limit middlewares and runway's auth middleware — answers
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
from starlette.types import Receive, Scope, Send

from app.api import webhook as webhook_api
from app.api.context import ApiContext
from app.api.extender import VERBS, answer_verb, closes_after, forwards, serve_verb
from app.connections import DirectVerbs


class RunwayApp(FastAPI):
    """FastAPI, with the three verbs answered before anything of FastAPI's own runs (its
    ``__call__`` checks telemetry providers and the environment on every request; its stack
    adds error, telemetry and body-limit middlewares, runway's auth middleware, routing)."""

    verb_paths: dict[str, str] = {}
    """``<urlPrefix>/<verb>`` → verb; set by ``serve_verbs``."""

    def serve_verbs(self, prefix: str) -> None:
        """Answer ``POST <prefix>/{filter,prioritize,preempt}`` on the fast path."""
        self.verb_paths = {f"{prefix}/{verb}": verb for verb in VERBS}

    def direct_verbs(self, *, verbs: bool = True, webhook: bool = True) -> DirectVerbs:
        """The verbs (and the gate webhook, ``POST /webhooks/gate``) for the HTTP protocol to
        answer itself (``app.connections``), with the same handlers as the routes. With
        ``server.restPort`` the verbs' listener answers the verbs and the REST listener the
        webhook (kube-apiserver presents no client certificate)."""
        ctx: ApiContext = self.state.context

        def answer(verb: str, body: bytes | None) -> tuple[int, list[bytes | memoryview]]:
            if verb == webhook_api.DIRECT:
                status, parts = webhook_api.answer_review(ctx, body)
                return status, list(parts)
            return answer_verb(ctx, verb, body)

        paths = dict(self.verb_paths) if verbs else {}
        if webhook:
            paths[webhook_api.PATH] = webhook_api.DIRECT
        return DirectVerbs(
            paths={p.encode(): v for p, v in paths.items()},
            answer=answer,
            max_body_bytes=ctx.config.server.max_body_bytes,
            close_after=lambda verb: closes_after(ctx, verb),
            declines=lambda verb: forwards(ctx, verb),
            query_ignored=frozenset({webhook_api.DIRECT}),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            verb = self.verb_paths.get(scope["path"])
            if verb is not None:
                scope["app"] = self  # what Starlette sets: the handler reads app.state
                response = await serve_verb(Request(scope, receive), verb)
                await response(scope, receive, send)
                return
        await super().__call__(scope, receive, send)
