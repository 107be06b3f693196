"""Two listeners, one app (``server.restPort``): the verbs' port answers the extender verbs and
the probes/metrics; the REST port answers the REST API, its documents and the ``/ui/`` page.

Each listener gets ``app`` wrapped in a ``PortSplit``, which answers a path that belongs to the
other port with a 404 saying where it is served, so a person pointed at the wrong port learns
the right one, and the REST API is never reachable with the scheduler's client certificate
alone. ``/healthz`` and ``/readyz`` are answered on both; ``/metrics`` stays with the verbs
(Prometheus scrapes that port with the chart's client certificate).
"""

from __future__ import annotations

from typing import Any, Literal

from app.api.errors import error_response

Side = Literal["verbs", "rest"]

SHARED = ("/healthz", "/readyz")
"""Answered on both ports (probes may reach either)."""

VERBS_ONLY = ("/metrics",)
"""With the verbs (Prometheus scrapes that port): not readable on the REST port."""


def side_of(path: str, verb_prefix: str) -> Side | None:
    """Which port serves ``path``; None for the shared ones."""
    if path in SHARED:
        return None
    if path in VERBS_ONLY or path == verb_prefix or path.startswith(verb_prefix + "/"):
        return "verbs"
    return "rest"


class PortSplit:
    """ASGI: ``app`` as one of the two listeners (``side``); the other side's paths are 404s."""

    def __init__(self, app: Any, side: Side, verb_prefix: str, other_port: int) -> None:
        self.app = app
        self.side = side
        self.verb_prefix = verb_prefix
        self.other_port = other_port

    def __getattr__(self, name: str) -> Any:  # state, direct_verbs(): the wrapped app's
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """ASGI entry point."""
        if scope["type"] == "http":
            owner = side_of(scope["path"], self.verb_prefix)
            if owner is not None and owner != self.side:
                what = "the REST API is"
                if owner == "verbs":
                    what = "the extender verbs and /metrics are"
                message = f"{what} served on port {self.other_port} (server.restPort)"
                await error_response(404, message)(scope, receive, send)
                return
        await self.app(scope, receive, send)
